"""The original's SSD sample configs built as training graphs: each predicts.

The released zoo models among them also hold the original's variables.
The other configs: tests/test_upstream_ssd_inference_configs.py; the
tests, and the one build per distinct predicting part they share (what it
proves for each config): tests/upstream_ssd.py.
"""
from tests import upstream_ssd
from tests import zoo_checkpoints

upstream_ssd.add_tests(globals(), upstream_ssd.is_training)


def test_the_upstream_folder_has_ssd_configs(upstream_configs):
  assert len(upstream_ssd.SSD_CONFIGS) > 30, upstream_configs
  zoo_models = {upstream_ssd.zoo_name(path)
                for path in upstream_ssd.SSD_CONFIGS}
  assert set(zoo_checkpoints.FULL_MODELS) <= zoo_models, upstream_configs
