"""Tests for od_estimator.nets.nasnet."""
import dataclasses

import numpy as np
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import nasnet
from tests import fast_graphs
from tests import plain_session

# Three normal cells (reductions before cells 1 and 2), 8 filters, no
# dropout (drop path stays: it ramps in over 250000 steps).
TINY = dataclasses.replace(nasnet.LARGE, num_cells=3, num_conv_filters=8,
                           dense_dropout_keep_prob=1.0)


def _variables():
  return {v.op.name: v.shape.as_list()
          for v in tf.compat.v1.global_variables()}


def test_reduction_layers_are_the_originals():
  assert nasnet.reduction_layers(18, 2) == [6, 12]
  assert nasnet.reduction_layers(12, 2) == [4, 8]
  assert nasnet.LARGE.total_num_cells == 22


def test_drop_path_keep_prob_ramps_with_depth_and_steps():
  keep = [nasnet.scheduled_keep_prob(0.7, cell_num, 22, step, 100)
          for cell_num, step in ((21, 100), (21, 1000), (21, 50), (10, 100),
                                 (21, 0))]
  np.testing.assert_allclose(
      [float(value) for value in keep],
      [0.7, 0.7, 0.85, 1 - 11 / 22 * 0.3, 1.0], rtol=1e-6)


def test_drop_path_keeps_or_drops_whole_examples():
  tf.random.set_seed(1)
  net = tf.ones([400, 2, 2, 3])
  dropped = nasnet.drop_path(net, tf.constant(0.5)).numpy()
  per_example = dropped.reshape(400, -1)
  assert set(np.unique(per_example)) == {0.0, 2.0}
  assert (per_example.min(axis=1) == per_example.max(axis=1)).all()
  assert 120 < (per_example[:, 0] == 0).sum() < 280


def test_inference_stops_at_final_endpoint_without_heads_or_noise():
  with fast_graphs.new_graph() as graph:
    with slim.arg_scope(nasnet.nasnet_large_arg_scope()):
      net, end_points = nasnet.nasnet(
          tf.zeros([2, 64, 64, 3]), config=TINY, num_classes=5,
          is_training=False, final_endpoint='Cell_0')
    names = _variables()
    # No drop path, batch norm in inference mode.
    assert not [op for op in graph.get_operations()
                if op.type == 'RandomUniform']
    assert not graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
  assert net is end_points['Cell_0']
  # 64 -> 31 (conv0, VALID) -> 16 -> 8 (stem cells); 6 states of 8.
  assert net.shape.as_list() == [2, 8, 8, 48]
  assert not any(name.startswith(('reduction_cell', 'aux', 'final_layer'))
                 for name in names)


def test_tiny_network_trains():
  with fast_graphs.new_graph():
    tf.compat.v1.set_random_seed(3)
    step = tf.compat.v1.train.get_or_create_global_step()
    images = tf.random.uniform([2, 96, 96, 3], -1.0, 1.0, seed=1)
    labels = tf.constant([0, 2])
    with slim.arg_scope(nasnet.nasnet_large_arg_scope()):
      logits, end_points = nasnet.nasnet(images, config=TINY, num_classes=3)
    # 96 -> 47 -> 24 -> 12 (cell 0); reductions -> 6 (cell 1, under the
    # auxiliary head's 5 x 5 pooling) -> 3; 6 states of 32.
    assert end_points['Cell_2'].shape.as_list() == [2, 3, 3, 192]
    names = _variables()
    assert names['aux_1/aux_logits/FC/weights'][1] == 3
    assert names['final_layer/FC/weights'] == [192, 3]
    assert 'cell_2/comb_iter_4/left/bn_sep_3x3_2/gamma' in names
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    # A fixed batch: batch norm in training mode, no dropout noise. Plain
    # gradient descent: no slot variables to build (Adam's double them).
    with tf.control_dependencies(
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
      train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
          loss, global_step=step)
    with plain_session.session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      losses = [session.run([train, loss])[1] for _ in range(10)]
  assert np.isfinite(losses).all()
  assert losses[-1] < losses[0]
