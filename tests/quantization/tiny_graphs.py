"""Tiny slim graphs for the quantization rewrite tests, with fixed values.

Every variable has a constant initializer (moving statistics away from 0/1),
so two sessions on a graph before and after a rewrite see the same values.
"""
import numpy as np
import tensorflow as tf
import tf_slim as slim

IMAGE = np.random.RandomState(0).uniform(-1, 2, (2, 8, 8, 3)).astype(np.float32)


def _constant(shape, seed, scale=0.5, offset=0.0):
  values = np.random.RandomState(seed).uniform(-scale, scale, shape)
  return tf.compat.v1.constant_initializer(values.astype(np.float32) + offset)


def batch_norm_params(is_training, channels, seed):
  return dict(
      is_training=is_training, decay=0.9, epsilon=0.001, scale=True,
      param_initializers=dict(
          gamma=_constant([channels], seed, 0.3, 1.0),
          beta=_constant([channels], seed + 1, 0.3),
          moving_mean=_constant([channels], seed + 2, 0.5),
          moving_variance=_constant([channels], seed + 3, 0.4, 1.0)))


def conv_bn(inputs, depth, is_training, scope, depthwise=False,
            activation_fn=tf.nn.relu6, seed=0):
  """A 3x3 conv (or depthwise conv) + fused batch norm + activation."""
  channels = inputs.shape[-1]
  if depthwise:
    return slim.separable_conv2d(
        inputs, None, [3, 3], depth_multiplier=1, padding='SAME',
        weights_initializer=_constant([3, 3, channels, 1], seed),
        normalizer_fn=slim.batch_norm,
        normalizer_params=batch_norm_params(is_training, channels, seed),
        activation_fn=activation_fn, scope=scope)
  return slim.conv2d(
      inputs, depth, [3, 3], padding='SAME',
      weights_initializer=_constant([3, 3, channels, depth], seed),
      normalizer_fn=slim.batch_norm,
      normalizer_params=batch_norm_params(is_training, depth, seed),
      activation_fn=activation_fn, scope=scope)


def mobilenet_like(images, is_training):
  """conv, depthwise + pointwise, a residual block, a predictor conv.

  Returns:
    (features, predictions) tensors.
  """
  with tf.compat.v1.variable_scope('Net'):
    net = conv_bn(images, 8, is_training, 'Conv2d_0', seed=1)
    net = conv_bn(net, 8, is_training, 'Conv2d_1_depthwise', depthwise=True,
                  seed=2)
    net = conv_bn(net, 8, is_training, 'Conv2d_1_pointwise', seed=3)
    with tf.compat.v1.variable_scope('block'):
      # As MobileNet v2's expanded_conv: input -> project (no activation),
      # added to the input, then an Identity 'output'.
      block_input = tf.identity(net, name='input')
      residual = conv_bn(block_input, 8, is_training, 'project',
                         activation_fn=None, seed=4)
      net = tf.identity(residual + block_input, name='output')
  predictions = slim.conv2d(
      net, 4, [1, 1], activation_fn=None, normalizer_fn=None,
      weights_initializer=_constant([1, 1, 8, 4], 5),
      biases_initializer=_constant([4], 6), scope='Predictor')
  # Consumed as SSD's box predictors are (the FakeQuant sits before it).
  return net, tf.reshape(predictions, [-1, 4], name='predictions')


def run(graph, tensors, feed=None, steps=1):
  """Initializes the graph's variables and runs `tensors` `steps` times."""
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(steps):
      values = sess.run(tensors, feed)
  return values
