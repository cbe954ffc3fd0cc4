"""SSD Inception v3 feature extractor: shapes, checkpoint names, options.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDInceptionV3FeatureExtractor on the same inputs and
hyperparams; a model-zoo checkpoint restores only if they match exactly.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.models import ssd_inception_v3_feature_extractor
from od_estimator.protos import hyperparams_pb2

# conv_hyperparams of the sample ssd_inception_v3_coco config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""

_SCOPE = 'FeatureExtractor/InceptionV3/'

# Depth multiplier 1 (the model zoo's): Mixed_7c has 2048 channels, the new
# layers 512/256/128 with 1x1 convs of half depth 256/128/64 (indices 3-5,
# after the three backbone maps).
EXPECTED_VARIABLES = {
    'Conv2d_1a_3x3/weights': [3, 3, 3, 32],
    'Conv2d_1a_3x3/BatchNorm/moving_mean': [32],
    'Conv2d_4a_3x3/weights': [3, 3, 80, 192],
    'Mixed_5d/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 288, 64],
    'Mixed_6e/Branch_1/Conv2d_0c_7x1/weights': [7, 1, 192, 192],
    'Mixed_7a/Branch_0/Conv2d_1a_3x3/BatchNorm/gamma': [320],
    'Mixed_7c/Branch_1/Conv2d_0b_1x3/weights': [1, 3, 384, 384],
    'Mixed_7c_1_Conv2d_3_1x1_256/weights': [1, 1, 2048, 256],
    'Mixed_7c_2_Conv2d_3_3x3_s2_512/weights': [3, 3, 256, 512],
    'Mixed_7c_2_Conv2d_3_3x3_s2_512/BatchNorm/beta': [512],
    'Mixed_7c_1_Conv2d_4_1x1_128/weights': [1, 1, 512, 128],
    'Mixed_7c_2_Conv2d_4_3x3_s2_256/weights': [3, 3, 128, 256],
    'Mixed_7c_1_Conv2d_5_1x1_64/weights': [1, 1, 256, 64],
    'Mixed_7c_2_Conv2d_5_3x3_s2_128/weights': [3, 3, 64, 128],
}
# Totals of the original at this setting.
NUM_VARIABLES = 500
NUM_REGULARIZED = 100


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(override=True, pad_to_multiple=1):
  return ssd_inception_v3_feature_extractor.SSDInceptionV3FeatureExtractor(
      is_training=False, depth_multiplier=1.0, min_depth=16,
      pad_to_multiple=pad_to_multiple,
      conv_hyperparams_fn=_conv_hyperparams_fn(),
      override_base_feature_extractor_hyperparams=override)


Built = collections.namedtuple('Built', ['graph', 'extractor', 'maps',
                                         'variables', 'regularized'])


@pytest.fixture(scope='module')
def smallest():
  """The extractor on the smallest image the backbone takes, 75x75."""
  graph = tf.Graph()
  with graph.as_default():
    extractor = _extractor()
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(
          tf.constant(np.full([1, 75, 75, 3], 128, np.float32))))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    regularized = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  return Built(graph, extractor, maps, variables, regularized)


def test_registered():
  assert ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS[
      'ssd_inception_v3'] is (
          ssd_inception_v3_feature_extractor.SSDInceptionV3FeatureExtractor)


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1: 0 -> -1, 127.5 -> 0, 255 -> 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_shapes_75x75(smallest):
  with smallest.graph.as_default(), tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    maps = sess.run(smallest.maps)
  # VALID layers, size -> (size - 3) // 2 + 1 at stride 2, size - 2 at
  # stride 1: 75 -> 37 (1a) -> 35 (2a) -> 17 (pool 3a) -> 15 (4a)
  # -> 7 (pool 5a, Mixed_5b..5d) -> 3 (Mixed_6a..6e) -> 1 (Mixed_7a..7c).
  # Depths: Mixed_5d 64 + 64 + 96 + 64 = 288, Mixed_6e 4 * 192 = 768,
  # Mixed_7c 320 + 2 * 384 + 2 * 384 + 192 = 2048; then SAME stride-2
  # layers on 1x1 maps of depth 512, 256, 128.
  assert [m.shape for m in maps] == [
      (1, 7, 7, 288), (1, 3, 3, 768), (1, 1, 1, 2048), (1, 1, 1, 512),
      (1, 1, 1, 256), (1, 1, 1, 128)]
  assert all(np.isfinite(m).all() for m in maps)


def test_checkpoint_names(smallest):
  variables = smallest.variables
  for name, shape in EXPECTED_VARIABLES.items():
    assert variables.get(_SCOPE + name) == shape, name
  assert all(name.startswith(_SCOPE) for name in variables)
  # conv_hyperparams' batch norm replaces biases in the backbone too.
  assert not any(name.endswith('biases') for name in variables)
  assert len(variables) == NUM_VARIABLES
  assert len(smallest.regularized) == NUM_REGULARIZED


def test_restore_from_classification_checkpoint_fn(smallest):
  with smallest.graph.as_default():
    restore = smallest.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  name = 'InceptionV3/Mixed_7c/Branch_3/Conv2d_0b_1x1/weights'
  assert restore[name].op.name == 'FeatureExtractor/' + name
  assert len(restore) == NUM_VARIABLES


def test_backbone_always_takes_conv_hyperparams():
  assert _extractor(override=False)._override_base_feature_extractor_hyperparams


@pytest.mark.parametrize('shape, pad_to_multiple, minimum', [
    ([1, 32, 80, 3], 1, 33),  # the original's guard on the raw image
    ([1, 80, 74, 3], 1, 75),  # 74 -> ... -> 2 at Mixed_6e: no Mixed_7a
    ([1, 64, 64, 3], 32, 75),  # padding to 64 is still too small
])
def test_too_small_static_image(shape, pad_to_multiple, minimum):
  with tf.Graph().as_default():
    with pytest.raises(ValueError,
                       match='image size must be >= {}'.format(minimum)):
      _extractor(pad_to_multiple=pad_to_multiple).extract_features(
          tf.zeros(shape))
    # Nothing was built before the check.
    assert not tf.compat.v1.global_variables()
