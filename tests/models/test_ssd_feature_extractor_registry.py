"""The registry maps every config `type` string to its extractor class."""
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_feature_extractor_registry


def test_registry():
  classes = ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS
  names = {name: cls.__name__ for name, cls in classes.items()}
  # A few of the original's types; tests/test_upstream_ssd_configs.py builds
  # every type the original's sample configs name.
  assert names['ssd_mobilenet_v1'] == 'SSDMobileNetV1FeatureExtractor'
  assert names['ssd_mobilenet_v2_fpn'] == 'SSDMobileNetV2FpnFeatureExtractor'
  assert names['embedded_ssd_mobilenet_v1'] == (
      'EmbeddedSSDMobileNetV1FeatureExtractor')
  for cls in classes.values():
    assert issubclass(cls, ssd_feature_extractor.SSDFeatureExtractor)
