"""Tests for od_estimator.nets.mobilenet_v3 (v3 large, small and EdgeTPU).

Expected names, shapes and counts were collected once by building the
original tf-slim nets (nets/mobilenet/mobilenet_v3.py) under their
training_scope; a released checkpoint restores only if they match.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v3
from tests import fast_graphs
from tests import plain_session

ExpandedConv = mobilenet_v3.ExpandedConv

Net = collections.namedtuple('Net', ['net', 'end_points', 'variables',
                                     'num_trainable', 'num_losses',
                                     'num_updates'])

# name: (conv defs, scope, {variable: shape}, total variables, trainable,
#        regularization losses, batch norm updates).
ORIGINAL = {
    'large': (mobilenet_v3.V3_LARGE, 'MobilenetV3', {
        'MobilenetV3/Conv/weights': (3, 3, 3, 16),
        'MobilenetV3/Conv/BatchNorm/gamma': (16,),
        # expansion 1 on 16 channels: no expand conv.
        'MobilenetV3/expanded_conv/depthwise/depthwise_weights':
            (3, 3, 16, 1),
        'MobilenetV3/expanded_conv/project/weights': (1, 1, 16, 16),
        'MobilenetV3/expanded_conv_1/expand/weights': (1, 1, 16, 64),
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights':
            (5, 5, 72, 1),
        # Squeeze-excite: 72 / 4 = 18 -> 24, with biases, no batch norm.
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights':
            (1, 1, 72, 24),
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/biases': (24,),
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/weights':
            (1, 1, 24, 72),
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/biases': (72,),
        'MobilenetV3/expanded_conv_3/project/weights': (1, 1, 72, 40),
        # 80 * 184 / 80 = 184.
        'MobilenetV3/expanded_conv_8/expand/weights': (1, 1, 80, 184),
        'MobilenetV3/expanded_conv_11/squeeze_excite/Conv/weights':
            (1, 1, 672, 168),
        'MobilenetV3/expanded_conv_14/project/weights': (1, 1, 960, 160),
        'MobilenetV3/expanded_conv_14/project/BatchNorm/moving_variance':
            (160,),
        'MobilenetV3/Conv_1/weights': (1, 1, 160, 960),
        # The last conv (after the pool) has biases instead of batch norm.
        'MobilenetV3/Conv_2/weights': (1, 1, 960, 1280),
        'MobilenetV3/Conv_2/biases': (1280,),
    }, 264, 172, 48, 92),
    'small': (mobilenet_v3.V3_SMALL, 'MobilenetV3', {
        'MobilenetV3/Conv/weights': (3, 3, 3, 16),
        'MobilenetV3/expanded_conv/squeeze_excite/Conv/weights':
            (1, 1, 16, 8),
        'MobilenetV3/expanded_conv/project/weights': (1, 1, 16, 16),
        # 16 * 72 / 16 = 72 and 24 * 88 / 24 = 88.
        'MobilenetV3/expanded_conv_1/expand/weights': (1, 1, 16, 72),
        'MobilenetV3/expanded_conv_2/expand/weights': (1, 1, 24, 88),
        'MobilenetV3/expanded_conv_8/depthwise/depthwise_weights':
            (5, 5, 288, 1),
        'MobilenetV3/expanded_conv_10/squeeze_excite/Conv_1/biases': (576,),
        'MobilenetV3/Conv_1/weights': (1, 1, 96, 576),
        'MobilenetV3/Conv_2/weights': (1, 1, 576, 1024),
        'MobilenetV3/Conv_2/biases': (1024,),
    }, 208, 140, 42, 68),
    'edgetpu': (mobilenet_v3.V3_EDGETPU, 'MobilenetEdgeTPU', {
        'MobilenetEdgeTPU/Conv/weights': (3, 3, 3, 32),
        # The first fused block does not expand: a bare projection.
        'MobilenetEdgeTPU/expanded_conv/project/weights': (1, 1, 32, 16),
        # Fused blocks: a full 3x3 expansion conv, no depthwise conv.
        'MobilenetEdgeTPU/expanded_conv_1/expand/weights': (3, 3, 16, 128),
        'MobilenetEdgeTPU/expanded_conv_1/project/weights': (1, 1, 128, 32),
        'MobilenetEdgeTPU/expanded_conv_8/expand/weights': (3, 3, 48, 192),
        'MobilenetEdgeTPU/expanded_conv_9/expand/weights': (1, 1, 48, 384),
        'MobilenetEdgeTPU/expanded_conv_9/depthwise/depthwise_weights':
            (3, 3, 384, 1),
        'MobilenetEdgeTPU/expanded_conv_18/depthwise/depthwise_weights':
            (5, 5, 640, 1),
        'MobilenetEdgeTPU/expanded_conv_21/project/weights':
            (1, 1, 1280, 192),
        'MobilenetEdgeTPU/Conv_1/weights': (1, 1, 192, 1280),
        'MobilenetEdgeTPU/Conv_1/BatchNorm/beta': (1280,),
    }, 290, 174, 45, 116),
}


def _variables():
  return {v.op.name: tuple(v.shape.as_list())
          for v in tf.compat.v1.global_variables()}


def _count(key):
  return len(tf.compat.v1.get_collection(key))


def _build_net(name, size=64):
  conv_defs, scope = ORIGINAL[name][:2]
  with fast_graphs.new_graph():
    with slim.arg_scope(mobilenet_v3.training_scope()):
      net, end_points = mobilenet_v3.mobilenet_base(
          tf.zeros([1, size, size, 3]), conv_defs=conv_defs, scope=scope)
    keys = tf.compat.v1.GraphKeys
    return Net(net, end_points, _variables(),
               _count(keys.TRAINABLE_VARIABLES),
               _count(keys.REGULARIZATION_LOSSES), _count(keys.UPDATE_OPS))


@pytest.fixture(scope='module', params=sorted(ORIGINAL))
def built(request):
  return request.param, _build_net(request.param)


def test_variables_match_original(built):
  name, net = built
  expected, num_variables, num_trainable, num_losses, num_updates = (
      ORIGINAL[name][2:])
  for variable, shape in expected.items():
    assert net.variables.get(variable) == shape, variable
  assert len(net.variables) == num_variables
  assert not any('/Conv_2/BatchNorm' in v for v in net.variables)
  # Squeeze-excite convs are regularized like the other full convs.
  assert (net.num_trainable, net.num_losses, net.num_updates) == (
      num_trainable, num_losses, num_updates)


def test_end_points(built):
  name, net = built
  shapes = {k: v.shape.as_list() for k, v in net.end_points.items()}
  # 64 x 64 input: strides 2, 4, 8, 16, 32 give 32, 16, 8, 4, 2.
  expected = {
      'large': {'layer_1': [1, 32, 32, 16],
                'layer_14/expansion_output': [1, 4, 4, 672],
                'layer_14/depthwise_output': [1, 2, 2, 672],
                'layer_17': [1, 2, 2, 960],
                'layer_18': [1, 1, 1, 960],
                'layer_19': [1, 1, 1, 1280]},
      'small': {'layer_2': [1, 16, 16, 16],
                'layer_10/expansion_output': [1, 4, 4, 288],
                'layer_13': [1, 2, 2, 576],
                'layer_15': [1, 1, 1, 1024]},
      'edgetpu': {'layer_2': [1, 32, 32, 16],
                  # The fused expansion conv carries the stride.
                  'layer_3/expansion_output': [1, 16, 16, 128],
                  'layer_18/expansion_output': [1, 4, 4, 384],
                  'layer_23': [1, 2, 2, 192],
                  'layer_24': [1, 2, 2, 1280]},
  }[name]
  for end_point, shape in expected.items():
    assert shapes[end_point] == shape, end_point
  last = {'large': 'layer_19', 'small': 'layer_15', 'edgetpu': 'layer_24'}
  assert net.net is net.end_points[last[name]]
  if name == 'edgetpu':
    # Neither expansion nor depthwise conv in layer_2; fused blocks (up to
    # layer_10) have no depthwise conv.
    assert sorted(k for k in shapes if k.split('/')[0] == 'layer_2') == [
        'layer_2', 'layer_2/output']
    assert 'layer_10/depthwise_output' not in shapes
    assert 'layer_11/depthwise_output' in shapes


def test_detection_defs_halve_the_last_stage():
  large = [getattr(l, 'depth', None) for l in
           mobilenet_v3.V3_LARGE_DETECTION]
  small = [getattr(l, 'depth', None) for l in
           mobilenet_v3.V3_SMALL_DETECTION]
  assert large[12:19] == [112, 80, 80, 80, 480, None, 1280]
  assert small[8:15] == [48, 48, 48, 48, 288, None, 1024]


def test_hard_swish_and_hard_sigmoid(execute):
  x = np.array([-4., -3., -1., 0., 1., 3., 5.], np.float32)
  swish, sigmoid = execute(
      lambda t: (mobilenet_v3.hard_swish(t), mobilenet_v3.hard_sigmoid(t)),
      [x])
  np.testing.assert_allclose(swish, x * np.clip(x + 3, 0, 6) / 6,
                             rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(sigmoid, np.clip(x + 3, 0, 6) * 0.16667,
                             rtol=1e-6)


def test_squeeze_excite_gates_channels(execute):
  def graph_fn(net):
    with slim.arg_scope([slim.conv2d],
                        weights_initializer=tf.compat.v1.zeros_initializer()):
      return mobilenet_v3.squeeze_excite(net)

  images = np.random.RandomState(3).uniform(-1, 1, [2, 5, 5, 16])
  out = execute(graph_fn, [images.astype(np.float32)])
  # Zero weights and biases: the gate is hard_sigmoid(0) = 3 * 0.16667.
  np.testing.assert_allclose(out, images * 3 * 0.16667, rtol=1e-5)


@pytest.mark.parametrize('residual', [True, False])
def test_residual_flag(execute, residual):
  def graph_fn(images):
    # Zero weights: the projection is 0, the block outputs its shortcut.
    with slim.arg_scope([slim.conv2d],
                        weights_initializer=tf.compat.v1.zeros_initializer()):
      net, _ = mobilenet_v3.mobilenet_base(
          images, conv_defs=[ExpandedConv(stride=1, depth=8, expansion=4,
                                          residual=residual)],
          divisible_by=1, min_depth=1)
    return net

  images = np.random.RandomState(2).uniform(-1, 1, [1, 4, 4, 8])
  net = execute(graph_fn, [images.astype(np.float32)])
  expected = images if residual else np.zeros_like(images)
  np.testing.assert_allclose(net, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('name,final_endpoint,size', [
    ('small', 'layer_10', [2, 2]),
    ('edgetpu', 'layer_7', [8, 8]),
])
def test_explicit_padding_keeps_same_sizes(name, final_endpoint, size):
  conv_defs, scope = ORIGINAL[name][:2]
  with fast_graphs.new_graph():
    _, end_points = mobilenet_v3.mobilenet_base(
        tf.zeros([1, 61, 61, 3]), conv_defs=conv_defs, scope=scope,
        final_endpoint=final_endpoint, use_explicit_padding=True)
  # 5x5 depthwise and 3x3 fused convs are padded like SAME: 61 -> 31, 16,
  # 8, 4, 2.
  assert end_points[final_endpoint].shape.as_list()[1:3] == size


def test_dynamic_size_and_depth_multiplier():
  with fast_graphs.new_graph():
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    _, end_points = mobilenet_v3.mobilenet_base(
        images, conv_defs=mobilenet_v3.V3_SMALL, depth_multiplier=0.5,
        final_endpoint='layer_13')
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      end_points = sess.run(end_points, {images: np.zeros([1, 40, 56, 3])})
  # Squeeze-excite averages over unknown sizes; stride 32 -> 2 x 2.
  assert end_points['layer_13'].shape == (1, 2, 2, 288)
  # 0.5 * 16 = 8; SE on 8 channels: 8 / 4 = 2 -> 8.
  assert end_points['layer_2'].shape == (1, 10, 14, 8)


def test_fused_stride_without_expansion_raises():
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match='needs an expansion'):
      mobilenet_v3.mobilenet_base(
          tf.zeros([1, 32, 32, 16]),
          conv_defs=[ExpandedConv(stride=2, depth=16, expansion=1,
                                  fused=True)])
