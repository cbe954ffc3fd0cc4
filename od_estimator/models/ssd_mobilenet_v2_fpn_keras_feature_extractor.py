"""SSD FPN on MobileNet v2 with the original's TF2 names.

Type 'ssd_mobilenet_v2_fpn_keras'; with use_depthwise it is the FPN-lite of
the `ssd_mobilenet_v2_fpnlite_*` TF2 configs. The backbone is that of
'ssd_mobilenet_v2_keras' (Keras names at the graph's root, its last conv
keeps 1280 channels even with use_depthwise, as the original's Keras
model); the FPN is the original's Keras one (keras_fpn.py) on layers 4, 7,
14 and 19 (FPN levels 2..5), named

  ssd_mobile_net_v2_fpn_keras_feature_extractor/FeatureMaps/top_down/...
  ssd_mobile_net_v2_fpn_keras_feature_extractor/bottom_up_Conv2d_<n>_...
"""
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import keras_fpn
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_keras_feature_extractor

# Keras name of the extractor model, prefix of its FPN layers.
_EXTRACTOR_NAME = 'ssd_mobile_net_v2_fpn_keras_feature_extractor'
_FPN_SCOPE = 'fpn'
_FEATURE_BLOCKS = ('layer_4', 'layer_7', 'layer_14', 'layer_19')
# Highest FPN level the backbone provides (layer_19); the layers above are
# numbered on from it.
_BASE_MAX_LEVEL = 5
_LAST_BACKBONE_LAYER_NUMBER = 19


class SSDMobileNetV2FpnKerasFeatureExtractor(
    ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin,
    ssd_mobilenet_v2_keras_feature_extractor
    .SSDMobileNetV2KerasFeatureExtractor):
  """'ssd_mobilenet_v2_fpn_keras'; arguments of SSDFpnFeatureExtractorMixin.

  Raises (constructor):
    UserInputError: for use_explicit_padding, use_native_resize_op or FPN
      levels out of range.
  """

  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = False

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    field = 'model.ssd.feature_extractor'
    if self._use_explicit_padding:
      raise errors.UserInputError(
          '%s.use_explicit_padding is not supported by type '
          'ssd_mobilenet_v2_fpn_keras.' % field)
    if self._use_native_resize_op:
      raise errors.UserInputError(
          '%s.use_native_resize_op is not supported by type '
          'ssd_mobilenet_v2_fpn_keras.' % field)
    if not 2 <= self._fpn_min_level <= min(self._fpn_max_level,
                                           _BASE_MAX_LEVEL):
      raise errors.UserInputError(
          '%s.fpn: min_level must be in [2, min(max_level, 5)], got '
          'min_level=%d, max_level=%d.' % (
              field, self._fpn_min_level, self._fpn_max_level))

  def _keras_variable_name(self, name):
    """Keras name of a variable below the extractor's scope."""
    root, _, relative = name.partition('/')
    fpn_scope, _, fpn_name = relative.partition('/')
    if fpn_scope != _FPN_SCOPE:
      return super()._keras_variable_name(name)
    return '%s/%s' % (_EXTRACTOR_NAME, keras_fpn.variable_name(
        fpn_name, self._use_depthwise))

  def _feature_maps(self, image_features):
    """The Keras FPN (inside the conv_hyperparams arg_scope)."""
    base_max_level = min(self._fpn_max_level, _BASE_MAX_LEVEL)
    features = [image_features[_FEATURE_BLOCKS[level - 2]]
                for level in range(self._fpn_min_level, base_max_level + 1)]
    coarse_layer_names = [
        'bottom_up_Conv2d_%d' % (_LAST_BACKBONE_LAYER_NUMBER + k + 1)
        for k in range(self._fpn_max_level - base_max_level)]
    with tf.compat.v1.variable_scope(_FPN_SCOPE):
      return keras_fpn.feature_maps(features, self._fpn_depth(),
                                    coarse_layer_names, self._use_depthwise)
