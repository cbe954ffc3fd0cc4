"""RegionProposalNetwork, the part alone, on tiny fake feature maps.

The first-stage features are a random 2x2 map of a 32x32 image (stride
16); the anchors are its four quadrants (faster_rcnn_parts).
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from tests.meta_architectures import faster_rcnn_parts as parts

BATCH = 2
DEPTH = 8
IMAGE_SHAPE = [BATCH, parts.IMAGE_SIZE, parts.IMAGE_SIZE, 3]
LOSS_KEYS = ['Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']


def _features(seed=0):
  return np.random.RandomState(seed).uniform(
      -1, 1, [BATCH, 2, 2, DEPTH]).astype(np.float32)


def _boxlists(boxes_per_image):
  return [box_list.BoxList(tf.constant(boxes, tf.float32, [len(boxes), 4]))
          for boxes in boxes_per_image]


def _predict_and_loss(features, boxes_per_image, is_training=True):
  """predict(), proposals() and loss() of one tiny RPN."""
  network = parts.rpn(is_training)
  predictions = network.predict(features, tf.constant(IMAGE_SHAPE))
  proposals = network.proposals(
      predictions['rpn_box_encodings'],
      predictions['rpn_objectness_predictions_with_background'],
      predictions['anchors'], tf.constant([IMAGE_SHAPE[1:]] * BATCH))
  loss_dict = network.loss(
      predictions['rpn_box_encodings'],
      predictions['rpn_objectness_predictions_with_background'],
      predictions['anchors'], _boxlists(boxes_per_image),
      [tf.ones([len(boxes)]) for boxes in boxes_per_image])
  return predictions, proposals, loss_dict


@pytest.mark.parametrize('is_training', [True, False])
def test_output_shapes_and_finite_losses(execute, is_training):
  def graph(features):
    return _predict_and_loss(
        features, [[parts.QUADRANTS[0]], [parts.QUADRANTS[3]]], is_training)

  predictions, proposals, loss_dict = execute(graph, [_features()])
  assert predictions['rpn_box_predictor_features'].shape == (BATCH, 2, 2, 4)
  assert predictions['rpn_box_encodings'].shape == (BATCH, 4, 4)
  assert predictions['rpn_objectness_predictions_with_background'].shape == (
      BATCH, 4, 2)
  np.testing.assert_allclose(predictions['anchors'], parts.QUADRANTS)
  assert proposals['proposal_boxes'].shape == (BATCH, parts.MAX_PROPOSALS, 4)
  assert proposals['proposal_scores'].shape == (BATCH, parts.MAX_PROPOSALS)
  assert proposals['proposal_multiclass_scores'].shape == (
      BATCH, parts.MAX_PROPOSALS, 2)
  assert np.all((proposals['num_proposals'] >= 1) &
                (proposals['num_proposals'] <= parts.MAX_PROPOSALS))
  # Proposals are clipped to the image.
  assert np.all((proposals['proposal_boxes'] >= 0) &
                (proposals['proposal_boxes'] <= parts.IMAGE_SIZE))
  np.testing.assert_allclose(proposals['raw_scores'].sum(axis=-1), 1.0,
                             rtol=1e-5)
  assert sorted(loss_dict) == LOSS_KEYS
  assert all(np.isfinite(value) and value >= 0
             for value in loss_dict.values())


def test_zero_features_cost_log_two_per_sampled_anchor(execute):
  """Zero features give zero codes and logits (zero-initialized biases):
  each sampled anchor's objectness loss is log 2, averaged to log 2; the
  groundtruth boxes equal their anchors, so codes of 0 are exact."""
  def graph(features):
    return _predict_and_loss(
        features, [[parts.QUADRANTS[0]], [parts.QUADRANTS[3]]])[2]

  loss_dict = execute(graph, [np.zeros([BATCH, 2, 2, DEPTH], np.float32)])
  assert loss_dict['Loss/RPNLoss/objectness_loss'] == pytest.approx(
      np.log(2.0), rel=1e-6)
  assert loss_dict['Loss/RPNLoss/localization_loss'] == pytest.approx(
      0.0, abs=1e-7)


def test_no_groundtruth_has_no_localization_loss(execute):
  def graph(features):
    return _predict_and_loss(features, [[], []])[2]

  loss_dict = execute(graph, [_features(1)])
  assert sorted(loss_dict) == LOSS_KEYS
  assert loss_dict['Loss/RPNLoss/localization_loss'] == 0.0
  assert np.isfinite(loss_dict['Loss/RPNLoss/objectness_loss'])
  assert loss_dict['Loss/RPNLoss/objectness_loss'] > 0


def test_variables_keep_the_original_names():
  with tf.Graph().as_default():
    parts.rpn().predict(tf.constant(_features()), tf.constant(IMAGE_SHAPE))
    names = {v.op.name: v.shape.as_list()
             for v in tf.compat.v1.global_variables()}
  assert names['Conv/weights'] == [3, 3, DEPTH, 4]
  assert names['FirstStageBoxPredictor/BoxEncodingPredictor/weights'] == [
      1, 1, 4, 4]
  assert names['FirstStageBoxPredictor/ClassPredictor/weights'] == [
      1, 1, 4, 2]
