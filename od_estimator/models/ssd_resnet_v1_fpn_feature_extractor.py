"""SSD FPN feature extractors on ResNet v1 50/101/152 (RetinaNet).

Config types 'ssd_resnet50_v1_fpn', 'ssd_resnet101_v1_fpn' and
'ssd_resnet152_v1_fpn'. Variables follow the original Object Detection API so
that its model-zoo and slim classification checkpoints restore; below the
meta-architecture scope (normally `FeatureExtractor/`):

  resnet_v1_50/conv1/{weights,BatchNorm/...}
  resnet_v1_50/block<b>/unit_<u>/bottleneck_v1/{shortcut,conv1,conv2,conv3}/...
  resnet_v1_50/fpn/projection_<n>, smoothing_<n>   (top-down path)
  resnet_v1_50/fpn/bottom_up_block5, bottom_up_block6   (levels 6 and 7)

FPN level l (2..5) is built on ResNet block l - 1. The block outputs are taken
before each block's final stride (slim's `store_non_strided_activations`), so
block1..block4 have strides 4, 8, 16 and 32.
"""
import contextlib

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_utils
from tf_slim.nets import resnet_v1

from od_estimator import errors
from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_fpn_feature_extractor

# Smallest image side accepted, as in the original.
_MIN_IMAGE_DIM = 129
# ResNet end points of FPN levels 2, 3, 4 and 5.
_FEATURE_BLOCKS = ['block1', 'block2', 'block3', 'block4']
# (nominal bottleneck depth, stride) of the four blocks.
_BLOCK_DEPTHS_AND_STRIDES = [(64, 2), (128, 2), (256, 2), (512, 1)]


def _stack_blocks(net, blocks, store_non_strided_activations):
  """Runs the ResNet blocks, keeping each block's output as an end point.

  With store_non_strided_activations the last unit of a block runs at
  stride 1 and its output is subsampled afterwards: the end point keeps the
  full resolution while the next block sees what the strided unit would
  have produced (1x1 convs and the 3x3 'SAME' conv commute with the
  subsampling). Variables are identical either way.

  Args:
    net: [batch, h, w, c] output of the root block.
    blocks: list of resnet_utils.Block.
    store_non_strided_activations: see above.

  Returns:
    (net, {block scope name: [batch, h_b, w_b, d_b] tensor}).
  """
  end_points = {}
  for block in blocks:
    with tf.compat.v1.variable_scope(block.scope, 'block', [net]):
      block_stride = 1
      for i, unit in enumerate(block.args):
        if store_non_strided_activations and i == len(block.args) - 1:
          block_stride = unit.get('stride', 1)
          unit = dict(unit, stride=1)
        with tf.compat.v1.variable_scope('unit_%d' % (i + 1), values=[net]):
          net = block.unit_fn(net, rate=1, **unit)
      end_points[block.scope] = net
      net = resnet_utils.subsample(net, block_stride)
  return net, end_points


def _make_resnet_v1(num_units, default_scope):
  """Returns a slim ResNet v1 builder with the original's signature.

  tf_slim's resnet_v1_<n> has neither store_non_strided_activations nor
  depth_multiplier / min_base_depth, so the network is assembled here from
  tf_slim's bottleneck units and root-block helpers; variable names are
  those of the slim nets.

  Args:
    num_units: units in each of the four blocks, e.g. (3, 4, 6, 3).
    default_scope: variable scope when the caller passes none.

  Returns:
    resnet_fn(inputs, num_classes, is_training, global_pool, output_stride,
    store_non_strided_activations, min_base_depth, depth_multiplier, reuse,
    scope) -> (net, end_points) with end_points keyed 'block1'..'block4'.
  """
  def resnet_fn(inputs, num_classes=None, is_training=None, global_pool=False,
                output_stride=None, store_non_strided_activations=False,
                min_base_depth=8, depth_multiplier=1, reuse=None, scope=None):
    """Builds the backbone; is_training=None keeps the outer batch norm mode.

    Raises:
      ValueError: for classification heads, global pooling or an
        output_stride, which the detector never uses.
    """
    if num_classes or global_pool or output_stride is not None:
      raise ValueError('Only the fully convolutional backbone is available: '
                       'num_classes=None, global_pool=False and '
                       'output_stride=None.')
    blocks = [
        resnet_v1.resnet_v1_block(
            'block%d' % (i + 1),
            base_depth=max(int(depth * depth_multiplier), min_base_depth),
            num_units=units, stride=stride)
        for i, (units, (depth, stride)) in enumerate(
            zip(num_units, _BLOCK_DEPTHS_AND_STRIDES))]
    if is_training is None:
      batch_norm_scope = contextlib.nullcontext()
    else:
      batch_norm_scope = slim.arg_scope([slim.batch_norm],
                                        is_training=is_training)
    with tf.compat.v1.variable_scope(scope or default_scope, 'resnet_v1',
                                     [inputs], reuse=reuse):
      with batch_norm_scope:
        net = resnet_utils.conv2d_same(inputs, 64, 7, stride=2,
                                       scope='conv1')
        net = slim.max_pool2d(net, [3, 3], stride=2, scope='pool1')
        return _stack_blocks(net, blocks, store_non_strided_activations)
  return resnet_fn


resnet_v1_50 = _make_resnet_v1((3, 4, 6, 3), 'resnet_v1_50')
resnet_v1_101 = _make_resnet_v1((3, 4, 23, 3), 'resnet_v1_101')
resnet_v1_152 = _make_resnet_v1((3, 8, 36, 3), 'resnet_v1_152')


class SSDResnetV1FpnFeatureExtractor(
    ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin,
    ssd_feature_extractor.ImageNetMeanSubtractedInputsMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """SSD FPN feature extractor on a ResNet v1 backbone.

  FPN levels 2..5 are ResNet block1..block4. As in the original,
  use_explicit_padding must be False and use_depthwise is ignored.
  """

  # use_depthwise is accepted and ignored, as in the original.
  _FPN_HONOURS_USE_DEPTHWISE = False

  def __init__(self,
               is_training,
               depth_multiplier,
               min_depth,
               pad_to_multiple,
               conv_hyperparams_fn,
               resnet_base_fn,
               resnet_scope_name,
               fpn_scope_name,
               fpn_min_level=3,
               fpn_max_level=7,
               additional_layer_depth=256,
               reuse_weights=None,
               use_explicit_padding=False,
               use_depthwise=False,
               use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Arguments not listed are those of SSDFpnFeatureExtractorMixin;
    depth_multiplier also scales the backbone's bottleneck depths.

    Args:
      resnet_base_fn: backbone builder with the signature of resnet_v1_50.
      resnet_scope_name: variable scope of the backbone, e.g. 'resnet_v1_50'.
      fpn_scope_name: variable scope of the FPN inside the backbone's scope.

    Raises:
      ValueError: if use_explicit_padding is set.
    """
    self._resnet_base_fn = resnet_base_fn
    self._resnet_scope_name = resnet_scope_name
    self._fpn_scope_name = fpn_scope_name
    super().__init__(
        is_training, depth_multiplier, min_depth, pad_to_multiple,
        conv_hyperparams_fn,
        fpn_min_level=fpn_min_level,
        fpn_max_level=fpn_max_level,
        additional_layer_depth=additional_layer_depth,
        reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        use_native_resize_op=use_native_resize_op,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def _check_arguments(self):
    """Raises ValueError if use_explicit_padding is set."""
    if self._use_explicit_padding:
      raise errors.UserInputError(
          'use_explicit_padding is not supported by the ResNet '
          'v1 FPN feature extractors.')

  def extract_features(self, preprocessed_inputs):
    """Builds the FPN feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 129.

    Returns:
      List of fpn_max_level - fpn_min_level + 1 tensors
      [batch, ceil(height / 2**l), ceil(width / 2**l), depth], l =
      fpn_min_level..fpn_max_level, for inputs whose size is a multiple of
      32.

    Raises:
      ValueError: if the static image size is below 129.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    with tf.compat.v1.variable_scope(self._resnet_scope_name,
                                     reuse=self._reuse_weights) as scope:
      # Both arg_scope dicts are built here so they extend the caller's
      # scope (batch norm mode) instead of replacing it.
      with slim.arg_scope(resnet_utils.resnet_arg_scope()):
        with self._backbone_hyperparams():
          _, image_features = self._resnet_base_fn(
              inputs=feature_map_generators.pad_to_multiple(
                  preprocessed_inputs, self._pad_to_multiple),
              num_classes=None,
              is_training=None,
              global_pool=False,
              output_stride=None,
              store_non_strided_activations=True,
              min_base_depth=self._min_depth,
              depth_multiplier=self._depth_multiplier,
              scope=scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        return self._fpn_pyramid_feature_maps(
            image_features, _FEATURE_BLOCKS,
            # Added levels are named after the level they produce.
            coarse_layer_name_fn=lambda k: 'bottom_up_block%d' % (4 + k),
            scope_name=self._fpn_scope_name)


class _SSDResnetDepthV1FpnFeatureExtractor(SSDResnetV1FpnFeatureExtractor):
  """Binds the backbone of one ResNet depth (set by each subclass).

  Constructor arguments are those of SSDFpnFeatureExtractorMixin: the
  backbone arguments of SSDResnetV1FpnFeatureExtractor come from the class
  attributes below, so its constructor (which only stores them) is skipped.
  """

  __init__ = ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin.__init__
  # resnet_base_fn (a staticmethod) and resnet_scope_name.
  _resnet_base_fn = None
  _resnet_scope_name = None
  _fpn_scope_name = 'fpn'


class SSDResnet50V1FpnFeatureExtractor(_SSDResnetDepthV1FpnFeatureExtractor):
  """SSD FPN feature extractor on ResNet v1 50 ('ssd_resnet50_v1_fpn')."""
  _resnet_base_fn = staticmethod(resnet_v1_50)
  _resnet_scope_name = 'resnet_v1_50'


class SSDResnet101V1FpnFeatureExtractor(_SSDResnetDepthV1FpnFeatureExtractor):
  """SSD FPN feature extractor on ResNet v1 101 ('ssd_resnet101_v1_fpn')."""
  _resnet_base_fn = staticmethod(resnet_v1_101)
  _resnet_scope_name = 'resnet_v1_101'


class SSDResnet152V1FpnFeatureExtractor(_SSDResnetDepthV1FpnFeatureExtractor):
  """SSD FPN feature extractor on ResNet v1 152 ('ssd_resnet152_v1_fpn')."""
  _resnet_base_fn = staticmethod(resnet_v1_152)
  _resnet_scope_name = 'resnet_v1_152'
