"""Inception-ResNet v2 (https://arxiv.org/abs/1602.07261), tf-slim layers.

tf_slim ships no Inception-ResNet v2, so this builds it with the scope and
layer names of the tf-slim model zoo's classification network
(`InceptionResnetV2/Conv2d_1a_3x3`, `Mixed_5b`, `Repeat/block35_<i>`,
`Mixed_6a`, `Repeat_1/block17_<i>`, `Mixed_7a`, `Repeat_2/block8_<i>`,
`Block8`, `Conv2d_7b_1x1`), so that its checkpoints and the detection
checkpoints built on it restore unchanged. Only the convolutional body is
built; detectors do not use the classifier heads.

Sizes in comments are for the 299x299 classification input with 'VALID'
reductions (align_feature_maps=False).
"""
import collections

import tensorflow as tf
import tf_slim as slim

# The stem before Mixed_5b: (end point, layer, depth, kernel, stride,
# whether the layer takes the network's reduction padding). Layers that do
# not take it use 'SAME'.
STEM = (
    ('Conv2d_1a_3x3', 'conv', 32, 3, 2, True),    # 149 x 149 x 32
    ('Conv2d_2a_3x3', 'conv', 32, 3, 1, True),    # 147 x 147 x 32
    ('Conv2d_2b_3x3', 'conv', 64, 3, 1, False),   # 147 x 147 x 64
    ('MaxPool_3a_3x3', 'max_pool', None, 3, 2, True),  # 73 x 73 x 64
    ('Conv2d_3b_1x1', 'conv', 80, 1, 1, True),    # 73 x 73 x 80
    ('Conv2d_4a_3x3', 'conv', 192, 3, 1, True),   # 71 x 71 x 192
    ('MaxPool_5a_3x3', 'max_pool', None, 3, 2, True),  # 35 x 35 x 192
)

END_POINTS = tuple(spec[0] for spec in STEM) + (
    'Mixed_5b', 'Mixed_6a', 'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1')

# The network's mixed and residual blocks as data, one tuple of layers per
# branch (`Branch_<i>`), shared with the Keras layout
# (inception_resnet_v2_keras). A `reduces` layer has the block's reduction
# stride and padding; the others stride 1, 'SAME'.
Conv = collections.namedtuple('Conv', ['scope', 'depth', 'kernel', 'reduces'],
                              defaults=(False,))
Pool = collections.namedtuple('Pool', ['scope', 'kind', 'reduces'],
                              defaults=(False,))  # 3x3, 'max' or 'avg'

MIXED_5B = (  # 35 x 35 x 320
    (Conv('Conv2d_1x1', 96, 1),),
    (Conv('Conv2d_0a_1x1', 48, 1), Conv('Conv2d_0b_5x5', 64, 5)),
    (Conv('Conv2d_0a_1x1', 64, 1), Conv('Conv2d_0b_3x3', 96, 3),
     Conv('Conv2d_0c_3x3', 96, 3)),
    (Pool('AvgPool_0a_3x3', 'avg'), Conv('Conv2d_0b_1x1', 64, 1)),
)
MIXED_6A = (  # Reduction-A: 17 x 17 x 1088
    (Conv('Conv2d_1a_3x3', 384, 3, True),),
    (Conv('Conv2d_0a_1x1', 256, 1), Conv('Conv2d_0b_3x3', 256, 3),
     Conv('Conv2d_1a_3x3', 384, 3, True)),
    (Pool('MaxPool_1a_3x3', 'max', True),),
)
MIXED_7A = (  # Reduction-B: 8 x 8 x 2080
    (Conv('Conv2d_0a_1x1', 256, 1), Conv('Conv2d_1a_3x3', 384, 3, True)),
    (Conv('Conv2d_0a_1x1', 256, 1), Conv('Conv2d_1a_3x3', 288, 3, True)),
    (Conv('Conv2d_0a_1x1', 256, 1), Conv('Conv2d_0b_3x3', 288, 3),
     Conv('Conv2d_1a_3x3', 320, 3, True)),
    (Pool('MaxPool_1a_3x3', 'max', True),),
)
# Residual blocks: the branches before the linear 1x1 projection.
BLOCK35 = (  # Inception-ResNet-A, 35 x 35
    (Conv('Conv2d_1x1', 32, 1),),
    (Conv('Conv2d_0a_1x1', 32, 1), Conv('Conv2d_0b_3x3', 32, 3)),
    (Conv('Conv2d_0a_1x1', 32, 1), Conv('Conv2d_0b_3x3', 48, 3),
     Conv('Conv2d_0c_3x3', 64, 3)),
)
BLOCK17 = (  # Inception-ResNet-B, 17 x 17
    (Conv('Conv2d_1x1', 192, 1),),
    (Conv('Conv2d_0a_1x1', 128, 1), Conv('Conv2d_0b_1x7', 160, [1, 7]),
     Conv('Conv2d_0c_7x1', 192, [7, 1])),
)
BLOCK8 = (  # Inception-ResNet-C, 8 x 8
    (Conv('Conv2d_1x1', 192, 1),),
    (Conv('Conv2d_0a_1x1', 192, 1), Conv('Conv2d_0b_1x3', 224, [1, 3]),
     Conv('Conv2d_0c_3x1', 256, [3, 1])),
)
# Residual stacks: (scope, block function name, count, scale).
BLOCK35_STACK = ('Repeat', 'block35', 10, 0.17)
BLOCK17_STACK = ('Repeat_1', 'block17', 20, 0.10)
BLOCK8_STACK = ('Repeat_2', 'block8', 9, 0.20)
# The linear 1x1 projection ending each residual block.
PROJECTION = 'Conv2d_1x1'


def _tower(net, layers, stride=2, padding='VALID'):
  """Applies a branch's layers in turn.

  Args:
    net: [batch, h, w, depth] input.
    layers: Conv and Pool tuples.
    stride: of the `reduces` layers.
    padding: of the `reduces` layers.

  Returns:
    the last layer's output.
  """
  for layer in layers:
    layer_stride, layer_padding = ((stride, padding) if layer.reduces
                                   else (1, 'SAME'))
    if isinstance(layer, Pool):
      pool = slim.max_pool2d if layer.kind == 'max' else slim.avg_pool2d
      net = pool(net, 3, stride=layer_stride, padding=layer_padding,
                 scope=layer.scope)
    else:
      net = slim.conv2d(net, layer.depth, layer.kernel, stride=layer_stride,
                        padding=layer_padding, scope=layer.scope)
  return net


def _mixed(net, towers, stride=2, padding='VALID'):
  """The branches of `towers` on `net`, concatenated (see _tower)."""
  outputs = []
  for index, layers in enumerate(towers):
    with tf.compat.v1.variable_scope('Branch_%d' % index):
      outputs.append(_tower(net, layers, stride, padding))
  return tf.concat(outputs, axis=3)


def _residual(net, towers, scale, activation_fn):
  """net + scale * (1x1 linear projection of the concatenated towers).

  Args:
    net: [batch, h, w, depth] input of the block.
    towers: the branches, e.g. BLOCK35.
    scale: factor on the residual; the paper's scaling keeps very deep
      residual stacks stable.
    activation_fn: applied to the sum, or None.

  Returns:
    [batch, h, w, depth] tensor.
  """
  mixed = _mixed(net, towers)
  # A plain convolution with bias: batch norm here would undo the scaling.
  up = slim.conv2d(mixed, net.shape[3], 1, normalizer_fn=None,
                   activation_fn=None, scope=PROJECTION)
  net += scale * up
  return activation_fn(net) if activation_fn else net


def block35(net, scale=1.0, activation_fn=tf.nn.relu, scope=None,
            reuse=None):
  """The 35x35 residual block (Inception-ResNet-A)."""
  with tf.compat.v1.variable_scope(scope, 'Block35', [net], reuse=reuse):
    return _residual(net, BLOCK35, scale, activation_fn)


def block17(net, scale=1.0, activation_fn=tf.nn.relu, scope=None,
            reuse=None):
  """The 17x17 residual block (Inception-ResNet-B)."""
  with tf.compat.v1.variable_scope(scope, 'Block17', [net], reuse=reuse):
    return _residual(net, BLOCK17, scale, activation_fn)


def block8(net, scale=1.0, activation_fn=tf.nn.relu, scope=None,
           reuse=None):
  """The 8x8 residual block (Inception-ResNet-C)."""
  with tf.compat.v1.variable_scope(scope, 'Block8', [net], reuse=reuse):
    return _residual(net, BLOCK8, scale, activation_fn)


def residual_stack(net, stack, activation_fn=tf.nn.relu, scope=None):
  """`stack`'s scaled residual blocks, named `<scope>/<block>_<i>`, i from 1.

  The names slim.repeat gives with its default scope, here with the scope
  spelled out because it is part of the checkpoint names.

  Args:
    net: the stack's input.
    stack: BLOCK35_STACK, BLOCK17_STACK or BLOCK8_STACK.
    activation_fn: of each block.
    scope: instead of the stack's own scope.

  Returns:
    the last block's output.
  """
  stack_scope, name, count, scale = stack
  block = _BLOCKS[name]
  with tf.compat.v1.variable_scope(scope or stack_scope):
    for index in range(1, count + 1):
      net = block(net, scale=scale, activation_fn=activation_fn,
                  scope='%s_%d' % (name, index))
  return net


_BLOCKS = {'block35': block35, 'block17': block17, 'block8': block8}


def mixed_7a(net, padding='VALID'):
  """The 17x17 -> 8x8 reduction (Reduction-B) under scope `Mixed_7a`.

  Args:
    net: [batch, h, w, 1088] output of the block17 stack.
    padding: of the stride-2 layers: 'VALID' as in classification, 'SAME'
      to keep feature maps aligned with the input.

  Returns:
    [batch, h', w', 2080] tensor.
  """
  with tf.compat.v1.variable_scope('Mixed_7a'):
    return _mixed(net, MIXED_7A, padding=padding)


def block8_stack(net, repeat_scope='Repeat_2', activation_fn=tf.nn.relu):
  """Nine scaled block8s, a linear Block8 and the 1x1 conv to 1536.

  Args:
    net: [batch, h, w, 2080] output of mixed_7a.
    repeat_scope: scope of the nine blocks (`Repeat_2` in the
      classification network, where it is the third repeat).
    activation_fn: of the nine blocks.

  Returns:
    [batch, h, w, 1536] tensor (end point Conv2d_7b_1x1).
  """
  net = residual_stack(net, BLOCK8_STACK, activation_fn, scope=repeat_scope)
  net = block8(net, activation_fn=None)
  return slim.conv2d(net, 1536, 1, scope='Conv2d_7b_1x1')


def inception_resnet_v2_base(inputs, final_endpoint='Conv2d_7b_1x1',
                             output_stride=16, align_feature_maps=False,
                             scope=None, activation_fn=tf.nn.relu):
  """Builds Inception-ResNet v2 from `inputs` up to `final_endpoint`.

  Args:
    inputs: [batch, height, width, channels] float tensor.
    final_endpoint: one of END_POINTS.
    output_stride: 16, or 8 to keep the 35x35 resolution through the
      block17 stack with atrous (rate 2) convolutions; 8 only up to
      PreAuxLogits.
    align_feature_maps: use 'SAME' instead of 'VALID' padding in the
      reductions, so feature maps stay aligned with the input (detection).
    scope: variable scope (string or VariableScope); default
      'InceptionResnetV2'.
    activation_fn: of the residual blocks.

  Returns:
    net: the [batch, h, w, depth] tensor of `final_endpoint`.
    end_points: {end point name: tensor} of every end point built.

  Raises:
    ValueError: for an output_stride other than 8 or 16, stride 8 past
      PreAuxLogits, or an unknown final_endpoint.
  """
  if output_stride not in (8, 16):
    raise ValueError('output_stride must be 8 or 16, got %r.' % output_stride)
  if final_endpoint not in END_POINTS:
    raise ValueError('final_endpoint %r is not one of %s.' %
                     (final_endpoint, ', '.join(END_POINTS)))
  if (output_stride == 8 and
      END_POINTS.index(final_endpoint) > END_POINTS.index('PreAuxLogits')):
    raise ValueError('output_stride 8 is only supported up to PreAuxLogits, '
                     'not %s.' % final_endpoint)
  padding = 'SAME' if align_feature_maps else 'VALID'
  end_points = {}

  def done(name, net):
    end_points[name] = net
    return name == final_endpoint

  with tf.compat.v1.variable_scope(scope, 'InceptionResnetV2', [inputs]), \
      slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                     stride=1, padding='SAME'):
    net = inputs
    for name, layer, depth, kernel, stride, reduces in STEM:
      layer_padding = padding if reduces else 'SAME'
      if layer == 'conv':
        net = slim.conv2d(net, depth, kernel, stride=stride,
                          padding=layer_padding, scope=name)
      else:
        net = slim.max_pool2d(net, kernel, stride=stride,
                              padding=layer_padding, scope=name)
      if done(name, net):
        return net, end_points

    with tf.compat.v1.variable_scope('Mixed_5b'):
      net = _mixed(net, MIXED_5B)
    if done('Mixed_5b', net):
      return net, end_points
    net = residual_stack(net, BLOCK35_STACK, activation_fn)

    # At output stride 8 this reduction keeps the resolution (33 x 33) and
    # the next blocks dilate instead.
    atrous = output_stride == 8
    with tf.compat.v1.variable_scope('Mixed_6a'):
      net = _mixed(net, MIXED_6A, stride=1 if atrous else 2, padding=padding)
    if done('Mixed_6a', net):
      return net, end_points

    with slim.arg_scope([slim.conv2d], rate=2 if atrous else 1):
      net = residual_stack(net, BLOCK17_STACK, activation_fn)
    if done('PreAuxLogits', net):
      return net, end_points

    net = mixed_7a(net, padding)
    if done('Mixed_7a', net):
      return net, end_points
    # 8 x 8 x 1536
    net = block8_stack(net, 'Repeat_2', activation_fn)
    done('Conv2d_7b_1x1', net)
    return net, end_points


def inception_resnet_v2_arg_scope(weight_decay=0.00004,
                                  batch_norm_decay=0.9997,
                                  batch_norm_epsilon=0.001,
                                  activation_fn=tf.nn.relu):
  """The arg_scope the classification network was trained with.

  Convolutions have batch norm without a learned scale (beta only) and L2
  weight decay on weights and biases.

  Args:
    weight_decay: L2 weight of convolution and fully connected parameters.
    batch_norm_decay: moving average decay of batch norm statistics.
    batch_norm_epsilon: added to the variance in batch norm.
    activation_fn: of the convolutions.

  Returns:
    an arg_scope dict for slim.arg_scope.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=regularizer,
                      biases_regularizer=regularizer):
    with slim.arg_scope(
        [slim.conv2d], activation_fn=activation_fn,
        normalizer_fn=slim.batch_norm,
        normalizer_params={'decay': batch_norm_decay,
                           'epsilon': batch_norm_epsilon,
                           'fused': None}) as scope:
      return scope
