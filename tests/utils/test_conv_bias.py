"""conv_bias.biased: a convolution's bias before its normalizer."""
import numpy as np
import tensorflow as tf
import tf_slim as slim

from od_estimator.utils import conv_bias


def _biased_conv(images):
  return slim.conv2d(images, 2, 1, normalizer_fn=conv_bias.biased(
      slim.batch_norm), normalizer_params={'is_training': False},
                     scope='layer')


def test_the_bias_is_added_before_the_normalizer(execute):
  images = np.ones([1, 2, 2, 1], np.float32)

  def graph_fn(images):
    outputs = _biased_conv(images)
    biases, = [v for v in tf.compat.v1.global_variables()
               if v.op.name == 'layer/biases']
    with tf.control_dependencies([biases.assign([1.0, -1.0])]):
      return tf.identity(outputs), slim.conv2d(
          images, 2, 1, scope='layer', reuse=True, activation_fn=None,
          normalizer_fn=None, biases_initializer=None)
  outputs, convolved = execute(graph_fn, [images])
  # Inference-mode batch norm of moving mean 0, variance 1: x / sqrt(1 + eps).
  np.testing.assert_allclose(
      outputs, np.maximum(convolved + [1.0, -1.0], 0) / np.sqrt(1.001),
      rtol=1e-5)


def test_in_a_bfloat16_scope_the_bias_is_a_float32_variable():
  # The TPU step of use_bfloat16 (EfficientDet's configs set it).
  with tf.Graph().as_default():
    with tf.compat.v1.tpu.bfloat16_scope():
      outputs = _biased_conv(tf.zeros([1, 2, 2, 1], tf.bfloat16))
    assert outputs.dtype == tf.bfloat16
    assert {v.op.name: v.dtype.base_dtype
            for v in tf.compat.v1.global_variables()}['layer/biases'] == (
                tf.float32)
