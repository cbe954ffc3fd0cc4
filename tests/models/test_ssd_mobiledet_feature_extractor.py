"""SSD MobileDet feature extractors: shapes, checkpoint names, options.

Expected variable names, shapes and counts were collected by running the TF1
Object Detection API's SSDMobileDet*FeatureExtractor classes on the same
inputs and hyperparams; a model-zoo checkpoint restores only if they match.
Each configuration is built once per module and shared by several tests.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobiledet_feature_extractor as mobiledet
from od_estimator.protos import hyperparams_pb2
from tests import fast_graphs
from tests import plain_session

# conv_hyperparams of the upstream ssdlite_mobiledet_*_320x320 configs.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.97,
               epsilon: 0.001 }
"""

EXTRACTORS = {
    'cpu': mobiledet.SSDMobileDetCPUFeatureExtractor,
    'dsp': mobiledet.SSDMobileDetDSPFeatureExtractor,
    'edgetpu': mobiledet.SSDMobileDetEdgeTPUFeatureExtractor,
    'gpu': mobiledet.SSDMobileDetGPUFeatureExtractor,
}

# Feature map depths at depth_multiplier 1.0: C4, C5 of the backbone, then
# the SSDLite layers 512, 256, 256, 128.
MAP_DEPTHS = {
    'cpu': [72, 144, 512, 256, 256, 128],
    'dsp': [144, 240, 512, 256, 256, 128],
    'edgetpu': [96, 384, 512, 256, 256, 128],
    'gpu': [128, 384, 512, 256, 256, 128],
}

# Variables of the original at depth_multiplier 1.0 with use_depthwise:
# (all, trainable, squeeze-excite). Only the CPU net has squeeze-excite
# (swish6 activations); the others differ by their block mix.
VARIABLE_COUNTS = {
    'cpu': (421, 283, 76),
    'dsp': (350, 210, 0),
    'edgetpu': (345, 207, 0),
    'gpu': (310, 186, 0),
}

# First conv, one block of each kind present, the last backbone projection
# and an extra SSD layer, from the original (without 'FeatureExtractor/').
CPU_NAMES = {
    'MobileDetCPU/Conv/weights': [3, 3, 3, 16],
    'MobileDetCPU/Conv/BatchNorm/moving_variance': [16],
    'MobileDetCPU/IBNNoExpansion/SeparableConv2d/depthwise_weights':
        [3, 3, 16, 1],
    'MobileDetCPU/IBNNoExpansion/SqueezeExcite/Conv/weights': [1, 1, 16, 8],
    'MobileDetCPU/IBNNoExpansion/SqueezeExcite/Conv/biases': [8],
    'MobileDetCPU/IBNNoExpansion/SqueezeExcite/Conv_1/weights':
        [1, 1, 8, 16],
    'MobileDetCPU/IBNNoExpansion/Conv/weights': [1, 1, 16, 8],
    'MobileDetCPU/IBN/Conv/weights': [1, 1, 8, 32],
    'MobileDetCPU/IBN/SeparableConv2d/depthwise_weights': [3, 3, 32, 1],
    'MobileDetCPU/IBN/SqueezeExcite/Conv/weights': [1, 1, 32, 8],
    'MobileDetCPU/IBN/Conv_1/weights': [1, 1, 32, 16],
    'MobileDetCPU/IBN_7/SeparableConv2d/depthwise_weights': [5, 5, 288, 1],
    'MobileDetCPU/IBN_7/SqueezeExcite/Conv_1/biases': [288],
    'MobileDetCPU/IBN_17/Conv_1/weights': [1, 1, 832, 144],
    'MobileDetCPU/C5_1_Conv2d_2_1x1_256/weights': [1, 1, 144, 256],
    'MobileDetCPU/C5_2_Conv2d_2_3x3_s2_512_depthwise/depthwise_weights':
        [3, 3, 256, 1],
    'MobileDetCPU/C5_2_Conv2d_2_3x3_s2_512/weights': [1, 1, 256, 512],
    'MobileDetCPU/C5_2_Conv2d_5_3x3_s2_128/BatchNorm/beta': [128],
}
DSP_NAMES = {
    'MobileDetDSP/Conv/weights': [3, 3, 3, 32],
    'MobileDetDSP/IBNNoExpansion/SeparableConv2d/depthwise_weights':
        [3, 3, 32, 1],
    'MobileDetDSP/IBNNoExpansion/Conv/weights': [1, 1, 32, 24],
    'MobileDetDSP/FusedConv/Conv/weights': [3, 3, 24, 96],
    'MobileDetDSP/FusedConv/Conv_1/weights': [1, 1, 96, 32],
    'MobileDetDSP/FusedConv_1/Conv/weights': [3, 3, 32, 128],
    'MobileDetDSP/IBN/Conv/weights': [1, 1, 32, 128],
    'MobileDetDSP/IBN/SeparableConv2d/depthwise_weights': [3, 3, 128, 1],
    'MobileDetDSP/IBN/Conv_1/weights': [1, 1, 128, 32],
    'MobileDetDSP/TuckerConv/Conv/weights': [1, 1, 32, 8],
    'MobileDetDSP/TuckerConv/Conv_1/weights': [3, 3, 8, 24],
    'MobileDetDSP/TuckerConv/Conv_2/weights': [1, 1, 24, 32],
    'MobileDetDSP/TuckerConv_1/Conv_2/weights': [1, 1, 120, 160],
    'MobileDetDSP/IBN_10/Conv_1/weights': [1, 1, 1280, 240],
    'MobileDetDSP/C5_1_Conv2d_2_1x1_256/weights': [1, 1, 240, 256],
    'MobileDetDSP/C5_2_Conv2d_3_3x3_s2_256_depthwise/depthwise_weights':
        [3, 3, 128, 1],
}
EDGETPU_NAMES = {
    'MobileDetEdgeTPU/Conv/weights': [3, 3, 3, 32],
    'MobileDetEdgeTPU/TuckerConv/Conv/weights': [1, 1, 32, 8],
    'MobileDetEdgeTPU/TuckerConv/Conv_1/weights': [3, 3, 8, 16],
    'MobileDetEdgeTPU/TuckerConv/Conv_2/weights': [1, 1, 16, 16],
    'MobileDetEdgeTPU/FusedConv_1/Conv/weights': [3, 3, 16, 64],
    'MobileDetEdgeTPU/FusedConv_1/Conv_1/weights': [1, 1, 64, 16],
    'MobileDetEdgeTPU/IBN_10/Conv/weights': [1, 1, 120, 960],
    'MobileDetEdgeTPU/IBN_10/SeparableConv2d/depthwise_weights':
        [5, 5, 960, 1],
    'MobileDetEdgeTPU/IBN_10/Conv_1/weights': [1, 1, 960, 384],
    'MobileDetEdgeTPU/C5_1_Conv2d_2_1x1_256/weights': [1, 1, 384, 256],
}
GPU_NAMES = {
    'MobileDetGPU/Conv/weights': [3, 3, 3, 32],
    'MobileDetGPU/TuckerConv/Conv_1/weights': [3, 3, 8, 8],
    'MobileDetGPU/TuckerConv/Conv_2/weights': [1, 1, 8, 16],
    'MobileDetGPU/FusedConv_1/Conv/weights': [3, 3, 32, 256],
    'MobileDetGPU/FusedConv_1/Conv_1/weights': [1, 1, 256, 64],
    'MobileDetGPU/TuckerConv_3/Conv/weights': [1, 1, 32, 8],
    'MobileDetGPU/FusedConv_16/Conv/weights': [3, 3, 128, 512],
    'MobileDetGPU/IBN/Conv/weights': [1, 1, 128, 1024],
    'MobileDetGPU/IBN/SeparableConv2d/depthwise_weights': [3, 3, 1024, 1],
    'MobileDetGPU/IBN/Conv_1/weights': [1, 1, 1024, 384],
    'MobileDetGPU/C5_2_Conv2d_2_3x3_s2_512/weights': [1, 1, 256, 512],
}
NAMES = {'cpu': CPU_NAMES, 'dsp': DSP_NAMES, 'edgetpu': EDGETPU_NAMES,
         'gpu': GPU_NAMES}


def _conv_hyperparams_fn():
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=True)


def _extractor(variant, depth_multiplier=1.0, **kwargs):
  kwargs.setdefault('use_depthwise', True)
  kwargs.setdefault('pad_to_multiple', 1)
  return EXTRACTORS[variant](
      is_training=True, depth_multiplier=depth_multiplier, min_depth=16,
      conv_hyperparams_fn=_conv_hyperparams_fn(), **kwargs)


Built = collections.namedtuple(
    'Built', ['graph', 'extractor', 'images', 'maps', 'variables',
              'trainable'])


def _build(extractor, images_fn):
  """Builds `extractor` in the 'FeatureExtractor' scope of a new graph."""
  with fast_graphs.new_graph() as graph:
    images = images_fn()
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    trainable = tf.compat.v1.trainable_variables()
  return Built(graph, extractor, images, maps, variables, trainable)


def _run(built, feed=None):
  with built.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(built.maps, feed_dict=feed)


@pytest.fixture(scope='module')
def built_variants():
  """The four extractors at depth 1.0 (SSDLite layers) on 64x64 images."""
  return {variant: _build(_extractor(variant),
                          lambda: tf.random.uniform([2, 64, 64, 3], 0, 255))
          for variant in EXTRACTORS}


def test_preprocess(execute):
  out = execute(_extractor('gpu').preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


@pytest.mark.parametrize('variant', sorted(EXTRACTORS))
def test_feature_map_shapes(built_variants, variant):
  maps = _run(built_variants[variant])
  # C4 has stride 16 (64 -> 4), C5 stride 32 (-> 2), then SAME stride 2.
  sizes = [4, 2, 1, 1, 1, 1]
  assert [m.shape for m in maps] == [
      (2, size, size, depth)
      for size, depth in zip(sizes, MAP_DEPTHS[variant])]
  assert all(np.isfinite(m).all() for m in maps)


@pytest.mark.parametrize('variant', sorted(EXTRACTORS))
def test_variable_names_and_shapes(built_variants, variant):
  variables = built_variants[variant].variables
  expected = {'FeatureExtractor/' + name: shape
              for name, shape in NAMES[variant].items()}
  assert {name: variables.get(name) for name in expected} == expected


@pytest.mark.parametrize('variant', sorted(EXTRACTORS))
def test_variable_counts(built_variants, variant):
  built = built_variants[variant]
  num_all, num_trainable, num_squeeze_excite = VARIABLE_COUNTS[variant]
  assert len(built.variables) == num_all
  assert len(built.trainable) == num_trainable
  assert sum('SqueezeExcite' in name
             for name in built.variables) == num_squeeze_excite
  # Six SSDLite layers of three convs' variables (1x1, depthwise, 1x1) on
  # top of C5 in every variant: 4 * (5 + 5 + 5) = 60.
  assert sum('/C5_' in name for name in built.variables) == 60


def test_restore_from_classification_checkpoint_fn(built_variants):
  built = built_variants['cpu']
  with built.graph.as_default():
    tf.compat.v1.get_variable('BoxPredictor_0/ClassPredictor/weights', [1])
    restore = built.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  assert restore['MobileDetCPU/Conv/weights'].op.name == (
      'FeatureExtractor/MobileDetCPU/Conv/weights')
  assert set(CPU_NAMES) <= set(restore)
  assert not any(name.startswith('FeatureExtractor') or 'BoxPredictor' in name
                 for name in restore)
  assert len(restore) == VARIABLE_COUNTS['cpu'][0]


def test_depth_multiplier_and_plain_ssd_layers():
  built = _build(_extractor('dsp', depth_multiplier=0.5, use_depthwise=False),
                 lambda: tf.zeros([1, 64, 64, 3]))
  # Backbone widths are rounded half up to multiples of 8 (at least 8):
  # 144 * 0.5 = 72, 240 * 0.5 = 120, stem 32 * 0.5 = 16, tucker rank
  # 16 * 0.25 -> 8; SSD layers are int(depth * 0.5).
  assert [m.shape.as_list()[-1] for m in built.maps] == [
      72, 120, 256, 128, 128, 64]
  variables = built.variables
  assert variables['FeatureExtractor/MobileDetDSP/Conv/weights'] == [
      3, 3, 3, 16]
  assert variables['FeatureExtractor/MobileDetDSP/TuckerConv/Conv/weights'] == [
      1, 1, 16, 8]
  assert variables[
      'FeatureExtractor/MobileDetDSP/C5_2_Conv2d_2_3x3_s2_256/weights'] == [
          3, 3, 128, 256]
  assert len(variables) == 330  # the original's count for this setting


class _TinyMobileDet(mobiledet.SSDMobileDetFeatureExtractorBase):
  """One stride-2 block per stage, every block kind, squeeze-excite on."""
  _TYPE = 'tiny_mobiledet'
  _SCOPE = 'TinyMobileDet'
  _ARCHITECTURE = mobiledet.Architecture(
      stem_filters=8, activation_fn=tf.nn.relu6, use_squeeze_excite=True,
      stages=(
          ('C1', (mobiledet.Block('ibn_no_expansion', 8),)),
          ('C2', (mobiledet.Block('fused', 8, expansion=2, stride=2,
                                  residual=False),)),
          ('C3', (mobiledet.Block('tucker', 8, stride=2, residual=False),)),
          ('C4', (mobiledet.Block('ibn', 16, expansion=2, stride=2,
                                  residual=False),
                  mobiledet.Block('ibn', 16, expansion=2))),
          ('C5', (mobiledet.Block('ibn', 16, expansion=2, stride=2,
                                  residual=False),)),
      ))


def test_dynamic_size_pad_to_multiple_and_num_layers():
  extractor = _TinyMobileDet(
      is_training=False, depth_multiplier=1.0, min_depth=8,
      pad_to_multiple=32, conv_hyperparams_fn=_conv_hyperparams_fn(),
      use_depthwise=True, num_layers=4)
  built = _build(extractor, lambda: tf.compat.v1.placeholder(
      tf.float32, [2, None, None, 3]))
  assert len(built.maps) == 4
  maps = _run(built, {built.images: np.zeros([2, 70, 40, 3], np.float32)})
  # Padded to 96 x 64: strides 16 and 32 give 6 x 4 and 3 x 2, then 2 x 1
  # and 1 x 1.
  assert [m.shape[1:3] for m in maps] == [(6, 4), (3, 2), (2, 1), (1, 1)]
  with pytest.raises(tf.errors.InvalidArgumentError):
    _run(built, {built.images: np.zeros([2, 32, 64, 3], np.float32)})


def test_too_small_static_image():
  with fast_graphs.new_graph():
    extractor = _extractor('gpu')
    with pytest.raises(ValueError, match='image size must be >= 33'):
      extractor.extract_features(tf.zeros([1, 32, 64, 3]))
    assert not tf.compat.v1.global_variables()


@pytest.mark.parametrize('kwargs, field', [
    ({'use_explicit_padding': True}, 'use_explicit_padding'),
    ({'override_base_feature_extractor_hyperparams': True},
     'override_base_feature_extractor_hyperparams'),
    ({'num_layers': 7}, 'num_layers'),
])
def test_unsupported_options(kwargs, field):
  with pytest.raises(ValueError, match=field) as raised:
    _extractor('edgetpu', **kwargs)
  assert 'ssd_mobiledet_edgetpu' in str(raised.value)


def test_round_filters():
  round_filters = mobiledet._round_filters  # pylint: disable=protected-access
  # Half up to a multiple of 8, never below 8.
  cases = [(32, 0.25), (32, 0.75), (72, 0.75), (12, 1.0), (20, 1.0),
           (8, 0.1)]
  assert [round_filters(f, m) for f, m in cases] == [8, 24, 56, 16, 24, 8]


def test_swish6(execute):
  values = np.array([-4.0, -3.0, -1.0, 0.0, 1.5, 3.0, 5.0], np.float32)
  out = execute(mobiledet._swish6, [values])  # pylint: disable=protected-access
  expected = values * np.clip(values + 3.0, 0.0, 6.0) / 6.0
  np.testing.assert_allclose(out, expected, rtol=1e-6)
