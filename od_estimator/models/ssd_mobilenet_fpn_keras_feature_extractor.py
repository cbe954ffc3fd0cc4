"""SSD FPN on MobileNet v1 and v2 with the original's TF2 names.

Types 'ssd_mobilenet_v1_fpn_keras' and 'ssd_mobilenet_v2_fpn_keras' (with
use_depthwise the FPN-lite of the `ssd_mobilenet_v2_fpnlite_*` TF2
configs). The backbone is the slim MobileNet with the Keras application's
names at the graph's root (v2: that of 'ssd_mobilenet_v2_keras', whose last
conv keeps 1280 channels even with use_depthwise, as the original's Keras
model; v1: `conv1`, `conv_{dw,pw}_<i>` and their `_bn`). The FPN is the
original's Keras one (keras_fpn.py) on four backbone layers (FPN levels
2..5), named

  ssd_mobile_net_v<k>_fpn_keras_feature_extractor/FeatureMaps/top_down/...
  ssd_mobile_net_v<k>_fpn_keras_feature_extractor/bottom_up_Conv2d_<n>_...
"""
import re

import tensorflow as tf

from od_estimator import errors
from od_estimator.models import keras_fpn
from od_estimator.models import keras_named_feature_extractor
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v1_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_keras_feature_extractor
from od_estimator.utils import keras_names

_FIELD = 'model.ssd.feature_extractor'
_FPN_SCOPE = 'fpn'
# Highest FPN level the backbones provide.
_BASE_MAX_LEVEL = 5


class _KerasMobileNetFpnMixin(
    ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin):
  """The Keras FPN on a Keras-named MobileNet extractor; put it first.

  Subclasses set the class attributes; arguments are those of
  SSDFpnFeatureExtractorMixin.

  Raises (constructor):
    UserInputError: for use_explicit_padding, use_native_resize_op,
      use_depthwise where not supported, or FPN levels out of range.
  """

  # Config type and Keras name of the extractor (prefix of its FPN layers).
  _TYPE = None
  _EXTRACTOR_NAME = None
  # End points of FPN levels 2..5; the layers above are numbered on from
  # _LAST_BACKBONE_LAYER_NUMBER.
  _FEATURE_BLOCKS = None
  _LAST_BACKBONE_LAYER_NUMBER = None
  _SUPPORTS_DEPTHWISE = True
  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = False

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    for option in ['use_explicit_padding', 'use_native_resize_op'] + (
        [] if self._SUPPORTS_DEPTHWISE else ['use_depthwise']):
      if getattr(self, '_' + option):
        raise errors.UserInputError('%s.%s is not supported by type %s.' % (
            _FIELD, option, self._TYPE))
    if not 2 <= self._fpn_min_level <= min(self._fpn_max_level,
                                           _BASE_MAX_LEVEL):
      raise errors.UserInputError(
          '%s.fpn: min_level must be in [2, min(max_level, 5)], got '
          'min_level=%d, max_level=%d.' % (
              _FIELD, self._fpn_min_level, self._fpn_max_level))

  def _keras_variable_name(self, name):
    """Keras name of a variable below the extractor's scope."""
    _, _, relative = name.partition('/')
    fpn_scope, _, fpn_name = relative.partition('/')
    if fpn_scope != _FPN_SCOPE:
      return self._backbone_variable_name(name)
    return '%s/%s' % (self._EXTRACTOR_NAME, keras_fpn.variable_name(
        fpn_name, self._use_depthwise))

  def _feature_maps(self, image_features):
    """The Keras FPN (inside the conv_hyperparams arg_scope)."""
    base_max_level = min(self._fpn_max_level, _BASE_MAX_LEVEL)
    features = [image_features[self._FEATURE_BLOCKS[level - 2]]
                for level in range(self._fpn_min_level, base_max_level + 1)]
    coarse_layer_names = [
        'bottom_up_Conv2d_%d' % (self._LAST_BACKBONE_LAYER_NUMBER + k + 1)
        for k in range(self._fpn_max_level - base_max_level)]
    with tf.compat.v1.variable_scope(_FPN_SCOPE):
      return keras_fpn.feature_maps(features, self._fpn_depth(),
                                    coarse_layer_names, self._use_depthwise)


def mobilenet_v1_keras_variable_name(name):
  """Keras name of a slim 'MobilenetV1/...' backbone variable.

  Raises:
    ValueError: for a layer the Keras model does not have.
  """
  layer, weight = keras_names.split_variable(name.partition('/')[2])
  batch_norm = layer.endswith('/BatchNorm')
  layer = layer[:-len('/BatchNorm')] if batch_norm else layer
  match = re.fullmatch(r'Conv2d_(\d+)(?:_(depthwise|pointwise))?', layer)
  if not match or (match.group(2) is None) != (match.group(1) == '0'):
    raise ValueError('MobileNet v1 layer %r has no Keras name.' % layer)
  keras_layer = 'conv1' if match.group(2) is None else 'conv_%s_%s' % (
      match.group(2)[0] + 'w', match.group(1))
  return '%s%s/%s' % (keras_layer, '_bn' if batch_norm else '', weight)


class SSDMobileNetV1FpnKerasFeatureExtractor(
    _KerasMobileNetFpnMixin,
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """'ssd_mobilenet_v1_fpn_keras' (without use_depthwise)."""

  _TYPE = 'ssd_mobilenet_v1_fpn_keras'
  _EXTRACTOR_NAME = 'ssd_mobile_net_v1_fpn_keras_feature_extractor'
  _FEATURE_BLOCKS = ('Conv2d_3_pointwise', 'Conv2d_5_pointwise',
                     'Conv2d_11_pointwise', 'Conv2d_13_pointwise')
  _LAST_BACKBONE_LAYER_NUMBER = 13
  _SUPPORTS_DEPTHWISE = False

  def extract_features(self, preprocessed_inputs):
    """Builds the FPN maps, finest first; see SSDFeatureExtractor."""
    with self._keras_named(self._keras_variable_name):
      return super().extract_features(preprocessed_inputs)

  def _backbone_variable_name(self, name):
    return mobilenet_v1_keras_variable_name(name)


class SSDMobileNetV2FpnKerasFeatureExtractor(
    _KerasMobileNetFpnMixin,
    ssd_mobilenet_v2_keras_feature_extractor
    .SSDMobileNetV2KerasFeatureExtractor):
  """'ssd_mobilenet_v2_fpn_keras' (its base names the variables)."""

  _TYPE = 'ssd_mobilenet_v2_fpn_keras'
  _EXTRACTOR_NAME = 'ssd_mobile_net_v2_fpn_keras_feature_extractor'
  _FEATURE_BLOCKS = ('layer_4', 'layer_7', 'layer_14', 'layer_19')
  _LAST_BACKBONE_LAYER_NUMBER = 19

  def _backbone_variable_name(self, name):
    return ssd_mobilenet_v2_keras_feature_extractor.keras_variable_name(name)
