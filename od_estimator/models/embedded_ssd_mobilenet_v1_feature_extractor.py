"""Embedded SSD on MobileNet v1 (config type 'embedded_ssd_mobilenet_v1').

Fixed 256x256 inputs and five feature maps whose kernels never exceed the
map size (the last added layer is 2x2), so every op runs on simple embedded
runtimes (Conv, DepthwiseConv, Relu6).
"""
import tensorflow as tf

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_mobilenet_v1_feature_extractor

_IMAGE_SIZE = 256


class EmbeddedSSDMobileNetV1FeatureExtractor(
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """MobileNet v1 SSD for 256x256 images with five maps.

  Constructor arguments are those of SSDFeatureExtractor; num_layers is
  ignored (always five maps).
  """

  # The original uses mobilenet_v1_arg_scope's default here.
  _REGULARIZE_DEPTHWISE = False

  def __init__(self, is_training, depth_multiplier, min_depth,
               pad_to_multiple, conv_hyperparams_fn, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False,
               num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    """See SSDFeatureExtractor.

    Raises:
      ValueError: if pad_to_multiple is not 1.
    """
    if pad_to_multiple != 1:
      raise ValueError('Embedded-specific SSD only supports `pad_to_multiple` '
                       'of 1.')
    super().__init__(
        is_training=is_training,
        depth_multiplier=depth_multiplier,
        min_depth=min_depth,
        pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def _check_inputs(self, preprocessed_inputs):
    """Requires 256x256 images (ValueError if static, else an assertion)."""
    preprocessed_inputs.shape.assert_has_rank(4)
    height, width = preprocessed_inputs.shape.as_list()[1:3]
    if height is None or width is None:
      shape = tf.shape(preprocessed_inputs)
      check = tf.debugging.Assert(
          tf.logical_and(tf.equal(shape[1], _IMAGE_SIZE),
                         tf.equal(shape[2], _IMAGE_SIZE)),
          ['image size must be 256 in both height and width.'])
      with tf.control_dependencies([check]):
        return tf.identity(preprocessed_inputs)
    if height != _IMAGE_SIZE or width != _IMAGE_SIZE:
      raise ValueError('image size must be = 256 in both height and width;'
                       ' image dim = %d,%d' % (height, width))
    return preprocessed_inputs

  def _feature_maps(self, image_features):
    layout = {
        'from_layer': ['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', '',
                       ''],
        'layer_depth': [-1, -1, 512, 256, 256],
        'conv_kernel_size': [-1, -1, 3, 3, 2],
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    feature_maps = feature_map_generators.multi_resolution_feature_maps(
        feature_map_layout=layout,
        depth_multiplier=self._depth_multiplier,
        min_depth=self._min_depth,
        insert_1x1_conv=True,
        image_features=image_features)
    return list(feature_maps.values())
