"""SSD feature extractor on MobileNet EdgeTPU ('ssd_mobilenet_edgetpu').

Variables live under `<meta-arch scope>/MobilenetEdgeTPU/`, as the slim
EdgeTPU classification checkpoints (`MobilenetEdgeTPU/expanded_conv_1/
expand/weights`, ...), with SSD layers such as
`MobilenetEdgeTPU/layer_23_2_Conv2d_2_3x3_s2_512/weights`.
"""
from od_estimator.models import ssd_mobilenet_v3_feature_extractor
from od_estimator.nets import mobilenet_v3


class SSDMobileNetEdgeTPUFeatureExtractor(
    ssd_mobilenet_v3_feature_extractor.SSDMobileNetV3FeatureExtractorBase):
  """MobileNet EdgeTPU: maps from layer_18's expansion and layer_23."""

  _conv_defs = mobilenet_v3.V3_EDGETPU
  _FROM_LAYERS = ('layer_18/expansion_output', 'layer_23')
  _SCOPE = 'MobilenetEdgeTPU'
