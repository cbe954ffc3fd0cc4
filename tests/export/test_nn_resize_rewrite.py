"""nn_resize_rewrite: FPN's stack-and-reshape upsampling becomes one op."""
import numpy as np
import tensorflow as tf

from od_estimator.export import nn_resize_rewrite
from od_estimator.models import feature_map_generators


def _fpn_step(fake_quant):
  """coarse (2x2) upsampled x2 and added to fine (4x4): (output, feeds)."""
  coarse = tf.compat.v1.placeholder(tf.float32, [1, 2, 2, 3])
  fine = tf.compat.v1.placeholder(tf.float32, [1, 4, 4, 3])
  top_down = coarse
  if fake_quant:
    top_down = tf.quantization.fake_quant_with_min_max_vars(
        top_down, -6.0, 6.0)
  with tf.name_scope('top_down'):
    upsampled = feature_map_generators.nearest_neighbor_upsampling(
        top_down, scale=2)
  output = upsampled + fine
  rng = np.random.RandomState(0)
  return output, {coarse: rng.uniform(-1, 1, [1, 2, 2, 3]),
                  fine: rng.uniform(-1, 1, [1, 4, 4, 3])}


def _run(output, feeds):
  with tf.compat.v1.Session() as sess:
    return sess.run(output, feeds)


def test_float_upsampling_is_rewritten_with_the_same_values():
  with tf.Graph().as_default() as graph:
    output, feeds = _fpn_step(fake_quant=False)
    before = _run(output, feeds)
    assert nn_resize_rewrite.rewrite_nn_resize_op(is_quantized=False) == 1
    resize = graph.get_operation_by_name(
        'top_down/nearest_neighbor_upsampling/resize_nearest_neighbor')
    assert resize.type == 'ResizeNearestNeighbor'
    assert output.op.inputs[0].op is resize
    np.testing.assert_allclose(_run(output, feeds), before)


def test_quantized_graph_rewrites_only_fake_quant_inputs():
  with tf.Graph().as_default():
    output, _ = _fpn_step(fake_quant=False)
    assert nn_resize_rewrite.rewrite_nn_resize_op(is_quantized=True) == 0
    assert output.op.inputs[0].op.type == 'Reshape'
  with tf.Graph().as_default():
    output, feeds = _fpn_step(fake_quant=True)
    before = _run(output, feeds)
    assert nn_resize_rewrite.rewrite_nn_resize_op(is_quantized=True) == 1
    assert output.op.inputs[0].op.type == 'ResizeNearestNeighbor'
    np.testing.assert_allclose(_run(output, feeds), before)
