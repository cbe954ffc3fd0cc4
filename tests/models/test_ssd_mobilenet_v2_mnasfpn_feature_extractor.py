"""SSD MobileNet v2 MnasFPN feature extractor: shapes and checkpoint names.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDMobileNetV2MnasFPNFeatureExtractor at
depth_multiplier 1.0, min_depth 16 on 64x64 images; a model-zoo checkpoint
restores only if they match exactly. The graph is built once per module.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.models import ssd_mobilenet_v2_mnasfpn_feature_extractor
from tests import fast_graphs
from tests import plain_session

_FE = 'FeatureExtractor/'
_FPN = _FE + 'MnasFPN/'

# A sample of the original's variables. Block 0 of cell 0 reads C4 (96
# channels) and C5 (320), expands to 256 and outputs 48 channels; block 3
# reads block 0 at level 4 through a max-pool `Downsample` (no variables)
# then a 1x1 conv; it and only it has a 5x5 kernel.
EXPECTED_VARIABLES = {
    _FE + 'MobilenetV2/Conv/weights': [3, 3, 3, 32],
    _FE + 'MobilenetV2/expanded_conv_16/project/weights': [1, 1, 960, 320],
    _FPN + 'C6_Conv1x1/weights': [1, 1, 320, 48],
    _FPN + 'C6_Conv1x1/BatchNorm/moving_variance': [48],
    _FPN + 'cell_0/block_0/input_0/Conv1x1/weights': [1, 1, 96, 256],
    _FPN + 'cell_0/block_0/input_1/Conv1x1/weights': [1, 1, 320, 256],
    _FPN + 'cell_0/block_0/input_1/Conv1x1/BatchNorm/gamma': [256],
    _FPN + 'cell_0/block_0/SepConv/depthwise_weights': [3, 3, 256, 1],
    _FPN + 'cell_0/block_0/SepConv/pointwise_weights': [1, 1, 256, 48],
    _FPN + 'cell_0/block_0/SepConv/BatchNorm/beta': [48],
    _FPN + 'cell_0/block_3/input_0/Conv1x1/weights': [1, 1, 48, 128],
    _FPN + 'cell_3/block_3/SepConv/depthwise_weights': [5, 5, 128, 1],
    _FPN + 'cell_3/block_4/SepConv/BatchNorm/moving_mean': [48],
}
NUM_VARIABLES = 580
NUM_MNASFPN_VARIABLES = 325
NUM_REGULARIZATION_LOSSES = 131

Extractor = (ssd_mobilenet_v2_mnasfpn_feature_extractor
             .SSDMobileNetV2MnasFPNFeatureExtractor)
Built = collections.namedtuple('Built', ['graph', 'extractor', 'maps',
                                         'variables', 'num_regularizers'])


def _extractor(**kwargs):
  params = dict(is_training=False, depth_multiplier=1.0, min_depth=16,
                pad_to_multiple=1, conv_hyperparams_fn=None)
  params.update(kwargs)
  return Extractor(**params)


def _build(image_shape, **kwargs):
  with fast_graphs.new_graph() as graph:
    extractor = _extractor(**kwargs)
    images = tf.random.uniform(image_shape, 0.0, 255.0)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    num_regularizers = len(tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES))
  return Built(graph, extractor, maps, variables, num_regularizers)


def _run(built):
  with built.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(built.maps)


@pytest.fixture(scope='module')
def mnasfpn_64():
  # 64x64 is the smallest input whose levels 3..6 halve exactly (8..1).
  return _build([2, 64, 64, 3])


def test_registered():
  assert ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS[
      'ssd_mobilenet_v2_mnasfpn'] is Extractor


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_levels_3_to_6_at_64x64(mnasfpn_64):
  maps = _run(mnasfpn_64)
  # Strides 8, 16, 32, 64; every map has additional_layer_depth channels.
  assert [m.shape for m in maps] == [
      (2, 8, 8, 48), (2, 4, 4, 48), (2, 2, 2, 48), (2, 1, 1, 48)]
  assert all(np.isfinite(m).all() for m in maps)


def test_variable_names_and_shapes(mnasfpn_64):
  variables = mnasfpn_64.variables
  assert {k: variables.get(k) for k in EXPECTED_VARIABLES} == (
      EXPECTED_VARIABLES)
  assert len(variables) == NUM_VARIABLES
  assert sum(k.startswith(_FPN) for k in variables) == NUM_MNASFPN_VARIABLES
  # The backbone stops at layer_18: no 1280-channel Conv_1.
  assert not any('MobilenetV2/Conv_1/' in k for k in variables)
  # 1x1 convs have no biases (batch norm) and C6_Conv1x1 no regularizer.
  assert not any(k.endswith('/biases') for k in variables)
  assert mnasfpn_64.num_regularizers == NUM_REGULARIZATION_LOSSES


def test_restore_from_classification_checkpoint_names(mnasfpn_64):
  with mnasfpn_64.graph.as_default():
    restore = (mnasfpn_64.extractor
               .restore_from_classification_checkpoint_fn('FeatureExtractor'))
  assert 'MobilenetV2/Conv/weights' in restore
  assert 'MobilenetV2/expanded_conv_16/project/weights' in restore
  assert 'MnasFPN/C6_Conv1x1/weights' in restore
  assert restore['MobilenetV2/Conv/weights'].op.name == (
      'FeatureExtractor/MobilenetV2/Conv/weights')
  assert not any(name.startswith('FeatureExtractor/') for name in restore)
  assert len(restore) == NUM_VARIABLES


def test_explicit_padding_native_resize_and_multiplier():
  built = _build([1, 64, 128, 3], depth_multiplier=0.5,
                 use_explicit_padding=True, use_native_resize_op=True)
  # 48 * 0.5 = 24 channels; non-square inputs keep their aspect ratio.
  assert [m.shape for m in _run(built)] == [
      (1, 8, 16, 24), (1, 4, 8, 24), (1, 2, 4, 24), (1, 1, 2, 24)]
  assert built.variables[_FPN + 'cell_0/block_0/input_0/Conv1x1/weights'] == (
      [1, 1, 48, 128])


@pytest.mark.parametrize('size', [96, 120])
def test_input_size_not_dividing_to_level_6_raises(size):
  with fast_graphs.new_graph():
    extractor = _extractor()
    with pytest.raises(ValueError, match='multiples of 64'):
      extractor.extract_features(tf.zeros([1, size, size, 3]))


def test_too_small_input_raises():
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match='>= 33'):
      _extractor().extract_features(tf.zeros([1, 32, 64, 3]))


def test_dynamic_input_size_raises():
  with fast_graphs.new_graph():
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    with pytest.raises(ValueError, match='static image height and width'):
      _extractor().extract_features(images)


@pytest.mark.parametrize('kwargs, message', [
    ({'fpn_min_level': 2}, 'fpn.min_level 3'),
    ({'fpn_max_level': 7}, 'fpn.max_level 6'),
    ({'use_depthwise': True}, 'use_depthwise'),
])
def test_unsupported_options_raise(kwargs, message):
  with pytest.raises(ValueError, match=message):
    _extractor(**kwargs)


def test_inconsistent_head_def_raises():
  block = ssd_mobilenet_v2_mnasfpn_feature_extractor.Block
  reads_ahead = [block(inputs=(0, 5), output_level=level, kernel_size=3,
                       expansion_size=8) for level in (3, 4, 5, 6)]
  with pytest.raises(ValueError, match='not built yet'):
    _extractor(head_def={'feature_levels': [3, 4, 5, 6],
                         'spec': [reads_ahead]})
  wrong_order = list(reversed(reads_ahead))
  with pytest.raises(ValueError, match='expected the feature levels'):
    _extractor(head_def={'feature_levels': [3, 4, 5, 6],
                         'spec': [wrong_order]})


def test_depth_rounding():
  module = ssd_mobilenet_v2_mnasfpn_feature_extractor
  depth = module._depth_fn(0.35, 16)  # pylint: disable=protected-access
  # Rounded to multiples of 8 as the backbone: 48 * 0.35 = 16.8 -> 16,
  # 256 * 0.35 = 89.6 -> 88, 96 * 0.35 = 33.6 -> 32; min_depth bounds it.
  assert [depth(d) for d in (48, 256, 96, 8)] == [16, 88, 32, 16]
