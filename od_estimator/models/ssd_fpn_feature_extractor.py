"""What the SSD Feature Pyramid Network extractors share.

The `*_fpn` extractor types (MobileNet v1/v2, ResNet v1 and its Keras-named
variant, MnasFPN) take the same pyramid arguments on top of those of
SSDFeatureExtractor. `SSDFpnFeatureExtractorMixin` holds that constructor
and builds the slim FPN of feature_map_generators.fpn_pyramid_feature_maps
in the extractor's scope.
"""
import tensorflow as tf

from od_estimator.models import feature_map_generators


class SSDFpnFeatureExtractorMixin:
  """FPN constructor arguments and layers; put it before an SSD base class.

  Extractors with other arguments keep their own constructor and pass these
  on; their checks go in `_check_arguments`, which sees every argument.
  """

  # Whether use_depthwise makes the FPN convs separable (FPNLite).
  _FPN_HONOURS_USE_DEPTHWISE = True

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=7,
               additional_layer_depth=256, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False,
               use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Arguments not listed are those of SSDFeatureExtractor (without
    num_layers: the levels set the number of maps).

    Args:
      fpn_min_level: finest output level (stride 2**level), from 2 to the
        backbone's coarsest level; each extractor names its levels.
      fpn_max_level: coarsest output level; levels above the backbone's
        are stride-2 convs on the previous level.
      additional_layer_depth: nominal depth of every FPN map.
      use_native_resize_op: upsample with tf.image.resize (nearest).

    Raises:
      ValueError: from `_check_arguments`, for arguments the extractor
        cannot honour.
    """
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._use_native_resize_op = use_native_resize_op
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

  def _fpn_depth(self):
    """Depth of every FPN map: additional_layer_depth, multiplied."""
    depth_fn = feature_map_generators.get_depth_fn(self._depth_multiplier,
                                                   self._min_depth)
    return depth_fn(self._additional_layer_depth)

  def _fpn_pyramid_feature_maps(self, image_features, feature_blocks,
                                coarse_layer_name_fn, scope_name='fpn'):
    """feature_map_generators.fpn_pyramid_feature_maps with our arguments.

    Call it inside the conv_hyperparams arg_scope.

    Args:
      image_features: dict {end point name: [batch, h, w, d] tensor}.
      feature_blocks: end point names of levels 2, 3, ... in order.
      coarse_layer_name_fn: callable k -> scope name of the k-th level
        added above the backbone's.
      scope_name: variable scope of the FPN layers.

    Returns:
      The list of fpn_pyramid_feature_maps: levels fpn_min_level to
      fpn_max_level, finest first.
    """
    with tf.compat.v1.variable_scope(scope_name, reuse=self._reuse_weights):
      return feature_map_generators.fpn_pyramid_feature_maps(
          image_features, feature_blocks,
          fpn_min_level=self._fpn_min_level,
          fpn_max_level=self._fpn_max_level,
          depth=self._fpn_depth(),
          coarse_layer_name_fn=coarse_layer_name_fn,
          use_depthwise=(self._use_depthwise and
                         self._FPN_HONOURS_USE_DEPTHWISE),
          use_explicit_padding=self._use_explicit_padding,
          use_native_resize_op=self._use_native_resize_op)


class SSDMobileNetFpnFeatureExtractorMixin(SSDFpnFeatureExtractorMixin):
  """FPN on the backbone of an SSDMobileNetFeatureExtractorBase subclass.

  Put it first among the bases; subclasses set the class attributes below.
  """

  # End points of FPN levels 2, 3, 4 and 5.
  _FPN_FEATURE_BLOCKS = None
  # Number of the backbone's last layer: the levels added above the
  # backbone's continue it, as 'bottom_up_Conv2d_<n>'.
  _LAST_BACKBONE_LAYER_NUMBER = None
  # The backbone's conv defs with use_depthwise (FPNLite), thinner at the
  # top as in the original.
  _FPNLITE_CONV_DEFS = None

  @property
  def _conv_defs(self):
    if self._use_depthwise:
      return list(self._FPNLITE_CONV_DEFS)
    return None

  def _feature_maps(self, image_features):
    """The FPN maps (in the SSD layers' conv_hyperparams arg_scope)."""
    return self._fpn_pyramid_feature_maps(
        image_features, self._FPN_FEATURE_BLOCKS,
        coarse_layer_name_fn=lambda k: 'bottom_up_Conv2d_%d' % (
            self._LAST_BACKBONE_LAYER_NUMBER + k))
