"""PASCAL instance segmentation metrics: the original's names, matching by
mask IoU (not box IoU), and the overlap measures against plain numpy."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import overlaps
from od_estimator.metrics import pascal_evaluation
from od_estimator.metrics import pascal_mask_evaluation
from od_estimator.protos import eval_pb2

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORIES = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]
BOX = np.array([[0, 0, 8, 8]], np.float64)


def _triangles():
  """Two masks sharing the box [0, 0, 8, 8]: lower and upper triangle."""
  y, x = np.mgrid[:8, :8]
  return (y >= x).astype(np.uint8), (y < x).astype(np.uint8)


def _add(evaluator, gt_mask, det_masks, det_scores, difficult=None):
  groundtruth = {_IN.groundtruth_boxes: BOX,
                 _IN.groundtruth_classes: np.array([1]),
                 _IN.groundtruth_instance_masks: gt_mask[np.newaxis]}
  if difficult is not None:
    groundtruth[_IN.groundtruth_difficult] = np.array([difficult])
  evaluator.add_single_ground_truth_image_info('a', groundtruth)
  evaluator.add_single_detected_image_info('a', {
      _DET.detection_boxes: np.repeat(BOX, len(det_masks), axis=0),
      _DET.detection_scores: np.array(det_scores),
      _DET.detection_classes: np.ones(len(det_masks), int),
      _DET.detection_masks: np.stack(det_masks)})


def test_names_are_the_originals():
  plain = pascal_mask_evaluation.PascalInstanceSegmentationEvaluator(
      CATEGORIES)
  weighted = (pascal_mask_evaluation.
              WeightedPascalInstanceSegmentationEvaluator(CATEGORIES))
  assert plain.metric_names() == [
      'PascalMasks_Precision/mAP@0.5IOU',
      'PascalMasks_PerformanceByCategory/AP@0.5IOU/cat',
      'PascalMasks_PerformanceByCategory/AP@0.5IOU/dog']
  assert weighted.metric_names() == [
      'WeightedPascalMasks_Precision/mAP@0.5IOU',
      'WeightedPascalMasks_PerformanceByCategory/AP@0.5IOU/cat',
      'WeightedPascalMasks_PerformanceByCategory/AP@0.5IOU/dog']


def test_detections_match_by_mask_not_by_box():
  lower, upper = _triangles()
  # Same box, best score on the wrong half: a false positive by mask IoU,
  # then the right half: AP = area under precision 1/2 at recall 1.
  masks = pascal_mask_evaluation.PascalInstanceSegmentationEvaluator(
      CATEGORIES)
  _add(masks, lower, [upper, lower], [0.9, 0.8])
  result = masks.evaluate()
  assert result['PascalMasks_Precision/mAP@0.5IOU'] == pytest.approx(0.5)
  assert result['PascalMasks_PerformanceByCategory/AP@0.5IOU/cat'] == (
      pytest.approx(0.5))
  assert np.isnan(result['PascalMasks_PerformanceByCategory/AP@0.5IOU/dog'])
  boxes = pascal_evaluation.PascalDetectionEvaluator(CATEGORIES)
  _add(boxes, lower, [upper, lower], [0.9, 0.8])
  assert boxes.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == 1.0


def test_difficult_groundtruth_is_ignored_by_masks_too():
  lower, _ = _triangles()
  evaluator = pascal_mask_evaluation.PascalInstanceSegmentationEvaluator(
      CATEGORIES)
  _add(evaluator, lower, [lower], [0.9], difficult=True)
  assert np.isnan(evaluator.evaluate()['PascalMasks_Precision/mAP@0.5IOU'])


def test_detections_without_masks_are_refused():
  lower, _ = _triangles()
  evaluator = pascal_mask_evaluation.PascalInstanceSegmentationEvaluator(
      CATEGORIES)
  _add(evaluator, lower, [lower], [0.9])
  with pytest.raises(ValueError, match='needs detection_masks'):
    evaluator.add_single_detected_image_info('b', {
        _DET.detection_boxes: BOX, _DET.detection_scores: np.ones(1),
        _DET.detection_classes: np.ones(1, int)})


def test_mask_overlaps_equal_plain_numpy():
  rng = np.random.RandomState(0)
  masks = (rng.uniform(size=(40, 9, 7)) < 0.3).astype(np.uint8)
  masks[3] = 0  # An empty mask: ratios stay finite.
  gt = (rng.uniform(size=(5, 9, 7)) < 0.5).astype(np.uint8)
  inter = np.array([[np.minimum(a, b).sum() for b in gt] for a in masks],
                   np.float32)
  area = masks.sum(axis=(1, 2)).astype(np.float32)
  gt_area = gt.sum(axis=(1, 2)).astype(np.float32)
  union = area[:, None] + gt_area[None, :] - inter
  np.testing.assert_array_equal(
      overlaps.MASKS.iou(masks, gt),
      inter / np.maximum(union, np.float32(1e-7)))
  np.testing.assert_array_equal(
      overlaps.MASKS.coverage(masks, gt),
      inter / (area[:, None] + np.float32(1e-7)))


def _eval_dict():
  """One 6 x 10 image in a batch padded to 8 x 12 (a larger image)."""
  lower, upper = _triangles()
  gt = np.zeros([2, 2, 8, 12], np.uint8)
  det = np.zeros([2, 3, 8, 12], np.uint8)
  gt[0, 0, :6, :6] = lower[:6, :6]
  det[0, 0, :6, :6] = upper[:6, :6]
  det[0, 1, :6, :6] = lower[:6, :6]
  det[0, 2, 6:, :] = 1  # In the padding only: cut away, an empty mask.
  boxes = np.zeros([2, 3, 4], np.float32)
  boxes[0] = [0, 0, 6, 6]
  return {
      _IN.key: np.array([b'a', b'b']),
      _IN.original_image_spatial_shape: np.array([[6, 10], [8, 12]],
                                                 np.int32),
      _IN.num_groundtruth_boxes: np.array([1, 0], np.int32),
      _IN.groundtruth_boxes: np.array([[[0, 0, 6, 6]] * 2] * 2, np.float32),
      _IN.groundtruth_classes: np.array([[1, 0], [0, 0]], np.int64),
      _IN.groundtruth_instance_masks: gt,
      _DET.num_detections: np.array([3, 0], np.int32),
      _DET.detection_boxes: boxes,
      _DET.detection_scores: np.array([[0.9, 0.8, 0.7]] * 2, np.float32),
      _DET.detection_classes: np.ones([2, 3], np.int64),
      _DET.detection_masks: det,
  }


def test_metric_ops_cut_padded_masks_to_each_image():
  with tf.Graph().as_default():
    eval_dict = {name: tf.constant(value)
                 for name, value in _eval_dict().items()}
    config = eval_pb2.EvalConfig(metrics_set=[
        'pascal_voc_instance_segmentation_metrics',
        'weighted_pascal_voc_instance_segmentation_metrics'])
    ops = eval_util.get_eval_metric_ops_for_evaluators(config, CATEGORIES,
                                                       eval_dict)
    with tf.compat.v1.Session() as sess:
      sess.run([update for _, update in ops.values()])
      values = sess.run({name: value for name, (value, _) in ops.items()})
  # FP (upper), TP (lower), FP (empty): precision 1/2 at recall 1.
  assert values['PascalMasks_Precision/mAP@0.5IOU'] == pytest.approx(0.5)
  assert values['WeightedPascalMasks_Precision/mAP@0.5IOU'] == (
      pytest.approx(0.5))
