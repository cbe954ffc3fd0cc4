"""SSD Inception v2/v3 feature extractors: shapes, checkpoint names, options.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDInceptionV2/V3FeatureExtractor on the same inputs
and hyperparams; a model-zoo checkpoint restores only if they match exactly.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.models import ssd_inception_feature_extractor as inception
from od_estimator.protos import hyperparams_pb2
from tests import fast_graphs
from tests import plain_session

# conv_hyperparams of the sample ssd_inception_v2/v3_coco configs.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""

Spec = collections.namedtuple('Spec', [
    'extractor_class', 'size', 'map_shapes', 'variables', 'num_variables',
    'num_regularized', 'restore_name'])

# Depth multiplier 1 (the model zoo's).
SPECS = {
    # 128x128. Mixed_4c: stride 16, 8x8, 192 + 128 + 128 + 128 = 576
    # channels; Mixed_5c: stride 32, 4x4, 352 + 320 + 224 + 128 = 1024; then
    # SAME stride-2 layers 512/256/256/128 (1x1 convs of half depth): 2, 1,
    # 1, 1.
    'ssd_inception_v2': Spec(
        inception.SSDInceptionV2FeatureExtractor, 128,
        [(1, 8, 8, 576), (1, 4, 4, 1024), (1, 2, 2, 512), (1, 1, 1, 256),
         (1, 1, 1, 256), (1, 1, 1, 128)],
        {
            # Separable stem: depthwise multiplier min(int(64 / 3), 8) = 8,
            # so the pointwise conv sees 3 * 8 = 24 channels.
            'Conv2d_1a_7x7/depthwise_weights': [7, 7, 3, 8],
            'Conv2d_1a_7x7/pointwise_weights': [1, 1, 24, 64],
            'Conv2d_1a_7x7/BatchNorm/gamma': [64],
            'Conv2d_2b_1x1/BatchNorm/moving_mean': [64],
            'Conv2d_2c_3x3/weights': [3, 3, 64, 192],
            'Mixed_4a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 96, 96],
            'Mixed_4c/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 576, 128],
            'Mixed_5c/Branch_3/Conv2d_0b_1x1/BatchNorm/moving_variance':
                [128],
            'Mixed_5c_1_Conv2d_2_1x1_256/weights': [1, 1, 1024, 256],
            'Mixed_5c_2_Conv2d_2_3x3_s2_512/weights': [3, 3, 256, 512],
            'Mixed_5c_2_Conv2d_2_3x3_s2_512/BatchNorm/beta': [512],
            'Mixed_5c_1_Conv2d_3_1x1_128/weights': [1, 1, 512, 128],
            'Mixed_5c_2_Conv2d_3_3x3_s2_256/weights': [3, 3, 128, 256],
            'Mixed_5c_1_Conv2d_4_1x1_128/weights': [1, 1, 256, 128],
            'Mixed_5c_2_Conv2d_4_3x3_s2_256/weights': [3, 3, 128, 256],
            'Mixed_5c_1_Conv2d_5_1x1_64/weights': [1, 1, 256, 64],
            'Mixed_5c_2_Conv2d_5_3x3_s2_128/weights': [3, 3, 64, 128],
        }, 386, 78, 'InceptionV2/Mixed_5c/Branch_0/Conv2d_0a_1x1/weights'),
    # 75x75, the smallest the backbone takes. VALID layers: 75 -> 37 (1a)
    # -> 35 (2a) -> 17 (pool 3a) -> 15 (4a) -> 7 (pool 5a, Mixed_5b..5d)
    # -> 3 (Mixed_6a..6e) -> 1 (Mixed_7a..7c). Depths: Mixed_5d 288,
    # Mixed_6e 4 * 192 = 768, Mixed_7c 2048; then SAME stride-2 layers on
    # 1x1 maps of depth 512, 256, 128.
    'ssd_inception_v3': Spec(
        inception.SSDInceptionV3FeatureExtractor, 75,
        [(1, 7, 7, 288), (1, 3, 3, 768), (1, 1, 1, 2048), (1, 1, 1, 512),
         (1, 1, 1, 256), (1, 1, 1, 128)],
        {
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
        }, 500, 100, 'InceptionV3/Mixed_7c/Branch_3/Conv2d_0b_1x1/weights'),
}
TYPES = sorted(SPECS)


def _conv_hyperparams_fn():
  """Returns the conv_hyperparams_fn built from CONV_HYPERPARAMS."""
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(extractor_type, override=True, pad_to_multiple=1):
  return SPECS[extractor_type].extractor_class(
      is_training=False, depth_multiplier=1.0, min_depth=16,
      pad_to_multiple=pad_to_multiple,
      conv_hyperparams_fn=_conv_hyperparams_fn(),
      override_base_feature_extractor_hyperparams=override)


Built = collections.namedtuple(
    'Built', ['spec', 'graph', 'extractor', 'maps', 'variables',
              'regularized'])


@pytest.fixture(scope='module', params=TYPES)
def built(request):
  """The extractor built on a grey image of its spec's size."""
  spec = SPECS[request.param]
  with fast_graphs.new_graph() as graph:
    extractor = _extractor(request.param)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(
          tf.constant(np.full([1, spec.size, spec.size, 3], 128,
                              np.float32))))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    regularized = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  return Built(spec, graph, extractor, maps, variables, regularized)


@pytest.mark.parametrize('extractor_type', TYPES)
def test_registered(extractor_type):
  assert ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS[
      extractor_type] is SPECS[extractor_type].extractor_class


@pytest.mark.parametrize('extractor_type', TYPES)
def test_preprocess(execute, extractor_type):
  out = execute(_extractor(extractor_type).preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  # 2 / 255 * x - 1: 0 -> -1, 127.5 -> 0, 255 -> 1.
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_feature_map_shapes(built):
  with built.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    maps = sess.run(built.maps)
  assert [m.shape for m in maps] == built.spec.map_shapes
  assert all(np.isfinite(m).all() for m in maps)


def test_checkpoint_names(built):
  scope = 'FeatureExtractor/%s/' % built.extractor._SCOPE
  for name, shape in built.spec.variables.items():
    assert built.variables.get(scope + name) == shape, name
  assert all(name.startswith(scope) for name in built.variables)
  assert len(built.variables) == built.spec.num_variables
  # conv_hyperparams' batch norm and L2 reach the backbone: no biases.
  assert not any(name.endswith('biases') for name in built.variables)
  assert len(built.regularized) == built.spec.num_regularized


def test_restore_from_classification_checkpoint_fn(built):
  with built.graph.as_default():
    restore = built.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  name = built.spec.restore_name
  assert restore[name].op.name == 'FeatureExtractor/' + name
  assert len(restore) == built.spec.num_variables


@pytest.mark.parametrize('extractor_type', TYPES)
def test_backbone_always_takes_conv_hyperparams(extractor_type):
  extractor = _extractor(extractor_type, override=False)
  assert extractor._override_base_feature_extractor_hyperparams


@pytest.mark.parametrize('extractor_type, shape, pad_to_multiple, minimum', [
    ('ssd_inception_v2', [1, 64, 32, 3], 1, 33),
    ('ssd_inception_v3', [1, 32, 80, 3], 1, 33),  # the original's guard
    ('ssd_inception_v3', [1, 80, 74, 3], 1, 75),  # no Mixed_7a from 2x2
    ('ssd_inception_v3', [1, 64, 64, 3], 32, 75),  # padded 64 is too small
])
def test_too_small_static_image(extractor_type, shape, pad_to_multiple,
                                minimum):
  with fast_graphs.new_graph():
    with pytest.raises(ValueError,
                       match='image size must be >= {}'.format(minimum)):
      _extractor(extractor_type, pad_to_multiple=pad_to_multiple
                ).extract_features(tf.zeros(shape))
    # Nothing was built before the check.
    assert not tf.compat.v1.global_variables()
