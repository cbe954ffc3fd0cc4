"""MobileNet v2 feature extractor body (https://arxiv.org/abs/1801.04381).

Builds the trunk with the scope and layer names of the tf-slim model zoo
(`MobilenetV2/Conv`, `MobilenetV2/expanded_conv[_k]/{expand,depthwise,
project}`, `MobilenetV2/Conv_1`, BatchNorm under each), so released
checkpoints restore unchanged. End points follow the original's naming:
'layer_<n>' for the n-th layer (1-based) plus, for inverted residual blocks,
'layer_<n>/expansion_output', 'layer_<n>/depthwise_output' and
'layer_<n>/output'.

The conv def tuples also describe MobileNet v3 and MobileNet EdgeTPU
(nets/mobilenet_v3.py): per-layer activations, squeeze-excite, fused blocks
and a global pool.
"""
import collections
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v1

# A full convolution; scoped 'Conv', 'Conv_1', ... in order of appearance.
# activation_fn (optional) replaces the net's activation; with
# use_batch_norm=False the conv has biases instead of batch norm.
Conv = collections.namedtuple(
    'Conv', ['kernel', 'stride', 'depth', 'activation_fn', 'use_batch_norm'],
    defaults=(None, True))
# Inverted residual block: 1x1 expansion to `expansion` times the input depth
# (skipped when it would not grow the depth), `kernel` depthwise with
# `stride`, linear 1x1 projection to `depth`, plus a residual add when shapes
# allow. Scoped 'expanded_conv', 'expanded_conv_1', ... in order of
# appearance. Optional fields:
#   activation_fn: replaces the net's activation in expand and depthwise.
#   squeeze_excite: function of the depthwise output returning a tensor of
#     the same shape (mobilenet_v3.squeeze_excite), applied before project.
#   fused: the expansion is a full `kernel` conv with `stride` and there is
#     no depthwise conv (EdgeTPU).
#   residual: False drops the shortcut.
ExpandedConv = collections.namedtuple(
    'ExpandedConv',
    ['stride', 'depth', 'expansion', 'kernel', 'activation_fn',
     'squeeze_excite', 'fused', 'residual'],
    defaults=((3, 3), None, None, False, True))
# Average pool to 1x1, without variables: its kernel is the input size when
# that is known and square, else default_size (MobileNet v3's head).
GlobalPool = collections.namedtuple('GlobalPool', ['default_size'],
                                    defaults=(7,))

# The MobileNet v2 body; layer i of this list is end point 'layer_<i + 1>'.
V2_DEF = (
    [Conv(kernel=[3, 3], stride=2, depth=32),
     ExpandedConv(stride=1, depth=16, expansion=1)] +
    [ExpandedConv(stride=stride, depth=depth, expansion=6)
     for stride, depth in [(2, 24), (1, 24), (2, 32), (1, 32), (1, 32),
                           (2, 64), (1, 64), (1, 64), (1, 64), (1, 96),
                           (1, 96), (1, 96), (2, 160), (1, 160), (1, 160),
                           (1, 320)]] +
    [Conv(kernel=[1, 1], stride=1, depth=1280)])

# Expansion sizes are rounded to this regardless of `divisible_by`.
_EXPANSION_DIVISOR = 8


def _make_divisible(v, divisor, min_value=None):
  """Rounds v to the nearest multiple of divisor, at least min_value.

  Args:
    v: requested number of channels (may be fractional).
    divisor: the result is a multiple of this.
    min_value: lower bound; defaults to divisor.

  Returns:
    int channel count, never more than 10% below v.
  """
  if min_value is None:
    min_value = divisor
  rounded = max(min_value, int(v + divisor / 2) // divisor * divisor)
  if rounded < 0.9 * v:
    rounded += divisor
  return int(rounded)


def _conv(net, layer, num_outputs, stride, rate, use_explicit_padding,
          scope):
  """Builds a Conv layer (see the Conv tuple)."""
  if use_explicit_padding:
    net = mobilenet_v1.fixed_padding(net, layer.kernel, rate)
  overrides = {}
  if layer.activation_fn is not None:
    overrides['activation_fn'] = layer.activation_fn
  if not layer.use_batch_norm:
    overrides['normalizer_fn'] = None
  # 1x1 kernels gain nothing from dilation.
  conv_rate = 1 if list(layer.kernel) == [1, 1] else rate
  return slim.conv2d(net, num_outputs, layer.kernel, stride=stride,
                     rate=conv_rate, scope=scope, **overrides)


def _activation_scope(activation_fn):
  """arg_scope giving convs `activation_fn`; no change when it is None."""
  if activation_fn is None:
    return contextlib.nullcontext()
  return slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                        activation_fn=activation_fn)


def _expand(net, block, inner_depth, stride, rate, use_explicit_padding):
  """The expansion conv: 1x1, or `block.kernel` with `stride` when fused."""
  if not block.fused:
    return slim.conv2d(net, inner_depth, [1, 1], scope='expand')
  if use_explicit_padding:
    net = mobilenet_v1.fixed_padding(net, block.kernel, rate)
  return slim.conv2d(net, inner_depth, block.kernel, stride=stride,
                     rate=rate, scope='expand')


def _expanded_conv(net, block, num_outputs, stride, rate,
                   use_explicit_padding, scope):
  """Builds one inverted residual block.

  Args:
    net: [batch, h, w, c] input tensor with static c.
    block: the ExpandedConv tuple (expansion, kernel, activation_fn,
      squeeze_excite, fused and residual are read from it).
    num_outputs: channels of the projection.
    stride: stride of the depthwise (or fused expansion) conv.
    rate: its dilation rate.
    use_explicit_padding: pre-pad that conv's input (padding is 'VALID'
      through the caller's arg_scope).
    scope: variable scope name.

  Returns:
    output: [batch, h / stride, w / stride, num_outputs] tensor.
    block_end_points: dict of 'expansion_output' (when an expand conv exists),
      'depthwise_output' (unless fused) and 'output' tensors.

  Raises:
    ValueError: for a fused block with stride > 1 but nothing to expand.
  """
  with tf.compat.v1.variable_scope(scope), \
      _activation_scope(block.activation_fn):
    block_input = tf.identity(net, name='input')
    in_depth = block_input.shape.as_list()[3]
    inner_depth = in_depth
    if block.expansion != 1:
      inner_depth = _make_divisible(in_depth * block.expansion,
                                    _EXPANSION_DIVISOR)
    if block.fused and stride > 1 and inner_depth <= in_depth:
      raise ValueError('%s: a fused block with stride %d needs an expansion '
                       '(expansion %s of %d channels).' %
                       (scope, stride, block.expansion, in_depth))
    end_points = {}
    net = block_input
    if inner_depth > in_depth:
      net = _expand(net, block, inner_depth, stride, rate,
                    use_explicit_padding)
      net = tf.identity(net, name='expansion_output')
      end_points['expansion_output'] = net
    if not block.fused:
      if use_explicit_padding:
        net = mobilenet_v1.fixed_padding(net, block.kernel, rate)
      net = slim.separable_conv2d(net, None, block.kernel, depth_multiplier=1,
                                  stride=stride, rate=rate, scope='depthwise')
      net = tf.identity(net, name='depthwise_output')
      end_points['depthwise_output'] = net
    if block.squeeze_excite is not None:
      net = block.squeeze_excite(net)
    # The projection is linear: a ReLU here would destroy information in the
    # low dimensional bottleneck.
    net = slim.conv2d(net, num_outputs, [1, 1], activation_fn=None,
                      scope='project')
    if block.residual and stride == 1 and num_outputs == in_depth:
      net += block_input
    net = tf.identity(net, name='output')
    end_points['output'] = net
  return net, end_points


def _global_pool(net, default_size):
  """Average pools [batch, h, w, c] to [batch, 1, 1, c] (VALID, stride 1)."""
  height, width = net.shape.as_list()[1:3]
  size = height if height is not None and height == width else default_size
  return slim.avg_pool2d(net, [size, size], stride=1, padding='VALID')


@slim.add_arg_scope
def mobilenet_base(input_tensor,
                   depth_multiplier=1.0,
                   min_depth=8,
                   divisible_by=8,
                   final_endpoint=None,
                   output_stride=None,
                   use_explicit_padding=False,
                   scope='MobilenetV2',
                   conv_defs=None,
                   finegrain_classification_mode=False,
                   activation_fn=None,
                   is_training=False,
                   reuse=None):
  """Builds MobileNet v2 (or the net of `conv_defs`) without logits.

  Batch norm runs in inference mode unless `is_training` is set (usually via
  `training_scope`). Inside the net, convolutions always use batch norm and
  ReLU6 (or `activation_fn`), overriding outer arg_scopes, as the original,
  unless their conv def says otherwise.

  Args:
    input_tensor: [batch, height, width, channels] float tensor.
    depth_multiplier: float > 0 scaling every layer's channels, including the
      last 1280-channel conv.
    min_depth: lower bound on every scaled layer's channels.
    divisible_by: scaled channel counts are rounded to multiples of this.
    final_endpoint: 'layer_<n>' to stop after; None builds every layer.
    output_stride: None, 1 or an even number. Once the accumulated stride
      reaches it, later strides become atrous (dilated) convolutions.
    use_explicit_padding: pad with `fixed_padding` and convolve with 'VALID'
      instead of using 'SAME' padding.
    scope: variable scope (string or VariableScope).
    conv_defs: list of Conv / ExpandedConv / GlobalPool tuples; defaults
      to V2_DEF.
    finegrain_classification_mode: keep the last layer at its full depth
      when depth_multiplier < 1.
    activation_fn: activation replacing ReLU6 in every non-linear conv.
    is_training: batch norm training mode; None leaves it to outer scopes.
    reuse: variable reuse for `scope`.

  Returns:
    net: output tensor of the last layer built.
    end_points: dict from end point name to tensor.

  Raises:
    ValueError: on an input that is not rank 4, depth_multiplier <= 0, an
      invalid output_stride, an unknown conv def type or a strided fused
      block without expansion.
  """
  if input_tensor.shape.ndims != 4:
    raise ValueError('Expected rank 4 input, was: %s' %
                     input_tensor.shape.ndims)
  if depth_multiplier <= 0:
    raise ValueError('multiplier is not greater than zero.')
  if output_stride is not None and (
      output_stride == 0 or (output_stride > 1 and output_stride % 2)):
    raise ValueError('Output stride must be None, 1 or a multiple of 2.')
  conv_defs = V2_DEF if conv_defs is None else conv_defs

  def depth(d):
    return _make_divisible(d * depth_multiplier, divisible_by, min_depth)

  bn_scope = ({'is_training': is_training} if is_training is not None else {})
  padding = 'VALID' if use_explicit_padding else 'SAME'
  with tf.compat.v1.variable_scope(scope, 'Mobilenet', [input_tensor],
                                   reuse=reuse) as var_scope, \
      tf.compat.v1.name_scope(var_scope.original_name_scope), \
      slim.arg_scope([slim.batch_norm], center=True, scale=True,
                     **bn_scope), \
      slim.arg_scope([slim.conv2d, slim.fully_connected,
                      slim.separable_conv2d],
                     normalizer_fn=slim.batch_norm,
                     activation_fn=activation_fn or tf.nn.relu6), \
      slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
    current_stride = 1
    rate = 1
    num_convs = 0
    num_blocks = 0
    end_points = {}
    net = input_tensor
    for i, layer in enumerate(conv_defs):
      if not isinstance(layer, (Conv, ExpandedConv, GlobalPool)):
        raise ValueError('Unknown layer type %s for layer %d' %
                         (type(layer).__name__, i))
      stride = getattr(layer, 'stride', 1)
      if output_stride is not None and current_stride == output_stride:
        # Target resolution reached: keep it, dilate later kernels instead.
        layer_stride, layer_rate = 1, rate
        rate *= stride
      else:
        layer_stride, layer_rate = stride, 1
        current_stride *= stride
      if (finegrain_classification_mode and depth_multiplier < 1 and
          i == len(conv_defs) - 1 and hasattr(layer, 'depth')):
        layer = layer._replace(depth=layer.depth / depth_multiplier)
      end_point = 'layer_%d' % (i + 1)

      if isinstance(layer, Conv):
        name = 'Conv' if num_convs == 0 else 'Conv_%d' % num_convs
        num_convs += 1
        net = _conv(net, layer, depth(layer.depth), layer_stride, layer_rate,
                    use_explicit_padding, name)
      elif isinstance(layer, ExpandedConv):
        name = ('expanded_conv' if num_blocks == 0 else
                'expanded_conv_%d' % num_blocks)
        num_blocks += 1
        net, block_end_points = _expanded_conv(
            net, layer, depth(layer.depth), layer_stride, layer_rate,
            use_explicit_padding, name)
        for key, tensor in block_end_points.items():
          end_points[end_point + '/' + key] = tensor
      else:
        net = _global_pool(net, layer.default_size)
      end_points[end_point] = net
      if end_point == final_endpoint:
        break
  return net, end_points


def training_scope(is_training=True,
                   weight_decay=0.00004,
                   stddev=0.09,
                   dropout_keep_prob=0.8,
                   bn_decay=0.997):
  """Returns the arg_scope for training (or evaluating) MobileNet v2.

  Convolutions get a truncated normal initializer and batch norm; full and
  1x1 convolutions get L2 weight decay, depthwise ones none.

  Args:
    is_training: training mode for batch norm, dropout and mobilenet_base;
      None leaves it to outer scopes.
    weight_decay: L2 regularization scale.
    stddev: standard deviation of the initializer; negative selects Xavier.
    dropout_keep_prob: dropout keep probability; None leaves it unset.
    bn_decay: batch norm moving average decay; None leaves it unset.

  Returns:
    An arg_scope dict for `slim.arg_scope`.
  """
  if stddev < 0:
    initializer = slim.initializers.xavier_initializer()
  else:
    initializer = tf.compat.v1.truncated_normal_initializer(stddev=stddev)

  def set_args(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not None}

  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected, slim.separable_conv2d],
      weights_initializer=initializer, normalizer_fn=slim.batch_norm), \
      slim.arg_scope([mobilenet_base], is_training=is_training), \
      slim.arg_scope([slim.batch_norm],
                     **set_args(decay=bn_decay, is_training=is_training)), \
      slim.arg_scope([slim.dropout],
                     **set_args(is_training=is_training,
                                keep_prob=dropout_keep_prob)), \
      slim.arg_scope([slim.conv2d],
                     weights_regularizer=slim.l2_regularizer(weight_decay)), \
      slim.arg_scope([slim.separable_conv2d],
                     weights_regularizer=None) as scope:
    return scope
