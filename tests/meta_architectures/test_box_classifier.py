"""BoxClassifier, the part alone, on tiny fake feature maps.

A random 2x2 first-stage feature map of a 32x32 image; proposals in
absolute pixels; the fake second-stage predictor mean-pools each crop
(faster_rcnn_parts). Groundtruth classes carry the background column 0.
"""
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.meta_architectures import box_classifier
from od_estimator.predictors import rfcn_box_predictor
from tests.meta_architectures import faster_rcnn_parts as parts

BATCH = 2
DEPTH = 8
NUM_CLASSES = parts.NUM_CLASSES
NUM_PROPOSALS = 3
LOSS_KEYS = ['Loss/BoxClassifierLoss/classification_loss',
             'Loss/BoxClassifierLoss/localization_loss']
# Per image: two quadrant boxes (absolute), classes 1 and 2 with background.
GT_BOXES = [[parts.QUADRANTS[0], parts.QUADRANTS[3]],
            [parts.QUADRANTS[1], parts.QUADRANTS[2]]]
GT_CLASSES = [[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
              [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]]


def _random(shape, seed, low=-1.0, high=1.0):
  return np.random.RandomState(seed).uniform(low, high, shape).astype(
      np.float32)


def _random_proposals(seed):
  """[BATCH, NUM_PROPOSALS, 4] absolute boxes inside the image."""
  corners = np.sort(_random([BATCH, NUM_PROPOSALS, 2, 2], seed, 0.0,
                            parts.IMAGE_SIZE), axis=2)
  return np.concatenate([corners[:, :, 0], corners[:, :, 1]], axis=2)


def _groundtruth(boxes_per_image=GT_BOXES, classes_per_image=GT_CLASSES):
  """(boxlists, classes, weights) as the meta-architecture hands them in."""
  boxlists = [box_list.BoxList(tf.constant(boxes, tf.float32,
                                           [len(boxes), 4]))
              for boxes in boxes_per_image]
  classes = [tf.constant(classes, tf.float32, [len(classes),
                                               NUM_CLASSES + 1])
             for classes in classes_per_image]
  weights = [tf.ones([len(boxes)]) for boxes in boxes_per_image]
  return boxlists, classes, weights


def _softmax_cross_entropy_with_background(logits):
  """[...] float: each row's softmax cross-entropy against background."""
  top = logits.max(axis=-1, keepdims=True)
  log_sum = np.log(np.exp(logits - top).sum(axis=-1)) + top[..., 0]
  return log_sum - logits[..., 0]


@pytest.mark.parametrize('is_training', [True, False])
def test_crop_predict_loss_and_detections(execute, is_training):
  def graph(features, proposals):
    classifier, _ = parts.second_stage_parts(is_training)
    image_shapes = tf.constant([[parts.IMAGE_SIZE, parts.IMAGE_SIZE, 3]] *
                               BATCH)
    cropped = classifier.crop(features, proposals / parts.IMAGE_SIZE)
    refined, logits = classifier.predict(cropped)
    num_proposals = tf.constant([NUM_PROPOSALS, 1], tf.int32)
    return {
        'cropped': cropped, 'refined': refined, 'logits': logits,
        'losses': classifier.loss(refined, logits, proposals, num_proposals,
                                  *_groundtruth()),
        'detections': classifier.detections(refined, logits, proposals,
                                            num_proposals, image_shapes)}

  out = execute(graph, [_random([BATCH, 2, 2, DEPTH], 0),
                        _random_proposals(1)])
  rows = BATCH * NUM_PROPOSALS
  # 4x4 crops max-pooled by 2.
  assert out['cropped'].shape == (rows, 2, 2, DEPTH)
  assert out['refined'].shape == (rows, NUM_CLASSES, 4)
  assert out['logits'].shape == (rows, NUM_CLASSES + 1)
  assert sorted(out['losses']) == LOSS_KEYS
  assert all(np.isfinite(value) for value in out['losses'].values())
  detections = out['detections']
  assert detections['detection_boxes'].shape == (BATCH, 5, 4)
  assert detections['detection_multiclass_scores'].shape == (
      BATCH, 5, NUM_CLASSES + 1)
  assert detections['raw_detection_boxes'].shape == (BATCH, NUM_PROPOSALS, 4)
  # Image 1 has one real proposal: at most one detection per class.
  assert detections['num_detections'][1] <= NUM_CLASSES
  assert np.all((detections['detection_boxes'] >= 0) &
                (detections['detection_boxes'] <= 1))


def test_proposals_on_the_groundtruth_cost_log_three(execute):
  """Proposals equal to the groundtruth: zero localization loss, and a
  uniform classifier gives log(num_classes + 1) per proposal."""
  def graph():
    classifier, _ = parts.second_stage_parts(is_training=False)
    num_rows = BATCH * 2
    return classifier.loss(
        tf.zeros([num_rows, NUM_CLASSES, 4]),
        tf.zeros([num_rows, NUM_CLASSES + 1]),
        tf.constant(GT_BOXES, tf.float32), tf.constant([2, 2], tf.int32),
        *_groundtruth())

  loss_dict = execute(graph)
  assert loss_dict['Loss/BoxClassifierLoss/localization_loss'] == (
      pytest.approx(0.0, abs=1e-6))
  assert loss_dict['Loss/BoxClassifierLoss/classification_loss'] == (
      pytest.approx(np.log(NUM_CLASSES + 1), rel=1e-5))


def test_no_groundtruth_is_background_averaged_per_image(execute):
  """Every real proposal is background: no localization loss; the
  classification loss is each image's mean cross-entropy against
  background, averaged over the images (padding rows count nothing)."""
  num_proposals = np.array([NUM_PROPOSALS, 1], np.int32)
  logits = _random([BATCH * NUM_PROPOSALS, NUM_CLASSES + 1], 2, -3.0, 3.0)

  def graph(refined, logits, proposals, num_proposals):
    classifier, _ = parts.second_stage_parts()
    return classifier.loss(refined, logits, proposals, num_proposals,
                           *_groundtruth([[], []], [[], []]))

  loss_dict = execute(graph, [
      _random([BATCH * NUM_PROPOSALS, NUM_CLASSES, 4], 3), logits,
      _random_proposals(4), num_proposals])
  per_row = _softmax_cross_entropy_with_background(logits).reshape(
      BATCH, NUM_PROPOSALS)
  expected = np.mean([per_row[image, :count].mean()
                      for image, count in enumerate(num_proposals)])
  assert loss_dict['Loss/BoxClassifierLoss/localization_loss'] == 0.0
  assert loss_dict['Loss/BoxClassifierLoss/classification_loss'] == (
      pytest.approx(expected, rel=1e-5))


def test_sampled_proposals_are_padded_to_the_batch_size(execute):
  def graph(proposals):
    classifier, _ = parts.second_stage_parts()
    boxlists, classes, weights = _groundtruth()
    return classifier.sample_proposals(
        proposals, tf.ones([BATCH, NUM_PROPOSALS + 1]),
        tf.constant([NUM_PROPOSALS + 1, 2], tf.int32), boxlists, classes,
        weights)

  # The groundtruth boxes themselves, then two random boxes per image.
  proposals = np.concatenate(
      [np.array(GT_BOXES, np.float32),
       _random_proposals(5)[:, :2]], axis=1)
  boxes, scores, num_sampled = execute(graph, [proposals])
  assert boxes.shape == (BATCH, parts.SECOND_STAGE_BATCH, 4)
  assert scores.shape == (BATCH, parts.SECOND_STAGE_BATCH)
  # Positive fraction 0.5 of 3: one positive, then negatives. Image 0 has
  # two random negatives; image 1's two real proposals are both positive,
  # so one is sampled and the rest is zero padding.
  assert num_sampled.tolist() == [parts.SECOND_STAGE_BATCH, 1]
  assert boxes[1, 0].tolist() in np.array(GT_BOXES[1]).tolist()
  np.testing.assert_array_equal(boxes[1, 1:], np.zeros([2, 4]))


@pytest.mark.parametrize('with_roi_crop', [True, False])
def test_classify_crops_or_reads_proposals_from_whole_maps(execute,
                                                           with_roi_crop):
  def graph(features, proposals):
    classifier, _ = parts.second_stage_parts(is_training=False)
    if not with_roi_crop:
      # R-FCN: no ROI crop; the predictor reads the proposals itself.
      predictor = rfcn_box_predictor.RfcnBoxPredictor(
          False, NUM_CLASSES, parts.conv_hyperparams, num_spatial_bins=[2, 2],
          depth=4, crop_size=[2, 2], box_code_size=4)
      classifier = box_classifier.BoxClassifier(
          dataclasses.replace(classifier.params, box_predictor=predictor),
          None, NUM_CLASSES, classifier.params.target_assigner.box_coder,
          False)
    extracted, refined, logits = classifier.classify(
        features, proposals / parts.IMAGE_SIZE, lambda maps: maps + 1.0)
    return {'extracted': extracted, 'refined': refined, 'logits': logits}

  features = _random([BATCH, 2, 2, DEPTH], 2)
  out = execute(graph, [features, _random_proposals(3)])
  rows = BATCH * NUM_PROPOSALS
  if with_roi_crop:
    # The second stage ran on each proposal's pooled 2x2 crop.
    assert out['extracted'].shape == (rows, 2, 2, DEPTH)
  else:
    # Once, on the whole feature maps.
    np.testing.assert_allclose(out['extracted'], features + 1.0)
  assert out['refined'].shape == (rows, NUM_CLASSES, 4)
  assert out['logits'].shape == (rows, NUM_CLASSES + 1)

