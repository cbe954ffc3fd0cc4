"""model_main_tf2 with tests/fakes.py's Faster R-CNN feature extractor as
'fake':

  python -m tests.fake_extractor_model_main_tf2 --pipeline_config_path=...

For the tests that start model_main_tf2 processes (its workers) on the
tiniest model, tiny_faster_rcnn's config with `extractor='fake'`.
"""
from od_estimator import model_main_tf2
from tests import fakes

if __name__ == '__main__':
  fakes.register_fake_faster_rcnn_extractor()
  model_main_tf2.run()
