"""SSD Inception v2 feature extractor: shapes, checkpoint names, options.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDInceptionV2FeatureExtractor on the same inputs and
hyperparams; a model-zoo checkpoint restores only if they match exactly.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.models import ssd_inception_v2_feature_extractor
from od_estimator.protos import hyperparams_pb2

# conv_hyperparams of the sample ssd_inception_v2_coco config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""

_SCOPE = 'FeatureExtractor/InceptionV2/'

# Depth multiplier 1 (the model zoo's): Mixed_5c has 1024 channels, the new
# layers 512/256/256/128 with 1x1 convs of half depth 256/128/128/64.
EXPECTED_VARIABLES = {
    # Separable stem: depthwise multiplier min(int(64 / 3), 8) = 8, so the
    # pointwise conv sees 3 * 8 = 24 channels.
    'Conv2d_1a_7x7/depthwise_weights': [7, 7, 3, 8],
    'Conv2d_1a_7x7/pointwise_weights': [1, 1, 24, 64],
    'Conv2d_1a_7x7/BatchNorm/gamma': [64],
    'Conv2d_2c_3x3/weights': [3, 3, 64, 192],
    'Mixed_4a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 96, 96],
    'Mixed_4c/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 576, 128],
    'Mixed_5c/Branch_3/Conv2d_0b_1x1/BatchNorm/moving_variance': [128],
    'Mixed_5c_1_Conv2d_2_1x1_256/weights': [1, 1, 1024, 256],
    'Mixed_5c_2_Conv2d_2_3x3_s2_512/weights': [3, 3, 256, 512],
    'Mixed_5c_2_Conv2d_2_3x3_s2_512/BatchNorm/beta': [512],
    'Mixed_5c_1_Conv2d_3_1x1_128/weights': [1, 1, 512, 128],
    'Mixed_5c_2_Conv2d_3_3x3_s2_256/weights': [3, 3, 128, 256],
    'Mixed_5c_1_Conv2d_4_1x1_128/weights': [1, 1, 256, 128],
    'Mixed_5c_2_Conv2d_4_3x3_s2_256/weights': [3, 3, 128, 256],
    'Mixed_5c_1_Conv2d_5_1x1_64/weights': [1, 1, 256, 64],
    'Mixed_5c_2_Conv2d_5_3x3_s2_128/weights': [3, 3, 64, 128],
}
# Totals of the original at this setting.
NUM_VARIABLES = 386
NUM_REGULARIZED = 78


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(override=True, **kwargs):
  return ssd_inception_v2_feature_extractor.SSDInceptionV2FeatureExtractor(
      is_training=False, depth_multiplier=1.0, min_depth=16,
      pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn(),
      override_base_feature_extractor_hyperparams=override, **kwargs)


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
    regularized = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  return Built(graph, extractor, maps, variables, regularized)


@pytest.fixture(scope='module')
def default_128():
  return _build(np.full([1, 128, 128, 3], 128, np.float32))


def test_registered():
  assert ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS[
      'ssd_inception_v2'] is (
          ssd_inception_v2_feature_extractor.SSDInceptionV2FeatureExtractor)


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1: 0 -> -1, 127.5 -> 0, 255 -> 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_shapes_128x128(default_128):
  with default_128.graph.as_default(), tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    maps = sess.run(default_128.maps)
  # Mixed_4c: stride 16, 128 / 16 = 8, 192 + 128 + 128 + 128 = 576 channels.
  # Mixed_5c: stride 32, 4x4, 352 + 320 + 224 + 128 = 1024 channels.
  # Then SAME stride-2 layers: ceil(4 / 2) = 2, then 1, 1, 1.
  assert [m.shape for m in maps] == [
      (1, 8, 8, 576), (1, 4, 4, 1024), (1, 2, 2, 512), (1, 1, 1, 256),
      (1, 1, 1, 256), (1, 1, 1, 128)]
  assert all(np.isfinite(m).all() for m in maps)


def test_checkpoint_names(default_128):
  variables = default_128.variables
  for name, shape in EXPECTED_VARIABLES.items():
    assert variables.get(_SCOPE + name) == shape, name
  assert all(name.startswith(_SCOPE) for name in variables)
  assert len(variables) == NUM_VARIABLES
  assert len(default_128.regularized) == NUM_REGULARIZED


def test_backbone_uses_conv_hyperparams(default_128):
  # Batch norm (no biases) and L2 regularization come from conv_hyperparams.
  variables = default_128.variables
  assert _SCOPE + 'Conv2d_2b_1x1/BatchNorm/moving_mean' in variables
  assert _SCOPE + 'Conv2d_2b_1x1/biases' not in variables
  assert any('InceptionV2/Mixed_3b/' in loss.name
             for loss in default_128.regularized)


def test_restore_from_classification_checkpoint_fn(default_128):
  with default_128.graph.as_default():
    restore = default_128.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  name = 'InceptionV2/Mixed_5c/Branch_0/Conv2d_0a_1x1/weights'
  assert restore[name].op.name == 'FeatureExtractor/' + name
  assert len(restore) == NUM_VARIABLES


def test_backbone_always_takes_conv_hyperparams():
  assert _extractor(override=False)._override_base_feature_extractor_hyperparams


def test_too_small_static_image():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='image size must be >= 33'):
      _extractor().extract_features(tf.zeros([1, 64, 32, 3]))
