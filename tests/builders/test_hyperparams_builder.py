"""hyperparams_builder: arg_scopes built from text protos like the samples'."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.protos import hyperparams_pb2

SSD_CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""


def _config(text):
  return text_format.Parse(text, hyperparams_pb2.Hyperparams())


def _conv(config_text, is_training=True, inputs=None, op='conv'):
  """Builds one layer under the scope; returns (output, variables, reg loss)."""
  graph = tf.Graph()
  with graph.as_default():
    scope_fn = hyperparams_builder.build(_config(config_text), is_training)
    if inputs is None:
      inputs = np.full([1, 4, 4, 2], 100., np.float32)
    with slim.arg_scope(scope_fn()):
      if op == 'conv':
        output = slim.conv2d(tf.constant(inputs), 3, [3, 3], scope='Conv')
      else:
        output = slim.fully_connected(tf.constant(inputs), 3, scope='FC')
    reg = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
    names = sorted(variables)
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      weights = sess.run(
          variables[('Conv' if op == 'conv' else 'FC') + '/weights'])
      out, reg_values = sess.run([output, reg])
  return out, names, reg_values, weights


def test_ssd_style_hyperparams_configure_conv_layers():
  out, names, reg, weights = _conv(SSD_CONV_HYPERPARAMS)
  # Batch norm with scale and center replaces the bias.
  assert 'Conv/BatchNorm/gamma' in names and 'Conv/BatchNorm/beta' in names
  assert 'Conv/biases' not in names
  # slim's L2 loss is weight * sum(w^2) / 2.
  np.testing.assert_allclose(reg, [0.00004 * np.sum(weights ** 2) / 2],
                             rtol=1e-5)
  # Truncated normal keeps every weight within two standard deviations.
  assert np.abs(weights).max() <= 2 * 0.03 + 1e-6
  assert out.max() <= 6.0  # RELU_6.


def test_l1_regularizer_and_no_normalizer_gives_biases():
  _, names, reg, weights = _conv("""
    regularizer { l1_regularizer { weight: 0.5 } }
    initializer { random_normal_initializer { stddev: 0.1 } }
    activation: NONE""")
  assert 'Conv/biases' in names
  np.testing.assert_allclose(reg, [0.5 * np.abs(weights).sum()], rtol=1e-5)


def test_fc_op_scopes_fully_connected_only():
  _, _, reg, weights = _conv("""
    op: FC
    regularizer { l2_regularizer { weight: 2.0 } }
    initializer { variance_scaling_initializer { factor: 1.0 uniform: true
                                                 mode: FAN_AVG } }""",
                             inputs=np.ones([2, 5], np.float32), op='fc')
  np.testing.assert_allclose(reg, [2.0 * np.sum(weights ** 2) / 2], rtol=1e-5)
  # Uniform variance scaling, FAN_AVG: limit sqrt(3 * 1.0 / ((5 + 3) / 2)).
  assert np.abs(weights).max() <= np.sqrt(3.0 / 4.0) + 1e-6


def test_batch_norm_training_flag():
  with tf.Graph().as_default():
    config = _config(SSD_CONV_HYPERPARAMS)
    assert hyperparams_builder.batch_norm_params(config.batch_norm,
                                                 True)['is_training']
    assert not hyperparams_builder.batch_norm_params(config.batch_norm,
                                                     False)['is_training']
    config.batch_norm.train = False
    params = hyperparams_builder.batch_norm_params(config.batch_norm, True)
    assert not params['is_training']
    assert params['decay'] == pytest.approx(0.9997)


def test_activations_and_flags():
  assert hyperparams_builder.build(_config('activation: SWISH'), True) \
      .activation_fn is not None
  assert hyperparams_builder.build(_config('activation: NONE'), True) \
      .activation_fn is None
  built = hyperparams_builder.build(_config('regularize_depthwise: true'),
                                    False)
  assert built.regularize_depthwise
  with tf.Graph().as_default():
    swish = hyperparams_builder.ACTIVATIONS[hyperparams_pb2.Hyperparams.SWISH]
    with tf.compat.v1.Session() as sess:
      # swish(x) = x * sigmoid(x); sigmoid(0) = 0.5 so swish(0) = 0.
      np.testing.assert_allclose(
          sess.run(swish(tf.constant([0., 2.]))),
          [0., 2. / (1. + np.exp(-2.))], rtol=1e-6)


def test_batch_norm_fields_reach_the_layer():
  with tf.Graph().as_default():
    scope_fn = hyperparams_builder.build(_config("""
      batch_norm { decay: 0.9 center: false scale: true epsilon: 0.01 }
    """), is_training=True)
    with slim.arg_scope(scope_fn()):
      slim.conv2d(tf.ones([1, 2, 2, 2]), 3, [1, 1], scope='Conv')
    names = {v.op.name for v in tf.compat.v1.global_variables()}
    # center: false drops beta; scale: true adds gamma.
    assert 'Conv/BatchNorm/gamma' in names
    assert 'Conv/BatchNorm/beta' not in names
    batch_norm = tf.compat.v1.get_default_graph().get_operation_by_name(
        'Conv/BatchNorm/FusedBatchNormV3')
    assert batch_norm.get_attr('epsilon') == pytest.approx(0.01)
    # Training with train: true (the default) updates the moving averages.
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)


def test_batch_norm_not_trained_in_eval():
  with tf.Graph().as_default():
    scope_fn = hyperparams_builder.build(_config('batch_norm { }'),
                                         is_training=False)
    with slim.arg_scope(scope_fn()):
      slim.conv2d(tf.ones([1, 2, 2, 2]), 3, [1, 1], scope='Conv')
    assert not tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.UPDATE_OPS)


def test_group_norm_replaces_biases():
  with tf.Graph().as_default():
    scope_fn = hyperparams_builder.build(_config('group_norm { }'), True)
    with slim.arg_scope(scope_fn()):
      # slim.group_norm's default is 32 groups, so 32 output channels.
      slim.conv2d(tf.ones([1, 2, 2, 2]), 32, [1, 1], scope='Conv')
    names = {v.op.name for v in tf.compat.v1.global_variables()}
  assert {'Conv/GroupNorm/gamma', 'Conv/GroupNorm/beta'} <= names
  assert 'Conv/biases' not in names


@pytest.mark.parametrize('text, field', [
    ('force_use_bias: true', 'force_use_bias'),
    ('sync_batch_norm { }', 'sync_batch_norm'),
    ('initializer { keras_initializer_by_name: "glorot_uniform" }',
     'keras_initializer_by_name'),
])
def test_keras_only_options_are_refused_by_name(text, field):
  with pytest.raises(ValueError, match=field):
    hyperparams_builder.build(_config(text), True)


def test_wrong_config_type():
  with pytest.raises(ValueError, match='Hyperparams proto'):
    hyperparams_builder.build('activation: RELU', True)


def _scope_key(op):
  return getattr(op, '_key_op', str(op))


def test_scope_holds_the_original_entries():
  # Code written for the original unpacks the scope: without batch norm it
  # holds exactly conv2d, separable_conv2d and conv2d_transpose.
  with tf.Graph().as_default():
    scope = hyperparams_builder.build(_config("""
      regularizer { l1_regularizer { weight: 0.5 } }
      initializer { truncated_normal_initializer { } }
    """), is_training=True)()
    assert sorted(scope) == sorted(_scope_key(op) for op in (
        slim.conv2d, slim.separable_conv2d, slim.conv2d_transpose))
    conv_scope_arguments = list(scope.values())[0]
    assert conv_scope_arguments['normalizer_fn'] is None
    assert conv_scope_arguments['weights_regularizer'] is not None
    fc_scope = hyperparams_builder.build(_config("""
      regularizer { l2_regularizer { } }
      initializer { truncated_normal_initializer { } }
      op: FC
    """), is_training=True)()
    assert list(fc_scope) == [_scope_key(slim.fully_connected)]


def test_batch_norm_scope_entry_as_the_original():
  with tf.Graph().as_default():
    scope = hyperparams_builder.build(_config("""
      regularizer { l2_regularizer { } }
      initializer { truncated_normal_initializer { } }
      batch_norm { decay: 0.7 center: false scale: true epsilon: 0.03
                   train: true }
    """), is_training=True)()
    assert scope[_scope_key(slim.conv2d)]['normalizer_fn'] is slim.batch_norm
    batch_norm_params = scope[_scope_key(slim.batch_norm)]
    assert batch_norm_params['decay'] == pytest.approx(0.7)
    assert batch_norm_params['epsilon'] == pytest.approx(0.03)
    assert not batch_norm_params['center'] and batch_norm_params['scale']
    assert batch_norm_params['is_training']
