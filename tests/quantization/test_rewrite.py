"""rewrite: FakeQuant placement, variable names, ranges, delay, gradients."""
import collections

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.checks import tpu_check
from od_estimator.quantization import rewrite
from tests.quantization import tiny_graphs

# Quantizers of tiny_graphs.mobilenet_like, as the original named them.
EXPECTED_QUANTIZERS = {
    'Net/Conv2d_0/weights_quant', 'Net/Conv2d_0/act_quant',
    'Net/Conv2d_1_depthwise/weights_quant',
    'Net/Conv2d_1_depthwise/act_quant',
    'Net/Conv2d_1_pointwise/weights_quant',
    'Net/Conv2d_1_pointwise/act_quant',
    # Residual block: the add's scope holds act_quant and add_quant.
    'Net/block/project/weights_quant', 'Net/block/project/conv_quant',
    'Net/block/act_quant', 'Net/block/add_quant',
    # Final layer: its bias add is quantized.
    'Predictor/weights_quant', 'Predictor/act_quant',
}


def _graph(is_training=True):
  graph = tf.Graph()
  with graph.as_default():
    images = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
    features, predictions = tiny_graphs.mobilenet_like(images, is_training)
  return graph, images, features, predictions


def _quantizers(graph):
  return {op.name.rsplit('/', 1)[0] for op in graph.get_operations()
          if op.type == 'FakeQuantWithMinMaxVars'}


def _variables(graph):
  with graph.as_default():
    return {v.op.name: v for v in tf.compat.v1.global_variables()}


@pytest.mark.parametrize('is_training', [True, False])
def test_fake_quant_placement_and_variable_names(is_training):
  graph, _, _, _ = _graph(is_training)
  before = set(_variables(graph))
  if is_training:
    count = rewrite.create_training_graph(graph, quant_delay=0)
  else:
    count = rewrite.create_eval_graph(graph)
  assert _quantizers(graph) == EXPECTED_QUANTIZERS
  assert count == len(EXPECTED_QUANTIZERS)
  fake_quants = [op for op in graph.get_operations()
                 if op.type == 'FakeQuantWithMinMaxVars']
  for op in fake_quants:
    assert op.get_attr('num_bits') == 8
    assert op.get_attr('narrow_range') == ('weights_quant' in op.name)
  new = set(_variables(graph)) - before
  ranges = {q + '/' + end for q in EXPECTED_QUANTIZERS
            for end in ('min', 'max')}
  # Moving averages carry the original's zero-debias variables.
  debias = {'%s/%s/%s' % (q, name, extra)
            for q in EXPECTED_QUANTIZERS if 'weights_quant' not in q
            for name in (q + '/min', q + '/max')
            for extra in ('biased', 'local_step')}
  assert new == (ranges | debias if is_training else ranges)
  with graph.as_default():
    model_vars = {v.op.name for v in tf.compat.v1.model_variables()}
    trainable = {v.op.name for v in tf.compat.v1.trainable_variables()}
  assert ranges <= model_vars and not ranges & trainable
  # Weights are read by the folded layers through their quantizer.
  conv = graph.get_operation_by_name('Net/Conv2d_0/Conv2D_Fold')
  assert conv.inputs[1].op.name == (
      'Net/Conv2d_0/weights_quant/FakeQuantWithMinMaxVars')


def test_rewrite_twice_changes_nothing():
  graph, _, _, _ = _graph()
  rewrite.create_training_graph(graph)
  ops_before = [op.name for op in graph.get_operations()]
  assert rewrite.create_training_graph(graph) == 0
  assert [op.name for op in graph.get_operations()] == ops_before


def test_training_learns_ranges_and_eval_keeps_them():
  graph, images, features, predictions = _graph()
  rewrite.create_training_graph(graph)
  variables = _variables(graph)
  with graph.as_default():
    scale = graph.get_tensor_by_name('Net/Conv2d_0/mul_fold:0')
    reads = {name: variables[name].read_value() for name in (
        'Net/Conv2d_0/weights_quant/min', 'Net/Conv2d_0/weights_quant/max',
        'Predictor/act_quant/min', 'Predictor/act_quant/max')}
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    folded, bias_add, _ = sess.run(
        [scale, graph.get_tensor_by_name('Predictor/BiasAdd:0'), predictions],
        {images: tiny_graphs.IMAGE})
    values = sess.run(reads)
    sess.run(predictions, {images: tiny_graphs.IMAGE * 3})
    second = sess.run(reads)
  # Weights: last value of the folded weights (with 0 in the range).
  assert values['Net/Conv2d_0/weights_quant/min'] == pytest.approx(
      min(folded.min(), 0.0), rel=1e-5)
  assert values['Net/Conv2d_0/weights_quant/max'] == pytest.approx(
      max(folded.max(), 0.0), rel=1e-5)
  # Activations: a zero-debiased EMA starts at the first batch's range...
  assert values['Predictor/act_quant/max'] == pytest.approx(
      max(bias_add.max(), 0.0), rel=1e-4)
  assert values['Predictor/act_quant/min'] == pytest.approx(
      min(bias_add.min(), 0.0), rel=1e-4, abs=1e-6)
  # ... then moves slowly (decay 0.999) toward the next batches'.
  assert second['Predictor/act_quant/max'] != values['Predictor/act_quant/max']

  eval_graph, eval_images, _, eval_predictions = _graph(is_training=False)
  rewrite.create_eval_graph(eval_graph)
  eval_vars = _variables(eval_graph)
  with eval_graph.as_default():
    read = eval_vars['Predictor/act_quant/max'].read_value()
    assign = eval_vars['Predictor/act_quant/max'].assign(0.5)
  with tf.compat.v1.Session(graph=eval_graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(assign)
    out, kept = sess.run([eval_predictions, read],
                         {eval_images: tiny_graphs.IMAGE})
    assert kept == 0.5
    assert out.max() <= 0.5 + 1e-6


def test_quant_delay_switches_on_at_the_step():
  graph, images, _, predictions = _graph()
  rewrite.create_training_graph(graph, quant_delay=2)
  names = {op.name for op in graph.get_operations()}
  assert {'fake_quantization_step', 'Predictor/act_quant/activate_quant',
          'Predictor/act_quant/delayed_quant'} <= names
  step = graph.get_tensor_by_name('fake_quantization_step/Identity:0')
  float_output = graph.get_tensor_by_name('Predictor/BiasAdd:0')
  quantized = graph.get_tensor_by_name(
      'Predictor/act_quant/FakeQuantWithMinMaxVars:0')
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    feed = {images: tiny_graphs.IMAGE}
    runs = [sess.run([step, predictions, float_output, quantized], feed)
            for _ in range(2)]
  assert [run[0] for run in runs] == [1, 2]
  # Step 1 < delay: the float value passes; from step 2 the quantized one.
  (_, out1, float1, quant1), (_, out2, float2, quant2) = runs
  np.testing.assert_array_equal(out1, float1.reshape(-1, 4))
  assert not np.allclose(out1, quant1.reshape(-1, 4))
  np.testing.assert_array_equal(out2, quant2.reshape(-1, 4))
  assert not np.allclose(out2, float2.reshape(-1, 4))


def test_gradients_for_every_trainable_variable_and_train_op():
  graph, images, features, predictions = _graph()
  with graph.as_default():
    loss = tf.reduce_mean(tf.square(predictions)) + tf.reduce_mean(features)
  rewrite.create_training_graph(graph, quant_delay=0)
  with graph.as_default():
    variables = tf.compat.v1.trainable_variables()
    grads = tf.compat.v1.gradients(loss, variables)
    assert all(g is not None for g in grads), [
        v.op.name for v, g in zip(variables, grads) if g is None]
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
          loss)
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    first = sess.run(loss, {images: tiny_graphs.IMAGE})
    for _ in range(3):
      sess.run(train_op, {images: tiny_graphs.IMAGE})
    assert sess.run(loss, {images: tiny_graphs.IMAGE}) < first


@pytest.mark.parametrize('field', ['weight_bits', 'activation_bits'])
def test_bits_other_than_8_refused(field):
  graph, _, _, _ = _graph()
  with pytest.raises(ValueError, match=field):
    rewrite.create_training_graph(graph, **{field: 4})
  assert collections.Counter(op.type for op in graph.get_operations())[
      'FakeQuantWithMinMaxVars'] == 0


@pytest.mark.parametrize('quant_delay', [0, 5])
def test_training_step_compiles_with_xla(quant_delay):
  # The TPU check's conversion of a training step to XLA HLO (CPU backend).
  graph, images, features, predictions = _graph()
  with graph.as_default():
    loss = tf.reduce_mean(tf.square(predictions)) + tf.reduce_mean(features)
  rewrite.create_training_graph(graph, quant_delay=quant_delay)
  with graph.as_default():
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
          loss)
    with tf.control_dependencies([train_op]):
      output = tf.identity(loss)
  step = tpu_check._Step(graph=graph, feeds=[images], output=output,
                         scaffold_fn=None, model=None)
  ops = tpu_check._step_ops(output)
  assert any(op.type == 'FakeQuantWithMinMaxVars' for op in ops)
  assert tpu_check._xla_error(step, ops) is None


def test_eval_graph_restores_what_training_learned(tmp_path):
  graph, images, _, predictions = _graph()
  with graph.as_default():
    loss = tf.reduce_mean(tf.square(predictions))
  rewrite.create_training_graph(graph)
  with graph.as_default():
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
          loss)
    saver = tf.compat.v1.train.Saver()
    act_max = _variables(graph)['Net/Conv2d_0/act_quant/max'].read_value()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(3):
      sess.run(train_op, {images: tiny_graphs.IMAGE})
    learned = sess.run(act_max)
    path = saver.save(sess, str(tmp_path / 'model.ckpt'))

  eval_graph, eval_images, _, eval_predictions = _graph(is_training=False)
  rewrite.create_eval_graph(eval_graph)
  with eval_graph.as_default():
    # Every variable of the evaluation graph is in the training checkpoint.
    restore = tf.compat.v1.train.Saver()
    read = _variables(eval_graph)['Net/Conv2d_0/act_quant/max'].read_value()
  with tf.compat.v1.Session(graph=eval_graph) as sess:
    restore.restore(sess, path)
    out, restored = sess.run([eval_predictions, read],
                             {eval_images: tiny_graphs.IMAGE})
  assert restored == learned != 6.0
  assert np.isfinite(out).all()
