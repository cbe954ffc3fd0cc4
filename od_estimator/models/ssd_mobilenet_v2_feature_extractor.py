"""SSD feature extractor on MobileNet v2 (config type 'ssd_mobilenet_v2').

Variables live under `<meta-arch scope>/MobilenetV2/`: the backbone as in
the slim classification checkpoints (`MobilenetV2/Conv/weights`,
`MobilenetV2/expanded_conv_1/expand/weights`, ...) and the extra SSD layers
named by `multi_resolution_feature_maps`, e.g.
`FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights`.
"""
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v2


class SSDMobileNetV2FeatureExtractor(
    ssd_feature_extractor.SSDMobileNetFeatureExtractorBase):
  """SSD maps from layer_15's expansion and layer_19 plus stride-2 layers.

  Subclasses reuse the backbone and replace `_feature_maps`. Constructor
  arguments are those of SSDFeatureExtractor.
  """

  _SCOPE = 'MobilenetV2'
  _BACKBONE_FN = staticmethod(mobilenet_v2.mobilenet_base)
  _FROM_LAYERS = ('layer_15/expansion_output', 'layer_19')
  # As the original, the SSD layers see the backbone's training scope.
  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = True

  def _backbone_arg_scope(self):
    return mobilenet_v2.training_scope(is_training=None, bn_decay=0.9997)
