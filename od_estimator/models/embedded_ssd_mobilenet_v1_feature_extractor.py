"""Embedded SSD on MobileNet v1 (config type 'embedded_ssd_mobilenet_v1').

Fixed 256x256 inputs and five feature maps whose kernels never exceed the
map size (the last added layer is 2x2), so every op runs on simple embedded
runtimes (Conv, DepthwiseConv, Relu6).
"""
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import ssd_mobilenet_v1_feature_extractor

_IMAGE_SIZE = 256
# The feature maps this extractor always builds (see _feature_maps).
_NUM_LAYERS = 5


class EmbeddedSSDMobileNetV1FeatureExtractor(
    ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor):
  """MobileNet v1 SSD for 256x256 images with five maps.

  Constructor arguments are those of SSDFeatureExtractor; pad_to_multiple
  must be 1 and num_layers 5, its default here. (The original's constructor
  takes no num_layers at all, so a config setting it fails there; the one
  value this extractor honours is accepted.)
  """

  def __init__(self, *args, num_layers=_NUM_LAYERS, **kwargs):
    super().__init__(*args, num_layers=num_layers, **kwargs)

  # The original uses mobilenet_v1_arg_scope's default here.
  _REGULARIZE_DEPTHWISE = False

  def _check_arguments(self):
    """Raises ValueError unless pad_to_multiple is 1 and num_layers 5."""
    if self._pad_to_multiple != 1:
      raise errors.UserInputError(
          'Embedded-specific SSD only supports `pad_to_multiple` '
          'of 1.')
    if self._num_layers != _NUM_LAYERS:
      raise errors.UserInputError(
          'model.ssd.feature_extractor.num_layers: embedded_ssd_mobilenet_v1 '
          'always builds %d feature maps, got num_layers %d; remove '
          'num_layers or set it to %d.' % (_NUM_LAYERS, self._num_layers,
                                          _NUM_LAYERS))

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
      raise errors.UserInputError(
          'image size must be = 256 in both height and width;'
          ' image dim = %d,%d' % (height, width))
    return preprocessed_inputs

  def _feature_maps(self, image_features):
    return self._multi_resolution_feature_maps(
        image_features,
        from_layers=['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', '',
                     ''],
        layer_depths=[-1, -1, 512, 256, 256],
        conv_kernel_sizes=[-1, -1, 3, 3, 2])
