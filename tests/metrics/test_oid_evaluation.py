"""Open Images evaluators: hand-computed APs with group-of boxes and
verified image-level labels, names, registry and Estimator metric ops."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import oid_evaluation
from od_estimator.metrics import pascal_evaluation
from od_estimator.protos import eval_pb2

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATS = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'},
        {'id': 3, 'name': 'bird'}]
V2 = 'OpenImagesV2_'
CHALLENGE = 'OpenImagesDetectionChallenge_'
AP = 'PerformanceByCategory/AP@0.5IOU/'
MAP = 'Precision/mAP@0.5IOU'

# Image 1: cat box A, cat group-of box G, dog box D; image-level label bird
# (verified, no bird in the image). Cat detections, best score first:
#   c4 [60, 0, 70, 10]   .95  overlaps nothing              -> FP
#   c1 = A               .9   IoU(A) = 1                    -> TP
#   c2 [22, 22, 30, 30]  .8   no IoU with A; inside G       -> group-of
#   c3 [25, 25, 35, 35]  .7   no IoU with A; inside G       -> group-of
#   c5 = A               .5   A already taken; outside G    -> FP
# dog: D found at .4 (TP); bird: a detection at .7 matching nothing (FP).
# Image 2: bird box, found at .6 (TP); a dog detection at .8 (no dog box,
# dog not among the image's labels).
A, G, D = [0, 0, 10, 10], [20, 20, 40, 40], [50, 50, 60, 60]
IMAGE1_GROUNDTRUTH = ([A, G, D], [1, 1, 2], [False, True, False])
IMAGE1_DETECTIONS = (
    [[60, 0, 70, 10], A, [22, 22, 30, 30], [25, 25, 35, 35], A, D,
     [0, 0, 5, 5]],
    [.95, .9, .8, .7, .5, .4, .7],
    [1, 1, 1, 1, 1, 2, 3])
IMAGE2_GROUNDTRUTH = ([[0, 0, 10, 10]], [3], [False])
IMAGE2_DETECTIONS = ([[0, 0, 10, 10], [30, 30, 40, 40]], [.6, .8], [3, 2])


def _groundtruth(boxes, classes, group_of, **extra):
  groundtruth = {
      _IN.groundtruth_boxes: np.array(boxes, float).reshape([-1, 4]),
      _IN.groundtruth_classes: np.array(classes, int),
      _IN.groundtruth_group_of: np.array(group_of, bool)}
  groundtruth.update(extra)
  return groundtruth


def _detections(boxes, scores, classes):
  return {_DET.detection_boxes: np.array(boxes, float).reshape([-1, 4]),
          _DET.detection_scores: np.array(scores, float),
          _DET.detection_classes: np.array(classes, int)}


def _evaluate(evaluator, image1_labels=None, **extra):
  """Adds both images; image 1 gets the labels (ids) and extra fields."""
  if image1_labels is not None:
    extra[_IN.groundtruth_image_classes] = np.array(image1_labels, int)
  evaluator.add_single_ground_truth_image_info(
      'img1', _groundtruth(*IMAGE1_GROUNDTRUTH, **extra))
  evaluator.add_single_detected_image_info(
      'img1', _detections(*IMAGE1_DETECTIONS))
  evaluator.add_single_ground_truth_image_info(
      'img2', _groundtruth(*IMAGE2_GROUNDTRUTH))
  evaluator.add_single_detected_image_info(
      'img2', _detections(*IMAGE2_DETECTIONS))
  return evaluator.evaluate()


def test_v2_ignores_detections_inside_group_of_boxes():
  metrics = _evaluate(oid_evaluation.OpenImagesDetectionEvaluator(CATS))
  # cat: group_of_weight 0, so G is no groundtruth (1 cat) and c2, c3 are
  # dropped. Left: c4 FP, c1 TP, c5 FP -> precision 0, 1/2, 1/3 at recall
  # 0, 1, 1; made non-increasing from the right the precision at the one
  # recall step (0 -> 1) is 1/2: AP = 1/2.
  assert metrics[V2 + AP + 'cat'] == pytest.approx(0.5)
  # dog: the image-2 detection (.8) is a FP before the TP (.4): AP = 1/2.
  assert metrics[V2 + AP + 'dog'] == pytest.approx(0.5)
  # bird: image-1 FP (.7) before the image-2 TP (.6): AP = 1/2.
  assert metrics[V2 + AP + 'bird'] == pytest.approx(0.5)
  assert metrics[V2 + MAP] == pytest.approx(0.5)


def test_pascal_counts_the_same_group_of_box_as_an_ordinary_box():
  evaluator = pascal_evaluation.PascalDetectionEvaluator(CATS)
  metrics = _evaluate(evaluator)
  # cat: G is an ordinary box (2 cats); c2 (IoU 64/400) and c3 (IoU
  # 100/400) miss it. c4 FP, c1 TP, c2, c3, c5 FP: precision 0, 1/2, 1/3,
  # 1/4, 1/5 at recall 0, 1/2, ...: AP = 1/2 * 1/2 = 1/4.
  assert metrics['PascalBoxes_' + AP + 'cat'] == pytest.approx(0.25)


def test_challenge_counts_group_of_boxes_and_verified_labels():
  evaluator = oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS)
  metrics = _evaluate(evaluator, image1_labels=[3])
  # cat: G weighs 1, so 2 cats; c2 and c3 become one TP scored .8. Entries
  # c4 .95 FP, c1 .9 TP, G .8 TP, c5 .5 FP: precision 0, 1/2, 2/3, 1/2 at
  # recall 0, 1/2, 1, 1. Non-increasing from the right: 2/3 at recall
  # 1/2 and at 1: AP = 1/2 * 2/3 + 1/2 * 2/3 = 2/3.
  assert metrics[CHALLENGE + AP + 'cat'] == pytest.approx(2 / 3)
  # dog: image 2 neither has dogs nor lists dog: its dog detection is
  # ignored, leaving the TP: AP = 1.
  assert metrics[CHALLENGE + AP + 'dog'] == pytest.approx(1.0)
  # bird: verified in image 1, so the .7 detection there is a FP before the
  # image-2 TP: AP = 1/2.
  assert metrics[CHALLENGE + AP + 'bird'] == pytest.approx(0.5)
  assert metrics[CHALLENGE + MAP] == pytest.approx((2 / 3 + 1 + 0.5) / 3)


def test_challenge_ignores_classes_no_label_verifies():
  evaluator = oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS)
  metrics = _evaluate(evaluator)
  # Without image-level labels image 1 evaluates only cat and dog: the
  # bird detection there is ignored and bird's AP is 1.
  assert metrics[CHALLENGE + AP + 'bird'] == pytest.approx(1.0)
  assert metrics[CHALLENGE + MAP] == pytest.approx((2 / 3 + 1 + 1) / 3)


def test_challenge_reads_the_batched_k_hot_labels_too():
  evaluator = oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS)
  # [num_classes + 1] indexed by class id: bird (3) verified.
  metrics = _evaluate(evaluator, **{
      _IN.groundtruth_labeled_classes: np.array([0, 0, 0, 1.])})
  assert metrics[CHALLENGE + AP + 'bird'] == pytest.approx(0.5)
  with pytest.raises(ValueError, match='num_categories_including_background'):
    evaluator.add_single_ground_truth_image_info('img3', _groundtruth(
        *IMAGE2_GROUNDTRUTH, **{_IN.groundtruth_labeled_classes: np.ones(3)}))


def test_a_group_of_box_nobody_finds_is_missed_only_in_the_challenge():
  groundtruth = _groundtruth([A, G], [1, 1], [False, True])
  detections = _detections([A], [.9], [1])
  results = []
  for evaluator in (oid_evaluation.OpenImagesDetectionEvaluator(CATS),
                    oid_evaluation.OpenImagesDetectionChallengeEvaluator(
                        CATS)):
    evaluator.add_single_ground_truth_image_info('img', groundtruth)
    evaluator.add_single_detected_image_info('img', detections)
    results.append(evaluator.evaluate())
  # V2: one cat, found: AP 1. Challenge: A and G are 2 cats, 1 found:
  # precision 1 up to recall 1/2: AP = 1/2.
  assert results[0][V2 + AP + 'cat'] == pytest.approx(1.0)
  assert results[1][CHALLENGE + AP + 'cat'] == pytest.approx(0.5)


def test_missing_or_empty_group_of_flags_mean_ordinary_boxes():
  evaluator = oid_evaluation.OpenImagesDetectionEvaluator(CATS)
  groundtruth = _groundtruth([A, G], [1, 1], [])
  evaluator.add_single_ground_truth_image_info('img', groundtruth)
  evaluator.add_single_detected_image_info(
      'img', _detections([A, [22, 22, 30, 30]], [.9, .8], [1, 1]))
  # Both boxes ordinary: TP then FP, recall 1/2: AP = 1/2.
  assert evaluator.evaluate()[V2 + AP + 'cat'] == pytest.approx(0.5)


def test_metric_names_are_the_originals():
  v2 = oid_evaluation.OpenImagesDetectionEvaluator(CATS[:1])
  challenge = oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS[:1])
  assert v2.metric_names() == [
      'OpenImagesV2_Precision/mAP@0.5IOU',
      'OpenImagesV2_PerformanceByCategory/AP@0.5IOU/cat']
  assert challenge.metric_names() == [
      'OpenImagesDetectionChallenge_Precision/mAP@0.5IOU',
      'OpenImagesDetectionChallenge_PerformanceByCategory/AP@0.5IOU/cat']


@pytest.mark.parametrize('name,evaluator_class', [
    ('oid_V2_detection_metrics', oid_evaluation.OpenImagesDetectionEvaluator),
    ('open_images_V2_detection_metrics',
     oid_evaluation.OpenImagesDetectionEvaluator),
    ('open_images_metrics', oid_evaluation.OpenImagesDetectionEvaluator),
    ('oid_challenge_detection_metrics',
     oid_evaluation.OpenImagesDetectionChallengeEvaluator),
    ('oid_challenge_object_detection_metrics',
     oid_evaluation.OpenImagesDetectionChallengeEvaluator),
])
def test_registered_under_the_originals_names(name, evaluator_class):
  config = eval_pb2.EvalConfig(metrics_set=[name])
  evaluators = eval_util.get_evaluators(config, CATS)
  assert [type(e) for e in evaluators] == [evaluator_class]


def test_estimator_metric_ops_read_group_of_and_labels_from_the_batch():
  evaluator = oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS)
  reference = _evaluate(
      oid_evaluation.OpenImagesDetectionChallengeEvaluator(CATS),
      image1_labels=[3])

  def pad(rows, length, width=None):
    shape = [length] if width is None else [length, width]
    padded = np.zeros(shape, np.asarray(rows).dtype)
    padded[:len(rows)] = rows
    return padded

  images = [(IMAGE1_GROUNDTRUTH, IMAGE1_DETECTIONS, [0, 0, 0, 1.]),
            (IMAGE2_GROUNDTRUTH, IMAGE2_DETECTIONS, [0, 0, 0, 0.])]
  batch = {name: [] for name in (
      _IN.groundtruth_boxes, _IN.groundtruth_classes, _IN.groundtruth_group_of,
      _IN.num_groundtruth_boxes, _IN.groundtruth_labeled_classes,
      _DET.detection_boxes, _DET.detection_scores, _DET.detection_classes,
      _DET.num_detections)}
  for (boxes, classes, group_of), (det_boxes, scores, det_classes), labels in (
      images):
    batch[_IN.groundtruth_boxes].append(pad(np.array(boxes, float), 4, 4))
    batch[_IN.groundtruth_classes].append(pad(classes, 4))
    batch[_IN.groundtruth_group_of].append(pad(group_of, 4))
    batch[_IN.num_groundtruth_boxes].append(len(classes))
    batch[_IN.groundtruth_labeled_classes].append(labels)
    batch[_DET.detection_boxes].append(pad(np.array(det_boxes, float), 8, 4))
    batch[_DET.detection_scores].append(pad(scores, 8))
    batch[_DET.detection_classes].append(pad(det_classes, 8))
    batch[_DET.num_detections].append(len(scores))
  with tf.Graph().as_default():
    eval_dict = {name: tf.constant(np.array(values))
                 for name, values in batch.items()}
    eval_dict[_IN.key] = tf.constant(['img1', 'img2'])
    metric_ops = evaluator.get_estimator_eval_metric_ops(eval_dict)
    with tf.compat.v1.Session() as session:
      session.run(metric_ops[CHALLENGE + MAP][1])
      values = session.run({name: op[0] for name, op in metric_ops.items()})
  assert values == pytest.approx(reference)


def test_text_config_selects_both_open_images_sets():
  config = text_format.Parse('metrics_set: "oid_V2_detection_metrics" '
                             'metrics_set: "oid_challenge_detection_metrics"',
                             eval_pb2.EvalConfig())
  names = set()
  for evaluator in eval_util.get_evaluators(config, CATS):
    names.update(evaluator.metric_names())
  assert {V2 + MAP, CHALLENGE + MAP} <= names
