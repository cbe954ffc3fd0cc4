"""Tests for od_estimator.nets.nasnet."""
import dataclasses

import numpy as np
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import nasnet
from tests import plain_session

# Three normal cells (reductions before cells 1 and 2), 8 filters, no
# dropout (drop path stays: it ramps in over 250000 steps).
TINY = dataclasses.replace(nasnet.LARGE, num_cells=3, num_conv_filters=8,
                           dense_dropout_keep_prob=1.0)

# Variables of NASNet-A large (331 x 331, 1001 classes, training) as the
# original's research/slim/nets/nasnet/nasnet.py and nasnet_utils.py
# (tensorflow/models) build them: conv0 has 32 * stem_multiplier 3 = 96
# filters; stem cells are reduction cells at filter scaling 1/4 (42) and
# 1/2 (84); a reduction cell concatenates 4 states, a normal cell 6;
# reduction cells come before cells 6 and 12 (filters 336, then 672);
# after a reduction, a normal cell's second input is the cell before the
# reduction (skip_reduction_layer_input), matched by factorized_reduction
# (path1_conv / path2_conv of half the filters); the auxiliary head is on
# cell 11 (5x5 / 3 pooling of 21 x 21 gives the 6 x 6 `Conv`); a cell's
# second input is first matched to its filters (prev_1x1).
LARGE_VARIABLES = {
    'conv0/weights': [3, 3, 3, 96],
    'conv0_bn/moving_variance': [96],
    'cell_stem_0/1x1/weights': [1, 1, 96, 42],
    'cell_stem_0/beginning_bn/gamma': [42],
    'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights':
        [5, 5, 42, 1],
    'cell_stem_0/comb_iter_0/right/separable_7x7_1/pointwise_weights':
        [1, 1, 96, 42],
    'cell_stem_0/comb_iter_0/right/bn_sep_7x7_2/beta': [42],
    'cell_stem_0/comb_iter_4/left/separable_3x3_2/pointwise_weights':
        [1, 1, 42, 42],
    'cell_stem_1/path1_conv/weights': [1, 1, 96, 42],
    'cell_stem_1/path2_conv/weights': [1, 1, 96, 42],
    'cell_stem_1/final_path_bn/moving_mean': [84],
    'cell_stem_1/1x1/weights': [1, 1, 168, 84],
    'cell_0/path1_conv/weights': [1, 1, 168, 84],
    'cell_0/1x1/weights': [1, 1, 336, 168],
    'cell_1/prev_1x1/weights': [1, 1, 336, 168],
    'cell_1/prev_bn/gamma': [168],
    'cell_1/comb_iter_1/left/separable_5x5_1/depthwise_weights':
        [5, 5, 168, 1],
    'cell_5/comb_iter_1/right/separable_3x3_2/depthwise_weights':
        [3, 3, 168, 1],
    'reduction_cell_0/1x1/weights': [1, 1, 1008, 336],
    'reduction_cell_0/prev_1x1/weights': [1, 1, 1008, 336],
    'cell_6/path2_conv/weights': [1, 1, 1008, 168],
    'cell_7/prev_1x1/weights': [1, 1, 1344, 336],
    'cell_11/1x1/weights': [1, 1, 2016, 336],
    'aux_11/aux_logits/proj/weights': [1, 1, 2016, 128],
    'aux_11/aux_logits/aux_bn0/beta': [128],
    'aux_11/aux_logits/Conv/weights': [6, 6, 128, 768],
    'aux_11/aux_logits/aux_bn1/gamma': [768],
    'aux_11/aux_logits/FC/weights': [768, 1001],
    'reduction_cell_1/1x1/weights': [1, 1, 2016, 672],
    'reduction_cell_1/prev_1x1/weights': [1, 1, 2016, 672],
    'reduction_cell_1/comb_iter_0/right/separable_7x7_1/depthwise_weights':
        [7, 7, 672, 1],
    'cell_12/path1_conv/weights': [1, 1, 2016, 336],
    'cell_17/comb_iter_0/left/separable_5x5_2/pointwise_weights':
        [1, 1, 672, 672],
    'final_layer/FC/weights': [4032, 1001],
    'final_layer/FC/biases': [1001],
}


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


def test_full_large_network_has_the_original_variables():
  # Graph only: building is the cost, the shapes do not need a run.
  with tf.Graph().as_default():
    with slim.arg_scope(nasnet.nasnet_large_arg_scope()):
      logits, end_points = nasnet.nasnet(
          tf.zeros([1, 331, 331, 3]), num_classes=1001, is_training=True)
    shapes = _variables()
  for name, shape in LARGE_VARIABLES.items():
    assert shapes.get(name) == shape, name
  assert logits.shape.as_list() == [1, 1001]
  assert end_points['Cell_11'].shape.as_list() == [1, 21, 21, 2016]
  assert end_points['Cell_17'].shape.as_list() == [1, 11, 11, 4032]
  assert end_points['AuxLogits'].shape.as_list() == [1, 1001]
  # No variable outside the original's top-level scopes.
  assert {name.split('/')[0] for name in shapes} - {'global_step'} == (
      {'conv0', 'conv0_bn', 'cell_stem_0', 'cell_stem_1', 'aux_11',
       'reduction_cell_0', 'reduction_cell_1', 'final_layer'} |
      {'cell_%d' % n for n in range(18)})


def test_inference_stops_at_final_endpoint_without_heads_or_noise():
  with tf.Graph().as_default() as graph:
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
  with tf.Graph().as_default():
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
    assert 'aux_1/aux_logits/FC/weights' in names
    assert 'cell_2/comb_iter_4/left/bn_sep_3x3_2/gamma' in names
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    # A fixed batch: batch norm in training mode, no dropout noise.
    with tf.control_dependencies(
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
      train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
          loss, global_step=step)
    with plain_session.session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      losses = [session.run([train, loss])[1] for _ in range(10)]
  assert np.isfinite(losses).all()
  assert losses[-1] < losses[0]
