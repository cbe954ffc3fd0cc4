"""variables_helper: regex filters, gradient edits, checkpoint matching."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.utils import variables_helper


def _variable(name, shape=(), value=0.0):
  return tf.compat.v1.get_variable(
      name, initializer=tf.constant(np.full(shape, value, np.float32)))


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _names(variables):
  return [v.op.name for v in variables]


def test_filter_variables(graph):
  del graph
  variables = [_variable('FeatureExtractor/conv1/weights'),
               _variable('FeatureExtractor/conv1/biases'),
               _variable('BoxPredictor/weights'),
               _variable('global_step_like')]
  regexes = ['FeatureExtractor/.*/weights', 'global']
  assert _names(variables_helper.filter_variables(variables, regexes)) == [
      'FeatureExtractor/conv1/biases', 'BoxPredictor/weights']
  assert _names(variables_helper.filter_variables(
      variables, regexes, invert=True)) == [
          'FeatureExtractor/conv1/weights', 'global_step_like']
  # re.match anchors at the start: 'weights' alone matches nothing.
  assert len(variables_helper.filter_variables(variables, ['weights'])) == 4
  # Empty patterns are ignored rather than matching everything.
  assert len(variables_helper.filter_variables(variables, ['', ''])) == 4
  assert not variables_helper.filter_variables(variables, [], invert=True)
  assert variables_helper.filter_variables([], ['.*']) == []


def test_filter_variables_search_matches_anywhere(graph):
  del graph
  variables = [_variable('FeatureExtractor/conv1/weights'),
               _variable('BoxPredictor_0/ClassPredictor/weights'),
               _variable('BoxPredictor_0/BoxEncodingPredictor/biases')]
  assert _names(variables_helper.filter_variables(
      variables, ['ClassPredictor'], search=True)) == [
          'FeatureExtractor/conv1/weights',
          'BoxPredictor_0/BoxEncodingPredictor/biases']
  assert _names(variables_helper.filter_variables(
      variables, ['weights$'], invert=True, search=True)) == [
          'FeatureExtractor/conv1/weights',
          'BoxPredictor_0/ClassPredictor/weights']
  # Without `search` the same regex must match at the start of a name.
  assert len(variables_helper.filter_variables(
      variables, ['ClassPredictor'])) == 3


def test_multiply_gradients_matching_regex(graph):
  del graph
  a = _variable('Box/a', [2])
  b = _variable('Class/b', [2])
  c = _variable('Box/c', [2])
  emb = _variable('Box/embedding', [3, 2])
  sparse = tf.IndexedSlices(tf.constant([[1., 2.]]), tf.constant([1]),
                            tf.constant([3, 2]))
  grads_and_vars = [(tf.constant([1., 2.]), a), (tf.constant([3., 4.]), b),
                    (None, c), (sparse, emb)]
  out = variables_helper.multiply_gradients_matching_regex(
      grads_and_vars, ['Box/.*'], 3.0)
  assert [v for _, v in out] == [a, b, c, emb]
  assert out[2][0] is None
  assert isinstance(out[3][0], tf.IndexedSlices)
  with tf.compat.v1.Session() as sess:
    grad_a, grad_b, sparse_values, sparse_indices = sess.run(
        [out[0][0], out[1][0], out[3][0].values, out[3][0].indices])
  np.testing.assert_allclose(grad_a, [3., 6.])   # [1, 2] * 3
  np.testing.assert_allclose(grad_b, [3., 4.])   # not matched: unchanged
  np.testing.assert_allclose(sparse_values, [[3., 6.]])
  np.testing.assert_array_equal(sparse_indices, [1])


def test_freeze_gradients_matching_regex(graph):
  del graph
  a = _variable('FeatureExtractor/a')
  b = _variable('BoxPredictor/b')
  grads_and_vars = [(tf.constant(1.), a), (tf.constant(2.), b)]
  out = variables_helper.freeze_gradients_matching_regex(
      grads_and_vars, ['FeatureExtractor'])
  assert [v for _, v in out] == [b]
  assert variables_helper.freeze_gradients_matching_regex(
      grads_and_vars, []) == grads_and_vars
  assert variables_helper.freeze_gradients_matching_regex([], ['.*']) == []


@pytest.fixture
def checkpoint(tmp_path):
  """Checkpoint with conv/weights [3, 3], conv/biases [3], head/w [4, 2]."""
  with tf.Graph().as_default():
    variables = [_variable('conv/weights', [3, 3], 1.0),
                 _variable('conv/biases', [3], 2.0),
                 _variable('head/w', [4, 2], 3.0)]
    tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      path = saver.save(sess, str(tmp_path / 'model.ckpt'))
  del variables
  return path


def _model_variables():
  """Model: conv matches, head/w has 3 classes, extra/v is new."""
  return [_variable('conv/weights', [3, 3]), _variable('conv/biases', [3]),
          _variable('head/w', [4, 3]), _variable('extra/v', [1]),
          tf.compat.v1.train.get_or_create_global_step()]


def test_report_from_list(checkpoint, graph):
  del graph
  variables = _model_variables()
  available, missing, mismatched = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          variables, checkpoint))
  assert _names(available) == ['conv/weights', 'conv/biases', 'global_step']
  assert missing == ['extra/v']
  assert mismatched == [('head/w', [4, 2], [4, 3])]


def test_report_without_global_step(checkpoint, graph):
  del graph
  variables = _model_variables()
  available, missing, _ = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          variables, checkpoint, include_global_step=False))
  assert _names(available) == ['conv/weights', 'conv/biases']
  # Excluded on purpose, so not reported as missing.
  assert missing == ['extra/v']


def test_available_from_dict_with_renaming(checkpoint, graph):
  del graph
  variables = _model_variables()
  # Checkpoint names as keys: a model variable may load another's entry.
  name_map = {'conv/weights': variables[0],
              'head/w': variables[2],
              'renamed/biases': variables[1]}
  available = variables_helper.get_variables_available_in_checkpoint(
      name_map, checkpoint)
  assert available == {'conv/weights': variables[0]}
  assert isinstance(available, dict)


def test_available_logs_one_summary(checkpoint, graph, caplog):
  del graph
  variables = _model_variables()
  with caplog.at_level(logging.WARNING):
    available = variables_helper.get_variables_available_in_checkpoint(
        variables, checkpoint)
  assert isinstance(available, list)
  assert _names(available) == ['conv/weights', 'conv/biases', 'global_step']
  warnings = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING]
  assert len(warnings) == 1
  assert 'Restoring 3 of 5' in warnings[0]
  assert 'extra/v' in warnings[0]
  assert 'head/w [4, 2] vs [4, 3]' in warnings[0]


def test_all_available_logs_nothing(checkpoint, graph, caplog):
  del graph
  variables = _model_variables()[:2]
  with caplog.at_level(logging.WARNING):
    available = variables_helper.get_variables_available_in_checkpoint(
        variables, checkpoint)
  assert available == variables
  assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_checkpoint_directory_and_empty_inputs(checkpoint, graph, tmp_path):
  del graph
  variables = _model_variables()
  available, _, _ = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          variables, str(tmp_path)))
  assert len(available) == 3
  assert variables_helper.get_variables_available_in_checkpoint(
      [], checkpoint) == []
  assert variables_helper.get_variables_available_in_checkpoint(
      {}, checkpoint) == {}


def test_restored_values(checkpoint, graph):
  del graph
  variables = _model_variables()
  available = variables_helper.get_variables_available_in_checkpoint(
      variables, checkpoint, include_global_step=False)
  saver = tf.compat.v1.train.Saver(available)
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    saver.restore(sess, checkpoint)
    weights, head = sess.run([variables[0], variables[2]])
  np.testing.assert_allclose(weights, np.ones([3, 3]))
  np.testing.assert_allclose(head, np.zeros([4, 3]))  # kept its initializer


def test_bad_inputs(checkpoint, graph, tmp_path):
  del graph
  with pytest.raises(ValueError, match='list or dict'):
    variables_helper.get_variables_available_in_checkpoint(
        _variable('x'), checkpoint)
  empty_dir = tmp_path / 'empty'
  empty_dir.mkdir()
  with pytest.raises(ValueError, match='No checkpoint'):
    variables_helper.get_variables_available_in_checkpoint(
        [], str(empty_dir))


def write_object_based_checkpoint(directory, values):
  """Saves {variable name: array} with tf.train.Checkpoint (TF2, eager).

  The variables hang in nested objects as in a Keras model, so their keys
  are object paths ('model/backbone/0/.ATTRIBUTES/VARIABLE_VALUE') and only
  the object graph records their names.
  """
  model = tf.Module()
  model.backbone = [tf.Variable(value, name=name)
                    for name, value in values.items()]
  return tf.train.Checkpoint(model=model).save(str(directory / 'ckpt'))


@pytest.fixture
def object_based_checkpoint(tmp_path):
  return write_object_based_checkpoint(tmp_path, {
      'Conv1/kernel': np.full([3, 3], 1.0, np.float32),
      'bn_Conv1/gamma': np.full([3], 2.0, np.float32),
      'head/kernel': np.full([4, 2], 3.0, np.float32)})


def test_object_based_checkpoint_keys(object_based_checkpoint, graph):
  del graph
  variables = {'Conv1/kernel': _variable('Conv1/kernel', [3, 3]),
               'bn_Conv1/gamma': _variable('bn_Conv1/gamma', [3]),
               'head/kernel': _variable('head/kernel', [4, 3]),
               'extra/v': _variable('extra/v', [1])}
  available, missing, mismatched = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          variables, object_based_checkpoint))
  assert available == {
      'model/backbone/0/.ATTRIBUTES/VARIABLE_VALUE':
          variables['Conv1/kernel'],
      'model/backbone/1/.ATTRIBUTES/VARIABLE_VALUE':
          variables['bn_Conv1/gamma']}
  assert missing == ['extra/v']
  assert mismatched == [('head/kernel', [4, 2], [4, 3])]
  # The list form finds the same variables.
  listed = variables_helper.get_variables_available_in_checkpoint(
      list(variables.values()), object_based_checkpoint)
  assert _names(listed) == ['Conv1/kernel', 'bn_Conv1/gamma']


def test_object_based_checkpoint_restores(object_based_checkpoint, graph):
  del graph
  kernel = _variable('Conv1/kernel', [3, 3])
  gamma = _variable('bn_Conv1/gamma', [3])
  available = variables_helper.get_variables_available_in_checkpoint(
      {'Conv1/kernel': kernel, 'bn_Conv1/gamma': gamma},
      object_based_checkpoint)
  tf.compat.v1.train.init_from_checkpoint(object_based_checkpoint, available)
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    kernel_value, gamma_value = sess.run([kernel, gamma])
  np.testing.assert_allclose(kernel_value, np.ones([3, 3]))
  np.testing.assert_allclose(gamma_value, np.full([3], 2.0))
