"""Checkpoint compatibility with the original's model zoo and fine-tuning.

Part 1 builds full models from the original's sample configs and compares
every variable name and shape with lists derived independently from the
original's architecture: the slim MobileNet layer tables, the SSD extra
layer naming of multi_resolution_feature_maps, the FPN scopes and the box
predictor scopes. Names the released zoo checkpoints are known to hold are
also listed literally.

Part 2 runs restore_map end to end on the tiny demo model: a
classification-only backbone checkpoint, a full detection checkpoint, and
a partial one with missing and shape-mismatched variables, filtered with
variables_helper and loaded with init_from_checkpoint as model_lib does.
"""
import logging
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.builders import model_builder
from od_estimator.nets import mobilenet_v2
from od_estimator.config import config_util
from od_estimator.utils import variables_helper
from tests import tiny_ssd
from tests import upstream_folder

COCO_CLASS_SLOTS = 91  # 90 classes plus background

# ---------------------------------------------------------------------------
# Expected variables, derived from the original's architecture.


def _batch_norm_variables(batch_norm_scope, depth):
  return [(batch_norm_scope + '/' + name, [depth])
          for name in ('gamma', 'beta', 'moving_mean', 'moving_variance')]


def _batch_norm(scope, depth):
  return _batch_norm_variables(scope + '/BatchNorm', depth)


def _conv_bn(scope, kernel):
  """A conv with batch norm and no biases; kernel [h, w, in, out]."""
  return [(scope + '/weights', kernel)] + _batch_norm(scope, kernel[-1])


def _depthwise_bn(scope, size, depth):
  return ([(scope + '/depthwise_weights', [size, size, depth, 1])] +
          _batch_norm(scope, depth))


def _conv_biases(scope, kernel):
  return [(scope + '/weights', kernel), (scope + '/biases', [kernel[-1]])]


# MobileNet v1 depthwise separable layers 1..13: (input, output depth).
_V1_SEPARABLE = [(32, 64), (64, 128), (128, 128), (128, 256), (256, 256),
                 (256, 512)] + [(512, 512)] * 5 + [(512, 1024), (1024, 1024)]


def _mobilenet_v1(scope):
  """MobilenetV1 up to Conv2d_13_pointwise (depth multiplier 1)."""
  variables = _conv_bn(scope + '/Conv2d_0', [3, 3, 3, 32])
  for index, (depth_in, depth_out) in enumerate(_V1_SEPARABLE, start=1):
    layer = '%s/Conv2d_%d' % (scope, index)
    variables += _depthwise_bn(layer + '_depthwise', 3, depth_in)
    variables += _conv_bn(layer + '_pointwise', [1, 1, depth_in, depth_out])
  return variables


# MobileNet v2 inverted residual blocks: (expansion factor, output depth).
_V2_BLOCKS = ([(1, 16)] + [(6, 24)] * 2 + [(6, 32)] * 3 + [(6, 64)] * 4 +
              [(6, 96)] * 3 + [(6, 160)] * 3 + [(6, 320)])


def _mobilenet_v2(scope):
  """MobilenetV2 up to layer_19 (Conv_1), depth multiplier 1."""
  variables = _conv_bn(scope + '/Conv', [3, 3, 3, 32])
  depth_in = 32
  for index, (expansion, depth_out) in enumerate(_V2_BLOCKS):
    block = scope + ('/expanded_conv_%d' % index if index else
                     '/expanded_conv')
    inner = depth_in * expansion
    if expansion > 1:
      variables += _conv_bn(block + '/expand', [1, 1, depth_in, inner])
    variables += _depthwise_bn(block + '/depthwise', 3, inner)
    variables += _conv_bn(block + '/project', [1, 1, inner, depth_out])
    depth_in = depth_out
  return variables + _conv_bn(scope + '/Conv_1', [1, 1, 320, 1280])


def _ssd_extra_layers(scope, base_layer, depth_in, use_depthwise):
  """The four stride-2 layers after `base_layer` (insert_1x1_conv)."""
  variables = []
  for index, depth in enumerate([512, 256, 256, 128], start=2):
    half = depth // 2
    variables += _conv_bn('%s/%s_1_Conv2d_%d_1x1_%d' % (
        scope, base_layer, index, half), [1, 1, depth_in, half])
    layer = '%s/%s_2_Conv2d_%d_3x3_s2_%d' % (scope, base_layer, index, depth)
    if use_depthwise:
      variables += _depthwise_bn(layer + '_depthwise', 3, half)
      variables += _conv_bn(layer, [1, 1, half, depth])
    else:
      variables += _conv_bn(layer, [3, 3, half, depth])
    depth_in = depth
  return variables


def _box_predictors(kernel_size, depths, anchors_per_location):
  """ConvolutionalBoxPredictor heads, one BoxPredictor_<i> per map."""
  variables = []
  for index, (depth, anchors) in enumerate(zip(depths,
                                               anchors_per_location)):
    scope = 'BoxPredictor_%d' % index
    kernel = [kernel_size, kernel_size, depth]
    variables += _conv_biases(scope + '/BoxEncodingPredictor',
                              kernel + [anchors * 4])
    variables += _conv_biases(scope + '/ClassPredictor',
                              kernel + [anchors * COCO_CLASS_SLOTS])
  return variables


# 6 SSD maps: 3 anchors at the lowest (reduce_boxes_in_lowest_layer), then
# 5 aspect ratios + 1 interpolated scale.
_SSD_ANCHORS_PER_LOCATION = [3, 6, 6, 6, 6, 6]
_SSD_MAP_DEPTHS_TAIL = [512, 256, 256, 128]


def _expected_ssd_mobilenet_v1():
  scope = 'FeatureExtractor/MobilenetV1'
  return (_mobilenet_v1(scope) +
          _ssd_extra_layers(scope, 'Conv2d_13_pointwise', 1024, False) +
          _box_predictors(1, [512, 1024] + _SSD_MAP_DEPTHS_TAIL,
                          _SSD_ANCHORS_PER_LOCATION))


def _expected_ssd_mobilenet_v2():
  scope = 'FeatureExtractor/MobilenetV2'
  # layer_15 is expanded_conv_13: 96 * 6 = 576 channels after expansion.
  return (_mobilenet_v2(scope) +
          _ssd_extra_layers(scope, 'layer_19', 1280, True) +
          _box_predictors(3, [576, 1280] + _SSD_MAP_DEPTHS_TAIL,
                          _SSD_ANCHORS_PER_LOCATION))


def _expected_ssd_mobilenet_v1_fpn():
  """FPN levels 3-7 at depth 256, 4-layer weight-shared towers."""
  scope = 'FeatureExtractor/MobilenetV1'
  fpn = scope + '/fpn'
  variables = _mobilenet_v1(scope)
  # Lateral 1x1 projections (biases, no batch norm) of Conv2d_5, 11 and 13.
  for level, depth_in in enumerate([256, 512, 1024], start=1):
    variables += _conv_biases('%s/projection_%d' % (fpn, level),
                              [1, 1, depth_in, 256])
  for level in (1, 2):
    variables += _conv_bn('%s/smoothing_%d' % (fpn, level), [3, 3, 256, 256])
  for index in (14, 15):
    variables += _conv_bn('%s/bottom_up_Conv2d_%d' % (fpn, index),
                          [3, 3, 256, 256])
  predictor = 'WeightSharedConvolutionalBoxPredictor'
  anchors = 6  # 3 aspect ratios x 2 scales per octave
  for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
    for layer in range(4):
      conv = '%s/%s/conv2d_%d' % (predictor, tower, layer)
      # Shared kernel without biases; batch norm per feature map.
      variables.append((conv + '/weights', [3, 3, 256, 256]))
      for feature in range(5):
        variables += _batch_norm_variables(
            '%s/BatchNorm/feature_%d' % (conv, feature), 256)
  variables += _conv_biases(predictor + '/BoxPredictor',
                            [3, 3, 256, anchors * 4])
  variables += _conv_biases(predictor + '/ClassPredictor',
                            [3, 3, 256, anchors * COCO_CLASS_SLOTS])
  return variables


# Entries the released zoo checkpoints hold (ssd_mobilenet_v1_coco,
# ssd_mobilenet_v2_coco, ssd_mobilenet_v1_fpn_shared_box_predictor), with
# 3 anchors x 91 classes at the lowest SSD map and 6 x 91 elsewhere.
_ZOO_ENTRIES = {
    'ssd_mobilenet_v1_coco': [
        ('FeatureExtractor/MobilenetV1/Conv2d_0/weights', [3, 3, 3, 32]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_depthwise/'
         'depthwise_weights', [3, 3, 1024, 1]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/BatchNorm/'
         'moving_variance', [1024]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/'
         'weights', [1, 1, 1024, 256]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_5_3x3_s2_'
         '128/weights', [3, 3, 64, 128]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_5_3x3_s2_'
         '128/BatchNorm/moving_mean', [128]),
        ('BoxPredictor_0/BoxEncodingPredictor/weights', [1, 1, 512, 12]),
        ('BoxPredictor_0/ClassPredictor/biases', [273]),
        ('BoxPredictor_1/ClassPredictor/weights', [1, 1, 1024, 546]),
    ],
    'ssd_mobilenet_v2_coco': [
        ('FeatureExtractor/MobilenetV2/Conv/weights', [3, 3, 3, 32]),
        ('FeatureExtractor/MobilenetV2/expanded_conv/depthwise/'
         'depthwise_weights', [3, 3, 32, 1]),
        ('FeatureExtractor/MobilenetV2/expanded_conv_16/project/weights',
         [1, 1, 960, 320]),
        ('FeatureExtractor/MobilenetV2/Conv_1/BatchNorm/moving_variance',
         [1280]),
        ('FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_256/weights',
         [1, 1, 1280, 256]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512_'
         'depthwise/depthwise_weights', [3, 3, 256, 1]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights',
         [1, 1, 256, 512]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_128/'
         'BatchNorm/gamma', [128]),
        ('BoxPredictor_0/BoxEncodingPredictor/weights', [3, 3, 576, 12]),
        ('BoxPredictor_0/ClassPredictor/biases', [273]),
        ('BoxPredictor_5/ClassPredictor/weights', [3, 3, 128, 546]),
    ],
    'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync': [
        ('FeatureExtractor/MobilenetV1/Conv2d_5_pointwise/weights',
         [1, 1, 256, 256]),
        ('FeatureExtractor/MobilenetV1/fpn/projection_3/weights',
         [1, 1, 1024, 256]),
        ('FeatureExtractor/MobilenetV1/fpn/smoothing_1/BatchNorm/gamma',
         [256]),
        ('FeatureExtractor/MobilenetV1/fpn/bottom_up_Conv2d_15/weights',
         [3, 3, 256, 256]),
        ('WeightSharedConvolutionalBoxPredictor/BoxPredictionTower/conv2d_3/'
         'BatchNorm/feature_4/moving_variance', [256]),
        ('WeightSharedConvolutionalBoxPredictor/ClassPredictionTower/'
         'conv2d_0/weights', [3, 3, 256, 256]),
        ('WeightSharedConvolutionalBoxPredictor/BoxPredictor/biases', [24]),
        ('WeightSharedConvolutionalBoxPredictor/ClassPredictor/weights',
         [3, 3, 256, 546]),
    ],
}

# config name -> (expected variables, total count, number of anchors).
# Counts: v1 = 135 backbone + 40 extra layers + 24 predictor; v2 = 260 +
# 60 + 24; FPN = 135 + 26 FPN + 8 shared kernels + 160 per-map batch norm
# + 4 heads. Anchors: 19x19x3 + (10x10 + 5x5 + 3x3 + 2x2 + 1x1) x 6 at
# 300x300; (80^2 + 40^2 + 20^2 + 10^2 + 5^2) x 6 at 640x640.
_FULL_MODELS = {
    'ssd_mobilenet_v1_coco': (_expected_ssd_mobilenet_v1, 199, 1917),
    'ssd_mobilenet_v2_coco': (_expected_ssd_mobilenet_v2, 344, 1917),
    'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync': (
        _expected_ssd_mobilenet_v1_fpn, 333, 51150),
}


@pytest.fixture(scope='module', params=sorted(_FULL_MODELS))
def full_model(request):
  """(config name, {variable name: shape}, class prediction shape)."""
  path = os.path.join(upstream_folder.require(), request.param + '.config')
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  size = model_config.ssd.image_resizer.fixed_shape_resizer.height
  with tf.Graph().as_default():
    model = model_builder.build(model_config, is_training=True,
                                add_summaries=False)
    predictions = model.predict(tf.zeros([1, size, size, 3]), None)
    variables = tf.compat.v1.global_variables()
    shapes = {v.op.name: v.shape.as_list() for v in variables}
    assert len(shapes) == len(variables)
    class_shape = predictions[
        'class_predictions_with_background'].shape.as_list()
  return request.param, shapes, class_shape


def test_full_model_variables_match_the_original(full_model):
  name, shapes, _ = full_model
  expected_fn, expected_count, _ = _FULL_MODELS[name]
  expected = dict(expected_fn())
  assert len(expected) == expected_count  # the derivation has no duplicates
  missing = sorted(set(expected) - set(shapes))
  unexpected = sorted(set(shapes) - set(expected))
  wrong_shapes = sorted((n, shapes[n], expected[n]) for n in expected
                        if n in shapes and shapes[n] != expected[n])
  assert (missing, unexpected, wrong_shapes) == ([], [], [])
  assert len(shapes) == expected_count


def test_full_model_holds_the_zoo_checkpoint_entries(full_model):
  name, shapes, _ = full_model
  for entry_name, entry_shape in _ZOO_ENTRIES[name]:
    assert shapes.get(entry_name) == entry_shape, entry_name


def test_full_model_anchors_and_class_outputs(full_model):
  name, _, class_shape = full_model
  assert class_shape == [1, _FULL_MODELS[name][2], COCO_CLASS_SLOTS]


# ---------------------------------------------------------------------------
# restore_map end to end on the tiny demo model.

TINY_SIZE = 64


def _build_tiny_detector(num_classes=3, is_training=True):
  """The tiny demo detector in the default graph, after predict()."""
  model_config = tiny_ssd.model_config(TINY_SIZE)
  model_config.ssd.num_classes = num_classes
  model = model_builder.build(model_config, is_training=is_training,
                              add_summaries=False)
  images, true_shapes = model.preprocess(
      tf.zeros([1, TINY_SIZE, TINY_SIZE, 3]))
  model.predict(images, true_shapes)
  return model


def _save_random_values(variables, path):
  """Initializes the variables to random positive values, saves only them."""
  rng = np.random.RandomState(7)
  # Feeding initial values sets them without adding ops to the graph.
  random_values = {
      v.initial_value: rng.uniform(0.5, 1.5, v.shape.as_list()).astype(
          v.dtype.base_dtype.as_numpy_dtype) for v in variables}
  with tf.compat.v1.Session() as sess:
    sess.run([v.initializer for v in variables], feed_dict=random_values)
    return tf.compat.v1.train.Saver(variables).save(
        sess, path, write_meta_graph=False)


def _fine_tune(model, checkpoint, checkpoint_type, load_all=False):
  """restore_map, filtered and loaded as model_lib does.

  Returns:
    (restore map, available, missing, mismatched, {checkpoint name: value
    after initialization}).
  """
  wanted = model.restore_map(fine_tune_checkpoint_type=checkpoint_type,
                             load_all_detection_checkpoint_vars=load_all)
  available, missing, mismatched = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          wanted, checkpoint, include_global_step=False))
  tf.compat.v1.train.init_from_checkpoint(checkpoint, available)
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    values = sess.run(wanted)
  return wanted, available, missing, mismatched, values


def _assert_restored(values, names, checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  for name in names:
    np.testing.assert_array_equal(values[name], reader.get_tensor(name),
                                  err_msg=name)


@pytest.fixture(scope='module')
def classification_checkpoint(tmp_path_factory):
  """MobileNet v2 x0.25 alone under 'MobilenetV2', with a 1001-way head.

  Laid out as slim's classification checkpoints: no 'FeatureExtractor/'
  prefix, logits the detector lacks, a global step.
  """
  path = str(tmp_path_factory.mktemp('classification') / 'model.ckpt')
  with tf.Graph().as_default():
    images = tf.zeros([1, TINY_SIZE, TINY_SIZE, 3])
    with slim.arg_scope(mobilenet_v2.training_scope(is_training=False)):
      net, _ = mobilenet_v2.mobilenet_base(images, depth_multiplier=0.25,
                                           scope='MobilenetV2')
      slim.conv2d(net, 1001, [1, 1], activation_fn=None, normalizer_fn=None,
                  scope='MobilenetV2/Logits/Conv2d_1c_1x1')
    tf.compat.v1.train.get_or_create_global_step()
    return _save_random_values(tf.compat.v1.global_variables(), path)


@pytest.fixture(scope='module')
def detection_checkpoint(tmp_path_factory):
  """Every variable of the tiny detector (3 classes) and a global step."""
  path = str(tmp_path_factory.mktemp('detection') / 'model.ckpt')
  with tf.Graph().as_default():
    _build_tiny_detector(is_training=False)
    tf.compat.v1.train.get_or_create_global_step()
    return _save_random_values(tf.compat.v1.global_variables(), path)


def test_classification_checkpoint_restores_the_backbone(
    classification_checkpoint):
  with tf.Graph().as_default():
    model = _build_tiny_detector()
    wanted, available, missing, mismatched, values = _fine_tune(
        model, classification_checkpoint, 'classification')
  # Checkpoint names: the detector's backbone without 'FeatureExtractor/'.
  assert all(name.startswith('MobilenetV2/') for name in wanted)
  assert wanted['MobilenetV2/Conv/weights'].op.name == (
      'FeatureExtractor/MobilenetV2/Conv/weights')
  assert not any(name.startswith('BoxPredictor') for name in wanted)
  # Only the SSD layers added after layer_19 are new; no shape differs.
  assert missing == sorted(name for name in wanted if '/layer_19_' in name)
  assert len(missing) == 60  # 4 layers x 3 convs x (weights + 4 BN)
  assert mismatched == []
  assert len(available) == 260  # the whole MobileNet v2 trunk
  _assert_restored(values, available, classification_checkpoint)


def test_detection_checkpoint_restores_fully(detection_checkpoint):
  with tf.Graph().as_default():
    model = _build_tiny_detector()
    tf.compat.v1.train.get_or_create_global_step()
    # By default only the feature extractor is taken from a detector.
    extractor_map = model.restore_map('detection')
    wanted, available, missing, mismatched, values = _fine_tune(
        model, detection_checkpoint, 'detection', load_all=True)
  model_names = set(wanted) - {'global_step'}
  assert set(extractor_map) == {name for name in model_names
                                if name.startswith('FeatureExtractor/')}
  assert any(name.startswith('BoxPredictor_') for name in model_names)
  assert (missing, mismatched) == ([], [])
  assert set(available) == model_names
  _assert_restored(values, model_names, detection_checkpoint)


@pytest.fixture(scope='module')
def partial_checkpoint(tmp_path_factory):
  """A 2-class detector's variables, the last SSD layer's left out.

  Returns:
    (checkpoint prefix, sorted names left out).
  """
  path = str(tmp_path_factory.mktemp('partial') / 'model.ckpt')
  with tf.Graph().as_default():
    _build_tiny_detector(num_classes=2, is_training=False)
    variables = tf.compat.v1.global_variables()
    left_out = sorted(v.op.name for v in variables
                      if '/layer_19_2_Conv2d_5_' in v.op.name)
    kept = [v for v in variables if v.op.name not in left_out]
    return _save_random_values(kept, path), left_out


def test_partial_checkpoint_restores_the_rest_and_reports_skipped(
    partial_checkpoint, caplog):
  checkpoint, left_out = partial_checkpoint
  assert len(left_out) == 10  # depthwise and pointwise conv, with BN
  with tf.Graph().as_default():
    model = _build_tiny_detector(num_classes=3)
    wanted = model.restore_map('detection',
                               load_all_detection_checkpoint_vars=True)
    # Unfiltered, the checkpoint cannot initialize this model.
    with pytest.raises(ValueError):
      tf.compat.v1.train.init_from_checkpoint(checkpoint, wanted)
    with caplog.at_level(logging.WARNING):
      variables_helper.get_variables_available_in_checkpoint(
          wanted, checkpoint)
    _, available, missing, mismatched, values = _fine_tune(
        model, checkpoint, 'detection', load_all=True)
  assert missing == left_out
  # Class heads: anchors x (2 + 1) in the checkpoint, x (3 + 1) here.
  num_maps = 6
  assert [entry[0] for entry in mismatched] == sorted(
      'BoxPredictor_%d/ClassPredictor/%s' % (index, kind)
      for index in range(num_maps) for kind in ('biases', 'weights'))
  for _, checkpoint_shape, model_shape in mismatched:
    assert checkpoint_shape[:-1] == model_shape[:-1]
    assert checkpoint_shape[-1] // 3 == model_shape[-1] // 4
  skipped = set(missing) | {entry[0] for entry in mismatched}
  assert set(available) == set(wanted) - skipped
  _assert_restored(values, available, checkpoint)
  # One warning names what was skipped and why.
  warning = '\n'.join(r.getMessage() for r in caplog.records
                      if r.levelno == logging.WARNING)
  assert 'Restoring %d of %d' % (len(available), len(wanted)) in warning
  assert left_out[0] in warning
  assert 'BoxPredictor_0/ClassPredictor/biases [9] vs [12]' in warning
