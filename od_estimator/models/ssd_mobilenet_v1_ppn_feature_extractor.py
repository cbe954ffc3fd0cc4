"""SSD Pooling Pyramid Network on MobileNet v1 (type 'ssd_mobilenet_v1_ppn').

Six maps: Conv2d_11_pointwise followed by five 2x2 stride-2 max pools
(`MaxPool2d_<i>_2x2`), so the extra layers have no variables. The backbone
is still built up to Conv2d_13_pointwise, as the original, so checkpoints
hold the same backbone variables as ssd_mobilenet_v1.
"""
from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_mobilenet_v1_feature_extractor


class SSDMobileNetV1PpnFeatureExtractor(
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """MobileNet v1 with a pooling pyramid; see SSDFeatureExtractor args."""

  def _feature_maps(self, image_features):
    feature_maps = feature_map_generators.pooling_pyramid_feature_maps(
        base_feature_map_depth=0,
        num_layers=6,
        image_features={
            'image_features': image_features['Conv2d_11_pointwise']})
    return list(feature_maps.values())
