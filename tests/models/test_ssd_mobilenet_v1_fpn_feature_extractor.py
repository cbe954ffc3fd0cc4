"""SSD MobileNet v1 FPN feature extractor: shapes and checkpoint names.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDMobileNetV1FpnFeatureExtractor on the same inputs
and hyperparams; a model-zoo checkpoint restores only if they match exactly.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobilenet_v1_fpn_feature_extractor
from od_estimator.protos import hyperparams_pb2
from tests import plain_session

# conv_hyperparams of the sample ssd_mobilenet_v1_fpn config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { random_normal_initializer { stddev: 0.01 mean: 0.0 } }
  batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
"""

_PREFIX = 'FeatureExtractor/MobilenetV1/fpn/'

# Levels 3..7 at depth_multiplier 0.25: FPN depth 256 * 0.25 = 64; inputs
# Conv2d_5 (256 * 0.25 = 64), Conv2d_11 (128), Conv2d_13 (256) pointwise.
FPN_WEIGHTS = {
    _PREFIX + 'projection_3/weights': [1, 1, 256, 64],
    _PREFIX + 'projection_2/weights': [1, 1, 128, 64],
    _PREFIX + 'smoothing_2/weights': [3, 3, 64, 64],
    _PREFIX + 'projection_1/weights': [1, 1, 64, 64],
    _PREFIX + 'smoothing_1/weights': [3, 3, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_14/weights': [3, 3, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_15/weights': [3, 3, 64, 64],
}

# FPNLite, levels 2..6: Conv2d_12/13 shrink to 512 * 0.25 = 128 and
# 256 * 0.25 = 64 channels; level 2 is Conv2d_3_pointwise (128 * 0.25 = 32).
FPNLITE_WEIGHTS = {
    'FeatureExtractor/MobilenetV1/Conv2d_12_pointwise/weights':
        [1, 1, 128, 128],
    'FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/weights':
        [1, 1, 128, 64],
    _PREFIX + 'projection_4/weights': [1, 1, 64, 64],
    _PREFIX + 'projection_3/weights': [1, 1, 128, 64],
    _PREFIX + 'smoothing_3/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_3/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'projection_2/weights': [1, 1, 64, 64],
    _PREFIX + 'smoothing_2/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_2/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'projection_1/weights': [1, 1, 32, 64],
    _PREFIX + 'smoothing_1/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'smoothing_1/pointwise_weights': [1, 1, 64, 64],
    _PREFIX + 'bottom_up_Conv2d_14/depthwise_weights': [3, 3, 64, 1],
    _PREFIX + 'bottom_up_Conv2d_14/pointwise_weights': [1, 1, 64, 64],
}


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


Built = collections.namedtuple('Built', ['graph', 'maps', 'variables'])


def _build(images, **kwargs):
  graph = tf.Graph()
  with graph.as_default():
    extractor = (ssd_mobilenet_v1_fpn_feature_extractor
                 .SSDMobileNetV1FpnFeatureExtractor(
                     is_training=False, depth_multiplier=0.25, min_depth=16,
                     pad_to_multiple=1,
                     conv_hyperparams_fn=_conv_hyperparams_fn(), **kwargs))
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(
          extractor.preprocess(tf.constant(images)))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
  return Built(graph, maps, variables)


def _weights(variables):
  return {k: v for k, v in variables.items()
          if '/fpn/' in k and 'BatchNorm' not in k and 'biases' not in k}


@pytest.fixture(scope='module')
def fpn_64():
  return _build(np.full([2, 64, 64, 3], 128, np.float32))


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
  assert len(fpn_64.variables) == 161


def test_fpnlite_levels_2_to_6():
  built = _build(np.zeros([2, 64, 64, 3], np.float32), fpn_min_level=2,
                 fpn_max_level=6, use_depthwise=True,
                 use_explicit_padding=True, use_native_resize_op=True)
  # Strides 4..32 give 16, 8, 4, 2; one added stride-2 conv gives 1.
  assert [m.shape.as_list() for m in built.maps] == [
      [2, 16, 16, 64], [2, 8, 8, 64], [2, 4, 4, 64], [2, 2, 2, 64],
      [2, 1, 1, 64]]
  weights = _weights(built.variables)
  for name in ['Conv2d_12_pointwise', 'Conv2d_13_pointwise']:
    name = 'FeatureExtractor/MobilenetV1/%s/weights' % name
    weights[name] = built.variables[name]
  assert weights == FPNLITE_WEIGHTS
  assert len(built.variables) == 167
