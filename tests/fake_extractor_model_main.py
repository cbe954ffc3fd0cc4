"""model_main with tests/fakes.py's Faster R-CNN feature extractor as 'fake'.

For tests that run model_main in new processes (a TF_CONFIG cluster's
tasks) on the tiniest two-stage model, tiny_faster_rcnn's config with
`extractor='fake'`:

  python -m tests.fake_extractor_model_main --pipeline_config_path=... ...

run from the repository root, with model_main's flags.
"""
from od_estimator import model_main
from tests import fakes

if __name__ == '__main__':
  fakes.register_fake_faster_rcnn_extractor()
  model_main.run()
