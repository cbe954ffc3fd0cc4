"""MaskRCNNBoxPredictor and its fully connected heads, against numpy."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.core import box_predictor
from od_estimator.predictors import mask_rcnn_box_predictor
from od_estimator.predictors.heads import box_head
from od_estimator.predictors.heads import class_head

BOXES = box_predictor.BOX_ENCODINGS
CLASSES = box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND
NUM_CLASSES = 3


def _fc_hyperparams():
  with slim.arg_scope(
      [slim.fully_connected],
      weights_initializer=tf.compat.v1.random_normal_initializer(seed=1),
      biases_initializer=tf.compat.v1.random_normal_initializer(seed=2),
      weights_regularizer=slim.l2_regularizer(0.5)) as scope:
    return scope


def _predictor(is_training=False, use_dropout=False, share_box=False,
               third_stage_heads=None):
  box = box_head.MaskRCNNBoxHead(
      is_training=is_training, num_classes=NUM_CLASSES,
      fc_hyperparams_fn=_fc_hyperparams, use_dropout=use_dropout,
      dropout_keep_prob=0.5, box_code_size=4,
      share_box_across_classes=share_box)
  classes = class_head.MaskRCNNClassHead(
      is_training=is_training, num_class_slots=NUM_CLASSES + 1,
      fc_hyperparams_fn=_fc_hyperparams, use_dropout=use_dropout,
      dropout_keep_prob=0.5)
  return mask_rcnn_box_predictor.MaskRCNNBoxPredictor(
      is_training=is_training, num_classes=NUM_CLASSES,
      box_prediction_head=box, class_prediction_head=classes,
      third_stage_heads=third_stage_heads or {})


def _run_stage2(features, **kwargs):
  """(predictions, {variable name: value}) after one run."""
  with tf.Graph().as_default():
    predictions = _predictor(**kwargs).predict(
        [tf.constant(features)], [1], scope='SecondStageBoxPredictor')
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
      return sess.run((predictions, variables))


@pytest.mark.parametrize('share_box', [False, True])
def test_stage2_matches_numpy(share_box):
  features = np.random.RandomState(0).uniform(
      size=[6, 3, 3, 8]).astype(np.float32)
  predictions, variables = _run_stage2(features, share_box=share_box)
  num_boxes = 1 if share_box else NUM_CLASSES
  prefix = 'SecondStageBoxPredictor/'
  assert {name: value.shape for name, value in variables.items()} == {
      prefix + 'BoxEncodingPredictor/weights': (8, 4 * num_boxes),
      prefix + 'BoxEncodingPredictor/biases': (4 * num_boxes,),
      prefix + 'ClassPredictor/weights': (8, NUM_CLASSES + 1),
      prefix + 'ClassPredictor/biases': (NUM_CLASSES + 1,)}
  pooled = features.mean(axis=(1, 2))
  expected_boxes = (pooled @ variables[prefix + 'BoxEncodingPredictor/weights']
                    + variables[prefix + 'BoxEncodingPredictor/biases'])
  expected_logits = (pooled @ variables[prefix + 'ClassPredictor/weights'] +
                     variables[prefix + 'ClassPredictor/biases'])
  # No activation: negative outputs survive.
  assert (predictions[CLASSES] < 0).any()
  np.testing.assert_allclose(predictions[BOXES],
                             expected_boxes.reshape(6, 1, num_boxes, 4),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(predictions[CLASSES],
                             expected_logits.reshape(6, 1, NUM_CLASSES + 1),
                             rtol=1e-5, atol=1e-5)


def test_unknown_roi_count_and_regularization():
  with tf.Graph().as_default():
    features = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 8])
    predictions = _predictor().predict([features], [1])
    assert predictions[BOXES].shape.as_list() == [None, 1, NUM_CLASSES, 4]
    assert predictions[CLASSES].shape.as_list() == [None, 1, NUM_CLASSES + 1]
    # The fc arg_scope's regularizer reaches both layers.
    assert len(tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)) == 2


def test_dropout_only_when_training():
  features = np.random.RandomState(1).uniform(
      size=[64, 2, 2, 8]).astype(np.float32)
  plain, _ = _run_stage2(features)
  evaluated, _ = _run_stage2(features, use_dropout=True)
  np.testing.assert_allclose(evaluated[CLASSES], plain[CLASSES], rtol=1e-5)
  trained, _ = _run_stage2(features, is_training=True, use_dropout=True)
  assert not np.allclose(trained[CLASSES], plain[CLASSES])


class _FakeMaskHead:
  """Third-stage head: a per-ROI constant of the expected mask shape."""

  def predict(self, features, num_predictions_per_location):
    assert num_predictions_per_location == 1
    rois = tf.shape(features)[0]
    return tf.ones([rois, 1, NUM_CLASSES, 4, 4])


def test_stage3_runs_the_third_stage_heads():
  with tf.Graph().as_default():
    features = tf.zeros([5, 2, 2, 8])
    predictor = _predictor(third_stage_heads={
        box_predictor.MASK_PREDICTIONS: _FakeMaskHead()})
    assert predictor.get_third_stage_prediction_heads() == [
        box_predictor.MASK_PREDICTIONS]
    assert predictor.get_second_stage_prediction_heads() == (BOXES, CLASSES)
    stage3 = predictor.predict([features], [1], prediction_stage=3)
    assert list(stage3) == [box_predictor.MASK_PREDICTIONS]
    # Stage 3 creates no variables of the box and class heads.
    assert not tf.compat.v1.global_variables()
    assert _predictor().predict([features], [1], prediction_stage=3) == {}


def test_rejects_bad_arguments():
  with tf.Graph().as_default():
    features = tf.zeros([5, 2, 2, 8])
    predictor = _predictor()
    with pytest.raises(ValueError, match='one feature tensor'):
      predictor.predict([features, features], [1, 1])
    with pytest.raises(ValueError, match=r'must be \[1\]'):
      predictor.predict([features], [2])
    with pytest.raises(ValueError, match='prediction_stage must be 2 or 3'):
      predictor.predict([features], [1], prediction_stage=4)
    head = box_head.MaskRCNNBoxHead(False, NUM_CLASSES, _fc_hyperparams,
                                    False, 1.0, 4)
    with pytest.raises(ValueError, match='num_predictions_per_location=1'):
      head.predict(features, num_predictions_per_location=3)
