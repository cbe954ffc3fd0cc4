"""Quantizers of the less common layer patterns: matmul, post-activation
bypass, adds of quantized tensors (FPN top-down), separable convolution."""
import tensorflow as tf
import tf_slim as slim

from od_estimator.quantization import rewrite


def _quantizers(build, is_training=False):
  graph = tf.Graph()
  with graph.as_default():
    build(tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 4]))
  if is_training:
    rewrite.create_training_graph(graph)
  else:
    rewrite.create_eval_graph(graph)
  return sorted(op.name.rsplit('/', 1)[0] for op in graph.get_operations()
                if op.type == 'FakeQuantWithMinMaxVars')


def test_fully_connected_with_relu():
  def build(images):
    flat = tf.reshape(images, [2, -1])
    tf.identity(slim.fully_connected(flat, 5, scope='Logits'), name='out')
  assert _quantizers(build) == ['Logits/act_quant', 'Logits/weights_quant']


def test_post_activation_bypass():
  def build(images):
    with tf.compat.v1.variable_scope('scope1'):
      net = slim.conv2d(images, 4, [3, 3], activation_fn=tf.nn.relu6,
                        scope='Conv')
      tf.identity(net + images, name='out')
  assert _quantizers(build) == ['scope1/Conv/act_quant',
                                'scope1/Conv/weights_quant',
                                'scope1/post_activation_bypass_quant']


def test_add_of_quantized_tensors_is_quantized():
  # As the FPN top-down path: a projection (no activation) plus the
  # upsampled coarser level, both quantized, then a smoothing conv.
  def build(images):
    top = slim.conv2d(images, 4, [1, 1], stride=2, activation_fn=None,
                      scope='projection_1')
    lateral = slim.conv2d(images, 4, [1, 1], activation_fn=None,
                          scope='projection_2')
    upsampled = tf.reshape(tf.stack([tf.stack([top] * 2, 3)] * 2, 2),
                           [2, 8, 8, 4])
    with tf.name_scope('top_down'):
      merged = tf.add(upsampled, lateral, name='add')
    slim.conv2d(merged, 4, [3, 3], scope='smoothing')
  assert _quantizers(build) == [
      'projection_1/act_quant', 'projection_1/weights_quant',
      'projection_2/act_quant', 'projection_2/weights_quant',
      'smoothing/act_quant', 'smoothing/weights_quant',
      'top_down/add/activation_AddV2_quant']


def test_separable_conv_without_activation_between():
  def build(images):
    slim.separable_conv2d(images, 8, [3, 3], depth_multiplier=1,
                          activation_fn=tf.nn.relu6, scope='sep')
  assert _quantizers(build, is_training=True) == [
      'sep/act_quant', 'sep/separable_conv2d/act_quant',
      'sep/separable_conv2d/weights_quant', 'sep/weights_quant']
