"""context_rcnn_lib: the attention block against a numpy reference.

Every variable (weights and batch norm statistics) gets random values, so
the reference checks each projection's batch norm in inference mode, the
L2 normalisation, the temperature and the masking.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.meta_architectures import context_rcnn_lib

BATCH = 2
PROPOSALS = 3
CROP = 2
CHANNELS = 5
CONTEXT_SIZE = 4
CONTEXT_LENGTH = 6
BOTTLENECK = 7
TEMPERATURE = 0.5
VALID_SIZES = [2, 4]
PARAMS = context_rcnn_lib.ContextParams(
    bottleneck_dimension=BOTTLENECK, temperature=TEMPERATURE,
    context_feature_length=CONTEXT_LENGTH)
_EPSILON = 0.001


def _random(shape, seed):
  return np.random.RandomState(seed).uniform(-1.0, 1.0, shape).astype(
      np.float32)


def _run_attention(box_features, context_features, valid_sizes,
                   is_training=False):
  """(attention output, {variable name: value}) with random variables."""
  with tf.Graph().as_default():
    output = context_rcnn_lib.box_context_attention(
        tf.constant(box_features), tf.constant(context_features),
        tf.constant(valid_sizes, tf.int32), PARAMS, is_training)
    variables = tf.compat.v1.global_variables()
    assignments = []
    for index, variable in enumerate(variables):
      value = _random(variable.shape.as_list(), 100 + index)
      if variable.op.name.endswith('moving_variance'):
        value = np.abs(value) + 0.5
      assignments.append(variable.assign(value))
    with tf.compat.v1.Session() as session:
      session.run(assignments)
      return session.run(output), {
          variable.op.name: session.run(variable) for variable in variables}


def _projection(features, values, scope, normalize):
  """numpy fully connected, inference batch norm, ReLU6, L2 norm."""
  net = features @ values[scope + '/weights']
  net = ((net - values[scope + '/BatchNorm/moving_mean']) /
         np.sqrt(values[scope + '/BatchNorm/moving_variance'] + _EPSILON) *
         values[scope + '/BatchNorm/gamma'] + values[scope + '/BatchNorm/beta'])
  net = np.clip(net, 0.0, 6.0)
  if normalize:
    net /= np.maximum(np.linalg.norm(net, axis=-1, keepdims=True), 1e-6)
  return net


def _reference(box_features, context_features, valid_sizes, values):
  block = context_rcnn_lib.ATTENTION_BLOCK_SCOPE + '/'
  queries = _projection(box_features.mean(axis=(2, 3)), values,
                        block + 'fully_connected', True)
  keys = _projection(context_features, values, block + 'fully_connected_1',
                     True)
  attended = []
  for image in range(BATCH):
    valid = valid_sizes[image]
    logits = queries[image] @ keys[image, :valid].T / TEMPERATURE
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    image_values = _projection(context_features[image, :valid], values,
                               block + 'fully_connected_2', True)
    attended.append(weights @ image_values)
  output = _projection(np.stack(attended), values, 'fully_connected', False)
  return output[:, :, np.newaxis, np.newaxis, :]


def test_attention_matches_numpy_reference():
  box_features = _random([BATCH, PROPOSALS, CROP, CROP, CHANNELS], 1)
  context_features = _random([BATCH, CONTEXT_SIZE, CONTEXT_LENGTH], 2)
  output, values = _run_attention(box_features, context_features,
                                  VALID_SIZES)
  assert output.shape == (BATCH, PROPOSALS, 1, 1, CHANNELS)
  np.testing.assert_allclose(
      output, _reference(box_features, context_features, VALID_SIZES, values),
      rtol=1e-4, atol=1e-5)


def test_rows_beyond_valid_context_size_change_nothing():
  box_features = _random([BATCH, PROPOSALS, CROP, CROP, CHANNELS], 1)
  context_features = _random([BATCH, CONTEXT_SIZE, CONTEXT_LENGTH], 2)
  padded = context_features.copy()
  padded[0, VALID_SIZES[0]:] = 0.0
  changed = context_features.copy()
  changed[0, VALID_SIZES[0]:] = 50.0 * _random(
      [CONTEXT_SIZE - VALID_SIZES[0], CONTEXT_LENGTH], 3)
  first, _ = _run_attention(box_features, padded, VALID_SIZES)
  second, _ = _run_attention(box_features, changed, VALID_SIZES)
  np.testing.assert_allclose(first, second, rtol=1e-6)
  # The same rows inside the valid size do count.
  third, _ = _run_attention(box_features, changed, [CONTEXT_SIZE] * BATCH)
  assert not np.allclose(first[0], third[0], atol=1e-4)


def test_variable_names_and_shapes_are_the_originals():
  with tf.Graph().as_default():
    context_rcnn_lib.box_context_attention(
        tf.zeros([1, PROPOSALS, CROP, CROP, CHANNELS]),
        tf.zeros([1, CONTEXT_SIZE, CONTEXT_LENGTH]), tf.constant([1]),
        PARAMS, is_training=True)
    shapes = {variable.op.name: variable.shape.as_list()
              for variable in tf.compat.v1.global_variables()}
    updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
  expected = {}
  for scope, inputs, outputs in (
      ('AttentionBlock/fully_connected', CHANNELS, BOTTLENECK),
      ('AttentionBlock/fully_connected_1', CONTEXT_LENGTH, BOTTLENECK),
      ('AttentionBlock/fully_connected_2', CONTEXT_LENGTH, BOTTLENECK),
      ('fully_connected', BOTTLENECK, CHANNELS)):
    expected[scope + '/weights'] = [inputs, outputs]
    for name in ('beta', 'gamma', 'moving_mean', 'moving_variance'):
      expected['%s/BatchNorm/%s' % (scope, name)] = [outputs]
  assert shapes == expected
  # Four batch norms, each updating its mean and variance in training.
  assert len(updates) == 8


def test_a_second_call_reuses_the_variables():
  with tf.Graph().as_default():
    for _ in range(2):
      context_rcnn_lib.box_context_attention(
          tf.zeros([1, PROPOSALS, CROP, CROP, CHANNELS]),
          tf.zeros([1, CONTEXT_SIZE, CONTEXT_LENGTH]), tf.constant([1]),
          PARAMS, is_training=False)
    assert len(tf.compat.v1.global_variables()) == 4 * 5


def test_context_features_of_another_length_are_refused():
  with tf.Graph().as_default():
    with pytest.raises(ValueError):
      context_rcnn_lib.box_context_attention(
          tf.zeros([1, PROPOSALS, CROP, CROP, CHANNELS]),
          tf.zeros([1, CONTEXT_SIZE, CONTEXT_LENGTH + 1]), tf.constant([1]),
          PARAMS, is_training=False)
