"""RfcnBoxPredictor against numpy: 1x1 convs and position-sensitive pooling."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.core import box_predictor
from od_estimator.predictors import rfcn_box_predictor
from tests.core import crop_and_resize_reference as reference

BOXES = box_predictor.BOX_ENCODINGS
CLASSES = box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND
NUM_CLASSES = 3
PREFIX = 'SecondStageBoxPredictor/'


def _conv_hyperparams():
  with slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf.compat.v1.random_normal_initializer(seed=1),
      biases_initializer=tf.compat.v1.random_normal_initializer(seed=2)
  ) as scope:
    return scope


def _predictor(num_spatial_bins=(2, 3), crop_size=(4, 6), depth=5,
               box_code_size=4):
  return rfcn_box_predictor.RfcnBoxPredictor(
      is_training=False, num_classes=NUM_CLASSES,
      conv_hyperparams_fn=_conv_hyperparams,
      num_spatial_bins=list(num_spatial_bins), depth=depth,
      crop_size=list(crop_size), box_code_size=box_code_size)


def _inputs(batch=2, num_proposals=3):
  rng = np.random.RandomState(0)
  features = rng.uniform(-1, 1, [batch, 5, 6, 4]).astype(np.float32)
  corners = rng.uniform(0, 1, [batch, num_proposals, 2, 2])
  boxes = np.concatenate([corners.min(axis=2), corners.max(axis=2)], -1)
  return features, boxes.astype(np.float32)


def _conv1x1(inputs, variables, name):
  return (inputs @ variables[PREFIX + name + '/weights'][0, 0] +
          variables[PREFIX + name + '/biases'])


def test_predictions_match_numpy():
  features, boxes = _inputs()
  with tf.Graph().as_default():
    predictions = _predictor().predict(
        [tf.constant(features)], [1], scope='SecondStageBoxPredictor',
        proposal_boxes=tf.constant(boxes))
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
      predictions, variables = sess.run((predictions, variables))
  bins = 2 * 3
  assert {name: value.shape for name, value in variables.items()} == {
      PREFIX + 'reduce_depth/weights': (1, 1, 4, 5),
      PREFIX + 'reduce_depth/biases': (5,),
      PREFIX + 'refined_locations/weights': (1, 1, 5, bins * NUM_CLASSES * 4),
      PREFIX + 'refined_locations/biases': (bins * NUM_CLASSES * 4,),
      PREFIX + 'class_predictions/weights': (1, 1, 5, bins * (NUM_CLASSES + 1)),
      PREFIX + 'class_predictions/biases': (bins * (NUM_CLASSES + 1),)}
  # reduce_depth keeps slim's default ReLU; the score maps are linear.
  net = np.maximum(_conv1x1(features, variables, 'reduce_depth'), 0)
  location_maps = _conv1x1(net, variables, 'refined_locations')
  class_maps = _conv1x1(net, variables, 'class_predictions')
  expected_boxes = reference.position_sensitive_crop(
      location_maps, boxes, [4, 6], [2, 3], global_pool=True)
  expected_classes = reference.position_sensitive_crop(
      class_maps, boxes, [4, 6], [2, 3], global_pool=True)
  (box_encodings,), (class_predictions,) = (predictions[BOXES],
                                            predictions[CLASSES])
  assert (class_predictions < 0).any()
  np.testing.assert_allclose(
      box_encodings, expected_boxes.reshape(6, 1, NUM_CLASSES, 4),
      rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(
      class_predictions, expected_classes.reshape(6, 1, NUM_CLASSES + 1),
      rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('static', [True, False])
def test_output_shapes(static):
  with tf.Graph().as_default():
    if static:
      features, boxes = tf.zeros([2, 7, 9, 16]), tf.zeros([2, 10, 4])
    else:
      features = tf.compat.v1.placeholder(tf.float32, [None, None, None, 16])
      boxes = tf.compat.v1.placeholder(tf.float32, [None, 10, 4])
    predictions = _predictor(num_spatial_bins=[3, 3], crop_size=[9, 9],
                             box_code_size=5).predict(
                                 [features], [1], proposal_boxes=boxes)
  batch_rows = 20 if static else None
  assert [t.shape.as_list() for t in predictions[BOXES]] == [
      [batch_rows, 1, NUM_CLASSES, 5]]
  assert [t.shape.as_list() for t in predictions[CLASSES]] == [
      [batch_rows, 1, NUM_CLASSES + 1]]


def test_no_third_stage():
  predictor = _predictor()
  assert predictor.get_second_stage_prediction_heads() == (BOXES, CLASSES)
  assert predictor.get_third_stage_prediction_heads() == []


@pytest.mark.parametrize('num_features,per_location,match', [
    (2, [1, 1], 'one feature map'),
    (1, [2], 'num_predictions_per_location'),
])
def test_bad_arguments_raise(num_features, per_location, match):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=match):
      _predictor().predict([tf.zeros([1, 4, 4, 4])] * num_features,
                           per_location, proposal_boxes=tf.zeros([1, 2, 4]))
