"""SSD MobileNet v1 feature extractor: shapes, checkpoint names, options.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDMobileNetV1FeatureExtractor on the same inputs and
hyperparams; a model-zoo checkpoint restores only if they match exactly.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobilenet_v1_feature_extractor
from od_estimator.protos import hyperparams_pb2
from tests import plain_session

# conv_hyperparams of the sample ssd_mobilenet_v1_coco config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""

_PREFIX = 'FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_'

# Extra layers at depth_multiplier 0.25, min_depth 16: Conv2d_13_pointwise
# has 1024 * 0.25 = 256 channels; layer_depth 512/256/256/128 * 0.25 =
# 128/64/64/32 with 1x1 convs of half depth (64/32/32/16).
EXTRA_LAYERS = {
    _PREFIX + '1_Conv2d_2_1x1_64/weights': [1, 1, 256, 64],
    _PREFIX + '2_Conv2d_2_3x3_s2_128/weights': [3, 3, 64, 128],
    _PREFIX + '1_Conv2d_3_1x1_32/weights': [1, 1, 128, 32],
    _PREFIX + '2_Conv2d_3_3x3_s2_64/weights': [3, 3, 32, 64],
    _PREFIX + '1_Conv2d_4_1x1_32/weights': [1, 1, 64, 32],
    _PREFIX + '2_Conv2d_4_3x3_s2_64/weights': [3, 3, 32, 64],
    _PREFIX + '1_Conv2d_5_1x1_16/weights': [1, 1, 64, 16],
    _PREFIX + '2_Conv2d_5_3x3_s2_32/weights': [3, 3, 16, 32],
}


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(**kwargs):
  return ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor(
      is_training=False, depth_multiplier=0.25, min_depth=16,
      pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn(),
      **kwargs)


Built = collections.namedtuple(
    'Built', ['graph', 'extractor', 'maps', 'variables', 'regularized'])


def _build(images, graph=None, **kwargs):
  graph = graph or tf.Graph()
  with graph.as_default():
    extractor = _extractor(**kwargs)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(
          extractor.preprocess(tf.constant(images)))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    regularized = [loss.name for loss in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)]
  return Built(graph, extractor, maps, variables, regularized)


@pytest.fixture(scope='module')
def default_64():
  return _build(np.full([2, 64, 64, 3], 128, np.float32))


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1: 0 -> -1, 127.5 -> 0, 255 -> 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_shapes_64x64(default_64):
  with default_64.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    maps = sess.run(default_64.maps)
  # Conv2d_11 (stride 16, 512 * 0.25 = 128), Conv2d_13 (stride 32, 256),
  # then SAME stride-2 layers of depth 128, 64, 64, 32.
  assert [m.shape for m in maps] == [
      (2, 4, 4, 128), (2, 2, 2, 256), (2, 1, 1, 128), (2, 1, 1, 64),
      (2, 1, 1, 64), (2, 1, 1, 32)]
  assert all(np.isfinite(m).all() for m in maps)


def test_names(default_64):
  variables = default_64.variables
  extra = {k: v for k, v in variables.items() if k.startswith(_PREFIX) and
           k.endswith('weights')}
  assert extra == EXTRA_LAYERS
  # Conv2d_0 has max(32 * 0.25, min_depth 16) = 16 channels.
  assert variables[
      'FeatureExtractor/MobilenetV1/Conv2d_1_depthwise/depthwise_weights'] == [
          3, 3, 16, 1]
  assert len(variables) == 175


def test_depthwise_weights_are_regularized(default_64):
  # The SSD extractor asks mobilenet_v1_arg_scope to regularize them.
  assert any('MobilenetV1/Conv2d_1_depthwise/' in name
             for name in default_64.regularized)


def test_num_layers_and_reuse():
  images = np.zeros([1, 64, 64, 3], np.float32)
  built = _build(images, num_layers=4)
  assert len(built.maps) == 4
  assert not any('Conv2d_4_' in name or 'Conv2d_5_' in name
                 for name in built.variables if '_pointwise_' in name)
  # Rebuilding with reuse_weights shares every variable.
  rebuilt = _build(images, graph=built.graph, num_layers=4,
                   reuse_weights=True)
  assert rebuilt.variables == built.variables


def test_too_small_static_image():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='image size must be >= 33'):
      _extractor().extract_features(tf.zeros([1, 64, 32, 3]))


def test_restore_from_classification_checkpoint_fn(default_64):
  with default_64.graph.as_default():
    restore = default_64.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  assert restore['MobilenetV1/Conv2d_0/weights'].op.name == (
      'FeatureExtractor/MobilenetV1/Conv2d_0/weights')
  assert 'MobilenetV1/Conv2d_13_pointwise/BatchNorm/moving_variance' in (
      restore)
  assert len(restore) == 175
