"""The registry maps every config `type` string to its extractor class."""
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_feature_extractor_registry


def test_registry():
  classes = ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS
  assert {name: cls.__name__ for name, cls in classes.items()} == {
      'ssd_mobilenet_v1': 'SSDMobileNetV1FeatureExtractor',
      'ssd_mobilenet_v1_fpn': 'SSDMobileNetV1FpnFeatureExtractor',
      'ssd_mobilenet_v1_ppn': 'SSDMobileNetV1PpnFeatureExtractor',
      'ssd_mobilenet_v2': 'SSDMobileNetV2FeatureExtractor',
      'ssd_mobilenet_v2_fpn': 'SSDMobileNetV2FpnFeatureExtractor',
      'embedded_ssd_mobilenet_v1': 'EmbeddedSSDMobileNetV1FeatureExtractor',
  }
  for cls in classes.values():
    assert issubclass(cls, ssd_feature_extractor.SSDFeatureExtractor)
