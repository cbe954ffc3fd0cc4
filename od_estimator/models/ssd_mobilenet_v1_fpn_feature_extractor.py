"""SSD FPN feature extractor on MobileNet v1 (type 'ssd_mobilenet_v1_fpn').

FPN levels 2..5 come from Conv2d_3/5/11/13_pointwise; coarser levels are
stride-2 convs `bottom_up_Conv2d_14`, `bottom_up_Conv2d_15`, ... . FPN
variables live under `<meta-arch scope>/MobilenetV1/fpn/` (`projection_<n>`,
`smoothing_<n>`, `bottom_up_Conv2d_<n>`). With use_depthwise (FPNLite) the
last two backbone layers shrink to 512 and 256 channels, as the original.
"""
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v1_feature_extractor
from od_estimator.nets import mobilenet_v1


def _create_modified_mobilenet_config():
  """MobileNet v1 conv defs with thinner last two layers (FPNLite)."""
  conv_defs = list(mobilenet_v1.MOBILENETV1_CONV_DEFS)
  conv_defs[-2] = mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=2,
                                            depth=512)
  conv_defs[-1] = mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1,
                                            depth=256)
  return conv_defs


class SSDMobileNetV1FpnFeatureExtractor(
    ssd_fpn_feature_extractor.SSDMobileNetFpnFeatureExtractorMixin,
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """SSD feature extractor: MobileNet v1 with a Feature Pyramid Network.

  Constructor arguments are those of SSDFpnFeatureExtractorMixin.
  """

  _FPN_FEATURE_BLOCKS = ['Conv2d_3_pointwise', 'Conv2d_5_pointwise',
                        'Conv2d_11_pointwise', 'Conv2d_13_pointwise']
  _LAST_BACKBONE_LAYER_NUMBER = 13
  _FPNLITE_CONV_DEFS = _create_modified_mobilenet_config()
