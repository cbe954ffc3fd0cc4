"""Tests for od_estimator.nets.mobilenet_v1."""
import collections

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v1

# Variable names and shapes of the original tf-slim MobilenetV1 built under
# mobilenet_v1_arg_scope() with depth_multiplier=1.0 (collected once from the
# original implementation): every conv weight and the BatchNorm of the first
# and last layers. The original creates 135 variables in total (27 layers x
# (weights + 4 BatchNorm variables)), 81 of them trainable.
EXPECTED_VARIABLES = [
    ('MobilenetV1/Conv2d_0/weights', (3, 3, 3, 32)),
    ('MobilenetV1/Conv2d_0/BatchNorm/gamma', (32,)),
    ('MobilenetV1/Conv2d_0/BatchNorm/beta', (32,)),
    ('MobilenetV1/Conv2d_0/BatchNorm/moving_mean', (32,)),
    ('MobilenetV1/Conv2d_0/BatchNorm/moving_variance', (32,)),
    ('MobilenetV1/Conv2d_1_depthwise/depthwise_weights', (3, 3, 32, 1)),
    ('MobilenetV1/Conv2d_1_depthwise/BatchNorm/gamma', (32,)),
    ('MobilenetV1/Conv2d_1_pointwise/weights', (1, 1, 32, 64)),
    ('MobilenetV1/Conv2d_2_depthwise/depthwise_weights', (3, 3, 64, 1)),
    ('MobilenetV1/Conv2d_2_pointwise/weights', (1, 1, 64, 128)),
    ('MobilenetV1/Conv2d_3_depthwise/depthwise_weights', (3, 3, 128, 1)),
    ('MobilenetV1/Conv2d_3_pointwise/weights', (1, 1, 128, 128)),
    ('MobilenetV1/Conv2d_4_depthwise/depthwise_weights', (3, 3, 128, 1)),
    ('MobilenetV1/Conv2d_4_pointwise/weights', (1, 1, 128, 256)),
    ('MobilenetV1/Conv2d_5_depthwise/depthwise_weights', (3, 3, 256, 1)),
    ('MobilenetV1/Conv2d_5_pointwise/weights', (1, 1, 256, 256)),
    ('MobilenetV1/Conv2d_6_depthwise/depthwise_weights', (3, 3, 256, 1)),
    ('MobilenetV1/Conv2d_6_pointwise/weights', (1, 1, 256, 512)),
    ('MobilenetV1/Conv2d_7_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_7_pointwise/weights', (1, 1, 512, 512)),
    ('MobilenetV1/Conv2d_8_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_8_pointwise/weights', (1, 1, 512, 512)),
    ('MobilenetV1/Conv2d_9_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_9_pointwise/weights', (1, 1, 512, 512)),
    ('MobilenetV1/Conv2d_10_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_10_pointwise/weights', (1, 1, 512, 512)),
    ('MobilenetV1/Conv2d_11_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_11_pointwise/weights', (1, 1, 512, 512)),
    ('MobilenetV1/Conv2d_12_depthwise/depthwise_weights', (3, 3, 512, 1)),
    ('MobilenetV1/Conv2d_12_pointwise/weights', (1, 1, 512, 1024)),
    ('MobilenetV1/Conv2d_13_depthwise/depthwise_weights', (3, 3, 1024, 1)),
    ('MobilenetV1/Conv2d_13_pointwise/weights', (1, 1, 1024, 1024)),
    ('MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma', (1024,)),
    ('MobilenetV1/Conv2d_13_pointwise/BatchNorm/beta', (1024,)),
    ('MobilenetV1/Conv2d_13_pointwise/BatchNorm/moving_mean', (1024,)),
    ('MobilenetV1/Conv2d_13_pointwise/BatchNorm/moving_variance', (1024,)),
]
EXPECTED_NUM_VARIABLES = 135
EXPECTED_NUM_TRAINABLE = 81

_Pool = collections.namedtuple('Pool', ['kernel', 'stride', 'depth'])

ALL_END_POINTS = ['Conv2d_0'] + [
    'Conv2d_%d_%s' % (i, kind)
    for i in range(1, 14) for kind in ('depthwise', 'pointwise')]


def _build(size=64, arg_scope=None, batch=2, **kwargs):
  """Builds the base net in the current graph on a zero image batch.

  Graph construction dominates this file's run time, so most tests build
  without batch norm (arg_scope={}), or only the first few layers.
  """
  images = tf.zeros([batch, size, size, 3])
  if arg_scope is None:
    arg_scope = mobilenet_v1.mobilenet_v1_arg_scope()
  with slim.arg_scope(arg_scope):
    return mobilenet_v1.mobilenet_v1_base(images, **kwargs)


def _variables():
  return {v.op.name: tuple(v.shape.as_list())
          for v in tf.compat.v1.global_variables()}


def _collection(key):
  return tf.compat.v1.get_collection(key)


@pytest.fixture(scope='module')
def full_net():
  """The default net at 300x300 under the default arg scope, built once."""
  with tf.Graph().as_default():
    net, end_points = _build(300, arg_scope=mobilenet_v1.mobilenet_v1_arg_scope(
        weight_decay=0.01))
    losses = _collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    weights, = [v for v in tf.compat.v1.global_variables()
                if v.op.name == 'MobilenetV1/Conv2d_0/weights']
    first_loss, = [l for l in losses
                   if l.op.name.startswith('MobilenetV1/Conv2d_0/')]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      loss_value, weights_value = sess.run([first_loss, weights])
    return {
        'net': net, 'end_points': end_points, 'variables': _variables(),
        'num_trainable': len(tf.compat.v1.trainable_variables()),
        'num_losses': len(losses),
        'num_updates': len(_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)),
        'loss': loss_value, 'weights': weights_value,
    }


def test_variable_names_and_shapes_match_original(full_net):
  variables = full_net['variables']
  assert len(variables) == EXPECTED_NUM_VARIABLES
  assert full_net['num_trainable'] == EXPECTED_NUM_TRAINABLE
  for name, shape in EXPECTED_VARIABLES:
    assert variables[name] == shape, name


def test_output_and_end_points_at_300(full_net):
  net, end_points = full_net['net'], full_net['end_points']
  # SAME padding, five stride-2 layers: 300 -> 150, 75, 38, 19, 10.
  assert net.shape.as_list() == [2, 10, 10, 1024]
  assert sorted(end_points) == sorted(ALL_END_POINTS)
  assert end_points['Conv2d_13_pointwise'] is net
  expected = {
      'Conv2d_0': [2, 150, 150, 32],
      'Conv2d_1_depthwise': [2, 150, 150, 32],
      'Conv2d_1_pointwise': [2, 150, 150, 64],
      'Conv2d_2_depthwise': [2, 75, 75, 64],
      'Conv2d_4_depthwise': [2, 38, 38, 128],
      'Conv2d_6_pointwise': [2, 19, 19, 512],
      # SSD's first feature map (stride 16).
      'Conv2d_11_pointwise': [2, 19, 19, 512],
      'Conv2d_12_depthwise': [2, 10, 10, 512],
      'Conv2d_13_depthwise': [2, 10, 10, 1024],
  }
  for name, shape in expected.items():
    assert end_points[name].shape.as_list() == shape, name


def test_arg_scope_regularization_losses(full_net):
  # Conv2d_0 and the 13 pointwise convs; depthwise weights are not
  # regularized by default.
  assert full_net['num_losses'] == 14
  # slim's L2: scale * sum(w^2) / 2 with scale 0.01.
  expected = 0.01 * np.sum(np.square(full_net['weights'])) / 2
  assert full_net['loss'] > 0
  np.testing.assert_allclose(full_net['loss'], expected, rtol=1e-5)
  # Training batch norm: moving mean and variance updates for 27 layers.
  assert full_net['num_updates'] == 54


@pytest.mark.parametrize('kwargs,num_losses,num_updates', [
    # Conv2d_0, Conv2d_1_pointwise, Conv2d_2_pointwise; 5 batch norms.
    ({}, 3, 10),
    ({'regularize_depthwise': True}, 5, 10),
    ({'is_training': False}, 3, 0),
])
def test_arg_scope_options(kwargs, num_losses, num_updates):
  with tf.Graph().as_default():
    _build(arg_scope=mobilenet_v1.mobilenet_v1_arg_scope(**kwargs),
           final_endpoint='Conv2d_2_pointwise')
    losses = _collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    updates = _collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
  assert len(losses) == num_losses
  assert len(updates) == num_updates


def test_arg_scope_is_training_none_defers_to_outer_scope():
  with tf.Graph().as_default():
    with slim.arg_scope([slim.batch_norm], is_training=False):
      _build(arg_scope=mobilenet_v1.mobilenet_v1_arg_scope(is_training=None),
             final_endpoint='Conv2d_1_pointwise')
    assert not _collection(tf.compat.v1.GraphKeys.UPDATE_OPS)


def test_at_64_without_arg_scope():
  with tf.Graph().as_default():
    net, end_points = _build(64, arg_scope={})
    variables = _variables()
  # 64 -> 32, 16, 8, 4, 2.
  assert net.shape.as_list() == [2, 2, 2, 1024]
  assert sorted(end_points) == sorted(ALL_END_POINTS)
  assert end_points['Conv2d_11_pointwise'].shape.as_list() == [2, 4, 4, 512]
  # slim's defaults: no normalizer, so every layer owns weights + biases.
  assert len(variables) == 27 * 2
  assert variables['MobilenetV1/Conv2d_1_depthwise/biases'] == (32,)
  assert variables['MobilenetV1/Conv2d_13_pointwise/biases'] == (1024,)


def test_quarter_depth_at_300_runs(execute):
  def graph_fn(images):
    with slim.arg_scope(
        mobilenet_v1.mobilenet_v1_arg_scope(is_training=False)):
      return mobilenet_v1.mobilenet_v1_base(images, depth_multiplier=0.25)

  images = np.random.RandomState(1).uniform(-1, 1, [1, 300, 300, 3])
  net, end_points = execute(graph_fn, [images.astype(np.float32)])
  # int(1024 * 0.25) = 256, int(32 * 0.25) = 8, int(512 * 0.25) = 128.
  assert net.shape == (1, 10, 10, 256)
  assert end_points['Conv2d_0'].shape == (1, 150, 150, 8)
  assert end_points['Conv2d_11_pointwise'].shape == (1, 19, 19, 128)
  # ReLU6 activations.
  assert np.all(net >= 0) and np.all(net <= 6)
  assert np.any(end_points['Conv2d_0'] > 0)


def test_half_depth_with_min_depth():
  with tf.Graph().as_default():
    net, end_points = _build(64, arg_scope={}, depth_multiplier=0.5,
                             min_depth=32)
  # max(int(1024 * .5), 32) = 512; max(int(32 * .5), 32) = 32;
  # max(int(64 * .5), 32) = 32; max(int(128 * .5), 32) = 64.
  assert net.shape.as_list() == [2, 2, 2, 512]
  assert end_points['Conv2d_0'].shape.as_list()[3] == 32
  assert end_points['Conv2d_1_pointwise'].shape.as_list()[3] == 32
  assert end_points['Conv2d_2_pointwise'].shape.as_list()[3] == 64


def test_explicit_padding_keeps_same_shapes():
  # 65 -> 33 -> 17 -> 9 -> 5 -> 3, as with SAME padding.
  with tf.Graph().as_default():
    net, end_points = _build(65, arg_scope={}, use_explicit_padding=True)
  assert net.shape.as_list() == [2, 3, 3, 1024]
  assert end_points['Conv2d_0'].shape.as_list() == [2, 33, 33, 32]


def test_explicit_padding_pads_symmetrically(execute):
  plain = {'weights_initializer': tf.compat.v1.ones_initializer(),
           'normalizer_fn': None, 'activation_fn': None}

  def graph_fn(images):
    outputs = []
    for explicit in (True, False):
      with tf.compat.v1.variable_scope('explicit_%s' % explicit), \
          slim.arg_scope([slim.conv2d], **plain):
        net, _ = mobilenet_v1.mobilenet_v1_base(
            images, final_endpoint='Conv2d_0',
            conv_defs=[mobilenet_v1.Conv(kernel=[3, 3], stride=2, depth=8)],
            use_explicit_padding=explicit)
      outputs.append(net)
    return outputs

  explicit, same = execute(graph_fn, [np.ones([1, 4, 4, 3], np.float32)])
  # Explicit: pad 1 on each side, so the top-left 3x3 window covers 2x2
  # image pixels x 3 channels = 12 ones. SAME on an even size pads only at
  # the bottom/right, so the first window covers 3x3x3 = 27 ones.
  assert explicit.shape == (1, 2, 2, 8)
  np.testing.assert_allclose(explicit[0, 0, 0], np.full(8, 12.))
  np.testing.assert_allclose(same[0, 0, 0], np.full(8, 27.))
  # Bottom-right window: rows/cols 1..3 in both cases -> 27.
  np.testing.assert_allclose(explicit[0, 1, 1], np.full(8, 27.))


def test_fixed_padding_shapes():
  with tf.Graph().as_default():
    inputs = tf.zeros([1, 5, 6, 2])
    # (3 - 1) * 1 = 2 rows; (3 - 1) * 2 = 4 with rate 2; 1x1 adds nothing.
    assert mobilenet_v1.fixed_padding(
        inputs, [3, 3]).shape.as_list() == [1, 7, 8, 2]
    assert mobilenet_v1.fixed_padding(
        inputs, [3, 3], rate=2).shape.as_list() == [1, 9, 10, 2]
    assert mobilenet_v1.fixed_padding(
        inputs, [1, 1]).shape.as_list() == [1, 5, 6, 2]


def test_output_stride_uses_atrous_convolution():
  with tf.Graph().as_default():
    net, end_points = _build(64, arg_scope={}, output_stride=8)
    # Dilated depthwise convs run as SpaceToBatchND with block = rate.
    block_shape = tf.get_static_value(
        tf.compat.v1.get_default_graph().get_tensor_by_name(
            'MobilenetV1/Conv2d_13_depthwise/depthwise/SpaceToBatchND/'
            'block_shape:0'))
  # Strides stop at 8 (64 -> 8); Conv2d_6 and Conv2d_12 each double the rate.
  assert net.shape.as_list() == [2, 8, 8, 1024]
  assert end_points['Conv2d_4_pointwise'].shape.as_list()[1] == 8
  assert block_shape.tolist() == [4, 4]


def test_final_endpoint_stops_early():
  with tf.Graph().as_default():
    net, end_points = _build(64, final_endpoint='Conv2d_5_depthwise')
    num_variables = len(_variables())
  # 64 -> 32 (Conv2d_0), 16 (Conv2d_2), 8 (Conv2d_4); depth of Conv2d_4.
  assert net.shape.as_list() == [2, 8, 8, 256]
  assert sorted(end_points) == sorted(ALL_END_POINTS[:10])
  # Conv2d_0 .. Conv2d_5_depthwise: 10 layers x (weights + 4 batch norm).
  assert num_variables == 50


def test_scope_object_and_reuse():
  with tf.Graph().as_default():
    for reuse in (False, True):
      with tf.compat.v1.variable_scope('MobilenetV1', reuse=reuse) as scope:
        _build(scope=scope, final_endpoint='Conv2d_1_pointwise')
    variables = _variables()
  assert len(variables) == 3 * 5
  assert variables['MobilenetV1/Conv2d_0/weights'] == (3, 3, 3, 32)


@pytest.mark.parametrize('kwargs,message', [
    ({'depth_multiplier': 0.}, 'depth_multiplier'),
    ({'output_stride': 4}, 'output_stride'),
    ({'final_endpoint': 'Conv2d_1_pointwise'}, 'final endpoint'),
    ({'conv_defs': [_Pool(kernel=[3, 3], stride=2, depth=8)]},
     'Unknown convolution type'),
])
def test_bad_arguments_raise(kwargs, message):
  kwargs.setdefault(
      'conv_defs', [mobilenet_v1.Conv(kernel=[3, 3], stride=2, depth=8)])
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=message):
      _build(arg_scope={}, **kwargs)
