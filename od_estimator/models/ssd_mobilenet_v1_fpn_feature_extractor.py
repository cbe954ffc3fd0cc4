"""SSD FPN feature extractor on MobileNet v1 (type 'ssd_mobilenet_v1_fpn').

FPN levels 2..5 come from Conv2d_3/5/11/13_pointwise; coarser levels are
stride-2 convs `bottom_up_Conv2d_14`, `bottom_up_Conv2d_15`, ... . FPN
variables live under `<meta-arch scope>/MobilenetV1/fpn/` (`projection_<n>`,
`smoothing_<n>`, `bottom_up_Conv2d_<n>`). With use_depthwise (FPNLite) the
last two backbone layers shrink to 512 and 256 channels, as the original.
"""
import tensorflow as tf

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_mobilenet_v1_feature_extractor
from od_estimator.nets import mobilenet_v1

# End points of FPN levels 2, 3, 4 and 5.
_FEATURE_BLOCKS = ['Conv2d_3_pointwise', 'Conv2d_5_pointwise',
                   'Conv2d_11_pointwise', 'Conv2d_13_pointwise']


def _create_modified_mobilenet_config():
  """MobileNet v1 conv defs with thinner last two layers (FPNLite)."""
  conv_defs = list(mobilenet_v1.MOBILENETV1_CONV_DEFS)
  conv_defs[-2] = mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=2,
                                            depth=512)
  conv_defs[-1] = mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1,
                                            depth=256)
  return conv_defs


class SSDMobileNetV1FpnFeatureExtractor(
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """SSD feature extractor: MobileNet v1 with a Feature Pyramid Network."""

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
      fpn_min_level: finest output level, 2..5 (Conv2d_3/5/11/13_pointwise).
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

  def _feature_maps(self, image_features):
    depth_fn = feature_map_generators.get_depth_fn(self._depth_multiplier,
                                                   self._min_depth)
    with tf.compat.v1.variable_scope('fpn', reuse=self._reuse_weights):
      return feature_map_generators.fpn_pyramid_feature_maps(
          image_features, _FEATURE_BLOCKS,
          fpn_min_level=self._fpn_min_level,
          fpn_max_level=self._fpn_max_level,
          depth=depth_fn(self._additional_layer_depth),
          # Added levels continue the backbone's Conv2d_<i> numbering.
          coarse_layer_name_fn=lambda k: 'bottom_up_Conv2d_%d' % (13 + k),
          use_depthwise=self._use_depthwise,
          use_explicit_padding=self._use_explicit_padding,
          use_native_resize_op=self._use_native_resize_op)
