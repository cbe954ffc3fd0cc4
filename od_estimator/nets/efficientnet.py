"""EfficientNet B0-B7 laid out as tf-models-official's Keras model.

The original's EfficientDet extractors take their backbone from
`official.legacy.image_classification.efficientnet`. We build the same
computation with tf-slim layers, and the variables take that model's Keras
names, below the caller's variable scope:

  stem_conv2d/kernel, stem_bn/{gamma,beta,moving_mean,moving_variance}
  stack_<s>/block_<b>/expand_conv2d/kernel, .../expand_bn/...
  stack_<s>/block_<b>/depthwise_conv2d/depthwise_kernel, .../depthwise_bn/...
  stack_<s>/block_<b>/se_{reduce,expand}_conv2d/{kernel,bias}
  stack_<s>/block_<b>/project_conv2d/kernel, .../project_bn/...

Every block is an MBConv: optional 1x1 expansion, KxK depthwise conv,
squeeze-and-excitation, 1x1 projection, and, when shapes allow, drop-connect
and the identity shortcut. Convolutions use 'same' padding and no bias
(except the squeeze-and-excitation ones), activations are swish, and the
width and depth of each variant follow compound scaling.
"""
import collections
import math

import tensorflow as tf
import tf_slim as slim

from od_estimator.utils import keras_names

# One stack of blocks: (input filters, output filters, kernel size, repeats,
# expand ratio, stride), before scaling; squeeze-and-excitation ratio 0.25.
_Stack = collections.namedtuple('_Stack', [
    'input_filters', 'output_filters', 'kernel_size', 'repeats',
    'expand_ratio', 'stride'])
_STACKS = (
    _Stack(32, 16, 3, 1, 1, 1),
    _Stack(16, 24, 3, 2, 6, 2),
    _Stack(24, 40, 5, 2, 6, 2),
    _Stack(40, 80, 3, 3, 6, 2),
    _Stack(80, 112, 5, 3, 6, 1),
    _Stack(112, 192, 5, 4, 6, 2),
    _Stack(192, 320, 3, 1, 6, 1),
)
_SE_RATIO = 0.25
_STEM_FILTERS = 32
_DEPTH_DIVISOR = 8
# (width coefficient, depth coefficient) of each variant.
SCALING = {
    'efficientnet-b0': (1.0, 1.0),
    'efficientnet-b1': (1.0, 1.1),
    'efficientnet-b2': (1.1, 1.2),
    'efficientnet-b3': (1.2, 1.4),
    'efficientnet-b4': (1.4, 1.8),
    'efficientnet-b5': (1.6, 2.2),
    'efficientnet-b6': (1.8, 2.6),
    'efficientnet-b7': (2.0, 3.1),
}
# Drop-connect rate of the last block; block i of n drops at rate * i / n.
_DROP_CONNECT_RATE = 0.2
# The Keras model's batch norm and weight decay (Keras l2 scale).
BATCH_NORM_DECAY = 0.99
BATCH_NORM_EPSILON = 1e-3
WEIGHT_DECAY = 5e-6


def round_filters(filters, width_coefficient):
  """Channels after width scaling, a multiple of 8 within 10% of exact."""
  exact = filters * width_coefficient
  rounded = max(_DEPTH_DIVISOR, int(exact + _DEPTH_DIVISOR / 2) //
                _DEPTH_DIVISOR * _DEPTH_DIVISOR)
  if rounded < 0.9 * exact:
    rounded += _DEPTH_DIVISOR
  return int(rounded)


def round_repeats(repeats, depth_coefficient):
  """Blocks of a stack after depth scaling."""
  return int(math.ceil(depth_coefficient * repeats))


def _swish(net):
  return net * tf.sigmoid(net)


def _keras_name(name):
  """'<layer>/weights' -> '<layer>/kernel'; batch norm names are kept."""
  return '%s/%s' % keras_names.split_variable(name)


def default_arg_scope(weight_decay=WEIGHT_DECAY):
  """The Keras model's layer settings.

  Its initializer is variance scaling (scale 2, fan out, truncated normal);
  kernels and the squeeze-and-excitation biases carry Keras'
  l2(weight_decay), i.e. slim's l2_regularizer at twice the scale; the
  depthwise kernels are not regularized.
  """
  regularizer = slim.l2_regularizer(2 * weight_decay)
  initializer = tf.compat.v1.variance_scaling_initializer(
      scale=2.0, mode='fan_out', distribution='truncated_normal')
  with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer,
                      biases_regularizer=regularizer,
                      weights_initializer=initializer), \
      slim.arg_scope([slim.separable_conv2d], weights_initializer=initializer,
                     weights_regularizer=None), \
      slim.arg_scope([slim.batch_norm], decay=BATCH_NORM_DECAY,
                     epsilon=BATCH_NORM_EPSILON, center=True,
                     scale=True) as scope:
    return scope


def _conv_bn(net, filters, kernel_size, name, stride=1, activate=True):
  """Conv (depthwise when filters is None) + batch norm (+ swish)."""
  if filters is None:
    net = slim.separable_conv2d(net, None, kernel_size, depth_multiplier=1,
                                stride=stride, padding='SAME',
                                activation_fn=None, normalizer_fn=None,
                                biases_initializer=None,
                                scope=name + '_conv2d')
  else:
    net = slim.conv2d(net, filters, kernel_size, stride=stride,
                      padding='SAME', activation_fn=None, normalizer_fn=None,
                      biases_initializer=None, scope=name + '_conv2d')
  net = slim.batch_norm(net, activation_fn=None, scope=name + '_bn')
  return _swish(net) if activate else net


def _squeeze_excite(net, reduced_filters, prefix):
  """Scales the channels by a gate computed from their global average."""
  gate = tf.reduce_mean(net, axis=[1, 2], keepdims=True)
  gate = slim.conv2d(gate, reduced_filters, [1, 1], activation_fn=_swish,
                     normalizer_fn=None, scope=prefix + 'se_reduce_conv2d')
  gate = slim.conv2d(gate, net.shape[-1], [1, 1], activation_fn=tf.sigmoid,
                     normalizer_fn=None, scope=prefix + 'se_expand_conv2d')
  return net * gate


def _drop_connect(net, rate, is_training):
  """Drops the whole residual branch per example (scaled), when training."""
  if not is_training or not rate:
    return net
  keep = 1.0 - rate
  batch = tf.shape(net)[0]
  mask = tf.floor(keep + tf.random.uniform([batch, 1, 1, 1], dtype=net.dtype))
  return net / keep * mask


def _mb_conv(net, input_filters, output_filters, stack, stride, prefix,
             drop_rate, is_training):
  """One MBConv block; the identity shortcut when shapes allow."""
  inputs = net
  filters = input_filters * stack.expand_ratio
  if stack.expand_ratio != 1:
    net = _conv_bn(net, filters, [1, 1], prefix + 'expand')
  net = _conv_bn(net, None, [stack.kernel_size] * 2, prefix + 'depthwise',
                 stride=stride)
  net = _squeeze_excite(net, max(1, int(input_filters * _SE_RATIO)), prefix)
  net = _conv_bn(net, output_filters, [1, 1], prefix + 'project',
                 activate=False)
  if stride == 1 and input_filters == output_filters:
    net = _drop_connect(net, drop_rate, is_training) + inputs
  return net


def block_names(model_name):
  """'stack_<s>/block_<b>' of every block of the variant, in order."""
  _, depth_coefficient = SCALING[model_name]
  return ['stack_%d/block_%d' % (index, block)
          for index, stack in enumerate(_STACKS)
          for block in range(round_repeats(stack.repeats, depth_coefficient))]


def efficientnet(inputs, model_name='efficientnet-b0', last_block=None,
                 is_training=False, width_multiplier=1.0):
  """Builds the EfficientNet trunk up to a block (no classification head).

  Build it in default_arg_scope() (or other conv and batch norm settings).

  Args:
    inputs: [batch, height, width, 3] float32 preprocessed images.
    model_name: 'efficientnet-b0' ... 'efficientnet-b7'.
    last_block: 'stack_<s>/block_<b>' to stop after; all blocks by default.
    is_training: applies drop-connect.
    width_multiplier: extra factor on the width coefficient (1 for the
      original's variants; smaller for tiny test models).

  Returns:
    dict {end point: tensor}: '<block>/output' of every block built (the
    block's sum with its shortcut when it has one, else its projection).

  Raises:
    ValueError: for an unknown model or block name.
  """
  if model_name not in SCALING:
    raise ValueError('Unknown EfficientNet %r; expected one of %s.' % (
        model_name, ', '.join(sorted(SCALING))))
  names = block_names(model_name)
  last_block = last_block or names[-1]
  if last_block not in names:
    raise ValueError('%s has no block %r.' % (model_name, last_block))
  width_coefficient, depth_coefficient = SCALING[model_name]
  width_coefficient *= width_multiplier
  end_points = {}
  block_index = 0
  with keras_names.renamed_variables(_keras_name):
    net = _conv_bn(inputs, round_filters(_STEM_FILTERS, width_coefficient),
                   [3, 3], 'stem', stride=2)
    for index, stack in enumerate(_STACKS):
      output_filters = round_filters(stack.output_filters, width_coefficient)
      input_filters = round_filters(stack.input_filters, width_coefficient)
      for block in range(round_repeats(stack.repeats, depth_coefficient)):
        name = 'stack_%d/block_%d' % (index, block)
        with tf.name_scope(name.replace('/', '_')):
          net = _mb_conv(
              net, input_filters, output_filters, stack,
              stride=stack.stride if block == 0 else 1, prefix=name + '/',
              drop_rate=_DROP_CONNECT_RATE * block_index / len(names),
              is_training=is_training)
        end_points[name + '/output'] = net
        if name == last_block:
          return end_points
        input_filters = output_filters
        block_index += 1
  return end_points
