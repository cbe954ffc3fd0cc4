"""SSD feature extractors on MobileNet v3 ('ssd_mobilenet_v3_large', '_small').

The backbone is built in `<meta-arch scope>/MobilenetV3/` with the slim
checkpoint names (`MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights`,
...); the SSD layers are named by `multi_resolution_feature_maps` after the
last backbone map, e.g. `MobilenetV3/layer_17_2_Conv2d_2_3x3_s2_512/weights`.
The MobileNet EdgeTPU extractor (ssd_mobilenet_edgetpu_feature_extractor.py)
shares the base class. Unlike the original, num_layers is honoured (the
original always built 6 maps). There is no use_hardswish argument: the
backbone's activations come from its conv defs, as in the original.
"""
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v3


class SSDMobileNetV3FeatureExtractorBase(
    ssd_feature_extractor.SSDMobileNetFeatureExtractorBase):
  """SSD maps from two backbone end points plus stride-2 layers.

  Subclasses set `_conv_defs` (mobilenet_v3.*) and `_FROM_LAYERS`, and
  `_SCOPE` if not 'MobilenetV3'. Constructor arguments are those of
  SSDFeatureExtractor.
  """

  _SCOPE = 'MobilenetV3'
  _BACKBONE_FN = staticmethod(mobilenet_v3.mobilenet_base)
  # The SSD layers see the backbone's training scope, as the original.
  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = True

  def _backbone_arg_scope(self):
    return mobilenet_v3.training_scope(is_training=None, bn_decay=0.9997)


class SSDMobileNetV3LargeFeatureExtractor(SSDMobileNetV3FeatureExtractorBase):
  """MobileNet v3 large: maps from layer_14's expansion and layer_17."""

  _conv_defs = mobilenet_v3.V3_LARGE_DETECTION
  _FROM_LAYERS = ('layer_14/expansion_output', 'layer_17')


class SSDMobileNetV3SmallFeatureExtractor(SSDMobileNetV3FeatureExtractorBase):
  """MobileNet v3 small: maps from layer_10's expansion and layer_13."""

  _conv_defs = mobilenet_v3.V3_SMALL_DETECTION
  _FROM_LAYERS = ('layer_10/expansion_output', 'layer_13')
