"""keras_names: slim -> Keras variable names, renaming while building."""
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.utils import keras_names


def test_split_variable():
  assert keras_names.split_variable('Conv/weights') == ('Conv', 'kernel')
  assert keras_names.split_variable('a/b/biases') == ('a/b', 'bias')
  assert keras_names.split_variable('d/depthwise_weights') == (
      'd', 'depthwise_kernel')
  assert keras_names.split_variable('s/pointwise_weights') == (
      's', 'pointwise_kernel')
  assert keras_names.split_variable('Conv/BatchNorm/moving_mean') == (
      'Conv/BatchNorm', 'moving_mean')
  with pytest.raises(ValueError, match='No Keras name'):
    keras_names.split_variable('Conv/global_step')


def test_keras_layer_variable():
  assert keras_names.keras_layer_variable(
      'block/conv/weights', '_conv', '_batchnorm') == 'block/conv_conv/kernel'
  assert keras_names.keras_layer_variable(
      'block/conv/BatchNorm/gamma', '_conv',
      '_batchnorm') == 'block/conv_batchnorm/gamma'
  assert keras_names.keras_layer_variable('x/BatchNorm/beta') == 'x_bn/beta'
  with pytest.raises(ValueError, match='BatchNorm scope'):
    keras_names.keras_layer_variable('x/gamma')


def _conv_bn(net, scope, reuse=None):
  return slim.conv2d(net, 4, [3, 3], normalizer_fn=slim.batch_norm,
                     normalizer_params={'scale': True}, scope=scope,
                     reuse=reuse)


def test_renamed_variables_relative_and_from_root():
  with tf.Graph().as_default():
    images = tf.zeros([1, 8, 8, 3])
    created = []
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      with keras_names.renamed_variables(
          lambda name: keras_names.keras_layer_variable(name, '_conv')):
        _conv_bn(images, 'a')
      with keras_names.renamed_variables(
          lambda name: 'root_' + keras_names.keras_layer_variable(name),
          root_scope='', created=created):
        net = _conv_bn(images, 'b')
        # Reuse goes through the same renaming.
        _conv_bn(images, 'b', reuse=True)
      _conv_bn(images, 'c')  # Outside: slim names.
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
  assert names == sorted(
      ['FeatureExtractor/a_conv/kernel'] +
      ['FeatureExtractor/a_bn/' + v for v in keras_names.BATCH_NORM_VARIABLES]
      + ['root_b/kernel'] +
      ['root_b_bn/' + v for v in keras_names.BATCH_NORM_VARIABLES] +
      ['FeatureExtractor/c/weights'] +
      ['FeatureExtractor/c/BatchNorm/' + v
       for v in keras_names.BATCH_NORM_VARIABLES])
  # Ops keep their slim scopes; the reused layer returns the same variables.
  assert net.op.name.startswith('FeatureExtractor/b/')
  assert len(created) == 10 and len({id(v) for v in created}) == 5


def test_renamed_variables_errors_name_the_variable():
  with tf.Graph().as_default():
    with keras_names.renamed_variables(keras_names.keras_layer_variable):
      with pytest.raises(ValueError, match='other/global_step'):
        tf.compat.v1.get_variable('other/global_step', [])
