"""MobileNet v1 feature extractor body (https://arxiv.org/abs/1704.04861).

Builds the convolutional trunk with the scope and layer names of the
tf-slim model zoo (`MobilenetV1/Conv2d_0/weights`,
`MobilenetV1/Conv2d_<i>_depthwise/depthwise_weights`,
`MobilenetV1/Conv2d_<i>_pointwise/weights`, BatchNorm under each), so that
released classification and detection checkpoints restore unchanged.
"""
import collections

import tensorflow as tf
import tf_slim as slim

# A full 3x3 (or other kernel) convolution.
Conv = collections.namedtuple('Conv', ['kernel', 'stride', 'depth'])
# A depthwise convolution of `kernel` followed by a 1x1 convolution to `depth`.
DepthSepConv = collections.namedtuple('DepthSepConv',
                                      ['kernel', 'stride', 'depth'])

# The MobileNet v1 body: layer i of this list is scoped `Conv2d_<i>`.
MOBILENETV1_CONV_DEFS = [Conv(kernel=[3, 3], stride=2, depth=32)] + [
    DepthSepConv(kernel=[3, 3], stride=stride, depth=depth)
    for stride, depth in [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256),
                          (2, 512), (1, 512), (1, 512), (1, 512), (1, 512),
                          (1, 512), (2, 1024), (1, 1024)]
]


def fixed_padding(inputs, kernel_size, rate=1):
  """Zero-pads so that a 'VALID' convolution matches 'SAME' output size.

  The padding depends only on the (dilated) kernel size, not on the input
  size, which keeps results identical between differently sized inputs.

  Args:
    inputs: [batch, height, width, channels] tensor.
    kernel_size: [kernel_height, kernel_width] of the following convolution.
    rate: dilation rate of the following convolution.

  Returns:
    [batch, height + pad_h, width + pad_w, channels] tensor, where
    pad = (kernel - 1) * rate, split with the smaller half at the start.
  """
  paddings = [[0, 0]]
  for size in kernel_size:
    total = (size - 1) * rate
    paddings.append([total // 2, total - total // 2])
  paddings.append([0, 0])
  return tf.pad(inputs, paddings)


def mobilenet_v1_base(inputs,
                      final_endpoint='Conv2d_13_pointwise',
                      min_depth=8,
                      depth_multiplier=1.0,
                      conv_defs=None,
                      output_stride=None,
                      use_explicit_padding=False,
                      scope=None):
  """Builds MobileNet v1 from `inputs` up to `final_endpoint`.

  Args:
    inputs: [batch, height, width, channels] float tensor.
    final_endpoint: name of the last layer to build: 'Conv2d_0' or
      'Conv2d_<i>_depthwise' / 'Conv2d_<i>_pointwise' for i in 1..13 (for the
      default conv_defs).
    min_depth: lower bound on every layer's number of output channels after
      applying depth_multiplier.
    depth_multiplier: float > 0 scaling every layer's number of channels.
    conv_defs: list of Conv / DepthSepConv tuples; defaults to
      MOBILENETV1_CONV_DEFS.
    output_stride: None or one of 8, 16, 32. Once the accumulated stride
      reaches it, later strides are replaced by atrous (dilated) convolutions.
    use_explicit_padding: pad inputs with `fixed_padding` and convolve with
      'VALID' instead of using 'SAME' padding.
    scope: variable scope (string or VariableScope); default 'MobilenetV1'.

  Returns:
    net: the [batch, h, w, depth] tensor of `final_endpoint`.
    end_points: dict from layer name to its output tensor, for every layer
      built.

  Raises:
    ValueError: if depth_multiplier <= 0, output_stride is not allowed, a
      conv def has an unknown type, or final_endpoint is never reached.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier is not greater than zero.')
  if output_stride is not None and output_stride not in [8, 16, 32]:
    raise ValueError('Only allowed output_stride values are 8, 16, 32.')
  conv_defs = MOBILENETV1_CONV_DEFS if conv_defs is None else conv_defs

  def depth(d):
    return max(int(d * depth_multiplier), min_depth)

  end_points = {}
  padding = 'VALID' if use_explicit_padding else 'SAME'
  with tf.compat.v1.variable_scope(scope, 'MobilenetV1', [inputs]), \
      slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
    current_stride = 1
    rate = 1
    net = inputs
    for i, conv_def in enumerate(conv_defs):
      if output_stride is not None and current_stride == output_stride:
        # Target resolution reached: keep it, dilate later kernels instead.
        layer_stride, layer_rate = 1, rate
        rate *= conv_def.stride
      else:
        layer_stride, layer_rate = conv_def.stride, 1
        current_stride *= conv_def.stride

      if isinstance(conv_def, Conv):
        if use_explicit_padding:
          net = fixed_padding(net, conv_def.kernel)
        # A full conv only starts the net, before any target stride is hit,
        # so its own stride always applies.
        end_point = 'Conv2d_%d' % i
        net = slim.conv2d(net, depth(conv_def.depth), conv_def.kernel,
                          stride=conv_def.stride, scope=end_point)
        end_points[end_point] = net
        if end_point == final_endpoint:
          return net, end_points
      elif isinstance(conv_def, DepthSepConv):
        if use_explicit_padding:
          net = fixed_padding(net, conv_def.kernel, layer_rate)
        # num_outputs=None makes separable_conv2d depthwise only; checkpoints
        # keep depthwise and pointwise parts in separate scopes.
        end_point = 'Conv2d_%d_depthwise' % i
        net = slim.separable_conv2d(
            net, None, conv_def.kernel, depth_multiplier=1,
            stride=layer_stride, rate=layer_rate, scope=end_point)
        end_points[end_point] = net
        if end_point == final_endpoint:
          return net, end_points
        end_point = 'Conv2d_%d_pointwise' % i
        net = slim.conv2d(net, depth(conv_def.depth), [1, 1], stride=1,
                          scope=end_point)
        end_points[end_point] = net
        if end_point == final_endpoint:
          return net, end_points
      else:
        raise ValueError('Unknown convolution type %s for layer %d' %
                         (type(conv_def).__name__, i))
  raise ValueError('Unknown final endpoint %s' % final_endpoint)


def mobilenet_v1_arg_scope(
    is_training=True,
    weight_decay=0.00004,
    stddev=0.09,
    regularize_depthwise=False,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    batch_norm_updates_collections=tf.compat.v1.GraphKeys.UPDATE_OPS,
    normalizer_fn=slim.batch_norm):
  """Returns the default arg_scope for MobileNet v1 layers.

  Convolutions use ReLU6, `normalizer_fn` and a truncated normal
  initializer; full and pointwise convolutions get L2 weight decay, depthwise
  ones only when `regularize_depthwise`.

  Args:
    is_training: batch norm training mode; None leaves it to outer scopes.
    weight_decay: L2 regularization scale.
    stddev: standard deviation of the truncated normal weight initializer.
    regularize_depthwise: also regularize depthwise weights.
    batch_norm_decay: moving average decay of batch norm.
    batch_norm_epsilon: variance epsilon of batch norm.
    batch_norm_updates_collections: collection for batch norm update ops.
    normalizer_fn: normalization applied after each convolution.

  Returns:
    An arg_scope dict for `slim.arg_scope`.
  """
  batch_norm_params = {
      'center': True,
      'scale': True,
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'updates_collections': batch_norm_updates_collections,
  }
  if is_training is not None:
    batch_norm_params['is_training'] = is_training
  regularizer = slim.l2_regularizer(weight_decay)
  depthwise_regularizer = regularizer if regularize_depthwise else None
  with slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d],
      weights_initializer=tf.compat.v1.truncated_normal_initializer(
          stddev=stddev),
      activation_fn=tf.nn.relu6, normalizer_fn=normalizer_fn), \
      slim.arg_scope([slim.batch_norm], **batch_norm_params), \
      slim.arg_scope([slim.conv2d], weights_regularizer=regularizer), \
      slim.arg_scope([slim.separable_conv2d],
                     weights_regularizer=depthwise_regularizer) as scope:
    return scope
