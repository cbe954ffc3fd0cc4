"""SSD FPN feature extractor on MobileNet v2 (type 'ssd_mobilenet_v2_fpn').

FPN levels 2..5 come from layer_4, layer_7, layer_14 and layer_19; coarser
levels are stride-2 convs `bottom_up_Conv2d_20`, `bottom_up_Conv2d_21`, ... .
FPN variables live under `<meta-arch scope>/MobilenetV2/fpn/`
(`projection_<n>`, `smoothing_<n>`, `bottom_up_Conv2d_<n>`). With
use_depthwise (FPNLite) the last backbone conv has 256 instead of 1280
channels, as the original.
"""
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_feature_extractor
from od_estimator.nets import mobilenet_v2


def _create_modified_mobilenet_config():
  """MobileNet v2 conv defs with a 256-channel last layer (FPNLite)."""
  conv_defs = list(mobilenet_v2.V2_DEF)
  conv_defs[-1] = mobilenet_v2.Conv(kernel=[1, 1], stride=1, depth=256)
  return conv_defs


class SSDMobileNetV2FpnFeatureExtractor(
    ssd_fpn_feature_extractor.SSDMobileNetFpnFeatureExtractorMixin,
    ssd_mobilenet_v2_feature_extractor.SSDMobileNetV2FeatureExtractor):
  """SSD feature extractor: MobileNet v2 with a Feature Pyramid Network.

  Constructor arguments are those of SSDFpnFeatureExtractorMixin.
  """

  _FPN_FEATURE_BLOCKS = ['layer_4', 'layer_7', 'layer_14', 'layer_19']
  _LAST_BACKBONE_LAYER_NUMBER = 19
  _FPNLITE_CONV_DEFS = _create_modified_mobilenet_config()
  # Unlike the plain SSD layers, the original builds FPN outside the
  # backbone's training scope.
  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = False
