"""Tests for od_estimator.nets.mobilenet_v2."""
import collections

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v2
from tests import fast_graphs

Conv = mobilenet_v2.Conv
ExpandedConv = mobilenet_v2.ExpandedConv

# Variable names and shapes of the original tf-slim MobilenetV2 base built
# under training_scope() with depth_multiplier=1.0 (collected once from the
# original implementation): the weights of the first blocks, one weight of
# every later block, the last blocks and a few BatchNorms. The original has
# 260 variables in total (52 convs x (weights + 4 BatchNorm variables)), 156
# of them trainable.
EXPECTED_VARIABLES = [
    ('MobilenetV2/Conv/weights', (3, 3, 3, 32)),
    ('MobilenetV2/Conv/BatchNorm/gamma', (32,)),
    ('MobilenetV2/Conv/BatchNorm/beta', (32,)),
    ('MobilenetV2/Conv/BatchNorm/moving_mean', (32,)),
    ('MobilenetV2/Conv/BatchNorm/moving_variance', (32,)),
    ('MobilenetV2/expanded_conv/depthwise/depthwise_weights', (3, 3, 32, 1)),
    ('MobilenetV2/expanded_conv/depthwise/BatchNorm/gamma', (32,)),
    ('MobilenetV2/expanded_conv/project/weights', (1, 1, 32, 16)),
    ('MobilenetV2/expanded_conv/project/BatchNorm/moving_variance', (16,)),
    ('MobilenetV2/expanded_conv_1/expand/weights', (1, 1, 16, 96)),
    ('MobilenetV2/expanded_conv_1/expand/BatchNorm/beta', (96,)),
    ('MobilenetV2/expanded_conv_1/depthwise/depthwise_weights', (3, 3, 96, 1)),
    ('MobilenetV2/expanded_conv_1/project/weights', (1, 1, 96, 24)),
    ('MobilenetV2/expanded_conv_2/expand/weights', (1, 1, 24, 144)),
    ('MobilenetV2/expanded_conv_3/depthwise/depthwise_weights',
     (3, 3, 144, 1)),
    ('MobilenetV2/expanded_conv_3/project/weights', (1, 1, 144, 32)),
    ('MobilenetV2/expanded_conv_4/expand/weights', (1, 1, 32, 192)),
    ('MobilenetV2/expanded_conv_5/project/weights', (1, 1, 192, 32)),
    ('MobilenetV2/expanded_conv_6/project/weights', (1, 1, 192, 64)),
    ('MobilenetV2/expanded_conv_7/expand/weights', (1, 1, 64, 384)),
    ('MobilenetV2/expanded_conv_8/depthwise/depthwise_weights',
     (3, 3, 384, 1)),
    ('MobilenetV2/expanded_conv_9/project/weights', (1, 1, 384, 64)),
    ('MobilenetV2/expanded_conv_10/project/weights', (1, 1, 384, 96)),
    ('MobilenetV2/expanded_conv_11/expand/weights', (1, 1, 96, 576)),
    ('MobilenetV2/expanded_conv_12/depthwise/depthwise_weights',
     (3, 3, 576, 1)),
    ('MobilenetV2/expanded_conv_13/expand/weights', (1, 1, 96, 576)),
    ('MobilenetV2/expanded_conv_13/project/weights', (1, 1, 576, 160)),
    ('MobilenetV2/expanded_conv_14/expand/weights', (1, 1, 160, 960)),
    ('MobilenetV2/expanded_conv_15/depthwise/depthwise_weights',
     (3, 3, 960, 1)),
    ('MobilenetV2/expanded_conv_16/expand/weights', (1, 1, 160, 960)),
    ('MobilenetV2/expanded_conv_16/depthwise/depthwise_weights',
     (3, 3, 960, 1)),
    ('MobilenetV2/expanded_conv_16/project/weights', (1, 1, 960, 320)),
    ('MobilenetV2/expanded_conv_16/project/BatchNorm/gamma', (320,)),
    ('MobilenetV2/Conv_1/weights', (1, 1, 320, 1280)),
    ('MobilenetV2/Conv_1/BatchNorm/gamma', (1280,)),
    ('MobilenetV2/Conv_1/BatchNorm/beta', (1280,)),
    ('MobilenetV2/Conv_1/BatchNorm/moving_mean', (1280,)),
    ('MobilenetV2/Conv_1/BatchNorm/moving_variance', (1280,)),
]
EXPECTED_NUM_VARIABLES = 260
EXPECTED_NUM_TRAINABLE = 156

# 'layer_2' (expansion 1) has no expand conv, hence no expansion_output.
ALL_END_POINTS = (
    ['layer_%d' % n for n in range(1, 20)] +
    ['layer_2/depthwise_output', 'layer_2/output'] +
    ['layer_%d/%s' % (n, kind) for n in range(3, 19)
     for kind in ('expansion_output', 'depthwise_output', 'output')])

_Pool = collections.namedtuple('Pool', ['stride', 'depth'])


def _variables():
  return {v.op.name: tuple(v.shape.as_list())
          for v in tf.compat.v1.global_variables()}


def _collection(key):
  return tf.compat.v1.get_collection(key)


def _build(size=64, arg_scope=None, batch=2, **kwargs):
  """Builds the base net in the current graph on a zero image batch."""
  images = tf.zeros([batch, size, size, 3])
  with slim.arg_scope(arg_scope or {}):
    return mobilenet_v2.mobilenet_base(images, **kwargs)


@pytest.fixture(scope='module')
def full_net():
  """The default net at 300x300 under training_scope, built once."""
  with fast_graphs.new_graph():
    net, end_points = _build(
        300, arg_scope=mobilenet_v2.training_scope(weight_decay=0.01))
    losses = _collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    weights, = [v for v in tf.compat.v1.global_variables()
                if v.op.name == 'MobilenetV2/Conv_1/weights']
    last_loss, = [l for l in losses
                  if l.op.name.startswith('MobilenetV2/Conv_1/')]
    with tf.compat.v1.Session() as sess:
      sess.run(weights.initializer)
      loss_value, weights_value = sess.run([last_loss, weights])
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
  # Five stride-2 layers with SAME padding: 300 -> 150, 75, 38, 19, 10.
  assert net.shape.as_list() == [2, 10, 10, 1280]
  assert sorted(end_points) == sorted(ALL_END_POINTS)
  assert end_points['layer_19'] is net
  expected = {
      'layer_1': [2, 150, 150, 32],
      'layer_2': [2, 150, 150, 16],
      # The stride-2 block expands before its depthwise conv downsamples.
      'layer_3/expansion_output': [2, 150, 150, 96],
      'layer_3/depthwise_output': [2, 75, 75, 96],
      'layer_3/output': [2, 75, 75, 24],
      'layer_5': [2, 38, 38, 32],
      'layer_8': [2, 19, 19, 64],
      'layer_14': [2, 19, 19, 96],
      # SSD's first feature map: 96 * 6 = 576 channels at stride 16.
      'layer_15/expansion_output': [2, 19, 19, 576],
      'layer_15': [2, 10, 10, 160],
      'layer_18': [2, 10, 10, 320],
  }
  for name, shape in expected.items():
    assert end_points[name].shape.as_list() == shape, name


def test_training_scope_regularization_losses(full_net):
  # Conv, 16 expand, 17 project convs and Conv_1; depthwise weights are not
  # regularized.
  assert full_net['num_losses'] == 1 + 16 + 17 + 1
  # slim's L2: scale * sum(w^2) / 2 with scale 0.01.
  expected = 0.01 * np.sum(np.square(full_net['weights'])) / 2
  assert full_net['loss'] > 0
  np.testing.assert_allclose(full_net['loss'], expected, rtol=1e-5)
  # Training batch norm: moving mean and variance updates for 52 convs.
  assert full_net['num_updates'] == 104


def test_at_64_runs_in_inference_mode(execute):
  num_updates = []

  def graph_fn(images):
    outputs = mobilenet_v2.mobilenet_base(images)
    num_updates.append(len(_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)))
    return outputs

  images = np.random.RandomState(1).uniform(-1, 1, [1, 64, 64, 3])
  net, end_points = execute(graph_fn, [images.astype(np.float32)])
  # 64 -> 32, 16, 8, 4, 2.
  assert net.shape == (1, 2, 2, 1280)
  assert sorted(end_points) == sorted(ALL_END_POINTS)
  assert end_points['layer_15/expansion_output'].shape == (1, 4, 4, 576)
  # Without training_scope batch norm runs in inference mode.
  assert num_updates == [0]
  # Projections are linear, everything else is ReLU6.
  assert np.any(end_points['layer_18/output'] < 0)
  assert np.all(net >= 0) and np.all(net <= 6)
  assert np.any(end_points['layer_1'] > 0)


@pytest.mark.parametrize('multiplier,explicit,depths', [
    # _make_divisible(d * m, 8, min 8): 32 * .25 = 8; 24 * .25 = 6 -> 8;
    # 96 * .25 = 24; 1280 * .25 = 320 (the last layer is scaled too).
    (0.25, False, {'layer_1': 8, 'layer_4': 8, 'layer_14': 24,
                   'layer_15/expansion_output': 144, 'layer_19': 320}),
    # 16 * .5 = 8; expansion 8 * 6 = 48; 160 * .5 = 80; 1280 * .5 = 640.
    (0.5, True, {'layer_2': 8, 'layer_3/expansion_output': 48,
                 'layer_17': 80, 'layer_19': 640}),
])
def test_depth_multiplier_at_300(multiplier, explicit, depths):
  with fast_graphs.new_graph():
    net, end_points = _build(300, depth_multiplier=multiplier,
                             use_explicit_padding=explicit)
  # Explicit padding keeps SAME's output sizes.
  assert net.shape.as_list()[:3] == [2, 10, 10]
  assert end_points['layer_15/expansion_output'].shape.as_list()[1] == 19
  for name, depth in depths.items():
    assert end_points[name].shape.as_list()[3] == depth, name


def test_make_divisible():
  assert mobilenet_v2._make_divisible(1280 * 0.35, 8) == 448  # 452 // 8 * 8
  assert mobilenet_v2._make_divisible(20, 8) == 24  # (20 + 4) // 8 * 8
  # (10 + 4) // 8 * 8 = 8 is more than 10% below 10: one more step.
  assert mobilenet_v2._make_divisible(10, 8) == 16
  assert mobilenet_v2._make_divisible(3, 8) == 8
  assert mobilenet_v2._make_divisible(3, 8, min_value=16) == 16
  assert mobilenet_v2._make_divisible(3, 1) == 3


@pytest.mark.parametrize('kwargs,depths', [
    ({}, [32, 1280]),
    ({'depth_multiplier': 0.5}, [16, 640]),
    # The last layer keeps its depth: 1280 / .5 * .5.
    ({'depth_multiplier': 0.5, 'finegrain_classification_mode': True},
     [16, 1280]),
    # Only shrinking multipliers are compensated.
    ({'depth_multiplier': 1.4, 'finegrain_classification_mode': True},
     [48, 1792]),
    ({'depth_multiplier': 0.25, 'min_depth': 16}, [16, 320]),
    # 32 * .35 = 11.2 -> 8, more than 10% low -> 16.
    ({'depth_multiplier': 0.35}, [16, 448]),
    ({'depth_multiplier': 0.35, 'divisible_by': 1, 'min_depth': 1},
     [11, 448]),
])
def test_depth_rules(kwargs, depths):
  conv_defs = [Conv(kernel=[3, 3], stride=2, depth=32),
               Conv(kernel=[1, 1], stride=1, depth=1280)]
  with fast_graphs.new_graph():
    _, end_points = _build(16, conv_defs=conv_defs, **kwargs)
  assert [end_points['layer_%d' % n].shape.as_list()[3]
          for n in (1, 2)] == depths


def test_explicit_padding_pads_symmetrically(execute):
  def graph_fn(images):
    outputs = []
    for explicit in (True, False):
      with tf.compat.v1.variable_scope('explicit_%s' % explicit), \
          slim.arg_scope([slim.conv2d],
                         weights_initializer=tf.compat.v1.ones_initializer()):
        net, _ = mobilenet_v2.mobilenet_base(
            images, conv_defs=[Conv(kernel=[3, 3], stride=2, depth=8)],
            activation_fn=tf.identity, use_explicit_padding=explicit)
      outputs.append(net)
    return outputs

  explicit, same = execute(graph_fn, [np.ones([1, 4, 4, 3], np.float32)])
  # Inference batch norm with fresh statistics divides by sqrt(1 + 0.001).
  scale = 1 / np.sqrt(1.001)
  # Explicit: pad 1 on each side, so the top-left 3x3 window covers 2x2
  # pixels x 3 channels = 12 ones; SAME on an even size pads only at the
  # bottom/right, so it covers 3x3x3 = 27 ones.
  np.testing.assert_allclose(explicit[0, 0, 0], np.full(8, 12 * scale),
                             rtol=1e-5)
  np.testing.assert_allclose(same[0, 0, 0], np.full(8, 27 * scale),
                             rtol=1e-5)


@pytest.mark.parametrize('stride,residual', [(1, True), (2, False)])
def test_residual_connection(execute, stride, residual):
  def graph_fn(images):
    # Zero expand/project weights: the projection is exactly 0 after
    # inference batch norm, so the block outputs just its shortcut.
    with slim.arg_scope([slim.conv2d],
                        weights_initializer=tf.compat.v1.zeros_initializer()):
      net, _ = mobilenet_v2.mobilenet_base(
          images, conv_defs=[ExpandedConv(stride=stride, depth=3,
                                          expansion=6)],
          divisible_by=1, min_depth=1)
    return net

  images = np.random.RandomState(2).uniform(-1, 1, [1, 4, 4, 3])
  net = execute(graph_fn, [images.astype(np.float32)])
  if residual:
    np.testing.assert_allclose(net, images, rtol=1e-6)
  else:
    np.testing.assert_array_equal(net, np.zeros([1, 2, 2, 3]))


def test_output_stride_uses_atrous_convolution():
  conv_defs = [Conv(kernel=[3, 3], stride=2, depth=16),
               ExpandedConv(stride=2, depth=16, expansion=6),
               ExpandedConv(stride=2, depth=16, expansion=6),
               ExpandedConv(stride=1, depth=16, expansion=6),
               Conv(kernel=[1, 1], stride=1, depth=32)]
  with fast_graphs.new_graph():
    net, end_points = _build(32, conv_defs=conv_defs, output_stride=4)
    block_shape = tf.get_static_value(
        tf.compat.v1.get_default_graph().get_tensor_by_name(
            'MobilenetV2/expanded_conv_2/depthwise/depthwise/'
            'SpaceToBatchND/block_shape:0'))
  # Strides stop at 4 (32 -> 8): layer_3 drops its stride 2 and the next
  # block (expanded_conv_2) dilates by 2 instead.
  assert net.shape.as_list() == [2, 8, 8, 32]
  assert end_points['layer_3'].shape.as_list() == [2, 8, 8, 16]
  assert block_shape.tolist() == [2, 2]


def test_final_endpoint_stops_early():
  with fast_graphs.new_graph():
    net, end_points = _build(64, final_endpoint='layer_4')
    num_variables = len(_variables())
  assert net.shape.as_list() == [2, 16, 16, 24]
  assert sorted(end_points) == sorted(
      ['layer_1', 'layer_2', 'layer_3', 'layer_4', 'layer_2/depthwise_output',
       'layer_2/output'] + ['layer_%d/%s' % (n, kind) for n in (3, 4) for kind
                            in ('expansion_output', 'depthwise_output',
                                'output')])
  # Conv (1 conv), expanded_conv (2), expanded_conv_1 and _2 (3 each), each
  # with weights + 4 batch norm variables.
  assert num_variables == 9 * 5


def test_detection_conv_defs_override():
  # As the FPN feature extractor: a 256-channel last layer.
  conv_defs = mobilenet_v2.V2_DEF[:3] + [
      Conv(kernel=[1, 1], stride=1, depth=256)]
  with fast_graphs.new_graph():
    net, _ = _build(64, conv_defs=conv_defs, depth_multiplier=0.5)
    variables = _variables()
  # 1280 and 256 alike are scaled: 256 * .5 = 128.
  assert net.shape.as_list() == [2, 16, 16, 128]
  assert variables['MobilenetV2/Conv_1/weights'] == (1, 1, 16, 128)
  assert variables['MobilenetV2/expanded_conv_1/expand/weights'] == (
      1, 1, 8, 48)


def test_scope_object_and_reuse():
  conv_defs = mobilenet_v2.V2_DEF[:2]
  with fast_graphs.new_graph():
    for reuse in (False, True):
      with tf.compat.v1.variable_scope('MobilenetV2', reuse=reuse) as scope:
        _build(conv_defs=conv_defs, scope=scope)
    variables = _variables()
  assert len(variables) == 3 * 5
  assert variables['MobilenetV2/expanded_conv/project/weights'] == (
      1, 1, 32, 16)


@pytest.mark.parametrize('kwargs,num_updates', [
    ({}, 6),
    ({'is_training': False}, 0),
])
def test_training_scope_batch_norm_mode(kwargs, num_updates):
  with fast_graphs.new_graph():
    _build(arg_scope=mobilenet_v2.training_scope(**kwargs),
           conv_defs=mobilenet_v2.V2_DEF[:2])
    # Conv, depthwise and project batch norms x 2 statistics.
    assert len(_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)) == num_updates


@pytest.mark.parametrize('outer_is_training,num_updates', [(True, 6),
                                                           (False, 0)])
def test_training_scope_is_training_none_defers_to_outer_scope(
    outer_is_training, num_updates):
  with fast_graphs.new_graph():
    with slim.arg_scope([slim.batch_norm], is_training=outer_is_training):
      _build(arg_scope=mobilenet_v2.training_scope(is_training=None),
             conv_defs=mobilenet_v2.V2_DEF[:2])
    assert len(_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)) == num_updates


def test_training_scope_regularizes_only_full_convs():
  with fast_graphs.new_graph():
    _build(arg_scope=mobilenet_v2.training_scope(),
           conv_defs=mobilenet_v2.V2_DEF[:3])
    losses = _collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  # Conv, expanded_conv/project, expanded_conv_1/{expand,project}.
  assert sorted(l.op.name.split('/')[1] for l in losses) == [
      'Conv', 'expanded_conv', 'expanded_conv_1', 'expanded_conv_1']


@pytest.mark.parametrize('kwargs,message', [
    ({'depth_multiplier': 0.}, 'multiplier'),
    ({'output_stride': 3}, 'Output stride'),
    ({'conv_defs': [_Pool(stride=2, depth=8)]}, 'Unknown layer type'),
])
def test_bad_arguments_raise(kwargs, message):
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match=message):
      _build(**kwargs)


def test_bad_input_rank_raises():
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match='rank 4'):
      mobilenet_v2.mobilenet_base(tf.zeros([64, 64, 3]))
