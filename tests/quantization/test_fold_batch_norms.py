"""fold_batch_norms: folded conv / depthwise + batch norm equal the layer."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.quantization import fold_batch_norms
from tests.quantization import tiny_graphs


def _layer_graph(is_training, depthwise):
  graph = tf.Graph()
  with graph.as_default():
    images = tf.constant(tiny_graphs.IMAGE)
    output = tiny_graphs.conv_bn(images, 4, is_training, 'Layer',
                                 depthwise=depthwise, seed=7)
    loss = tf.reduce_sum(tf.square(output))
  return graph, output, loss


@pytest.mark.parametrize('depthwise', [False, True])
@pytest.mark.parametrize('is_training', [True, False])
def test_folded_layer_equals_batch_norm(is_training, depthwise):
  graph, output, loss = _layer_graph(is_training, depthwise)
  with graph.as_default():
    grads = tf.compat.v1.gradients(loss, tf.compat.v1.trainable_variables())
  expected, expected_grads = tiny_graphs.run(graph, [output, grads])

  graph, output, loss = _layer_graph(is_training, depthwise)
  assert fold_batch_norms.fold_batch_norms(graph, is_training) == 1
  with graph.as_default():
    grads = tf.compat.v1.gradients(loss, tf.compat.v1.trainable_variables())
  folded, folded_grads = tiny_graphs.run(graph, [output, grads])

  names = [op.name for op in graph.get_operations()]
  layer = 'Layer/depthwise' if depthwise else 'Layer/Conv2D'
  assert layer + '_Fold' in names
  assert 'Layer/mul_fold' in names and 'Layer/add_fold' in names
  assert 'Layer/BatchNorm_Fold/bias' in names
  assert ('Layer/post_conv_mul' in names) == is_training
  # The relu6 reads the fold; batch statistics in training, moving in eval.
  assert output.op.inputs[0].op.name == 'Layer/add_fold'
  assert np.abs(expected).max() > 0.1
  np.testing.assert_allclose(folded, expected, rtol=1e-4, atol=1e-4)
  for want, got in zip(expected_grads, folded_grads):
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_training_fold_keeps_moving_average_updates():
  graph, output, _ = _layer_graph(True, False)
  fold_batch_norms.fold_batch_norms(graph, True)
  with graph.as_default():
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    moving_mean = [v for v in tf.compat.v1.global_variables()
                   if v.op.name == 'Layer/BatchNorm/moving_mean'][0]
    with tf.control_dependencies(updates):
      step = tf.identity(output)
    read = moving_mean.read_value()
  before = tiny_graphs.run(graph, read)
  after = tiny_graphs.run(graph, [step, read], steps=2)[1]
  assert updates and not np.allclose(before, after)


def test_freeze_bn_delay_switches_to_frozen_moving_statistics():
  graph, output, _ = _layer_graph(True, False)
  fold_batch_norms.fold_batch_norms(graph, True, freeze_batch_norm_delay=2)
  with graph.as_default():
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
      step = tf.identity(output)
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
    reads = {name: variables['Layer/BatchNorm/' + name].read_value()
             for name in ('gamma', 'beta', 'moving_mean', 'moving_variance')}
    conv = graph.get_tensor_by_name('Layer/Conv2D:0')
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    runs = []
    for _ in range(3):
      before = sess.run(reads)
      runs.append((before, sess.run([step, conv])))
  def batch_norm(x, mean, variance, params):
    y = (x - mean) / np.sqrt(variance + 0.001) * params['gamma']
    return np.clip(y + params['beta'], 0, 6)
  (params1, (out1, conv1)), _, (params3, (out3, conv3)) = runs
  # Step 1 (before the delay): batch statistics.
  np.testing.assert_allclose(
      out1, batch_norm(conv1, conv1.mean((0, 1, 2)), conv1.var((0, 1, 2)),
                       params1), rtol=1e-4, atol=1e-4)
  # Step 3: the moving statistics, no longer updated.
  np.testing.assert_allclose(
      out3, batch_norm(conv3, params3['moving_mean'],
                       params3['moving_variance'], params3),
      rtol=1e-4, atol=1e-4)
  assert not np.allclose(runs[0][0]['moving_mean'], runs[1][0]['moving_mean'])
  np.testing.assert_array_equal(runs[1][0]['moving_mean'],
                                runs[2][0]['moving_mean'])


def test_batch_norm_after_an_identity_is_folded():
  # The weight-shared box predictor's tower: conv (normalizer_fn=tf.identity)
  # then a batch norm per feature map.
  def build():
    graph = tf.Graph()
    with graph.as_default():
      conv = tf.compat.v1.layers.conv2d(
          tf.constant(tiny_graphs.IMAGE), 4, 3, padding='same',
          use_bias=False, name='Tower/conv2d_0',
          kernel_initializer=tf.compat.v1.constant_initializer(0.3))
      bn = tf.compat.v1.layers.batch_normalization(
          tf.identity(conv), training=False, fused=True,
          moving_mean_initializer=tf.compat.v1.constant_initializer(0.2),
          moving_variance_initializer=tf.compat.v1.constant_initializer(2.0),
          name='Tower/conv2d_0/BatchNorm/feature_0')
      output = tf.nn.relu6(bn)
    return graph, output
  graph, output = build()
  expected = tiny_graphs.run(graph, output)
  graph, output = build()
  assert fold_batch_norms.fold_batch_norms(graph, False) == 1
  assert output.op.inputs[0].op.name == 'Tower/conv2d_0/add_fold'
  np.testing.assert_allclose(tiny_graphs.run(graph, output), expected,
                             rtol=1e-5, atol=1e-5)
