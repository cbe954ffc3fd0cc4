"""PASCAL evaluators: hand-computed APs, difficult/group-of, names, ops."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import pascal_evaluation
from od_estimator.protos import eval_pb2

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATS = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]


def _add(evaluator, image_id, gt_boxes, gt_classes, det_boxes, det_scores,
         det_classes, **groundtruth_extra):
  groundtruth = {_IN.groundtruth_boxes: np.array(gt_boxes, float).reshape(
      [-1, 4]), _IN.groundtruth_classes: np.array(gt_classes, int)}
  groundtruth.update(groundtruth_extra)
  evaluator.add_single_ground_truth_image_info(image_id, groundtruth)
  evaluator.add_single_detected_image_info(image_id, {
      _DET.detection_boxes: np.array(det_boxes, float).reshape([-1, 4]),
      _DET.detection_scores: np.array(det_scores, float),
      _DET.detection_classes: np.array(det_classes, int)})


# Two cat boxes A, B and three detections, best score first:
#   d1 = A exactly:          IoU(A) = 1                -> TP (takes A)
#   d2 = [0, 0, 10, 12]:     IoU(A) = 100 / 120 = .83  -> FP (A taken)
#   d3 = [20, 20, 30, 35]:   IoU(B) = 100 / 150 = .67  -> TP (takes B)
# cumTP 1, 1, 2; cumFP 0, 1, 1 -> precision 1, 1/2, 2/3; recall 1/2, 1/2, 1.
GT_A, GT_B = [0., 0., 10., 10.], [20., 20., 30., 30.]
TINY_DETS = [[0., 0., 10., 10.], [0., 0., 10., 12.], [20., 20., 30., 35.]]
TINY_SCORES = [.9, .8, .7]


def _tiny(evaluator):
  _add(evaluator, 'img', [GT_A, GT_B], [1, 1], TINY_DETS, TINY_SCORES,
       [1, 1, 1])


def test_hand_computed_ap_on_a_tiny_case():
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  _tiny(evaluator)
  metrics = evaluator.evaluate()
  # Curve padded: recall 0, .5, .5, 1, 1 / precision 0, 1, .5, 2/3, 0; made
  # non-increasing from the right: 1, 1, 2/3, 2/3, 0. Recall steps at .5
  # (precision 1) and 1 (precision 2/3): AP = .5 * 1 + .5 * 2/3 = 5/6.
  assert metrics['PascalBoxes_PerformanceByCategory/AP@0.5IOU/cat'] == (
      pytest.approx(5 / 6))
  # dog has no groundtruth: NaN, and the mean skips it.
  assert np.isnan(metrics['PascalBoxes_PerformanceByCategory/AP@0.5IOU/dog'])
  assert metrics['PascalBoxes_Precision/mAP@0.5IOU'] == pytest.approx(5 / 6)


def test_low_iou_and_low_score_false_positive():
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  # d3 moved to IoU(B) = 100 / 225 < .5: FP. precision 1, 1/2, 1/3 at
  # recall 1/2: AP = .5 * 1 = .5.
  dets = TINY_DETS[:2] + [[20., 20., 35., 35.]]
  _add(evaluator, 'img', [GT_A, GT_B], [1, 1], dets, TINY_SCORES, [1, 1, 1])
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == (
      pytest.approx(.5))


def test_difficult_boxes_are_neither_groundtruth_nor_false_positives():
  difficult_box = [40., 40., 50., 50.]
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  # The .95 detection hits the difficult box: dropped, not an FP (else the
  # A detection would have precision 1/2 and AP = .5). Only A counts: AP 1.
  _add(evaluator, 'a', [GT_A, difficult_box], [1, 1],
       [difficult_box, GT_A], [.95, .5], [1, 1],
       groundtruth_difficult=np.array([False, True]))
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == 1.0
  # Missed difficult box: not a missed instance, AP stays 1 ...
  evaluator.clear()
  _add(evaluator, 'a', [GT_A, difficult_box], [1, 1], [GT_A], [.5], [1],
       groundtruth_difficult=np.array([False, True]))
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == 1.0
  # ... while without the flag recall stops at 1/2: AP = .5 * 1.
  evaluator.clear()
  _add(evaluator, 'a', [GT_A, difficult_box], [1, 1], [GT_A], [.5], [1])
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == .5


def test_group_of_flag_is_ignored_by_pascal_like_the_original():
  results = []
  for extra in ({}, {_IN.groundtruth_group_of: np.array([False, True])}):
    evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
    _add(evaluator, 'a', [GT_A, GT_B], [1, 1], [GT_A], [.5], [1], **extra)
    results.append(evaluator.evaluate())
  # B missed in both: AP = .5.
  np.testing.assert_equal(results[0], results[1])  # NaN dog equal too.
  assert results[0]['PascalBoxes_Precision/mAP@0.5IOU'] == .5


def test_weighted_differs_from_mean_of_class_aps():
  cats = pascal_evaluation.PascalDetectionEvaluator(CATS)
  weighted = pascal_evaluation.WeightedPascalDetectionEvaluator(CATS)
  dog_gt = [[0., 0., 10., 10.], [0., 20., 10., 30.], [0., 40., 10., 50.]]
  for evaluator in (cats, weighted):
    # cat: 1 box, found (score .5). dog: 3 boxes; .9 misses, .8 and .7 hit.
    _add(evaluator, 'a', [[50., 50., 60., 60.]] + dog_gt, [1, 2, 2, 2],
         [[50., 50., 60., 60.], [80., 80., 90., 90.]] + dog_gt[:2],
         [.5, .9, .8, .7], [1, 2, 2, 2])
  # cat AP = 1. dog: precision 0, 1/2, 2/3 at recall 0, 1/3, 2/3; made
  # monotone all 2/3 up to recall 2/3: AP = 2/3 * 2/3 = 4/9.
  # mAP = (1 + 4/9) / 2 = 13/18.
  metrics = cats.evaluate()
  assert metrics['PascalBoxes_PerformanceByCategory/AP@0.5IOU/dog'] == (
      pytest.approx(4 / 9))
  assert metrics['PascalBoxes_Precision/mAP@0.5IOU'] == pytest.approx(13 / 18)
  # Pooled over 4 instances: .9 FP, .8 TP, .7 TP, .5 TP -> precision 0, 1/2,
  # 2/3, 3/4 at recall 0, 1/4, 2/4, 3/4; monotone 3/4 up to recall 3/4:
  # AP = 3/4 * 3/4 = 9/16. Per-class APs stay unweighted.
  metrics = weighted.evaluate()
  assert metrics['WeightedPascalBoxes_Precision/mAP@0.5IOU'] == (
      pytest.approx(9 / 16))
  assert metrics['WeightedPascalBoxes_PerformanceByCategory/AP@0.5IOU/dog'] \
      == pytest.approx(4 / 9)


@pytest.mark.parametrize('bounds, name, expected', [
    # Default bounds: the plain name and the full AP 5/6.
    ((0.0, 1.0), 'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU', 5 / 6),
    # Points with recall <= .5: precision 1, 1/2 at recall .5, .5 -> padded
    # recall 0, .5, .5, 1 / monotone precision 1, 1, .5, 0 -> .5 * 1 = .5.
    ((0.0, 0.5), 'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU@[0.0,0.5]Recall',
     0.5),
    # Points with recall >= .6: only (2/3, recall 1) -> 1 * 2/3.
    ((0.6, 1.0), 'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU@[0.6,1.0]Recall',
     2 / 3),
])
def test_precision_at_recall_bounds(bounds, name, expected):
  evaluator = pascal_evaluation.PrecisionAtRecallDetectionEvaluator(
      CATS, recall_lower_bound=bounds[0], recall_upper_bound=bounds[1])
  assert evaluator.metric_names()[0] == name
  _tiny(evaluator)
  assert evaluator.evaluate()[name] == pytest.approx(expected)
  # The bounds survive clear() (the original's clear() reset them).
  evaluator.clear()
  _tiny(evaluator)
  assert evaluator.evaluate()[name] == pytest.approx(expected)


def test_skip_predictions_for_unlabeled_class():
  def run(skip):
    evaluator = pascal_evaluation.PrecisionAtRecallDetectionEvaluator(
        CATS, skip_predictions_for_unlabeled_class=skip)
    _add(evaluator, 'a', [GT_A], [2], [GT_A], [.5], [2],
         groundtruth_labeled_classes=np.array([0, 0, 1]))
    # Image b labels only cat; its dog detection is dropped when skipping.
    _add(evaluator, 'b', [GT_B], [1], [GT_B, GT_A], [.5, .9], [1, 2],
         groundtruth_labeled_classes=np.array([0, 1, 0]))
    return evaluator.evaluate()[
        'PrecisionAtRecallBoxes_PerformanceByCategory/AP@0.5IOU/dog']

  assert run(True) == 1.0
  # Kept: dog .9 FP then .5 TP -> precision 1/2 at recall 1: AP .5.
  assert run(False) == .5
  evaluator = pascal_evaluation.PrecisionAtRecallDetectionEvaluator(
      CATS, skip_predictions_for_unlabeled_class=True)
  with pytest.raises(ValueError, match='labeled classes'):
    _add(evaluator, 'a', [GT_A], [1], [], [], [],
         groundtruth_labeled_classes=np.array([0, 1]))


def test_nms_option_removes_duplicates():
  evaluator = pascal_evaluation.PascalDetectionEvaluator(
      CATS, nms_iou_threshold=0.5)
  _tiny(evaluator)
  # d2 overlaps d1 with IoU .83 > .5: suppressed, so TP, TP: AP 1.
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == 1.0


def test_empty_and_degenerate_inputs():
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  # Nothing added: every AP and the mean are NaN.
  assert all(np.isnan(v) for v in evaluator.evaluate().values())
  # An image without boxes or detections, and one whose cat is not found.
  _add(evaluator, 'empty', [], [], [], [], [])
  _add(evaluator, 'missed', [GT_A], [1], [], [], [])
  metrics = evaluator.evaluate()
  assert metrics['PascalBoxes_PerformanceByCategory/AP@0.5IOU/cat'] == 0.0
  assert metrics['PascalBoxes_Precision/mAP@0.5IOU'] == 0.0
  # Inverted or empty detection boxes are dropped, not FPs: AP 1.
  evaluator.clear()
  _add(evaluator, 'a', [GT_A], [1], [[5., 5., 1., 9.], [3., 3., 3., 9.],
                                     GT_A], [.9, .8, .5], [1, 1, 1])
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == 1.0
  # Detections of an image with no groundtruth are all false positives:
  # .9 FP then .5 TP -> AP = 1 * 1/2.
  evaluator.clear()
  _add(evaluator, 'a', [GT_A], [1], [GT_A], [.5], [1])
  evaluator.add_single_detected_image_info('no_gt', {
      _DET.detection_boxes: np.array([GT_A]),
      _DET.detection_scores: np.array([.9]),
      _DET.detection_classes: np.array([1])})
  assert evaluator.evaluate()['PascalBoxes_Precision/mAP@0.5IOU'] == .5


def test_bad_inputs():
  with pytest.raises(ValueError, match='1-indexed'):
    pascal_evaluation.PascalDetectionEvaluator([{'id': 0, 'name': 'bg'}])
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  with pytest.raises(ValueError, match='same length'):
    _add(evaluator, 'a', [GT_A], [1], [GT_A], [.5, .6], [1])


def test_metric_names():
  cats = [{'id': 1, 'name': 'cat'}, {'id': 3, 'name': 'dog'}]
  evaluator = pascal_evaluation.PascalDetectionEvaluator(
      cats, matching_iou_threshold=0.75)
  assert evaluator.metric_names() == [
      'PascalBoxes_Precision/mAP@0.75IOU',
      'PascalBoxes_PerformanceByCategory/AP@0.75IOU/cat',
      'PascalBoxes_PerformanceByCategory/AP@0.75IOU/dog']
  assert pascal_evaluation.WeightedPascalDetectionEvaluator(
      cats).metric_names() == [
          'WeightedPascalBoxes_Precision/mAP@0.5IOU',
          'WeightedPascalBoxes_PerformanceByCategory/AP@0.5IOU/cat',
          'WeightedPascalBoxes_PerformanceByCategory/AP@0.5IOU/dog']
  assert pascal_evaluation.PrecisionAtRecallDetectionEvaluator(
      cats, recall_lower_bound=0.2).metric_names() == [
          'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU@[0.2,1.0]Recall',
          'PrecisionAtRecallBoxes_PerformanceByCategory/AP@0.5IOU/cat',
          'PrecisionAtRecallBoxes_PerformanceByCategory/AP@0.5IOU/dog']
  _add(evaluator, 'a', [GT_A], [3], [GT_A], [.5], [3])
  assert set(evaluator.evaluate()) == set(evaluator.metric_names())


def test_registered_in_eval_util():
  config = text_format.Merge("""
    metrics_set: "pascal_voc_detection_metrics"
    metrics_set: "weighted_pascal_voc_detection_metrics"
    metrics_set: "precision_at_recall_detection_metrics"
    recall_lower_bound: 0.5
  """, eval_pb2.EvalConfig())
  evaluators = eval_util.get_evaluators(config, CATS)
  assert [type(e) for e in evaluators] == [
      pascal_evaluation.PascalDetectionEvaluator,
      pascal_evaluation.WeightedPascalDetectionEvaluator,
      pascal_evaluation.PrecisionAtRecallDetectionEvaluator]
  assert evaluators[2].metric_names()[0] == (
      'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU@[0.5,1.0]Recall')


def _random_images(seed, num_images):
  rng = np.random.RandomState(seed)
  images = []
  for i in range(num_images):
    n = rng.randint(1, 5)
    corner = rng.uniform(0, 200, size=(n, 2))
    gt = np.concatenate([corner, corner + rng.uniform(10, 80, (n, 2))], 1)
    extra = rng.uniform(0, 250, size=(2, 4))
    extra[:, 2:] = extra[:, :2] + 30
    det = np.concatenate([gt + rng.normal(0, 6, (n, 4)), extra])
    labels = rng.choice([1, 2], size=n)
    images.append({
        'id': b'img%d' % i, 'gt': gt, 'labels': labels,
        'difficult': rng.uniform(size=n) < .2, 'det': det,
        'scores': rng.uniform(.1, 1., len(det)),
        'det_labels': np.concatenate([labels, rng.choice([1, 2], 2)])})
  return images


@pytest.mark.parametrize('evaluator_class', [
    pascal_evaluation.PascalDetectionEvaluator,
    pascal_evaluation.WeightedPascalDetectionEvaluator,
    pascal_evaluation.PrecisionAtRecallDetectionEvaluator])
def test_estimator_metric_ops_equal_evaluate(evaluator_class):
  images = _random_images(seed=1, num_images=6)
  expected_evaluator = evaluator_class(CATS)
  for im in images:
    _add(expected_evaluator, im['id'], im['gt'], im['labels'], im['det'],
         im['scores'], im['det_labels'],
         groundtruth_difficult=im['difficult'])
  expected = expected_evaluator.evaluate()
  assert 0.2 < expected[expected_evaluator.metric_names()[0]] <= 1.0

  def pad(rows, length, width=None):
    out = np.zeros((length,) + ((width,) if width else ()), np.float32)
    out[:len(rows)] = rows
    return out

  evaluator = evaluator_class(CATS)
  with tf.Graph().as_default():
    placeholder = tf.compat.v1.placeholder
    batch = {
        _IN.key: placeholder(tf.string, [None]),
        _IN.groundtruth_boxes: placeholder(tf.float32, [None, 6, 4]),
        _IN.groundtruth_classes: placeholder(tf.float32, [None, 6]),
        _IN.groundtruth_difficult: placeholder(tf.bool, [None, 6]),
        _IN.num_groundtruth_boxes: placeholder(tf.int32, [None]),
        _DET.detection_boxes: placeholder(tf.float32, [None, 8, 4]),
        _DET.detection_scores: placeholder(tf.float32, [None, 8]),
        _DET.detection_classes: placeholder(tf.float32, [None, 8]),
        _DET.num_detections: placeholder(tf.int32, [None]),
    }
    ops = evaluator.get_estimator_eval_metric_ops(batch)
    assert sorted(ops) == sorted(evaluator.metric_names())
    update = next(iter(ops.values()))[1]
    with tf.compat.v1.Session() as sess:
      for start in range(0, len(images), 4):
        chunk = images[start:start + 4]
        sess.run(update, {
            batch[_IN.key]: [im['id'] for im in chunk],
            batch[_IN.groundtruth_boxes]: [pad(im['gt'], 6, 4)
                                           for im in chunk],
            batch[_IN.groundtruth_classes]: [pad(im['labels'], 6)
                                             for im in chunk],
            batch[_IN.groundtruth_difficult]: [pad(im['difficult'], 6) > 0
                                               for im in chunk],
            batch[_IN.num_groundtruth_boxes]: [len(im['gt']) for im in chunk],
            batch[_DET.detection_boxes]: [pad(im['det'], 8, 4)
                                          for im in chunk],
            batch[_DET.detection_scores]: [pad(im['scores'], 8)
                                           for im in chunk],
            batch[_DET.detection_classes]: [pad(im['det_labels'], 8)
                                            for im in chunk],
            batch[_DET.num_detections]: [len(im['det']) for im in chunk]})
      values = sess.run({name: op[0] for name, op in ops.items()})
  for name, value in expected.items():
    assert values[name] == pytest.approx(value, abs=1e-6), name
