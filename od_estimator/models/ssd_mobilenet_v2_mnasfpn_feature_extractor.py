"""SSD feature extractor: MobileNet v2 with a MnasFPN head.

Config type 'ssd_mobilenet_v2_mnasfpn' (Chen et al., "MnasFPN",
https://arxiv.org/abs/1912.01106). MobileNet v2 up to layer_18 gives C3
(layer_7), C4 (layer_14) and C5 (layer_18); C6 is C5 max-pooled with stride 2
and projected by a 1x1 conv. Four MnasFPN cells then refine levels 3..6.

Variable names follow the original so its model-zoo checkpoint restores:
  FeatureExtractor/MobilenetV2/...   the backbone, without Conv_1
  FeatureExtractor/MnasFPN/C6_Conv1x1/{weights,BatchNorm/...}
  FeatureExtractor/MnasFPN/cell_<c>/block_<b>/input_<i>/Conv1x1/weights
  FeatureExtractor/MnasFPN/cell_<c>/block_<b>/SepConv/depthwise_weights
  FeatureExtractor/MnasFPN/cell_<c>/block_<b>/SepConv/pointwise_weights

As in the original, the network brings its own hyperparameters (He-normal
init, L2 decay, batch norm epsilon 0.01, decay 0.99); conv_hyperparams is
not used. Batch norm mode comes from the caller (the SSD meta-architecture).
"""
import collections
import functools

from absl import logging

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.nets import mobilenet_v2
from od_estimator.core import shape_utils

# One node of a MnasFPN cell. `inputs` index the cell's node list: first the
# cell inputs (one per feature level), then the blocks built so far. The
# inputs are resampled to `output_level` with `expansion_size` channels,
# summed, and go through a ReLU6 and a `kernel_size` separable conv.
Block = collections.namedtuple(
    'Block', ['inputs', 'output_level', 'kernel_size', 'expansion_size'])

_CELL_BLOCKS = (
    Block(inputs=(1, 2), output_level=4, kernel_size=3, expansion_size=256),
    Block(inputs=(0, 4), output_level=3, kernel_size=3, expansion_size=128),
    Block(inputs=(5, 4), output_level=4, kernel_size=3, expansion_size=128),
    Block(inputs=(4, 3), output_level=5, kernel_size=5, expansion_size=128),
    Block(inputs=(4, 3), output_level=6, kernel_size=3, expansion_size=96),
)

# The searched head of the paper: four identical cells over levels 3..6.
MNASFPN_DEF = {
    'feature_levels': [3, 4, 5, 6],
    'spec': [_CELL_BLOCKS] * 4,
}

# Backbone end points of C3, C4 and C5; C6 is built from C5.
_BACKBONE_LEVELS = ['layer_7', 'layer_14', 'layer_18']
_MIN_IMAGE_DIM = 33
_SUPPORTED_LEVELS = (3, 6)
_BACKBONE_WEIGHT_DECAY = 4e-5
_HEAD_WEIGHT_DECAY = 1e-4
# Channel counts scaled by depth_multiplier are rounded to multiples of this.
_DEPTH_DIVISOR = 8


def _mnasfpn_arg_scope(weight_decay):
  """slim arg_scope of the MnasFPN layers (and, inside it, the backbone).

  Args:
    weight_decay: L2 regularization scale of conv and separable conv weights.

  Returns:
    An arg_scope dict; batch norm's is_training is left to the caller.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  with slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf.compat.v1.initializers.he_normal(),
      weights_regularizer=regularizer), \
      slim.arg_scope(
          [slim.separable_conv2d],
          # He-normal for the 3x3 depthwise kernel: sqrt(2 / 9) / 0.88.
          weights_initializer=tf.compat.v1.truncated_normal_initializer(
              stddev=0.536),
          weights_regularizer=regularizer), \
      slim.arg_scope([slim.batch_norm], epsilon=0.01, decay=0.99,
                     center=True, scale=True) as scope:
    return scope


def _depth_fn(depth_multiplier, min_depth):
  """Returns depth(d): d scaled and rounded like the MobileNet layers."""
  def depth(d):
    return mobilenet_v2._make_divisible(  # pylint: disable=protected-access
        d * depth_multiplier, _DEPTH_DIVISOR, min_depth)
  return depth


def _maybe_pad(net, use_explicit_padding, kernel_size=3):
  if use_explicit_padding:
    return feature_map_generators.fixed_padding(net, kernel_size)
  return net


def _upsample(net, scale, use_native_resize_op):
  """Nearest-neighbour upsampling of [b, h, w, c] by an int `scale`."""
  if not use_native_resize_op:
    return feature_map_generators.nearest_neighbor_upsampling(net, scale)
  _, height, width, _ = shape_utils.combined_static_and_dynamic_shape(net)
  return tf.compat.v1.image.resize_nearest_neighbor(
      net, [height * scale, width * scale])


def _resample(net, from_level, to_level, depth, use_explicit_padding,
              use_native_resize_op):
  """Brings a feature map to `to_level` with `depth` channels.

  The 1x1 conv (`Conv1x1`) runs at the coarser of the two resolutions
  (size-dependent ordering): before upsampling, after max-pool downsampling
  (`Downsample`).

  Args:
    net: [batch, h, w, c] feature map at `from_level`.
    from_level: pyramid level of `net`.
    to_level: pyramid level wanted.
    depth: output channels.
    use_explicit_padding: fixed padding + VALID pooling.
    use_native_resize_op: upsample with tf.image's nearest neighbour resize.

  Returns:
    [batch, h * 2**(from_level - to_level), ..., depth] tensor.
  """
  padding = 'VALID' if use_explicit_padding else 'SAME'
  conv1x1 = functools.partial(
      slim.conv2d, num_outputs=depth, kernel_size=[1, 1], activation_fn=None,
      normalizer_fn=slim.batch_norm, padding=padding, scope='Conv1x1')
  if from_level < to_level:
    stride = 2**(to_level - from_level)
    net = slim.max_pool2d(_maybe_pad(net, use_explicit_padding), [3, 3],
                          stride=[stride, stride], padding=padding,
                          scope='Downsample')
    return conv1x1(net)
  net = conv1x1(net)
  if from_level > to_level:
    net = _upsample(net, 2**(from_level - to_level), use_native_resize_op)
  return net


def _mnasfpn_cell(feature_maps, feature_levels, blocks, depth, depth_fn,
                  use_explicit_padding=False, use_native_resize_op=False):
  """Builds one MnasFPN cell (blocks scoped `block_<b>`).

  Args:
    feature_maps: list of [batch, h_i, w_i, c_i] tensors, one per level.
    feature_levels: pyramid level of each feature map.
    blocks: sequence of Block; the last len(feature_maps) are the outputs.
    depth: channels of every block output, before depth_fn.
    depth_fn: maps a nominal depth to the depth to build.
    use_explicit_padding: fixed padding + VALID convs and pools.
    use_native_resize_op: see _resample.

  Returns:
    List of [batch, h_i, w_i, depth_fn(depth)] tensors, one per input level;
    each has its input added when the shapes agree (cell residual).
  """
  padding = 'VALID' if use_explicit_padding else 'SAME'
  nodes = list(feature_maps)
  levels = list(feature_levels)
  for block_index, block in enumerate(blocks):
    with tf.compat.v1.variable_scope('block_%d' % block_index):
      net = None
      for input_index, node_index in enumerate(block.inputs):
        with tf.compat.v1.variable_scope('input_%d' % input_index):
          resampled = _resample(
              nodes[node_index], levels[node_index], block.output_level,
              depth_fn(block.expansion_size), use_explicit_padding,
              use_native_resize_op)
        # Pairwise sums rather than one AddN, which TFLite handles badly.
        net = resampled if net is None else net + resampled
      net = slim.separable_conv2d(
          _maybe_pad(tf.nn.relu6(net), use_explicit_padding,
                     block.kernel_size),
          depth_fn(depth), block.kernel_size, activation_fn=None,
          normalizer_fn=slim.batch_norm, padding=padding, scope='SepConv')
    nodes.append(net)
    levels.append(block.output_level)
  outputs = nodes[-len(feature_maps):]
  for i, (cell_input, output) in enumerate(zip(feature_maps, outputs)):
    if cell_input.shape.as_list() == output.shape.as_list():
      outputs[i] = output + cell_input
  return outputs


def mnasfpn(feature_maps, head_def, depth, depth_fn,
            use_explicit_padding=False, use_native_resize_op=False):
  """Builds the MnasFPN cells of `head_def` (scoped `cell_<c>`).

  Args:
    feature_maps: list of [batch, h_i, w_i, c_i] tensors at
      head_def['feature_levels'].
    head_def: dict with 'feature_levels' (list of ints) and 'spec' (a list
      of cells, each a sequence of Block).
    depth: nominal channels of every block output.
    depth_fn: maps a nominal depth to the depth to build.
    use_explicit_padding: fixed padding + VALID convs and pools.
    use_native_resize_op: see _resample.

  Returns:
    List of [batch, h_i, w_i, depth_fn(depth)] tensors, finest first.
  """
  for cell_index, blocks in enumerate(head_def['spec']):
    with tf.compat.v1.variable_scope('cell_%d' % cell_index):
      feature_maps = _mnasfpn_cell(
          feature_maps, head_def['feature_levels'], blocks, depth, depth_fn,
          use_explicit_padding, use_native_resize_op)
  return feature_maps


def _check_head_def(head_def):
  """Raises ValueError unless every cell of head_def can be built.

  Each cell must end with one block per feature level, in the order of
  head_def['feature_levels'], and blocks may only read earlier nodes.
  """
  levels = list(head_def['feature_levels'])
  if len(levels) != len(_BACKBONE_LEVELS) + 1:
    raise ValueError('MnasFPN head_def needs feature_levels for C3..C6 '
                     '(%d levels), got %s.' % (len(_BACKBONE_LEVELS) + 1,
                                               levels))
  for cell_index, blocks in enumerate(head_def['spec']):
    output_levels = [block.output_level for block in blocks[-len(levels):]]
    if output_levels != levels:
      raise ValueError(
          'MnasFPN cell %d: its last blocks have levels %s, expected the '
          'feature levels %s.' % (cell_index, output_levels, levels))
    for block_index, block in enumerate(blocks):
      for node_index in block.inputs:
        if node_index >= len(levels) + block_index:
          raise ValueError(
              'MnasFPN cell %d: block %d reads node %d, which is not built '
              'yet.' % (cell_index, block_index, node_index))


def _check_input_sizes(feature_maps, feature_levels):
  """Raises ValueError unless each level halves the previous one exactly.

  Cells add maps resampled by powers of two, so the finest map's size times
  2**level must be divisible down to every coarser level.
  """
  finest_size = feature_maps[0].shape.as_list()[1:3]
  for feature_map, level in zip(feature_maps, feature_levels):
    size = feature_map.shape.as_list()[1:3]
    if None in size or None in finest_size:
      raise errors.UserInputError(
          'MnasFPN needs a static image height and width (e.g. '
          'a fixed_shape_resizer), got feature map sizes %s.' %
          [f.shape.as_list()[1:3] for f in feature_maps])
    expected = [s * 2**feature_levels[0] // 2**level for s in finest_size]
    if size != expected:
      raise errors.UserInputError(
          'MnasFPN: the feature map of level %d is %dx%d, expected %dx%d. '
          'Image height and width must be multiples of 64 (precisely: '
          'ceil(size / 8) a multiple of 8), e.g. 320x320.' % (
              level, size[0], size[1], expected[0], expected[1]))


class SSDMobileNetV2MnasFPNFeatureExtractor(
    ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin,
    ssd_feature_extractor.SymmetricRangeInputsMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps of levels 3..6 from MobileNet v2 and four MnasFPN cells."""

  def __init__(self,
               is_training,
               depth_multiplier,
               min_depth,
               pad_to_multiple,
               conv_hyperparams_fn,
               fpn_min_level=3,
               fpn_max_level=6,
               additional_layer_depth=48,
               head_def=None,
               reuse_weights=None,
               use_explicit_padding=False,
               use_depthwise=False,
               use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Arguments not listed are those of SSDFpnFeatureExtractorMixin, except
    that fpn_min_level and fpn_max_level must be 3 and 6, use_depthwise
    must be False (MnasFPN blocks are always separable),
    additional_layer_depth sets the channels of C6 and of the cell
    outputs, and MnasFPN has its own hyperparameters: conv_hyperparams_fn
    and override_base_feature_extractor_hyperparams are not used.

    Args:
      head_def: dict like MNASFPN_DEF describing the cells; None for it.

    Raises:
      ValueError: for other FPN levels than 3..6, use_depthwise or an
        inconsistent head_def.
    """
    self._head_def = head_def or MNASFPN_DEF
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
    logging.warning(
        'ssd_mobilenet_v2_mnasfpn uses its own hyperparameters, as the '
        'original: feature_extractor.conv_hyperparams and '
        'override_base_feature_extractor_hyperparams are not used.')

  def _check_arguments(self):
    """Raises ValueError for options MnasFPN cannot honour."""
    if (self._fpn_min_level, self._fpn_max_level) != _SUPPORTED_LEVELS:
      raise errors.UserInputError(
          'ssd_mobilenet_v2_mnasfpn supports fpn.min_level 3 and '
          'fpn.max_level 6 only, got %d and %d.' % (self._fpn_min_level,
                                                    self._fpn_max_level))
    if self._use_depthwise:
      raise errors.UserInputError(
          'ssd_mobilenet_v2_mnasfpn: use_depthwise is not '
          'supported (its blocks are always separable convs); '
          'leave it false.')
    _check_head_def(self._head_def)

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`, of static size; height and width must be multiples of
        64 (precisely: ceil(size / 8) a multiple of 8).

    Returns:
      List of 4 [batch, h_i, w_i, d] float32 maps of levels 3..6 (strides
      8..64), d = additional_layer_depth after the depth multiplier.

    Raises:
      ValueError: if the image is smaller than 33 pixels or its size does
        not divide down evenly to level 6.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    end_points = self._backbone_end_points(preprocessed_inputs)
    depth_fn = _depth_fn(self._depth_multiplier, self._min_depth)
    with tf.compat.v1.variable_scope('MnasFPN', reuse=self._reuse_weights), \
        slim.arg_scope(_mnasfpn_arg_scope(_HEAD_WEIGHT_DECAY)):
      c6 = self._c6(end_points[_BACKBONE_LEVELS[-1]], depth_fn)
      feature_maps = [end_points[name] for name in _BACKBONE_LEVELS] + [c6]
      _check_input_sizes(feature_maps, self._head_def['feature_levels'])
      return mnasfpn(feature_maps, self._head_def,
                     depth=self._additional_layer_depth, depth_fn=depth_fn,
                     use_explicit_padding=self._use_explicit_padding,
                     use_native_resize_op=self._use_native_resize_op)

  def _backbone_end_points(self, preprocessed_inputs):
    """Runs MobileNet v2 up to layer_18 in the 'MobilenetV2' scope."""
    with tf.compat.v1.variable_scope(
        'MobilenetV2', reuse=self._reuse_weights) as scope, \
        slim.arg_scope(mobilenet_v2.training_scope(is_training=None,
                                                   bn_decay=0.99)), \
        slim.arg_scope(_mnasfpn_arg_scope(_BACKBONE_WEIGHT_DECAY)):
      _, end_points = mobilenet_v2.mobilenet_base(
          feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                 self._pad_to_multiple),
          final_endpoint=_BACKBONE_LEVELS[-1],
          depth_multiplier=self._depth_multiplier,
          min_depth=self._min_depth,
          use_explicit_padding=self._use_explicit_padding,
          scope=scope)
    return end_points

  def _c6(self, c5, depth_fn):
    """Level 6: 3x3 stride-2 max pool of C5, then a linear 1x1 conv."""
    padding = 'VALID' if self._use_explicit_padding else 'SAME'
    net = slim.max_pool2d(_maybe_pad(c5, self._use_explicit_padding), [3, 3],
                          stride=[2, 2], padding=padding,
                          scope='C6_downsample')
    net = slim.conv2d(net, depth_fn(self._additional_layer_depth), [1, 1],
                      activation_fn=tf.identity,
                      normalizer_fn=slim.batch_norm,
                      weights_regularizer=None, padding='VALID',
                      scope='C6_Conv1x1')
    # A separate op for C6, as the original (quantization rewrites use it).
    return tf.identity(net)
