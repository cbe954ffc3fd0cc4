"""SSD MobileNet v2 FPN feature extractor: shapes and checkpoint names.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDMobileNetV2FpnFeatureExtractor on the same inputs
and hyperparams; a model-zoo checkpoint restores only if they match exactly.
Each configuration is built once per module (MobileNet v2 builds are slow).
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobilenet_v2_fpn_feature_extractor
from od_estimator.protos import hyperparams_pb2
from tests import plain_session

# conv_hyperparams of the sample ssd_mobilenet_v2_fpnlite configs.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { random_normal_initializer { stddev: 0.01 mean: 0.0 } }
  batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
"""

_PREFIX = 'FeatureExtractor/MobilenetV2/fpn/'

# Levels 3..7 at depth_multiplier 0.25: FPN depth 256 * 0.25 = 64; inputs
# layer_7 (32 * 0.25 -> 8 -> min_depth 16), layer_14 (96 * 0.25 = 24),
# layer_19 (1280 * 0.25 = 320).
FPN_WEIGHTS = {
    _PREFIX + 'projection_3/weights': [1, 1, 320, 64],
    _PREFIX + 'projection_2/weights': [1, 1, 24, 64],
    _PREFIX + 'smoothing_2/weights': [3, 3, 64, 64],
    _PREFIX + 'projection_1/weights': [1, 1, 16, 64],
    _PREFIX + 'smoothing_1/weights': [3, 3, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_20/weights': [3, 3, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_21/weights': [3, 3, 64, 64],
}

# FPNLite, levels 2..6: layer_19 shrinks to 256 * 0.25 = 64 channels; level 2
# is layer_4 (24 * 0.25 -> min_depth 16).
FPNLITE_WEIGHTS = {
    'FeatureExtractor/MobilenetV2/Conv_1/weights': [1, 1, 80, 64],
    _PREFIX + 'projection_4/weights': [1, 1, 64, 64],
    _PREFIX + 'projection_3/weights': [1, 1, 24, 64],
    _PREFIX + 'smoothing_3/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_3/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'projection_2/weights': [1, 1, 16, 64],
    _PREFIX + 'smoothing_2/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_2/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'projection_1/weights': [1, 1, 16, 64],
    _PREFIX + 'smoothing_1/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_1/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_20/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'bottom_up_Conv2d_20/pointwise_weights': [1, 1, 64, 64],
}


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(**kwargs):
  return (ssd_mobilenet_v2_fpn_feature_extractor
          .SSDMobileNetV2FpnFeatureExtractor(
              is_training=False, depth_multiplier=0.25, min_depth=16,
              pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn(),
              **kwargs))


Built = collections.namedtuple('Built', ['graph', 'maps', 'variables'])


def _build(images_fn, **kwargs):
  graph = tf.Graph()
  with graph.as_default():
    extractor = _extractor(**kwargs)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images_fn()))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
  return Built(graph, maps, variables)


def _weights(variables):
  return {k: v for k, v in variables.items()
          if '/fpn/' in k and 'BatchNorm' not in k and 'biases' not in k}


@pytest.fixture(scope='module')
def fpn_64():
  return _build(lambda: tf.fill([2, 64, 64, 3], 128.0))


@pytest.fixture(scope='module')
def fpnlite_64():
  return _build(lambda: tf.zeros([2, 64, 64, 3]), fpn_min_level=2,
                fpn_max_level=6, use_depthwise=True,
                use_explicit_padding=True, use_native_resize_op=True)


def test_preprocess(execute):
  out = execute(_extractor().preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_levels_3_to_7(fpn_64):
  with fpn_64.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    maps = sess.run(fpn_64.maps)
  # Strides 8, 16, 32 (64 / 8 = 8, 4, 2), then two stride-2 convs: 1, 1.
  assert [m.shape for m in maps] == [
      (2, 8, 8, 64), (2, 4, 4, 64), (2, 2, 2, 64), (2, 1, 1, 64),
      (2, 1, 1, 64)]
  assert all(np.isfinite(m).all() for m in maps)


def test_names(fpn_64):
  assert _weights(fpn_64.variables) == FPN_WEIGHTS
  # Projections have biases and no batch norm; smoothing convs use BN.
  assert _PREFIX + 'projection_1/biases' in fpn_64.variables
  assert _PREFIX + 'smoothing_1/BatchNorm/moving_mean' in fpn_64.variables
  assert len(fpn_64.variables) == 286


def test_fpnlite_levels_2_to_6(fpnlite_64):
  # Strides 4..32 give 16, 8, 4, 2; one added stride-2 conv gives 1.
  assert [m.shape.as_list() for m in fpnlite_64.maps] == [
      [2, 16, 16, 64], [2, 8, 8, 64], [2, 4, 4, 64], [2, 2, 2, 64],
      [2, 1, 1, 64]]
  weights = _weights(fpnlite_64.variables)
  conv_1 = 'FeatureExtractor/MobilenetV2/Conv_1/weights'
  weights[conv_1] = fpnlite_64.variables[conv_1]
  assert weights == FPNLITE_WEIGHTS
  assert len(fpnlite_64.variables) == 292
