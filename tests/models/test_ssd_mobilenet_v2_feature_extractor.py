"""SSD MobileNet v2 feature extractor: shapes, checkpoint names, options.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDMobileNetV2FeatureExtractor on the same inputs and
hyperparams; a model-zoo checkpoint restores only if they match exactly.

Building MobileNet v2 is slow on TF 2.15 (keras-legacy batch norm), so each
configuration is built once per module and shared by several tests.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobilenet_v2_feature_extractor
from od_estimator.protos import hyperparams_pb2
from tests import fast_graphs
from tests import plain_session

# conv_hyperparams of the sample ssd_mobilenet_v2_coco config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""

# Extra SSD layers at depth_multiplier 1.0 (min_depth 16): layer_19 has 1280
# channels, layer_depth [512, 256, 256, 128] with 1x1 convs of half depth.
EXTRA_LAYERS_DEPTH_1 = {
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_256/weights':
        [1, 1, 1280, 256],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights':
        [3, 3, 256, 512],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_3_1x1_128/weights':
        [1, 1, 512, 128],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_3_3x3_s2_256/weights':
        [3, 3, 128, 256],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_4_1x1_128/weights':
        [1, 1, 256, 128],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_4_3x3_s2_256/weights':
        [3, 3, 128, 256],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_5_1x1_64/weights':
        [1, 1, 256, 64],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_128/weights':
        [3, 3, 64, 128],
}

# SSDLite extra layers at depth_multiplier 0.25 (min_depth 16).
EXTRA_LAYERS_DEPTHWISE = {
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_64/weights':
        [1, 1, 320, 64],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_128_depthwise/'
    'depthwise_weights': [3, 3, 64, 1],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_128/weights':
        [1, 1, 64, 128],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_3_1x1_32/weights':
        [1, 1, 128, 32],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_3_3x3_s2_64_depthwise/'
    'depthwise_weights': [3, 3, 32, 1],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_3_3x3_s2_64/weights':
        [1, 1, 32, 64],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_4_1x1_32/weights':
        [1, 1, 64, 32],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_4_3x3_s2_64_depthwise/'
    'depthwise_weights': [3, 3, 32, 1],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_4_3x3_s2_64/weights':
        [1, 1, 32, 64],
    'FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_5_1x1_16/weights':
        [1, 1, 64, 16],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_32_depthwise/'
    'depthwise_weights': [3, 3, 16, 1],
    'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_32/weights':
        [1, 1, 16, 32],
}


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(depth_multiplier=0.25, pad_to_multiple=1, **kwargs):
  return ssd_mobilenet_v2_feature_extractor.SSDMobileNetV2FeatureExtractor(
      is_training=False, depth_multiplier=depth_multiplier, min_depth=16,
      pad_to_multiple=pad_to_multiple,
      conv_hyperparams_fn=_conv_hyperparams_fn(), **kwargs)


Built = collections.namedtuple(
    'Built', ['graph', 'extractor', 'images', 'maps', 'variables',
              'regularized'])


def _build(images_fn, **kwargs):
  """Builds an extractor in the 'FeatureExtractor' scope of a new graph."""
  with fast_graphs.new_graph() as graph:
    extractor = _extractor(**kwargs)
    images = images_fn()
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    regularized = [loss.name for loss in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)]
  return Built(graph, extractor, images, maps, variables, regularized)


def _run(built, feed=None):
  with built.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(built.maps, feed_dict=feed)


def _shapes(feature_maps):
  return [m.shape.as_list() for m in feature_maps]


@pytest.fixture(scope='module')
def default_64():
  return _build(lambda: tf.fill([2, 64, 64, 3], 128.0))


@pytest.fixture(scope='module')
def depth_1_300():
  return _build(lambda: tf.zeros([1, 300, 300, 3]), depth_multiplier=1.0)


@pytest.fixture(scope='module')
def ssdlite_dynamic():
  """SSDLite with every option on, on images of unknown size."""
  return _build(
      lambda: tf.compat.v1.placeholder(tf.float32, [2, None, None, 3]),
      pad_to_multiple=32, use_depthwise=True, use_explicit_padding=True,
      override_base_feature_extractor_hyperparams=True)


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1: 0 -> -1, 127.5 -> 0, 255 -> 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_shapes_64x64(default_64):
  maps = _run(default_64)
  # Strides 16 and 32: 64 / 16 = 4, 64 / 32 = 2, then SAME stride 2.
  # Depths: layer_15 expands its input (layer_14: 96 * 0.25 = 24) 6x = 144;
  # layer_19 1280 * 0.25 = 320; extra 512/256/256/128 * 0.25 = 128/64/64/32.
  assert [m.shape for m in maps] == [
      (2, 4, 4, 144), (2, 2, 2, 320), (2, 1, 1, 128), (2, 1, 1, 64),
      (2, 1, 1, 64), (2, 1, 1, 32)]
  assert all(np.isfinite(m).all() for m in maps)
  # Count from the original with the same hyperparams (weights, biases-free
  # convs, BatchNorm beta/gamma/moving mean/variance).
  assert len(default_64.variables) == 300


def test_shapes_names_300x300_depth_1(depth_1_300):
  variables = depth_1_300.variables
  # 300 / 16 -> 19, 300 / 32 -> 10, then 5, 3, 2, 1.
  assert _shapes(depth_1_300.maps) == [
      [1, 19, 19, 576], [1, 10, 10, 1280], [1, 5, 5, 512], [1, 3, 3, 256],
      [1, 2, 2, 256], [1, 1, 1, 128]]
  extra = {k: v for k, v in variables.items() if '/layer_19_' in k and
           k.endswith('weights')}
  assert extra == EXTRA_LAYERS_DEPTH_1
  # Backbone names of the slim classification checkpoint.
  assert variables['FeatureExtractor/MobilenetV2/Conv/weights'] == [
      3, 3, 3, 32]
  assert variables['FeatureExtractor/MobilenetV2/Conv_1/weights'] == [
      1, 1, 320, 1280]
  assert variables[
      'FeatureExtractor/MobilenetV2/expanded_conv_14/expand/weights'] == [
          1, 1, 160, 960]
  assert variables[
      'FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/'
      'BatchNorm/moving_variance'] == [512]
  assert len(variables) == 300


def test_ssdlite_names(ssdlite_dynamic):
  variables = ssdlite_dynamic.variables
  extra = {k: v for k, v in variables.items() if '/layer_19_' in k and
           k.endswith('weights')}
  assert extra == EXTRA_LAYERS_DEPTHWISE
  assert len(variables) == 320


def test_override_base_hyperparams(default_64, ssdlite_dynamic):
  def depthwise_regularized(built):
    return any('MobilenetV2/expanded_conv/depthwise/' in name
               for name in built.regularized)

  # training_scope leaves depthwise weights unregularized; the SSD
  # hyperparams (l2 on all convs) reach the backbone only when overriding.
  assert not depthwise_regularized(default_64)
  assert depthwise_regularized(ssdlite_dynamic)


def test_dynamic_size_pad_to_multiple(ssdlite_dynamic):
  images = np.zeros([2, 70, 40, 3], np.float32)
  maps = _run(ssdlite_dynamic, {ssdlite_dynamic.images: images})
  # Padded to 96 x 64: strides 16 and 32 give 6 x 4 and 3 x 2, then stride-2
  # layers 2 x 1, 1 x 1, ...
  assert [m.shape[1:3] for m in maps] == [
      (6, 4), (3, 2), (2, 1), (1, 1), (1, 1), (1, 1)]
  with pytest.raises(tf.errors.InvalidArgumentError):
    _run(ssdlite_dynamic,
         {ssdlite_dynamic.images: np.zeros([2, 32, 64, 3], np.float32)})


def test_too_small_static_image():
  with fast_graphs.new_graph():
    extractor = _extractor()
    with pytest.raises(ValueError, match='image size must be >= 33'):
      extractor.extract_features(tf.zeros([1, 32, 64, 3]))
    assert not tf.compat.v1.global_variables()


def test_restore_from_classification_checkpoint_fn(default_64):
  with default_64.graph.as_default():
    tf.compat.v1.get_variable('BoxPredictor/weights', [1])
    restore = default_64.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  assert restore['MobilenetV2/Conv/weights'].op.name == (
      'FeatureExtractor/MobilenetV2/Conv/weights')
  assert 'MobilenetV2/expanded_conv_16/project/BatchNorm/moving_mean' in (
      restore)
  assert 'MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_32/weights' in restore
  assert not any(name.startswith('FeatureExtractor') or 'BoxPredictor' in name
                 for name in restore)
  assert len(restore) == 300
