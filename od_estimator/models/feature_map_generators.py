"""Feature map generators: the layers SSD adds on top of a backbone.

Three generators, each returning an OrderedDict {feature map name: tensor}
ordered from the highest to the lowest resolution:

  * multi_resolution_feature_maps: the SSD pyramid (backbone maps followed by
    stride-2 convolutions).
  * fpn_top_down_feature_maps: the top-down path of a Feature Pyramid Network
    (fpn_pyramid_feature_maps adds the coarser levels the SSD FPN extractors
    build on top of it).
  * pooling_pyramid_feature_maps: the Pooling Pyramid Network (PPN).

Layer (and so variable) names follow the original Object Detection API so that
model-zoo checkpoints restore, e.g. `layer_19_2_Conv2d_2_3x3_s2_512/weights`
or `fpn/projection_3/weights`. All ops are tf-slim layers: the caller's
`slim.arg_scope` supplies activation, normalization and initializers.

The module also holds small padding/upsampling helpers shared by the SSD
feature extractors.
"""
import collections
import functools
import math

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.core import shape_utils

# Activations are clipped to [-ACTIVATION_BOUND, ACTIVATION_BOUND] when
# use_bounded_activations is set (TPU v1 / quantization friendly).
ACTIVATION_BOUND = 6.0


def get_depth_fn(depth_multiplier, min_depth):
  """Returns depth_fn(depth) = max(int(depth * depth_multiplier), min_depth).

  Args:
    depth_multiplier: float multiplier on the nominal channel count.
    min_depth: lower bound on the resulting channel count.

  Returns:
    A callable mapping a nominal int depth to the depth to use.
  """
  def depth_fn(depth):
    return max(int(depth * depth_multiplier), min_depth)
  return depth_fn


def fixed_padding(inputs, kernel_size, rate=1):
  """Zero-pads height and width so a VALID conv behaves like a SAME one.

  Unlike 'SAME', the padding does not depend on the input size or stride,
  which keeps the output aligned the same way for every image size.

  Args:
    inputs: [batch, height, width, channels] tensor.
    kernel_size: int size of the convolution or pooling kernel.
    rate: int dilation rate of the convolution.

  Returns:
    [batch, height + p, width + p, channels] tensor with
    p = (kernel_size - 1) * rate, split with the smaller half first.
  """
  effective_kernel = kernel_size + (kernel_size - 1) * (rate - 1)
  total = effective_kernel - 1
  before = total // 2
  after = total - before
  return tf.pad(inputs, [[0, 0], [before, after], [before, after], [0, 0]])


def nearest_neighbor_upsampling(input_tensor, scale=None, height_scale=None,
                                width_scale=None):
  """Repeats every pixel (stack and reshape only, TPU ok), as the original.

  Args:
    input_tensor: [batch, height, width, channels] tensor.
    scale: int factor for both dimensions.
    height_scale, width_scale: int factors; when given they override scale.

  Returns:
    [batch, height * height_scale, width * width_scale, channels].

  Raises:
    ValueError: if neither scale nor both height_scale and width_scale are
      given.
  """
  if not scale and (height_scale is None or width_scale is None):
    raise ValueError('Provide either `scale` or `height_scale` and'
                     ' `width_scale`.')
  h_scale = scale if height_scale is None else height_scale
  w_scale = scale if width_scale is None else width_scale
  with tf.name_scope('nearest_neighbor_upsampling'):
    batch, height, width, channels = (
        shape_utils.combined_static_and_dynamic_shape(input_tensor))
    output = tf.stack([input_tensor] * w_scale, axis=3, name='w_stack')
    output = tf.stack([output] * h_scale, axis=2, name='h_stack')
    return tf.reshape(output,
                      [batch, height * h_scale, width * w_scale, channels])


def pad_to_multiple(tensor, multiple):
  """Zero-pads height and width at the bottom/right up to a multiple.

  Concatenates zeros rather than calling tf.pad so static shapes survive.

  Args:
    tensor: [batch, height, width, channels] tensor.
    multiple: int; 1 returns the input unchanged.

  Returns:
    [batch, ceil(height / multiple) * multiple,
     ceil(width / multiple) * multiple, channels] tensor.
  """
  if multiple == 1:
    return tensor
  batch, height, width, channels = (
      shape_utils.combined_static_and_dynamic_shape(tensor))

  def padded(size):
    if isinstance(size, int):
      return int(math.ceil(float(size) / multiple)) * multiple
    return (size + multiple - 1) // multiple * multiple

  def needs_padding(size, padded_size):
    # Dynamic sizes may or may not need padding: a zero-row concat is a no-op.
    return not isinstance(size, int) or padded_size != size

  padded_height = padded(height)
  padded_width = padded(width)
  if needs_padding(height, padded_height):
    tensor = tf.concat([tensor, tf.zeros(
        [batch, padded_height - height, width, channels], tensor.dtype)], 1)
  if needs_padding(width, padded_width):
    tensor = tf.concat([tensor, tf.zeros(
        [batch, padded_height, padded_width - width, channels],
        tensor.dtype)], 2)
  return tensor


def check_min_image_dim(min_dim, image_tensor):
  """Checks that image height and width are at least `min_dim`.

  Args:
    min_dim: int minimum size in pixels.
    image_tensor: [batch, height, width, channels] tensor.

  Returns:
    The image; when its size is dynamic, an identity carrying a runtime
    assertion.

  Raises:
    ValueError: if the static height or width is smaller than min_dim.
  """
  height, width = image_tensor.shape.as_list()[1:3]
  if height is None or width is None:
    shape = tf.shape(image_tensor)
    check = tf.debugging.Assert(
        tf.logical_and(tf.greater_equal(shape[1], min_dim),
                       tf.greater_equal(shape[2], min_dim)),
        ['image size must be >= {} in both height and width.'.format(
            min_dim)])
    with tf.control_dependencies([check]):
      return tf.identity(image_tensor)
  if height < min_dim or width < min_dim:
    raise errors.UserInputError(
        'image size must be >= %d in both height and width; image dim = %d,%d'
        % (min_dim, height, width))
  return image_tensor


def multi_resolution_feature_maps(feature_map_layout, depth_multiplier,
                                  min_depth, insert_1x1_conv, image_features,
                                  pool_residual=False):
  """Builds the SSD multi-resolution feature maps.

  Entries of `feature_map_layout['from_layer']` naming a backbone end point
  are used as they are; empty entries add a new map computed from the
  previous one by an optional 1x1 conv (half depth) and a stride-2 KxK conv.
  New layers are named after the last backbone map they descend from:
  `<base>_1_Conv2d_<i>_1x1_<d/2>` and `<base>_2_Conv2d_<i>_<k>x<k>_s2_<d>`
  (plus a `_depthwise` layer before the latter when use_depthwise).

  Example layout (MobileNet v2):
    {'from_layer': ['layer_15/expansion_output', 'layer_19', '', '', '', ''],
     'layer_depth': [-1, -1, 512, 256, 256, 128]}

  Args:
    feature_map_layout: dict with
      'from_layer': list of end point names, '' for a new layer;
      'layer_depth': list of ints, the nominal depth of new layers (-1 for
        backbone maps);
      optional 'conv_kernel_size': list of ints (default 3 for all);
      optional 'use_explicit_padding': bool, fixed padding + VALID convs;
      optional 'use_depthwise': bool, depthwise 3x3 followed by 1x1 conv.
    depth_multiplier: float multiplier on layer_depth.
    min_depth: minimum depth of new layers.
    insert_1x1_conv: whether to add the 1x1 conv before each stride-2 conv.
    image_features: dict {end point name: [batch, h, w, d] tensor}.
    pool_residual: with use_depthwise, add a stride-2 average pool of the
      previous map when its depth equals the new map's depth (as the
      original, this has no effect without use_depthwise).

  Returns:
    OrderedDict {name: [batch, h_i, w_i, d_i] tensor}, in layout order.

  Raises:
    ValueError: if 'from_layer' and 'layer_depth' (or 'conv_kernel_size')
      differ in length, or the first entry does not name a backbone layer.
  """
  depth_fn = get_depth_fn(depth_multiplier, min_depth)
  from_layers = feature_map_layout['from_layer']
  layer_depths = feature_map_layout['layer_depth']
  kernel_sizes = feature_map_layout.get('conv_kernel_size',
                                        [3] * len(from_layers))
  use_explicit_padding = feature_map_layout.get('use_explicit_padding', False)
  use_depthwise = feature_map_layout.get('use_depthwise', False)
  _check_layout(from_layers, layer_depths, kernel_sizes)
  feature_maps = collections.OrderedDict()
  base_name = ''
  previous = None
  for index, (from_layer, layer_depth, kernel_size) in enumerate(
      zip(from_layers, layer_depths, kernel_sizes)):
    if from_layer:
      base_name = from_layer
      name = from_layer
      feature_map = image_features[from_layer]
    else:
      name, feature_map = _new_feature_map(
          previous, base_name, index, depth_fn(layer_depth), kernel_size,
          depth_fn(layer_depth // 2) if insert_1x1_conv else None,
          use_explicit_padding, use_depthwise, pool_residual)
    feature_maps[name] = feature_map
    previous = feature_map
  return feature_maps


def _check_layout(from_layers, layer_depths, kernel_sizes):
  """Raises ValueError for a feature_map_layout that cannot be built."""
  if len(layer_depths) != len(from_layers):
    raise ValueError('feature_map_layout: from_layer has %d entries but '
                     'layer_depth has %d.' % (len(from_layers),
                                              len(layer_depths)))
  if len(kernel_sizes) != len(from_layers):
    raise ValueError('feature_map_layout: from_layer has %d entries but '
                     'conv_kernel_size has %d.' % (len(from_layers),
                                                   len(kernel_sizes)))
  if from_layers and not from_layers[0]:
    raise ValueError('feature_map_layout: the first from_layer must name a '
                     'backbone feature map.')


def _new_feature_map(previous, base_name, index, depth, kernel_size,
                     half_depth, use_explicit_padding, use_depthwise,
                     pool_residual):
  """One new stride-2 map of multi_resolution_feature_maps.

  Args:
    previous: the map it is computed from.
    base_name: the last backbone map's name, which new layers are named by.
    index: its position in the layout.
    depth: its depth.
    kernel_size: of the stride-2 conv.
    half_depth: depth of the 1x1 conv before it; None for no such conv.
    use_explicit_padding, use_depthwise, pool_residual: see
      multi_resolution_feature_maps.

  Returns:
    (name, [batch, h, w, depth] tensor).
  """
  net = previous
  if half_depth is not None:
    net = slim.conv2d(
        net, half_depth, [1, 1], padding='SAME', stride=1,
        scope='{}_1_Conv2d_{}_1x1_{}'.format(base_name, index, half_depth))
  name = '{}_2_Conv2d_{}_{}x{}_s2_{}'.format(
      base_name, index, kernel_size, kernel_size, depth)
  padding = 'VALID' if use_explicit_padding else 'SAME'
  if use_explicit_padding:
    net = fixed_padding(net, kernel_size)
  if not use_depthwise:
    return name, slim.conv2d(net, depth, [kernel_size, kernel_size],
                             padding=padding, stride=2, scope=name)
  net = slim.separable_conv2d(
      net, None, [kernel_size, kernel_size], depth_multiplier=1,
      padding=padding, stride=2, scope=name + '_depthwise')
  feature_map = slim.conv2d(net, depth, [1, 1], padding='SAME', stride=1,
                            scope=name)
  if pool_residual and previous.shape.as_list()[3] == depth:
    shortcut = previous
    if use_explicit_padding:
      shortcut = fixed_padding(shortcut, kernel_size)
    feature_map += slim.avg_pool2d(
        shortcut, [kernel_size, kernel_size], padding=padding, stride=2,
        scope=name + '_pool')
  return name, feature_map


def _bound(tensor, use_bounded_activations):
  if not use_bounded_activations:
    return tensor
  return tf.clip_by_value(tensor, -ACTIVATION_BOUND, ACTIVATION_BOUND)


def fpn_top_down_feature_maps(image_features,
                              depth,
                              use_depthwise=False,
                              use_explicit_padding=False,
                              use_bounded_activations=False,
                              scope=None,
                              use_native_resize_op=False):
  """Builds the top-down path of a Feature Pyramid Network.

  The coarsest input is projected by a 1x1 conv (`projection_<n>`); each finer
  level adds its own 1x1 projection (`projection_<level+1>`) to the 2x
  upsampled coarser result and is smoothed by a 3x3 conv
  (`smoothing_<level+1>`). Variables take the enclosing variable scope (e.g.
  `fpn/projection_3/weights`); ops live under the name scope `top_down`.

  Args:
    image_features: list of (name, [batch, h_i, w_i, d_i] tensor), finest
      first; each resolution is half of the previous one.
    depth: int depth of every output map.
    use_depthwise: depthwise-separable smoothing convs.
    use_explicit_padding: fixed padding + VALID smoothing convs; the
      upsampled map is cropped to the projection's size before the sum.
    use_bounded_activations: clip projections and sums to
      [-ACTIVATION_BOUND, ACTIVATION_BOUND].
    scope: name scope of the ops (default 'top_down').
    use_native_resize_op: upsample with tf.image.resize (nearest) instead of
      the reshape-based implementation.

  Returns:
    OrderedDict {'top_down_<name>': [batch, h_i, w_i, depth]}, finest first.
  """
  with tf.compat.v1.name_scope(scope, 'top_down'):
    num_levels = len(image_features)
    padding = 'VALID' if use_explicit_padding else 'SAME'
    kernel_size = 3
    if use_depthwise:
      smoothing_op = functools.partial(slim.separable_conv2d,
                                       depth_multiplier=1)
    else:
      smoothing_op = slim.conv2d
    outputs = []
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                        padding=padding, stride=1):
      name, features = image_features[-1]
      top_down = slim.conv2d(features, depth, [1, 1], activation_fn=None,
                             normalizer_fn=None,
                             scope='projection_%d' % num_levels)
      top_down = _bound(top_down, use_bounded_activations)
      outputs.append(('top_down_%s' % name, top_down))
      for level in reversed(range(num_levels - 1)):
        name, features = image_features[level]
        if use_native_resize_op:
          with tf.name_scope('nearest_neighbor_upsampling'):
            shape = shape_utils.combined_static_and_dynamic_shape(top_down)
            top_down = tf.compat.v1.image.resize_nearest_neighbor(
                top_down, [shape[1] * 2, shape[2] * 2])
        else:
          top_down = nearest_neighbor_upsampling(top_down, scale=2)
        residual = slim.conv2d(features, depth, [1, 1], activation_fn=None,
                               normalizer_fn=None,
                               scope='projection_%d' % (level + 1))
        residual = _bound(residual, use_bounded_activations)
        if use_explicit_padding:
          # Odd sizes upsample one pixel too far; crop to the finer level.
          residual_shape = tf.shape(residual)
          top_down = top_down[:, :residual_shape[1], :residual_shape[2], :]
        top_down = _bound(top_down + residual, use_bounded_activations)
        smoothed = top_down
        if use_explicit_padding:
          smoothed = fixed_padding(smoothed, kernel_size)
        smoothed = smoothing_op(smoothed, depth, [kernel_size, kernel_size],
                                scope='smoothing_%d' % (level + 1))
        outputs.append(('top_down_%s' % name, smoothed))
    return collections.OrderedDict(reversed(outputs))


def pooling_pyramid_feature_maps(base_feature_map_depth, num_layers,
                                 image_features, replace_pool_with_conv=False):
  """Builds a Pooling Pyramid Network: one map repeatedly halved.

  An optional 1x1 conv (`Base_Conv2d_1x1_<d>`) sets the depth; each further
  map is a 2x2 stride-2 max pool (`MaxPool2d_<i>_2x2`) or, with
  replace_pool_with_conv, a 3x3 stride-2 conv (`Conv2d_<i>_3x3_s2_<d>`).

  Args:
    base_feature_map_depth: depth of the 1x1 conv; <= 0 skips the conv.
    num_layers: number of output maps.
    image_features: dict with exactly one [batch, h, w, d] tensor.
    replace_pool_with_conv: use stride-2 convs instead of max pools.

  Returns:
    OrderedDict {name: [batch, h_i, w_i, d_i] tensor}, finest first.

  Raises:
    ValueError: if image_features does not hold exactly one tensor.
  """
  if len(image_features) != 1:
    raise ValueError('image_features should be a dictionary of length 1.')
  feature_map = list(image_features.values())[0]
  base_name = 'Base_Conv2d_1x1_%d' % base_feature_map_depth
  if base_feature_map_depth > 0:
    feature_map = slim.conv2d(feature_map, base_feature_map_depth, [1, 1],
                              padding='SAME', stride=1, scope=base_name)
    # A 1x1 identity pool keeps TPU v1 from fusing the conv with the first
    # pool below, which would make the conv output unavailable.
    feature_map = slim.max_pool2d(feature_map, [1, 1], padding='SAME',
                                  stride=1, scope=base_name)
  feature_maps = collections.OrderedDict([(base_name, feature_map)])
  for i in range(num_layers - 1):
    if replace_pool_with_conv:
      name = 'Conv2d_{}_3x3_s2_{}'.format(i, base_feature_map_depth)
      feature_map = slim.conv2d(feature_map, base_feature_map_depth, [3, 3],
                                padding='SAME', stride=2, scope=name)
    else:
      name = 'MaxPool2d_%d_2x2' % i
      feature_map = slim.max_pool2d(feature_map, [2, 2], padding='SAME',
                                    stride=2, scope=name)
    feature_maps[name] = feature_map
  return feature_maps


def fpn_pyramid_feature_maps(image_features, feature_blocks, fpn_min_level,
                             fpn_max_level, depth, coarse_layer_name_fn,
                             use_depthwise=False, use_explicit_padding=False,
                             use_native_resize_op=False):
  """FPN levels fpn_min_level..fpn_max_level as built by SSD FPN extractors.

  Backbone blocks cover levels 2..1 + len(feature_blocks); the levels they
  cover go through `fpn_top_down_feature_maps`, and coarser levels are added
  as stride-2 3x3 convs on the previous level, named
  `coarse_layer_name_fn(k)` for the k-th added level (k = 1, 2, ...).
  Callers enter the 'fpn' variable scope and the conv_hyperparams arg_scope.

  Args:
    image_features: dict {end point name: [batch, h, w, d] tensor}.
    feature_blocks: end point names of levels 2, 3, ... in order.
    fpn_min_level: finest level to output.
    fpn_max_level: coarsest level to output.
    depth: depth of every output map.
    coarse_layer_name_fn: callable k -> scope name of the k-th added level.
    use_depthwise: depthwise-separable smoothing and added-level convs.
    use_explicit_padding: fixed padding + VALID convs.
    use_native_resize_op: see fpn_top_down_feature_maps.

  Returns:
    List of fpn_max_level - fpn_min_level + 1 [batch, h_i, w_i, depth]
    tensors, finest first.

  Raises:
    ValueError: if fpn_min_level is not a backbone level or exceeds
      fpn_max_level.
  """
  base_max_level = min(fpn_max_level, len(feature_blocks) + 1)
  if not 2 <= fpn_min_level <= base_max_level:
    raise errors.UserInputError(
        'fpn_min_level must be in [2, min(fpn_max_level, %d)], got '
        'fpn_min_level=%d, fpn_max_level=%d.' % (
            len(feature_blocks) + 1, fpn_min_level, fpn_max_level))
  blocks = [feature_blocks[level - 2]
            for level in range(fpn_min_level, base_max_level + 1)]
  top_down = fpn_top_down_feature_maps(
      [(block, image_features[block]) for block in blocks],
      depth=depth, use_depthwise=use_depthwise,
      use_explicit_padding=use_explicit_padding,
      use_native_resize_op=use_native_resize_op)
  feature_maps = [top_down['top_down_%s' % block] for block in blocks]
  if use_depthwise:
    conv_op = functools.partial(slim.separable_conv2d, depth_multiplier=1)
  else:
    conv_op = slim.conv2d
  padding = 'VALID' if use_explicit_padding else 'SAME'
  net = feature_maps[-1]
  for k in range(1, fpn_max_level - base_max_level + 1):
    if use_explicit_padding:
      net = fixed_padding(net, 3)
    net = conv_op(net, num_outputs=depth, kernel_size=[3, 3], stride=2,
                  padding=padding, scope=coarse_layer_name_fn(k))
    feature_maps.append(net)
  return feature_maps
