"""ResNet v1 in the Keras application's layout: names, strides, shapes.

Names and the stride placement are those of the original's TF2 ResNet50
(keras_models/resnet_v1.py over tf.keras.applications), which differ from
slim's resnet_v1_50.
"""
import collections

import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import resnet_v1_keras

Built = collections.namedtuple('Built', ['graph', 'end_points', 'variables'])


def _build(use_batch_norm=True, activation_fn=tf.nn.relu):
  """ResNet50 at depth x0.125 (min 8) on a 64x64 image."""
  graph = tf.Graph()
  with graph.as_default():
    with slim.arg_scope([slim.batch_norm], scale=True):
      end_points = resnet_v1_keras.resnet_v1(
          tf.zeros([1, 64, 64, 3]), depth_multiplier=0.125, min_depth=8,
          activation_fn=activation_fn, use_batch_norm=use_batch_norm)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
  return Built(graph, end_points, variables)


@pytest.fixture(scope='module')
def resnet50():
  return _build()


def test_output_layer_names():
  assert resnet_v1_keras.output_layer_names('resnet_v1_50') == [
      'conv2_block3_out', 'conv3_block4_out', 'conv4_block6_out',
      'conv5_block3_out']
  assert resnet_v1_keras.output_layer_names('resnet_v1_101')[2] == (
      'conv4_block23_out')
  with pytest.raises(ValueError, match='resnet_v1_18'):
    resnet_v1_keras.output_layer_names('resnet_v1_18')


def test_end_point_shapes(resnet50):
  shapes = {name: resnet50.end_points[name].shape.as_list() for name in
            resnet_v1_keras.output_layer_names('resnet_v1_50')}
  # Strides 4, 8, 16, 32; depths max(int(4 * d * 0.125), 8).
  assert shapes == {'conv2_block3_out': [1, 16, 16, 32],
                    'conv3_block4_out': [1, 8, 8, 64],
                    'conv4_block6_out': [1, 4, 4, 128],
                    'conv5_block3_out': [1, 2, 2, 256]}


def test_keras_variable_names(resnet50):
  variables = resnet50.variables
  # 53 bias-free convs, each with a 4-variable batch norm.
  assert len(variables) == 53 * 5
  assert not [name for name in variables if name.endswith('bias')]
  expected = {
      'conv1_conv/kernel': [7, 7, 3, 8],
      'conv1_bn/gamma': [8],
      'conv2_block1_0_conv/kernel': [1, 1, 8, 32],
      'conv2_block1_1_conv/kernel': [1, 1, 8, 8],
      'conv2_block1_2_conv/kernel': [3, 3, 8, 8],
      'conv2_block1_3_conv/kernel': [1, 1, 8, 32],
      'conv2_block3_3_bn/moving_variance': [32],
      'conv3_block1_0_conv/kernel': [1, 1, 32, 64],
      'conv3_block1_1_conv/kernel': [1, 1, 32, 16],
      'conv4_block6_2_bn/beta': [32],
      'conv5_block3_3_bn/moving_mean': [256],
  }
  assert {name: variables[name] for name in expected} == expected
  assert 'conv3_block2_0_conv/kernel' not in variables  # identity shortcut


def _conv_op(graph, layer):
  return graph.get_operation_by_name(layer + '/Conv2D')


def test_stride_on_first_1x1_conv_and_shortcut(resnet50):
  def strides(layer):
    return list(_conv_op(resnet50.graph, layer).get_attr('strides'))
  assert strides('conv2_block1_1_conv') == [1, 1, 1, 1]
  for stage in (3, 4, 5):
    assert strides('conv%d_block1_0_conv' % stage) == [1, 2, 2, 1]
    assert strides('conv%d_block1_1_conv' % stage) == [1, 2, 2, 1]
    assert strides('conv%d_block1_2_conv' % stage) == [1, 1, 1, 1]
  # The strided 7x7 conv pads explicitly (3 before, 3 after).
  conv1 = _conv_op(resnet50.graph, 'conv1_conv')
  assert conv1.get_attr('padding') == b'VALID'
  assert conv1.inputs[0].shape.as_list() == [1, 70, 70, 3]


def test_activation_and_no_batch_norm():
  built = _build(use_batch_norm=False, activation_fn=tf.nn.relu6)
  assert len(built.variables) == 53
  types = collections.Counter(op.type for op in built.graph.get_operations())
  # After conv1 and after each block's _1, _2 convs and its sum.
  assert types['Relu6'] == 1 + 16 * 3 and types['Relu'] == 0
