"""The EfficientDet sample config (make demo_efficientdet) keeps working.

It parses as D0's model, `od-estimator validate` passes it as written (its
paths are relative to the launch directory) and it sets no field without
effect. Its training runs by hand (README, EfficientDet); the tiny D0 of
tests/test_efficientdet_end_to_end.py trains through the commands.
"""
import os

from od_estimator.checks import config_check
from od_estimator.checks import config_notes
from od_estimator.config import config_util
from od_estimator.dataset_tools import create_synthetic_tf_record as synth

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_CONFIG = os.path.join(REPO, 'samples', 'configs',
                             'ssd_efficientdet_d0_shapes.config')


def test_the_sample_config_is_an_efficientdet_without_idle_fields():
  configs = config_util.get_configs_from_pipeline_file(SAMPLE_CONFIG)
  ssd = configs['model'].ssd
  assert ssd.feature_extractor.type == 'ssd_efficientnet-b0_bifpn_keras'
  assert ssd.feature_extractor.WhichOneof('feature_pyramid_oneof') == 'bifpn'
  assert ssd.num_classes == len(synth.CLASSES)
  assert config_notes.notes(configs) == []


def test_validate_passes_the_sample_config_from_the_repository_root(
    tmp_path, monkeypatch):
  synth.create_dataset(str(tmp_path / 'demo_out' / 'data'), num_train=2,
                       num_val=1, image_size=64, num_train_shards=2,
                       num_val_shards=1)
  monkeypatch.chdir(tmp_path)
  report = config_check.validate(SAMPLE_CONFIG)
  assert not report.errors, [str(error) for error in report.errors]
