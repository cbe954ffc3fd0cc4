"""SSD MobileNet v3 large / small feature extractors.

Expected names, shapes and counts were collected by running the original
TF1 Object Detection API (its SSDMobileNetV3{Large,Small}FeatureExtractor,
and model_builder on the upstream ssdlite_mobilenet_v3_* configs) with the
same inputs and hyperparams; a model-zoo checkpoint restores only if they
match. Each configuration is built once per module (building is slow).
"""
import collections
import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.models import ssd_mobilenet_v3_feature_extractor
from od_estimator.protos import hyperparams_pb2
from od_estimator.config import config_util
from tests import fast_graphs
from tests import plain_session
from tests import upstream_folder


# conv_hyperparams of the upstream ssdlite_mobilenet_v3_* configs.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.97,
               epsilon: 0.001 }
"""

_FE = 'FeatureExtractor/MobilenetV3/'
_CLASSES = {
    'large': ssd_mobilenet_v3_feature_extractor
             .SSDMobileNetV3LargeFeatureExtractor,
    'small': ssd_mobilenet_v3_feature_extractor
             .SSDMobileNetV3SmallFeatureExtractor,
}

# Depth multiplier 1, no depthwise SSD layers, 2 x 128 x 128 images:
# (depths of the two backbone maps, {variable: shape}, variables,
#  regularization losses).
DEFAULT_128 = {
    'large': ([672, 480], {
        _FE + 'Conv/weights': [3, 3, 3, 16],
        _FE + 'expanded_conv_11/squeeze_excite/Conv/weights':
            [1, 1, 672, 168],
        _FE + 'expanded_conv_12/expand/weights': [1, 1, 112, 672],
        # The detection variant halves the last stage: 160 -> 80, 960 -> 480.
        _FE + 'expanded_conv_14/project/weights': [1, 1, 480, 80],
        _FE + 'expanded_conv_14/squeeze_excite/Conv_1/weights':
            [1, 1, 120, 480],
        _FE + 'Conv_1/weights': [1, 1, 80, 480],
        _FE + 'layer_17_2_Conv2d_2_3x3_s2_512/weights': [3, 3, 256, 512],
    }, 302, 55),
    'small': ([288, 288], {
        _FE + 'expanded_conv/squeeze_excite/Conv_1/weights': [1, 1, 8, 16],
        _FE + 'expanded_conv_8/squeeze_excite/Conv_1/weights':
            [1, 1, 72, 288],
        _FE + 'expanded_conv_10/project/weights': [1, 1, 288, 48],
        _FE + 'Conv_1/weights': [1, 1, 48, 288],
        _FE + 'layer_13_1_Conv2d_2_1x1_256/weights': [1, 1, 288, 256],
        _FE + 'layer_13_1_Conv2d_2_1x1_256/BatchNorm/moving_variance':
            [256],
        _FE + 'layer_13_2_Conv2d_5_3x3_s2_128/weights': [3, 3, 64, 128],
    }, 246, 49),
}

# The full upstream model (SSDLite, depthwise box predictors, backbone
# overridden by conv_hyperparams): ({variable: shape}, variables,
# regularization losses, backbone + SSD variables).
UPSTREAM = {
    'large': ('ssdlite_mobilenet_v3_large_320x320_coco.config', {
        _FE + 'layer_17_2_Conv2d_2_3x3_s2_512_depthwise/depthwise_weights':
            [3, 3, 256, 1],
        _FE + 'layer_17_2_Conv2d_2_3x3_s2_512/weights': [1, 1, 256, 512],
        _FE + 'layer_17_1_Conv2d_5_1x1_64/weights': [1, 1, 256, 64],
        'BoxPredictor_0/ClassPredictor/weights': [1, 1, 672, 273],
        'BoxPredictor_1/BoxEncodingPredictor_depthwise/depthwise_weights':
            [3, 3, 480, 1],
        'BoxPredictor_5/ClassPredictor/biases': [546],
    }, 406, 98, 322),
    'small': ('ssdlite_mobilenet_v3_small_320x320_coco.config', {
        _FE + 'layer_13_2_Conv2d_2_3x3_s2_512_depthwise/depthwise_weights':
            [3, 3, 256, 1],
        'BoxPredictor_0/ClassPredictor/weights': [1, 1, 288, 273],
        'BoxPredictor_1/BoxEncodingPredictor_depthwise/depthwise_weights':
            [3, 3, 288, 1],
        'BoxPredictor_5/ClassPredictor/biases': [546],
    }, 350, 88, 266),
}

Built = collections.namedtuple(
    'Built', ['graph', 'extractor', 'images', 'maps', 'variables',
              'regularized'])


def _conv_hyperparams_fn():
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(kind, depth_multiplier=1.0, pad_to_multiple=1, **kwargs):
  return _CLASSES[kind](
      is_training=False, depth_multiplier=depth_multiplier, min_depth=16,
      pad_to_multiple=pad_to_multiple,
      conv_hyperparams_fn=_conv_hyperparams_fn(), **kwargs)


def _graph_facts():
  variables = {v.op.name: v.shape.as_list()
               for v in tf.compat.v1.global_variables()}
  regularized = [loss.op.name for loss in tf.compat.v1.get_collection(
      tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)]
  return variables, regularized


def _build(kind, images_fn, **kwargs):
  """Builds an extractor in the 'FeatureExtractor' scope of a new graph."""
  with fast_graphs.new_graph() as graph:
    extractor = _extractor(kind, **kwargs)
    images = images_fn()
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables, regularized = _graph_facts()
  return Built(graph, extractor, images, maps, variables, regularized)


def _run(built, feed=None):
  with built.graph.as_default(), plain_session.session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(built.maps, feed_dict=feed)


@pytest.fixture(scope='module', params=sorted(_CLASSES))
def default_128(request):
  kind = request.param
  return kind, _build(kind, lambda: tf.fill([2, 128, 128, 3], 128.0))


@pytest.fixture(scope='module', params=sorted(UPSTREAM))
def upstream_model(request):
  """The upstream config's model, with its predict graph at 128 x 128."""
  kind = request.param
  path = os.path.join(upstream_folder.require(), UPSTREAM[kind][0])
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  with fast_graphs.new_graph():
    model = model_builder.build(model_config, is_training=True)
    preprocessed, true_shapes = model.preprocess(tf.zeros([1, 128, 128, 3]))
    model.predict(preprocessed, true_shapes)
    variables, regularized = _graph_facts()
    restore = model.restore_map(fine_tune_checkpoint_type='classification')
    restore = {name: v.op.name for name, v in restore.items()}
  return kind, variables, regularized, restore


def test_preprocess(execute):
  out = execute(_extractor('large').preprocess,
                [np.array([[[[0, 127.5, 255]]]], np.float32)])
  np.testing.assert_allclose(out, [[[[-1, 0, 1]]]], atol=1e-6)


def test_shapes_and_names_128(default_128):
  kind, built = default_128
  depths, expected, num_variables, num_losses = DEFAULT_128[kind]
  # Strides 16 and 32: 8 and 4, then SAME stride-2 layers 2, 1, 1, 1.
  maps = _run(built)
  assert [m.shape for m in maps] == [
      (2, 8, 8, depths[0]), (2, 4, 4, depths[1]), (2, 2, 2, 512),
      (2, 1, 1, 256), (2, 1, 1, 256), (2, 1, 1, 128)]
  assert all(np.isfinite(m).all() for m in maps)
  for name, shape in expected.items():
    assert built.variables.get(name) == shape, name
  assert len(built.variables) == num_variables
  assert len(built.regularized) == num_losses
  # The backbone keeps its own hyperparams: depthwise weights unregularized.
  assert not any('depthwise_weights' in name for name in built.regularized)


def test_restore_from_classification_checkpoint_fn(default_128):
  kind, built = default_128
  with built.graph.as_default():
    tf.compat.v1.get_variable('BoxPredictor/weights', [1])
    restore = built.extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  assert restore['MobilenetV3/Conv/weights'].op.name == (
      'FeatureExtractor/MobilenetV3/Conv/weights')
  assert ('MobilenetV3/expanded_conv_5/squeeze_excite/Conv_1/biases'
          in restore)
  assert not any(name.startswith('FeatureExtractor') or 'BoxPredictor' in name
                 for name in restore)
  assert len(restore) == DEFAULT_128[kind][2]


def test_upstream_config_variables(upstream_model):
  kind, variables, regularized, restore = upstream_model
  expected, num_variables, num_losses, num_restored = UPSTREAM[kind][1:]
  for name, shape in expected.items():
    assert variables.get(name) == shape, name
  assert len(variables) == num_variables
  assert len(regularized) == num_losses
  # override_base_feature_extractor_hyperparams: the config's L2 reaches
  # the backbone's depthwise convs too.
  assert any('MobilenetV3/expanded_conv/depthwise/' in name
             for name in regularized)
  # Classification fine-tuning restores every backbone and SSD variable.
  assert len(restore) == num_restored
  assert restore['MobilenetV3/expanded_conv_1/expand/weights'] == (
      'FeatureExtractor/MobilenetV3/expanded_conv_1/expand/weights')
  assert set(restore.values()) <= set(variables)


def test_dynamic_size_pad_to_multiple_and_num_layers():
  built = _build(
      'small', lambda: tf.compat.v1.placeholder(tf.float32, [2, None, None, 3]),
      depth_multiplier=0.5, pad_to_multiple=32, use_depthwise=True,
      use_explicit_padding=True, num_layers=4)
  maps = _run(built, {built.images: np.zeros([2, 70, 40, 3], np.float32)})
  # Padded to 96 x 64: stride 16 -> 6 x 4, 32 -> 3 x 2, then 2 x 1, 1 x 1.
  # Depths: 288 * .5 = 144 twice, then 512 and 256 * .5.
  assert [m.shape for m in maps] == [
      (2, 6, 4, 144), (2, 3, 2, 144), (2, 2, 1, 256), (2, 1, 1, 128)]
  with pytest.raises(tf.errors.InvalidArgumentError):
    _run(built, {built.images: np.zeros([2, 32, 64, 3], np.float32)})


def test_too_small_static_image():
  with fast_graphs.new_graph():
    extractor = _extractor('large')
    with pytest.raises(ValueError, match='image size must be >= 33'):
      extractor.extract_features(tf.zeros([1, 32, 64, 3]))
    assert not tf.compat.v1.global_variables()


def test_use_hardswish_is_refused():
  path = os.path.join(upstream_folder.require(), UPSTREAM['small'][0])
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  model_config.ssd.feature_extractor.use_hardswish = True
  with pytest.raises(ValueError, match='use_hardswish is not supported by '
                     "feature extractor 'ssd_mobilenet_v3_small'"):
    model_builder.build(model_config, is_training=False)
