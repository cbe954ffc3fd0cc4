"""box_predictor_builder: predictors from text protos like the sample configs.

Expected variable names/shapes were collected by building the TF1 Object
Detection API's predictors from the same configs and feature maps (the real
SSD MobileNet / ResNet-FPN depths), so model-zoo checkpoints restore.
"""
import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.core import box_predictor
from od_estimator.errors import UserInputError
from od_estimator.predictors import convolutional_box_predictor as cbp
from od_estimator.predictors import mask_rcnn_box_predictor
from od_estimator.predictors import rfcn_box_predictor
from od_estimator.protos import box_predictor_pb2
from od_estimator.protos import hyperparams_pb2
from od_estimator.config import config_util
from tests import upstream_folder

BOXES = box_predictor.BOX_ENCODINGS
CLASSES = box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND
MASKS = box_predictor.MASK_PREDICTIONS

SSD_MOBILENET_V1_COCO = """
  convolutional_box_predictor {
    min_depth: 0
    max_depth: 0
    num_layers_before_predictor: 0
    use_dropout: false
    dropout_keep_probability: 0.8
    kernel_size: 1
    box_code_size: 4
    apply_sigmoid_to_scores: false
    conv_hyperparams {
      activation: RELU_6,
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
      batch_norm { train: true, scale: true, center: true, decay: 0.9997,
                   epsilon: 0.001 }
    }
  }
"""
SSDLITE_MOBILENET_V2_COCO = SSD_MOBILENET_V1_COCO.replace(
    'kernel_size: 1', 'kernel_size: 3\n    use_depthwise: true')
SSD_RESNET50_V1_FPN = """
  weight_shared_convolutional_box_predictor {
    depth: 256
    class_prediction_bias_init: -4.6
    conv_hyperparams {
      activation: RELU_6,
      regularizer { l2_regularizer { weight: 0.0004 } }
      initializer { random_normal_initializer { stddev: 0.01 mean: 0.0 } }
      batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
    }
    num_layers_before_predictor: 4
    kernel_size: 3
  }
"""
# stddev 0 makes every weight exactly 1 (biases 0): hand-computable outputs.
ONES_HYPERPARAMS = """
    conv_hyperparams {
      activation: NONE
      initializer { random_normal_initializer { stddev: 0.0 mean: 1.0 } }
    }
"""
# SSD MobileNet feature maps and anchors per location (300x300 input).
MOBILENET_V1_MAPS = [[1, 19, 19, 512], [1, 10, 10, 1024], [1, 5, 5, 512],
                     [1, 3, 3, 256], [1, 2, 2, 256], [1, 1, 1, 128]]
MOBILENET_V2_MAPS = [[1, 19, 19, 576], [1, 10, 10, 1280], [1, 5, 5, 512],
                     [1, 3, 3, 256], [1, 2, 2, 256], [1, 1, 1, 128]]
SSD_ANCHORS = [3, 6, 6, 6, 6, 6]
# 19*19*3, 10*10*6, 5*5*6, 3*3*6, 2*2*6, 1*1*6
SSD_NUM_ANCHORS = [1083, 600, 150, 54, 24, 6]


def _config(text):
  return text_format.Parse(text, box_predictor_pb2.BoxPredictor())


def _build(text, is_training=True, num_classes=90, **kwargs):
  return box_predictor_builder.build(hyperparams_builder.build, _config(text),
                                     is_training, num_classes, **kwargs)


def _predict(text, shapes, anchors, **kwargs):
  """Builds and predicts in a fresh graph; returns (variables, out shapes)."""
  with tf.Graph().as_default():
    predictor = _build(text, **kwargs)
    outputs = predictor.predict([tf.zeros(shape) for shape in shapes],
                                anchors)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    shapes = {key: [t.shape.as_list() for t in value]
              for key, value in outputs.items()}
  return predictor, variables, shapes


def _run(text, features, anchors, is_training=True, **kwargs):
  """Builds, initializes and runs; returns the numpy predictions."""
  with tf.Graph().as_default():
    outputs = _build(text, is_training=is_training, **kwargs).predict(
        [tf.constant(f) for f in features], anchors)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run(outputs)


def test_ssd_mobilenet_v1_coco_checkpoint_names():
  predictor, variables, shapes = _predict(SSD_MOBILENET_V1_COCO,
                                          MOBILENET_V1_MAPS, SSD_ANCHORS)
  assert isinstance(predictor, cbp.ConvolutionalBoxPredictor)
  assert predictor.num_classes == 90
  assert shapes == {BOXES: [[1, n, 1, 4] for n in SSD_NUM_ANCHORS],
                    CLASSES: [[1, n, 91] for n in SSD_NUM_ANCHORS]}
  # 3 anchors * 4 = 12, 3 * 91 = 273; 6 anchors: 24 and 546.
  assert variables == {
      'BoxPredictor_0/BoxEncodingPredictor/weights': [1, 1, 512, 12],
      'BoxPredictor_0/BoxEncodingPredictor/biases': [12],
      'BoxPredictor_0/ClassPredictor/weights': [1, 1, 512, 273],
      'BoxPredictor_0/ClassPredictor/biases': [273],
      'BoxPredictor_1/BoxEncodingPredictor/weights': [1, 1, 1024, 24],
      'BoxPredictor_1/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_1/ClassPredictor/weights': [1, 1, 1024, 546],
      'BoxPredictor_1/ClassPredictor/biases': [546],
      'BoxPredictor_2/BoxEncodingPredictor/weights': [1, 1, 512, 24],
      'BoxPredictor_2/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_2/ClassPredictor/weights': [1, 1, 512, 546],
      'BoxPredictor_2/ClassPredictor/biases': [546],
      'BoxPredictor_3/BoxEncodingPredictor/weights': [1, 1, 256, 24],
      'BoxPredictor_3/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_3/ClassPredictor/weights': [1, 1, 256, 546],
      'BoxPredictor_3/ClassPredictor/biases': [546],
      'BoxPredictor_4/BoxEncodingPredictor/weights': [1, 1, 256, 24],
      'BoxPredictor_4/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_4/ClassPredictor/weights': [1, 1, 256, 546],
      'BoxPredictor_4/ClassPredictor/biases': [546],
      'BoxPredictor_5/BoxEncodingPredictor/weights': [1, 1, 128, 24],
      'BoxPredictor_5/BoxEncodingPredictor/biases': [24],
      'BoxPredictor_5/ClassPredictor/weights': [1, 1, 128, 546],
      'BoxPredictor_5/ClassPredictor/biases': [546],
  }


def test_ssdlite_mobilenet_v2_checkpoint_names():
  _, variables, _ = _predict(SSDLITE_MOBILENET_V2_COCO, MOBILENET_V2_MAPS,
                             SSD_ANCHORS)
  assert len(variables) == 84  # 6 maps * (2 heads * (1 + 4 BN + 2))
  assert {name: shape for name, shape in variables.items()
          if name.startswith('BoxPredictor_0/')} == {
              'BoxPredictor_0/BoxEncodingPredictor_depthwise/'
              'depthwise_weights': [3, 3, 576, 1],
              'BoxPredictor_0/BoxEncodingPredictor_depthwise/BatchNorm/'
              'gamma': [576],
              'BoxPredictor_0/BoxEncodingPredictor_depthwise/BatchNorm/'
              'beta': [576],
              'BoxPredictor_0/BoxEncodingPredictor_depthwise/BatchNorm/'
              'moving_mean': [576],
              'BoxPredictor_0/BoxEncodingPredictor_depthwise/BatchNorm/'
              'moving_variance': [576],
              'BoxPredictor_0/BoxEncodingPredictor/weights': [1, 1, 576, 12],
              'BoxPredictor_0/BoxEncodingPredictor/biases': [12],
              'BoxPredictor_0/ClassPredictor_depthwise/depthwise_weights': [
                  3, 3, 576, 1],
              'BoxPredictor_0/ClassPredictor_depthwise/BatchNorm/gamma': [576],
              'BoxPredictor_0/ClassPredictor_depthwise/BatchNorm/beta': [576],
              'BoxPredictor_0/ClassPredictor_depthwise/BatchNorm/'
              'moving_mean': [576],
              'BoxPredictor_0/ClassPredictor_depthwise/BatchNorm/'
              'moving_variance': [576],
              'BoxPredictor_0/ClassPredictor/weights': [1, 1, 576, 273],
              'BoxPredictor_0/ClassPredictor/biases': [273],
          }
  assert variables['BoxPredictor_1/ClassPredictor_depthwise/'
                   'depthwise_weights'] == [3, 3, 1280, 1]
  assert variables['BoxPredictor_5/BoxEncodingPredictor/weights'] == [
      1, 1, 128, 24]


def test_ssd_resnet50_fpn_weight_shared_checkpoint_names():
  predictor, variables, shapes = _predict(
      SSD_RESNET50_V1_FPN, [[1, 4, 4, 256], [1, 2, 2, 256]], [6, 6])
  assert isinstance(predictor, cbp.WeightSharedConvolutionalBoxPredictor)
  # 4*4*6 = 96 and 2*2*6 = 24 anchors.
  assert shapes == {BOXES: [[1, 96, 4], [1, 24, 4]],
                    CLASSES: [[1, 96, 91], [1, 24, 91]]}
  ws = 'WeightSharedConvolutionalBoxPredictor/'
  # 8 tower convs + 2 heads * 2 + 4 BN * 8 tower convs * 2 feature maps.
  assert len(variables) == 76
  assert {name: shape for name, shape in variables.items()
          if 'BatchNorm' not in name} == {
              ws + 'BoxPredictionTower/conv2d_0/weights': [3, 3, 256, 256],
              ws + 'BoxPredictionTower/conv2d_1/weights': [3, 3, 256, 256],
              ws + 'BoxPredictionTower/conv2d_2/weights': [3, 3, 256, 256],
              ws + 'BoxPredictionTower/conv2d_3/weights': [3, 3, 256, 256],
              ws + 'BoxPredictor/weights': [3, 3, 256, 24],
              ws + 'BoxPredictor/biases': [24],
              ws + 'ClassPredictionTower/conv2d_0/weights': [3, 3, 256, 256],
              ws + 'ClassPredictionTower/conv2d_1/weights': [3, 3, 256, 256],
              ws + 'ClassPredictionTower/conv2d_2/weights': [3, 3, 256, 256],
              ws + 'ClassPredictionTower/conv2d_3/weights': [3, 3, 256, 256],
              ws + 'ClassPredictor/weights': [3, 3, 256, 546],
              ws + 'ClassPredictor/biases': [546],
          }
  for name in (
      'BoxPredictionTower/conv2d_0/BatchNorm/feature_0/gamma',
      'BoxPredictionTower/conv2d_3/BatchNorm/feature_1/moving_variance',
      'ClassPredictionTower/conv2d_0/BatchNorm/feature_0/beta',
      'ClassPredictionTower/conv2d_2/BatchNorm/feature_1/moving_mean'):
    assert variables[ws + name] == [256]


def test_resnet_fpn_class_bias_init_and_sigmoid_converter():
  config = SSD_RESNET50_V1_FPN.replace(
      'kernel_size: 3', 'kernel_size: 3\n    score_converter: SIGMOID')
  # Zero features stay zero through the towers (no biases; batch norm at
  # inference uses moving mean 0 / variance 1, beta 0), so class logits are
  # the -4.6 bias init, and SIGMOID converts them at inference.
  with tf.Graph().as_default():
    outputs = _build(config, is_training=False).predict(
        [tf.zeros([1, 2, 2, 256])], [6])
    bias, = [v for v in tf.compat.v1.global_variables()
             if v.op.name.endswith('ClassPredictor/biases')]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      outputs, bias = sess.run([outputs, bias])
  np.testing.assert_allclose(bias, np.full(546, -4.6, np.float32))
  np.testing.assert_allclose(outputs[CLASSES][0], 1 / (1 + np.exp(4.6)),
                             rtol=1e-5)
  np.testing.assert_allclose(outputs[BOXES][0], 0.0)


@pytest.mark.parametrize('value,is_training,expected', [
    ('IDENTITY', True, tf.identity), ('IDENTITY', False, tf.identity),
    ('SIGMOID', True, tf.identity), ('SIGMOID', False, tf.sigmoid)])
def test_build_score_converter(value, is_training, expected):
  enum = box_predictor_pb2.WeightSharedConvolutionalBoxPredictor
  assert box_predictor_builder.build_score_converter(
      enum.ScoreConverter.Value(value), is_training) is expected


def test_weight_shared_batch_norm_follows_hyperparams():
  text = SSD_RESNET50_V1_FPN.split('conv_hyperparams')[0] + (
      ONES_HYPERPARAMS + 'num_layers_before_predictor: 1 }')
  _, variables, _ = _predict(text, [[1, 2, 2, 8]], [1])
  ws = 'WeightSharedConvolutionalBoxPredictor/'
  assert not [name for name in variables if 'BatchNorm' in name]
  assert variables[ws + 'BoxPredictionTower/conv2d_0/biases'] == [256]


def test_convolutional_options_are_honoured():
  text = """
    convolutional_box_predictor {
      min_depth: 4 max_depth: 8 num_layers_before_predictor: 2
      kernel_size: 3 box_code_size: 5 use_dropout: false
      %s
    }""" % ONES_HYPERPARAMS
  _, variables, shapes = _predict(text, [[1, 3, 3, 16], [1, 1, 1, 2]],
                                  [2, 2], num_classes=3,
                                  add_background_class=False)
  # depth max(min(16, 8), 4) = 8 and max(min(2, 8), 4) = 4; 3*3*2 = 18
  # and 1*1*2 = 2 anchors, 5-number codes, 3 slots without background.
  assert shapes == {BOXES: [[1, 18, 1, 5], [1, 2, 1, 5]],
                    CLASSES: [[1, 18, 3], [1, 2, 3]]}
  assert variables['BoxPredictor_0/Conv2d_1_1x1_8/weights'] == [1, 1, 8, 8]
  assert variables['BoxPredictor_1/Conv2d_0_1x1_4/weights'] == [1, 1, 2, 4]
  assert variables['BoxPredictor_0/BoxEncodingPredictor/weights'] == [
      3, 3, 8, 10]
  assert variables['BoxPredictor_1/ClassPredictor/weights'] == [3, 3, 4, 6]


def test_convolutional_values_sigmoid_bias_and_clip():
  text = """
    convolutional_box_predictor {
      use_dropout: false apply_sigmoid_to_scores: true
      class_prediction_bias_init: -4.6
      box_encodings_clip_range { min: -2.0 max: 5.0 }
      %s
    }""" % ONES_HYPERPARAMS
  feature = np.full([1, 2, 2, 16], 0.5, np.float32)
  out = _run(text, [feature], [3], num_classes=2)
  # 1x1 kernel of ones over 16 channels of 0.5: 8, clipped to 5 for boxes;
  # class logits 8 - 4.6 = 3.4 -> sigmoid.
  np.testing.assert_allclose(out[BOXES][0], 5.0)
  np.testing.assert_allclose(out[CLASSES][0], 1 / (1 + np.exp(-3.4)),
                             rtol=1e-6)
  assert out[CLASSES][0].shape == (1, 12, 3)  # 2*2*3 anchors, 2+1 slots


@pytest.mark.parametrize('is_training', [True, False])
def test_convolutional_dropout_keep_probability(is_training):
  text = """
    convolutional_box_predictor {
      use_dropout: true dropout_keep_probability: 0.5
      %s
    }""" % ONES_HYPERPARAMS
  feature = np.full([1, 4, 4, 16], 0.5, np.float32)
  classes = _run(text, [feature], [3], is_training=is_training)[CLASSES][0]
  if is_training:
    # Kept inputs scale to 0.5 / 0.5 = 1, dropped to 0: integer sums.
    np.testing.assert_array_equal(classes, np.round(classes))
    assert not np.all(classes == 8.0)
  else:
    np.testing.assert_allclose(classes, 8.0)  # 16 * 0.5


def test_weight_shared_options_are_honoured():
  text = """
    weight_shared_convolutional_box_predictor {
      depth: 3 num_layers_before_predictor: 1 kernel_size: 1
      share_prediction_tower: true use_dropout: false box_code_size: 4
      box_encodings_clip_range { min: -1.0 max: 10.0 }
      %s
    }""" % ONES_HYPERPARAMS
  feature = np.full([1, 2, 2, 16], 0.5, np.float32)
  out = _run(text, [feature], [2], num_classes=1)
  # Tower relu6(16 * 0.5 = 8) = 6 on 3 channels: heads give 18; boxes
  # clipped to 10.
  np.testing.assert_allclose(out[BOXES][0], 10.0)
  np.testing.assert_allclose(out[CLASSES][0], 18.0)
  _, variables, _ = _predict(text, [feature.shape], [2])
  assert 'WeightSharedConvolutionalBoxPredictor/PredictionTower/conv2d_0/' \
      'weights' in variables


def test_weight_shared_depthwise():
  text = SSD_RESNET50_V1_FPN.replace(
      'depth: 256', 'depth: 16\n    use_depthwise: true').replace(
          'num_layers_before_predictor: 4', 'num_layers_before_predictor: 1')
  _, variables, _ = _predict(text, [[1, 2, 2, 16]], [1])
  ws = 'WeightSharedConvolutionalBoxPredictor/'
  assert variables[ws + 'BoxPredictionTower/conv2d_0/depthwise_weights'] == [
      3, 3, 16, 1]
  assert variables[ws + 'ClassPredictor/pointwise_weights'] == [1, 1, 16, 91]


@pytest.mark.parametrize('text,match', [
    ('', 'box_predictor_oneof'),
    ('weight_shared_convolutional_box_predictor { '
     'apply_conv_hyperparams_to_heads: true }',
     'apply_conv_hyperparams_to_heads'),
    ('weight_shared_convolutional_box_predictor { '
     'apply_conv_hyperparams_pointwise: true }',
     'apply_conv_hyperparams_pointwise'),
    # kernel_size defaults to 1 in convolutional_box_predictor.
    ('convolutional_box_predictor { use_depthwise: true }',
     'convolutional_box_predictor.use_depthwise'),
    ('weight_shared_convolutional_box_predictor { use_depthwise: true '
     'kernel_size: 1 }', 'weight_shared_convolutional_box_predictor'),
])
def test_unsupported_configs_raise(text, match):
  with pytest.raises(ValueError, match=match):
    _build(text)


def test_wrong_config_type_raises():
  with pytest.raises(ValueError, match='BoxPredictor proto'):
    box_predictor_builder.build(hyperparams_builder.build,
                                hyperparams_pb2.Hyperparams(), True, 90)
  with pytest.raises(ValueError, match='score_converter'):
    box_predictor_builder.build_score_converter(7, True)


# --- Faster R-CNN: second-stage (mask_rcnn_box_predictor) and RPN ---------

# faster_rcnn_resnet101_coco.config's second_stage_box_predictor.
FASTER_RCNN_RESNET101_COCO = """
  mask_rcnn_box_predictor {
    use_dropout: false
    dropout_keep_probability: 1.0
    fc_hyperparams {
      op: FC
      regularizer { l2_regularizer { weight: 0.0 } }
      initializer { variance_scaling_initializer {
          factor: 1.0 uniform: true mode: FAN_AVG } }
    }
  }
"""
# Its first_stage_box_predictor_conv_hyperparams.
RPN_HYPERPARAMS = """
  op: CONV
  regularizer { l2_regularizer { weight: 0.0 } }
  initializer { truncated_normal_initializer { stddev: 0.01 } }
"""


def _second_stage(text, features_shape, num_classes=90, is_training=True):
  """Builds and predicts stage 2 under the meta-architecture's scope."""
  with tf.Graph().as_default():
    predictor = _build(text, is_training=is_training, num_classes=num_classes)
    outputs = predictor.predict([tf.zeros(features_shape)], [1],
                                scope='SecondStageBoxPredictor',
                                prediction_stage=2)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    shapes = {key: value.shape.as_list() for key, value in outputs.items()}
  return predictor, variables, shapes


def test_faster_rcnn_resnet101_second_stage_checkpoint_names():
  # ResNet-101's second stage gives 2048 channels; 90 COCO classes.
  predictor, variables, shapes = _second_stage(FASTER_RCNN_RESNET101_COCO,
                                               [6, 2, 2, 2048])
  assert isinstance(predictor, mask_rcnn_box_predictor.MaskRCNNBoxPredictor)
  assert variables == {
      'SecondStageBoxPredictor/BoxEncodingPredictor/weights': [2048, 360],
      'SecondStageBoxPredictor/BoxEncodingPredictor/biases': [360],
      'SecondStageBoxPredictor/ClassPredictor/weights': [2048, 91],
      'SecondStageBoxPredictor/ClassPredictor/biases': [91]}
  assert shapes == {BOXES: [6, 1, 90, 4], CLASSES: [6, 1, 91]}
  assert predictor.get_third_stage_prediction_heads() == []


def test_mask_rcnn_options_are_honoured():
  text = FASTER_RCNN_RESNET101_COCO.replace(
      'use_dropout: false', 'use_dropout: true share_box_across_classes: true '
      'box_code_size: 5').replace('dropout_keep_probability: 1.0',
                                  'dropout_keep_probability: 0.5')
  _, variables, shapes = _second_stage(text, [4, 3, 3, 16], num_classes=3)
  assert variables['SecondStageBoxPredictor/BoxEncodingPredictor/weights'] == [
      16, 5]
  assert shapes == {BOXES: [4, 1, 1, 5], CLASSES: [4, 1, 4]}
  with tf.Graph().as_default():
    _build(text, num_classes=3).predict([tf.zeros([4, 3, 3, 16])], [1])
    ops = [op.name for op in tf.compat.v1.get_default_graph().get_operations()]
    assert any('Dropout' in name for name in ops)
  with tf.Graph().as_default():
    predictor = box_predictor_builder.build(
        hyperparams_builder.build, _config(text), True, 3,
        add_background_class=False)
    outputs = predictor.predict([tf.zeros([4, 3, 3, 16])], [1])
    assert outputs[CLASSES].shape.as_list() == [4, 1, 3]


@pytest.mark.parametrize('field', [
    'conv_hyperparams { op: CONV }', 'mask_height: 33', 'mask_width: 33',
    'mask_prediction_num_conv_layers: 4', 'mask_prediction_conv_depth: 0',
    'masks_are_class_agnostic: true', 'convolve_then_upsample_masks: true'])
def test_mask_fields_without_masks_raise_user_input_error(field):
  text = FASTER_RCNN_RESNET101_COCO.replace(
      'use_dropout: false', 'use_dropout: false ' + field)
  name = field.split()[0].rstrip(':')
  with pytest.raises(UserInputError, match=r'mask_rcnn_box_predictor\.%s.*'
                     'predict_instance_masks' % name):
    _build(text)


def test_mask_head_is_the_third_stage():
  text = FASTER_RCNN_RESNET101_COCO.replace(
      'use_dropout: false', 'use_dropout: false predict_instance_masks: true '
      'mask_height: 6 mask_width: 6 masks_are_class_agnostic: true '
      'conv_hyperparams { op: CONV }')
  with tf.Graph().as_default():
    predictor = _build(text, num_classes=3)
    outputs = predictor.predict([tf.zeros([4, 3, 3, 16])], [1],
                                prediction_stage=3)
  assert predictor.get_third_stage_prediction_heads() == [MASKS]
  assert outputs[MASKS].shape.as_list() == [4, 1, 1, 6, 6]
  with pytest.raises(UserInputError, match='conv_hyperparams is required'):
    _build(text.replace('conv_hyperparams { op: CONV }', ''))
  with pytest.raises(UserInputError, match='mask_height'):
    _build(text.replace('mask_height: 6', 'mask_height: 0'))


@pytest.mark.parametrize('text,match', [
    ('mask_rcnn_box_predictor { predict_keypoints: true }',
     r'predict_keypoints: keypoint heads'),
    ('mask_rcnn_box_predictor { }', r'fc_hyperparams must set op: FC'),
    ('mask_rcnn_box_predictor { fc_hyperparams { op: CONV } }',
     r'fc_hyperparams must set op: FC'),
    ('mask_rcnn_box_predictor { fc_hyperparams { op: FC } use_dropout: true '
     'dropout_keep_probability: 0.0 }', r'dropout_keep_probability'),
])
def test_mask_rcnn_bad_options_raise_user_input_error(text, match):
  with pytest.raises(UserInputError, match=match):
    _build(text)


def test_rpn_box_predictor_checkpoint_names():
  # faster_rcnn_resnet101_coco: 12 anchors per location (4 scales x 3
  # aspect ratios) on the 512-deep RPN features.
  hyperparams = hyperparams_builder.build(
      text_format.Parse(RPN_HYPERPARAMS, hyperparams_pb2.Hyperparams()), True)
  with tf.Graph().as_default():
    predictor = box_predictor_builder.build_rpn_box_predictor(
        is_training=True, conv_hyperparams_fn=hyperparams, box_code_size=4)
    outputs = predictor.predict([tf.zeros([2, 5, 7, 512])], [12],
                                scope='FirstStageBoxPredictor')
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    shapes = {key: [t.shape.as_list() for t in value]
              for key, value in outputs.items()}
  assert predictor.num_classes == 1
  assert variables == {
      'FirstStageBoxPredictor/BoxEncodingPredictor/weights': [1, 1, 512, 48],
      'FirstStageBoxPredictor/BoxEncodingPredictor/biases': [48],
      'FirstStageBoxPredictor/ClassPredictor/weights': [1, 1, 512, 24],
      'FirstStageBoxPredictor/ClassPredictor/biases': [24]}
  # Two objectness logits (background, object) per anchor, no sigmoid.
  assert shapes == {BOXES: [[2, 420, 1, 4]], CLASSES: [[2, 420, 2]]}


def _is_two_stage(path):
  return os.path.basename(path).startswith(('faster_rcnn', 'mask_rcnn',
                                            'context_rcnn'))


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_two_stage))
def test_upstream_two_stage_predictors(path):
  model = config_util.get_configs_from_pipeline_file(
      path)['model'].faster_rcnn
  second_stage = model.second_stage_box_predictor
  with tf.Graph().as_default():
    rpn = box_predictor_builder.build_rpn_box_predictor(
        True, hyperparams_builder.build(
            model.first_stage_box_predictor_conv_hyperparams, True))
    rpn.predict([tf.zeros([1, 3, 3, 8])], [12],
                scope='FirstStageBoxPredictor')
    predictor = box_predictor_builder.build(
        hyperparams_builder.build, second_stage, True, model.num_classes)
    outputs = predictor.predict([tf.zeros([2, 2, 2, 8])], [1],
                                scope='SecondStageBoxPredictor')
  assert outputs[CLASSES].shape.as_list() == [2, 1, model.num_classes + 1]
  assert bool(predictor.get_third_stage_prediction_heads()) == (
      second_stage.mask_rcnn_box_predictor.predict_instance_masks)


def test_fc_hyperparams_reach_the_fully_connected_layers():
  # stddev 0 makes every weight 1; the l2 weight shows in the losses.
  text = """
    mask_rcnn_box_predictor {
      fc_hyperparams {
        op: FC
        activation: RELU_6
        regularizer { l2_regularizer { weight: 0.5 } }
        initializer { random_normal_initializer { mean: 1.0 stddev: 0.0 } }
      }
    }"""
  with tf.Graph().as_default():
    outputs = _build(text, num_classes=2).predict(
        [tf.fill([3, 2, 2, 8], -1.0)], [1])
    losses = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      outputs, losses = sess.run((outputs, losses))
  # Linear outputs (the hyperparams' RELU_6 is overridden): 8 * -1.
  np.testing.assert_allclose(outputs[BOXES], np.full([3, 1, 2, 4], -8.0))
  np.testing.assert_allclose(outputs[CLASSES], np.full([3, 1, 3], -8.0))
  # slim's l2: 0.5 * sum(w ** 2) / 2 for the [8, 8] and [8, 3] weights.
  np.testing.assert_allclose(sorted(losses), [0.5 * 24 / 2, 0.5 * 64 / 2])


# --- R-FCN: second-stage rfcn_box_predictor -------------------------------

# rfcn_resnet101_coco.config's second_stage_box_predictor (its conv
# hyperparams are those of the RPN).
RFCN_RESNET101_COCO = """
  rfcn_box_predictor {
    conv_hyperparams { %s }
    crop_height: 18
    crop_width: 18
    num_spatial_bins_height: 3
    num_spatial_bins_width: 3
  }
""" % RPN_HYPERPARAMS


def _rfcn_second_stage(text, features_shape, num_proposals, num_classes=90):
  """Builds R-FCN's stage 2 under the meta-architecture's scope."""
  with tf.Graph().as_default():
    predictor = _build(text, num_classes=num_classes)
    outputs = predictor.predict(
        [tf.zeros(features_shape)], [1], scope='SecondStageBoxPredictor',
        proposal_boxes=tf.zeros([features_shape[0], num_proposals, 4]))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    shapes = {key: [t.shape.as_list() for t in value]
              for key, value in outputs.items()}
  return predictor, variables, shapes


def test_rfcn_resnet101_second_stage_checkpoint_names():
  # ResNet-101's block4 gives 2048 channels; default depth 1024; 3 x 3 bins
  # of 90 classes x 4 box codes and of 91 logits.
  predictor, variables, shapes = _rfcn_second_stage(RFCN_RESNET101_COCO,
                                                    [2, 4, 5, 2048], 7)
  assert isinstance(predictor, rfcn_box_predictor.RfcnBoxPredictor)
  assert variables == {
      'SecondStageBoxPredictor/reduce_depth/weights': [1, 1, 2048, 1024],
      'SecondStageBoxPredictor/reduce_depth/biases': [1024],
      'SecondStageBoxPredictor/refined_locations/weights': [1, 1, 1024, 3240],
      'SecondStageBoxPredictor/refined_locations/biases': [3240],
      'SecondStageBoxPredictor/class_predictions/weights': [1, 1, 1024, 819],
      'SecondStageBoxPredictor/class_predictions/biases': [819]}
  assert shapes == {BOXES: [[14, 1, 90, 4]], CLASSES: [[14, 1, 91]]}


def test_rfcn_options_are_honoured():
  text = """
    rfcn_box_predictor {
      conv_hyperparams {
        op: CONV
        initializer { truncated_normal_initializer { stddev: 0.01 } }
        batch_norm { scale: true }
      }
      depth: 8
      box_code_size: 5
      crop_height: 4
      crop_width: 6
      num_spatial_bins_height: 2
      num_spatial_bins_width: 3
    }"""
  _, variables, shapes = _rfcn_second_stage(text, [1, 3, 3, 16], 2,
                                            num_classes=3)
  prefix = 'SecondStageBoxPredictor/'
  assert variables[prefix + 'reduce_depth/weights'] == [1, 1, 16, 8]
  assert variables[prefix + 'reduce_depth/BatchNorm/gamma'] == [8]
  assert variables[prefix + 'refined_locations/weights'] == [1, 1, 8, 90]
  assert variables[prefix + 'class_predictions/BatchNorm/beta'] == [24]
  assert not any(name.endswith('biases') for name in variables)
  assert shapes == {BOXES: [[2, 1, 3, 5]], CLASSES: [[2, 1, 4]]}


@pytest.mark.parametrize('change,match', [
    (('crop_height: 18', 'crop_height: 16'),
     r'crop_height \(16\) must be a multiple of num_spatial_bins_height'),
    (('crop_width: 18', 'crop_width: 10'),
     r'crop_width \(10\) must be a multiple of num_spatial_bins_width'),
    (('num_spatial_bins_width: 3', 'num_spatial_bins_width: 0'),
     'num_spatial_bins_width must be >= 1'),
    (('crop_height: 18', 'depth: 0'), 'rfcn_box_predictor.depth must be >= 1'),
    (('op: CONV', 'op: FC'), 'conv_hyperparams must set op: CONV'),
])
def test_rfcn_bad_options_raise_user_input_error(change, match):
  with pytest.raises(UserInputError, match=match):
    _build(RFCN_RESNET101_COCO.replace(*change))


def test_rfcn_needs_conv_hyperparams():
  with pytest.raises(UserInputError,
                     match='rfcn_box_predictor.conv_hyperparams is required'):
    _build('rfcn_box_predictor { }')


def _is_rfcn(path):
  return os.path.basename(path).startswith('rfcn')


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_rfcn))
def test_upstream_rfcn_predictors(path):
  model = config_util.get_configs_from_pipeline_file(
      path)['model'].faster_rcnn
  _, variables, shapes = _rfcn_second_stage(
      text_format.MessageToString(model.second_stage_box_predictor),
      [1, 3, 3, 8], 4, num_classes=model.num_classes)
  slots = model.num_classes + 1
  assert variables['SecondStageBoxPredictor/class_predictions/weights'] == [
      1, 1, 1024, 9 * slots]
  assert shapes == {BOXES: [[4, 1, model.num_classes, 4]],
                    CLASSES: [[4, 1, slots]]}

