"""SSD FPN feature extractor on MobileNet v2 (type 'ssd_mobilenet_v2_fpn').

FPN levels 2..5 come from layer_4, layer_7, layer_14 and layer_19; coarser
levels are stride-2 convs `bottom_up_Conv2d_20`, `bottom_up_Conv2d_21`, ... .
FPN variables live under `<meta-arch scope>/MobilenetV2/fpn/`
(`projection_<n>`, `smoothing_<n>`, `bottom_up_Conv2d_<n>`). With
use_depthwise (FPNLite) the last backbone conv has 256 instead of 1280
channels, as the original.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_mobilenet_v2_feature_extractor
from od_estimator.nets import mobilenet_v2

# End points of FPN levels 2, 3, 4 and 5.
_FEATURE_BLOCKS = ['layer_4', 'layer_7', 'layer_14', 'layer_19']


def _create_modified_mobilenet_config():
  """MobileNet v2 conv defs with a 256-channel last layer (FPNLite)."""
  conv_defs = list(mobilenet_v2.V2_DEF)
  conv_defs[-1] = mobilenet_v2.Conv(kernel=[1, 1], stride=1, depth=256)
  return conv_defs


class SSDMobileNetV2FpnFeatureExtractor(
    ssd_mobilenet_v2_feature_extractor.SSDMobileNetV2FeatureExtractor):
  """SSD feature extractor: MobileNet v2 with a Feature Pyramid Network."""

  def __init__(self,
               is_training,
               depth_multiplier,
               min_depth,
               pad_to_multiple,
               conv_hyperparams_fn,
               fpn_min_level=3,
               fpn_max_level=7,
               additional_layer_depth=256,
               reuse_weights=None,
               use_explicit_padding=False,
               use_depthwise=False,
               use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Args:
      is_training: whether the network is being trained.
      depth_multiplier: float multiplier on every layer's channel count.
      min_depth: the smallest channel count after the multiplier.
      pad_to_multiple: images are zero-padded so height and width are
        multiples of this.
      conv_hyperparams_fn: callable returning the slim arg_scope of the FPN
        layers.
      fpn_min_level: finest output level, 2..5 (layer_4/7/14/19).
      fpn_max_level: coarsest output level; levels above 5 are added convs.
      additional_layer_depth: nominal depth of every FPN map.
      reuse_weights: variable reuse for the extractor's scope.
      use_explicit_padding: pad explicitly instead of 'SAME' convolutions.
      use_depthwise: depthwise-separable FPN convs and a thinner backbone
        top (FPNLite).
      use_native_resize_op: upsample with tf.image.resize (nearest).
      override_base_feature_extractor_hyperparams: apply
        conv_hyperparams_fn to the backbone too.
    """
    super().__init__(
        is_training=is_training,
        depth_multiplier=depth_multiplier,
        min_depth=min_depth,
        pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._use_native_resize_op = use_native_resize_op
    if use_depthwise:
      self._conv_defs = _create_modified_mobilenet_config()

  def _extra_layers_scope(self):
    # Unlike the plain SSD layers, the original builds FPN outside the
    # backbone's training scope.
    return slim.arg_scope(self._conv_hyperparams_fn())

  def _feature_maps(self, image_features):
    depth_fn = feature_map_generators.get_depth_fn(self._depth_multiplier,
                                                   self._min_depth)
    with tf.compat.v1.variable_scope('fpn', reuse=self._reuse_weights):
      return feature_map_generators.fpn_pyramid_feature_maps(
          image_features, _FEATURE_BLOCKS,
          fpn_min_level=self._fpn_min_level,
          fpn_max_level=self._fpn_max_level,
          depth=depth_fn(self._additional_layer_depth),
          # Added levels continue the backbone's layer_<n> numbering.
          coarse_layer_name_fn=lambda k: 'bottom_up_Conv2d_%d' % (19 + k),
          use_depthwise=self._use_depthwise,
          use_explicit_padding=self._use_explicit_padding,
          use_native_resize_op=self._use_native_resize_op)
