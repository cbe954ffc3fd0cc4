"""Convolutional box predictors: output shapes, checkpoint names, numbers.

Expected variable names/shapes were collected by running the TF1 Object
Detection API's own predictors on the same inputs and configs; a model-zoo
checkpoint restores only if these match exactly.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from google.protobuf import text_format

from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.core import box_predictor
from od_estimator.predictors import convolutional_box_predictor as cbp
from od_estimator.predictors.heads import box_head
from od_estimator.predictors.heads import class_head
from od_estimator.protos import box_predictor_pb2
from od_estimator.protos import hyperparams_pb2

BOXES = box_predictor.BOX_ENCODINGS
CLASSES = box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND

# ssd_mobilenet_v1_coco's conv_hyperparams.
SSD_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""
# ssd_resnet50_v1_fpn's conv_hyperparams.
FPN_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.0004 } }
  initializer { random_normal_initializer { stddev: 0.01 mean: 0.0 } }
  batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
"""
NO_BN_HYPERPARAMS = """
  activation: RELU_6,
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
"""
NUM_CLASSES = 5  # 6 class slots with background.


def _hyperparams(text, is_training=True):
  config = text_format.Parse(text, hyperparams_pb2.Hyperparams())
  return hyperparams_builder.build(config, is_training)


def _ones_hyperparams():
  # All-ones weights and zero biases make every output hand-computable.
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_initializer=tf.compat.v1.ones_initializer(),
                      activation_fn=None) as scope:
    return scope


def _bn(prefix, depth):
  """The four batch norm variables (scale and center on) under prefix."""
  return {prefix + '/' + name: [depth] for name in
          ('gamma', 'beta', 'moving_mean', 'moving_variance')}


def _conv_predictor(hyperparams_fn, is_training=True, kernel_size=1,
                    use_depthwise=False, min_depth=0, max_depth=0,
                    num_layers_before_predictor=0, use_dropout=False,
                    dropout_keep_prob=0.8, apply_sigmoid_to_scores=False,
                    class_prediction_bias_init=0.0, clip_range=None,
                    other_heads=None):
  return cbp.ConvolutionalBoxPredictor(
      is_training=is_training, num_classes=NUM_CLASSES,
      box_prediction_head=box_head.ConvolutionalBoxHead(
          is_training, box_code_size=4, kernel_size=kernel_size,
          use_depthwise=use_depthwise, box_encodings_clip_range=clip_range),
      class_prediction_head=class_head.ConvolutionalClassHead(
          is_training, num_class_slots=NUM_CLASSES + 1,
          use_dropout=use_dropout, dropout_keep_prob=dropout_keep_prob,
          kernel_size=kernel_size,
          apply_sigmoid_to_scores=apply_sigmoid_to_scores,
          class_prediction_bias_init=class_prediction_bias_init,
          use_depthwise=use_depthwise),
      other_heads=other_heads or {}, conv_hyperparams_fn=hyperparams_fn,
      num_layers_before_predictor=num_layers_before_predictor,
      min_depth=min_depth, max_depth=max_depth)


def _shared_predictor(hyperparams_fn, depth=8, num_layers_before_predictor=2,
                      kernel_size=3, apply_batch_norm=True,
                      share_prediction_tower=False, use_depthwise=False,
                      class_prediction_bias_init=0.0,
                      score_converter_fn=tf.identity):
  return cbp.WeightSharedConvolutionalBoxPredictor(
      is_training=True, num_classes=NUM_CLASSES,
      box_prediction_head=box_head.WeightSharedConvolutionalBoxHead(
          box_code_size=4, kernel_size=kernel_size,
          use_depthwise=use_depthwise),
      class_prediction_head=class_head.WeightSharedConvolutionalClassHead(
          num_class_slots=NUM_CLASSES + 1, kernel_size=kernel_size,
          class_prediction_bias_init=class_prediction_bias_init,
          use_depthwise=use_depthwise,
          score_converter_fn=score_converter_fn),
      other_heads={}, conv_hyperparams_fn=hyperparams_fn, depth=depth,
      num_layers_before_predictor=num_layers_before_predictor,
      kernel_size=kernel_size, apply_batch_norm=apply_batch_norm,
      share_prediction_tower=share_prediction_tower,
      use_depthwise=use_depthwise)


def _build(make_predictor, shapes, anchors, scope=None):
  """Builds in a fresh graph; returns ({name: shape} variables, out shapes)."""
  with tf.Graph().as_default():
    features = [tf.zeros(shape) for shape in shapes]
    outputs = make_predictor().predict(features, anchors, scope=scope)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    shapes = {key: [t.shape.as_list() for t in value]
              for key, value in outputs.items()}
  return variables, shapes


# Two maps, 8x8x16 and 4x4x32, with 3 and 6 anchors: 8*8*3 = 192 and
# 4*4*6 = 96 anchors; 6 class slots.
TWO_MAPS = [[2, 8, 8, 16], [2, 4, 4, 32]]
TWO_ANCHORS = [3, 6]
CONV_SHAPES = {BOXES: [[2, 192, 1, 4], [2, 96, 1, 4]],
               CLASSES: [[2, 192, 6], [2, 96, 6]]}


def test_conv_predictor_two_maps_shapes_and_checkpoint_names():
  variables, shapes = _build(
      lambda: _conv_predictor(_hyperparams(SSD_HYPERPARAMS)), TWO_MAPS,
      TWO_ANCHORS)
  assert shapes == CONV_SHAPES
  # Prediction layers ignore the hyperparams' batch norm: biases, no BN.
  assert variables == {
      'BoxPredictor_0/BoxEncodingPredictor/weights': [1, 1, 16, 12],
      'BoxPredictor_0/BoxEncodingPredictor/biases': [12],
      'BoxPredictor_0/ClassPredictor/weights': [1, 1, 16, 18],
      'BoxPredictor_0/ClassPredictor/biases': [18],
      'BoxPredictor_1/BoxEncodingPredictor/weights': [1, 1, 32, 24],
      'BoxPredictor_1/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_1/ClassPredictor/weights': [1, 1, 32, 36],
      'BoxPredictor_1/ClassPredictor/biases': [36],
  }


@pytest.mark.parametrize('scope,prefix', [(None, ''),
                                          ('BoxPredictor', 'BoxPredictor/')])
def test_conv_predictor_single_map_has_no_index_scope(scope, prefix):
  variables, shapes = _build(
      lambda: _conv_predictor(_hyperparams(SSD_HYPERPARAMS)),
      [[2, 8, 8, 16]], [3], scope=scope)
  assert shapes == {BOXES: [[2, 192, 1, 4]], CLASSES: [[2, 192, 6]]}
  assert variables == {
      prefix + 'BoxEncodingPredictor/weights': [1, 1, 16, 12],
      prefix + 'BoxEncodingPredictor/biases': [12],
      prefix + 'ClassPredictor/weights': [1, 1, 16, 18],
      prefix + 'ClassPredictor/biases': [18],
  }


def test_conv_predictor_layers_before_predictor_clamp_depth():
  # depth = max(min(channels, max_depth=24), min_depth=8): 16, then 24.
  variables, shapes = _build(
      lambda: _conv_predictor(_hyperparams(SSD_HYPERPARAMS), kernel_size=3,
                              min_depth=8, max_depth=24,
                              num_layers_before_predictor=2),
      TWO_MAPS, TWO_ANCHORS)
  assert shapes == CONV_SHAPES
  expected = {
      'BoxPredictor_0/Conv2d_0_1x1_16/weights': [1, 1, 16, 16],
      'BoxPredictor_0/Conv2d_1_1x1_16/weights': [1, 1, 16, 16],
      'BoxPredictor_0/BoxEncodingPredictor/weights': [3, 3, 16, 12],
      'BoxPredictor_0/BoxEncodingPredictor/biases': [12],
      'BoxPredictor_0/ClassPredictor/weights': [3, 3, 16, 18],
      'BoxPredictor_0/ClassPredictor/biases': [18],
      'BoxPredictor_1/Conv2d_0_1x1_24/weights': [1, 1, 32, 24],
      'BoxPredictor_1/Conv2d_1_1x1_24/weights': [1, 1, 24, 24],
      'BoxPredictor_1/BoxEncodingPredictor/weights': [3, 3, 24, 24],
      'BoxPredictor_1/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_1/ClassPredictor/weights': [3, 3, 24, 36],
      'BoxPredictor_1/ClassPredictor/biases': [36],
  }
  for layer in ('BoxPredictor_0/Conv2d_0_1x1_16',
                'BoxPredictor_0/Conv2d_1_1x1_16'):
    expected.update(_bn(layer + '/BatchNorm', 16))
  for layer in ('BoxPredictor_1/Conv2d_0_1x1_24',
                'BoxPredictor_1/Conv2d_1_1x1_24'):
    expected.update(_bn(layer + '/BatchNorm', 24))
  assert variables == expected


def test_ssdlite_depthwise_checkpoint_names():
  variables, shapes = _build(
      lambda: _conv_predictor(_hyperparams(SSD_HYPERPARAMS), kernel_size=3,
                              use_depthwise=True),
      TWO_MAPS, TWO_ANCHORS)
  assert shapes == CONV_SHAPES
  expected = {}
  for index, channels, anchors in ((0, 16, 3), (1, 32, 6)):
    prefix = 'BoxPredictor_%d/' % index
    # The depthwise layer keeps the arg_scope's batch norm.
    for name, slots in (('BoxEncodingPredictor', 4), ('ClassPredictor', 6)):
      expected[prefix + name + '_depthwise/depthwise_weights'] = [
          3, 3, channels, 1]
      expected.update(_bn(prefix + name + '_depthwise/BatchNorm', channels))
      expected[prefix + name + '/weights'] = [1, 1, channels, anchors * slots]
      expected[prefix + name + '/biases'] = [anchors * slots]
  assert variables == expected
  assert variables['BoxPredictor_0/BoxEncodingPredictor_depthwise/'
                   'depthwise_weights'] == [3, 3, 16, 1]
  assert variables['BoxPredictor_0/BoxEncodingPredictor/weights'] == [
      1, 1, 16, 12]


def test_conv_predictor_values_with_ones_weights(execute):
  # Inputs 0.5 over 16 channels, 1x1 all-ones kernels: 16 * 0.5 = 8 for
  # every box code; class logits 8 + bias_init -4.6 = 3.4, sigmoid applied.
  def graph_fn(feature):
    predictor = _conv_predictor(_ones_hyperparams, apply_sigmoid_to_scores=True,
                                class_prediction_bias_init=-4.6)
    return predictor.predict([feature], [3])
  out = execute(graph_fn, [np.full([2, 4, 4, 16], 0.5, np.float32)])
  assert out[BOXES][0].shape == (2, 48, 1, 4)  # 4*4*3 anchors
  np.testing.assert_allclose(out[BOXES][0], 8.0)
  np.testing.assert_allclose(out[CLASSES][0], 1 / (1 + np.exp(-3.4)),
                             rtol=1e-6)


def test_conv_predictor_clips_box_encodings(execute):
  class ClipRange:  # any object with min and max attributes
    min, max = -0.01, 0.01

  def graph_fn(feature):
    return _conv_predictor(_ones_hyperparams, clip_range=ClipRange).predict(
        [feature, -feature], [3, 3])
  out = execute(graph_fn, [np.full([1, 2, 2, 16], 0.5, np.float32)])
  # +-8 clipped to +-0.01; class logits (+-8) are not clipped.
  np.testing.assert_allclose(out[BOXES][0], np.float32(0.01))
  np.testing.assert_allclose(out[BOXES][1], np.float32(-0.01))
  np.testing.assert_allclose(out[CLASSES][1], -8.0)


def test_depthwise_class_head_keeps_zero_bias_like_original():
  # The original applies class_prediction_bias_init only without depthwise.
  with tf.Graph().as_default():
    predictor = _conv_predictor(_hyperparams(NO_BN_HYPERPARAMS),
                                kernel_size=3, use_depthwise=True,
                                class_prediction_bias_init=-4.6)
    predictor.predict([tf.zeros([1, 2, 2, 8])], [2])
    plain = _conv_predictor(_hyperparams(NO_BN_HYPERPARAMS),
                            class_prediction_bias_init=-4.6)
    plain.predict([tf.zeros([1, 2, 2, 8])], [2], scope='Plain')
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      by_name = {v.op.name: v for v in tf.compat.v1.global_variables()}
      depthwise_bias = sess.run(by_name['ClassPredictor/biases'])
      plain_bias = sess.run(by_name['Plain/ClassPredictor/biases'])
  np.testing.assert_array_equal(depthwise_bias, np.zeros(12))
  np.testing.assert_allclose(plain_bias, np.full(12, -4.6, np.float32))


@pytest.mark.parametrize('is_training', [False, True])
def test_class_dropout_only_when_training(execute, is_training):
  def graph_fn(feature):
    return _conv_predictor(_ones_hyperparams, is_training=is_training,
                           use_dropout=True, dropout_keep_prob=0.5).predict(
                               [feature], [3])
  out = execute(graph_fn, [np.full([2, 4, 4, 16], 0.5, np.float32)])
  np.testing.assert_allclose(out[BOXES][0], 8.0)  # no dropout on boxes
  if is_training:
    # Each kept input becomes 0.5 / 0.5 = 1, dropped ones 0: integer sums
    # in [0, 16], not all 8.
    classes = out[CLASSES][0]
    np.testing.assert_array_equal(classes, np.round(classes))
    assert not np.all(classes == 8.0)
  else:
    np.testing.assert_allclose(out[CLASSES][0], 8.0)


def test_conv_predictor_dynamic_and_empty_batch():
  with tf.Graph().as_default():
    feature = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 16])
    out = _conv_predictor(_hyperparams(SSD_HYPERPARAMS)).predict(
        [feature], [3])
    assert out[BOXES][0].shape.as_list() == [None, 192, 1, 4]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for batch in (3, 0):
        boxes, classes = sess.run(
            [out[BOXES][0], out[CLASSES][0]],
            {feature: np.zeros([batch, 8, 8, 16], np.float32)})
        assert boxes.shape == (batch, 192, 1, 4)
        assert classes.shape == (batch, 192, 6)


def test_conv_predictor_other_heads_run_after_extra_layers():
  class IdentityHead:

    def predict(self, features, num_predictions_per_location):
      del num_predictions_per_location
      return features

  with tf.Graph().as_default():
    out = _conv_predictor(_hyperparams(SSD_HYPERPARAMS), min_depth=4,
                          max_depth=4, num_layers_before_predictor=1,
                          other_heads={'extra': IdentityHead()}).predict(
                              [tf.zeros([1, 2, 2, 16])], [1])
  assert sorted(out) == sorted([BOXES, CLASSES, 'extra'])
  # The extra head sees the 1x1 layer's 4-channel output.
  assert out['extra'][0].shape.as_list() == [1, 2, 2, 4]


def test_bad_inputs_raise():
  with tf.Graph().as_default():
    predictor = _conv_predictor(_hyperparams(SSD_HYPERPARAMS))
    with pytest.raises(ValueError, match='same length'):
      predictor.predict([tf.zeros([1, 2, 2, 4])], [3, 6])
    with pytest.raises(ValueError, match='same for all'):
      _shared_predictor(_hyperparams(FPN_HYPERPARAMS)).predict(
          [tf.zeros([1, 2, 2, 4]), tf.zeros([1, 1, 1, 4])], [3, 6])
  for make_head in (
      lambda: box_head.ConvolutionalBoxHead(True, 4, 1, use_depthwise=True),
      lambda: class_head.ConvolutionalClassHead(True, 6, False, 0.8, 1,
                                                use_depthwise=True),
      lambda: box_head.WeightSharedConvolutionalBoxHead(4, 1, True),
      lambda: class_head.WeightSharedConvolutionalClassHead(
          6, 1, use_depthwise=True)):
    with pytest.raises(ValueError, match='kernel_size'):
      make_head()


# Weight shared: maps 8x8x16 and 4x4x16, 6 anchors each: 8*8*6 = 384 and
# 4*4*6 = 96 anchors; box encodings have no q dimension.
SHARED_MAPS = [[2, 8, 8, 16], [2, 4, 4, 16]]
SHARED_SHAPES = {BOXES: [[2, 384, 4], [2, 96, 4]],
                 CLASSES: [[2, 384, 6], [2, 96, 6]]}
WS = 'WeightSharedConvolutionalBoxPredictor/'


def test_weight_shared_checkpoint_names_fpn():
  variables, shapes = _build(
      lambda: _shared_predictor(_hyperparams(FPN_HYPERPARAMS)), SHARED_MAPS,
      [6, 6])
  assert shapes == SHARED_SHAPES
  expected = {
      WS + 'BoxPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'BoxPredictionTower/conv2d_1/weights': [3, 3, 8, 8],
      WS + 'BoxPredictor/weights': [3, 3, 8, 24],
      WS + 'BoxPredictor/biases': [24],
      WS + 'ClassPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'ClassPredictionTower/conv2d_1/weights': [3, 3, 8, 8],
      WS + 'ClassPredictor/weights': [3, 3, 8, 36],
      WS + 'ClassPredictor/biases': [36],
  }
  # Convolutions are shared; batch norm is per feature map.
  for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
    for layer in (0, 1):
      for feature in (0, 1):
        expected.update(_bn('%s%s/conv2d_%d/BatchNorm/feature_%d' %
                            (WS, tower, layer, feature), 8))
  assert variables == expected
  assert WS + 'ClassPredictionTower/conv2d_0/BatchNorm/feature_0/beta' in (
      variables)


def test_weight_shared_prediction_tower_sharing():
  variables, shapes = _build(
      lambda: _shared_predictor(_hyperparams(FPN_HYPERPARAMS),
                                share_prediction_tower=True),
      SHARED_MAPS, [6, 6])
  assert shapes == SHARED_SHAPES
  expected = {
      WS + 'PredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'PredictionTower/conv2d_1/weights': [3, 3, 8, 8],
      WS + 'BoxPredictor/weights': [3, 3, 8, 24],
      WS + 'BoxPredictor/biases': [24],
      WS + 'ClassPredictor/weights': [3, 3, 8, 36],
      WS + 'ClassPredictor/biases': [36],
  }
  for layer in (0, 1):
    for feature in (0, 1):
      expected.update(_bn('%sPredictionTower/conv2d_%d/BatchNorm/feature_%d'
                          % (WS, layer, feature), 8))
  assert variables == expected


def test_weight_shared_without_batch_norm_has_tower_biases():
  variables, _ = _build(
      lambda: _shared_predictor(_hyperparams(NO_BN_HYPERPARAMS),
                                num_layers_before_predictor=1,
                                apply_batch_norm=False),
      SHARED_MAPS, [6, 6])
  assert variables == {
      WS + 'BoxPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'BoxPredictionTower/conv2d_0/biases': [8],
      WS + 'BoxPredictor/weights': [3, 3, 8, 24],
      WS + 'BoxPredictor/biases': [24],
      WS + 'ClassPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'ClassPredictionTower/conv2d_0/biases': [8],
      WS + 'ClassPredictor/weights': [3, 3, 8, 36],
      WS + 'ClassPredictor/biases': [36],
  }


def test_weight_shared_projects_minority_depths():
  # Depths 16, 16, 32: the majority 16 wins; every map gets a projection.
  variables, shapes = _build(
      lambda: _shared_predictor(_hyperparams(FPN_HYPERPARAMS),
                                num_layers_before_predictor=1),
      SHARED_MAPS + [[2, 2, 2, 32]], [6, 6, 6])
  assert shapes[BOXES] == [[2, 384, 4], [2, 96, 4], [2, 24, 4]]  # 2*2*6
  expected = {
      WS + 'ProjectionLayer/conv2d_0/weights': [1, 1, 16, 16],
      WS + 'ProjectionLayer/conv2d_1/weights': [1, 1, 16, 16],
      WS + 'ProjectionLayer/conv2d_2/weights': [1, 1, 32, 16],
      WS + 'BoxPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'BoxPredictor/weights': [3, 3, 8, 24],
      WS + 'BoxPredictor/biases': [24],
      WS + 'ClassPredictionTower/conv2d_0/weights': [3, 3, 16, 8],
      WS + 'ClassPredictor/weights': [3, 3, 8, 36],
      WS + 'ClassPredictor/biases': [36],
  }
  for index in (0, 1, 2):
    expected.update(_bn('%sProjectionLayer/conv2d_%d/BatchNorm' % (WS, index),
                        16))
    for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
      expected.update(_bn('%s%s/conv2d_0/BatchNorm/feature_%d' %
                          (WS, tower, index), 8))
  assert variables == expected


def test_weight_shared_depthwise_names():
  variables, _ = _build(
      lambda: _shared_predictor(_hyperparams(FPN_HYPERPARAMS),
                                num_layers_before_predictor=1,
                                use_depthwise=True),
      SHARED_MAPS, [6, 6])
  expected = {
      WS + 'BoxPredictionTower/conv2d_0/depthwise_weights': [3, 3, 16, 1],
      WS + 'BoxPredictionTower/conv2d_0/pointwise_weights': [1, 1, 16, 8],
      WS + 'BoxPredictor/depthwise_weights': [3, 3, 8, 1],
      WS + 'BoxPredictor/pointwise_weights': [1, 1, 8, 24],
      WS + 'BoxPredictor/biases': [24],
      WS + 'ClassPredictionTower/conv2d_0/depthwise_weights': [3, 3, 16, 1],
      WS + 'ClassPredictionTower/conv2d_0/pointwise_weights': [1, 1, 16, 8],
      WS + 'ClassPredictor/depthwise_weights': [3, 3, 8, 1],
      WS + 'ClassPredictor/pointwise_weights': [1, 1, 8, 36],
      WS + 'ClassPredictor/biases': [36],
  }
  for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
    for feature in (0, 1):
      expected.update(_bn('%s%s/conv2d_0/BatchNorm/feature_%d' %
                          (WS, tower, feature), 8))
  assert variables == expected


def test_weight_shared_values_relu6_bias_and_sigmoid(execute):
  # Inputs 0.5 over 16 channels, 1x1 all-ones kernels, depth 3:
  # tower = relu6(16 * 0.5 = 8) = 6 per channel; box = 3 * 6 = 18;
  # class logit = 18 - 4.6 = 13.4, then sigmoid. Same weights on both maps.
  def graph_fn(big, small):
    predictor = _shared_predictor(
        _ones_hyperparams, depth=3, num_layers_before_predictor=1,
        kernel_size=1, apply_batch_norm=False,
        class_prediction_bias_init=-4.6, score_converter_fn=tf.sigmoid)
    out = predictor.predict([big, small], [2, 2])
    return out, tf.constant(len(tf.compat.v1.trainable_variables()))
  feature = np.full([1, 3, 3, 16], 0.5, np.float32)
  out, num_variables = execute(graph_fn, [feature, feature[:, :1, :1]])
  assert num_variables == 8  # 2 towers + 2 heads, weights and biases
  for index, anchors in ((0, 18), (1, 2)):  # 3*3*2 and 1*1*2
    assert out[BOXES][index].shape == (1, anchors, 4)
    np.testing.assert_allclose(out[BOXES][index], 18.0)
    np.testing.assert_allclose(out[CLASSES][index], 1 / (1 + np.exp(-13.4)),
                               rtol=1e-6)


def test_weight_shared_heads_unflattened_and_dynamic_shapes():
  with tf.Graph().as_default():
    feature = tf.compat.v1.placeholder(tf.float32, [None, None, None, 16])
    boxes = box_head.WeightSharedConvolutionalBoxHead(
        4, return_flat_predictions=False).predict(feature, 3)
    classes = class_head.WeightSharedConvolutionalClassHead(
        6, return_flat_predictions=False).predict(feature, 3)
    flat = class_head.WeightSharedConvolutionalClassHead(
        6, scope='Flat').predict(feature, 3)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      result = sess.run([boxes, classes, flat],
                        {feature: np.zeros([2, 5, 4, 16], np.float32)})
  assert result[0].shape == (2, 5, 4, 12)  # 3 anchors * 4 codes
  assert result[1].shape == (2, 5, 4, 18)  # 3 anchors * 6 slots
  assert result[2].shape == (2, 60, 6)  # 5*4*3 anchors


def test_weight_shared_static_anchor_count_with_unknown_batch():
  with tf.Graph().as_default():
    feature = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 16])
    out = _shared_predictor(_hyperparams(FPN_HYPERPARAMS)).predict(
        [feature], [6])
    # 4*4*6 = 96 anchors stay static for TPU-friendly downstream code.
    assert out[BOXES][0].shape.as_list() == [None, 96, 4]
    assert out[CLASSES][0].shape.as_list() == [None, 96, 6]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      boxes = sess.run(out[BOXES][0],
                       {feature: np.zeros([3, 4, 4, 16], np.float32)})
  assert boxes.shape == (3, 96, 4)


# With keras_layer_names: the names of the original's TF2 Keras predictors
# (read from its convolutional_keras_box_predictor and keras heads, and
# checked against a TF2 model of the original).


def _keras_predictor(text):
  config = text_format.Parse(text, box_predictor_pb2.BoxPredictor())
  return box_predictor_builder.build(hyperparams_builder.build, config,
                                     is_training=True,
                                     num_classes=NUM_CLASSES,
                                     keras_layer_names=True)


def _keras_conv_config(extra=''):
  return ('convolutional_box_predictor { box_code_size: 4 %s '
          'conv_hyperparams { %s } }' % (extra, SSD_HYPERPARAMS))


def test_keras_conv_predictor_names():
  variables, shapes = _build(lambda: _keras_predictor(_keras_conv_config(
      'kernel_size: 1')), TWO_MAPS, TWO_ANCHORS)
  assert shapes == CONV_SHAPES
  assert variables == {
      'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/kernel':
          [1, 1, 16, 12],
      'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/bias': [12],
      'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/kernel':
          [1, 1, 16, 18],
      'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/bias': [18],
      'BoxPredictor/ConvolutionalBoxHead_1/BoxEncodingPredictor/kernel':
          [1, 1, 32, 24],
      'BoxPredictor/ConvolutionalBoxHead_1/BoxEncodingPredictor/bias': [24],
      'BoxPredictor/ConvolutionalClassHead_1/ClassPredictor/kernel':
          [1, 1, 32, 36],
      'BoxPredictor/ConvolutionalClassHead_1/ClassPredictor/bias': [36],
  }


def test_keras_conv_predictor_single_map_keeps_head_index():
  variables, _ = _build(lambda: _keras_predictor(_keras_conv_config(
      'kernel_size: 1')), [[2, 8, 8, 16]], [3])
  assert sorted(variables) == [
      'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/bias',
      'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/kernel',
      'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/bias',
      'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/kernel']


def test_keras_conv_predictor_shared_convs_and_depthwise_names():
  variables, _ = _build(lambda: _keras_predictor(_keras_conv_config(
      'kernel_size: 3 use_depthwise: true min_depth: 8 max_depth: 16 '
      'num_layers_before_predictor: 1')), [[2, 8, 8, 16]], [3])
  expected = {
      'BoxPredictor/SharedConvolutions_0/Conv2d_0_1x1_16/kernel':
          [1, 1, 16, 16],
  }
  expected.update(_bn('BoxPredictor/SharedConvolutions_0/'
                      'Conv2d_0_1x1_16_norm', 16))
  for head, layer, slots in (('ConvolutionalBoxHead_0',
                              'BoxEncodingPredictor', 4),
                             ('ConvolutionalClassHead_0', 'ClassPredictor',
                              6)):
    prefix = 'BoxPredictor/%s/%s' % (head, layer)
    expected[prefix + '_depthwise/depthwise_kernel'] = [3, 3, 16, 1]
    expected.update(_bn(prefix + '_depthwise_batchnorm', 16))
    expected[prefix + '/kernel'] = [1, 1, 16, 3 * slots]
    expected[prefix + '/bias'] = [3 * slots]
  assert variables == expected


def _keras_shared_config(activation='RELU_6'):
  hyperparams = FPN_HYPERPARAMS.replace('RELU_6', activation)
  return ('weight_shared_convolutional_box_predictor { depth: 8 '
          'num_layers_before_predictor: 1 kernel_size: 3 box_code_size: 4 '
          'conv_hyperparams { %s } }' % hyperparams)


def test_keras_weight_shared_names():
  variables, shapes = _build(
      lambda: _keras_predictor(_keras_shared_config()), SHARED_MAPS, [6, 6])
  assert shapes == SHARED_SHAPES
  expected = {
      WS + 'BoxPredictionTower/conv2d_0/kernel': [3, 3, 16, 8],
      WS + 'ClassPredictionTower/conv2d_0/kernel': [3, 3, 16, 8],
      WS + 'WeightSharedConvolutionalBoxHead/BoxPredictor/kernel':
          [3, 3, 8, 24],
      WS + 'WeightSharedConvolutionalBoxHead/BoxPredictor/bias': [24],
      WS + 'WeightSharedConvolutionalClassHead/ClassPredictor/kernel':
          [3, 3, 8, 36],
      WS + 'WeightSharedConvolutionalClassHead/ClassPredictor/bias': [36],
  }
  for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
    for feature in (0, 1):
      expected.update(_bn('%s%s/conv2d_0/BatchNorm/feature_%d' %
                          (WS, tower, feature), 8))
  assert variables == expected


@pytest.mark.parametrize('activation,op_type', [('RELU_6', 'Relu6'),
                                                ('RELU', 'Relu')])
def test_keras_weight_shared_tower_takes_hyperparams_activation(activation,
                                                                op_type):
  with tf.Graph().as_default() as graph:
    _keras_predictor(_keras_shared_config(activation)).predict(
        [tf.zeros(shape) for shape in SHARED_MAPS], [6, 6])
  # Only the towers have activations in this predictor.
  tower_activations = {
      op.type for op in graph.get_operations()
      if op.name.startswith(WS) and op.type in ('Relu', 'Relu6')}
  assert tower_activations == {op_type}
