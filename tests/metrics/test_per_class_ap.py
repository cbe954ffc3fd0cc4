"""per_class_ap: precision/recall, AP and group-of matching on hand-made
cases (the evaluators on top: test_pascal_evaluation, test_oid_evaluation)."""
import numpy as np
import pytest

from od_estimator.metrics import per_class_ap

GT_A = [0., 0., 10., 10.]


def test_group_of_matching():
  group_box = [50., 50., 100., 100.]
  inside = [[60., 60., 70., 70.], [80., 80., 90., 90.]]  # IoA 1 with group.

  def run(weight, dets, scores):
    evaluation = per_class_ap.ObjectDetectionEvaluation(
        1, group_of_weight=weight)
    evaluation.add_single_ground_truth_image_info(
        'a', np.array([GT_A, group_box]), np.array([0, 0]),
        groundtruth_is_group_of_list=np.array([False, True]))
    evaluation.add_single_detected_image_info(
        'a', np.array(dets), np.array(scores), np.zeros(len(dets), int))
    return evaluation

  # Weight 0: detections inside the group box vanish; 1 instance, AP 1.
  evaluation = run(0.0, inside + [GT_A], [.95, .9, .5])
  assert evaluation.num_gt_instances_per_class[0] == 1
  np.testing.assert_allclose(evaluation.scores_per_class[0][0], [.5])
  assert evaluation.evaluate().mean_ap == 1.0
  # Weight 1: the group box is one more instance, hit once with the best
  # covering score .95 -> entries (.5, TP) and (.95, TP), AP 1.
  evaluation = run(1.0, inside + [GT_A], [.95, .9, .5])
  assert evaluation.num_gt_instances_per_class[0] == 2
  np.testing.assert_allclose(evaluation.scores_per_class[0][0], [.5, .95])
  np.testing.assert_allclose(evaluation.tp_fp_labels_per_class[0][0],
                             [1., 1.])
  assert evaluation.evaluate().mean_ap == 1.0
  # Weight 1 and the group box missed: recall 1/2, AP .5.
  assert run(1.0, [GT_A], [.5]).evaluate().mean_ap == .5


def test_bad_inputs():
  with pytest.raises(ValueError):
    per_class_ap.compute_average_precision(np.array([.5]), None)
  with pytest.raises(ValueError, match='non-decreasing'):
    per_class_ap.compute_average_precision(np.array([1., 1.]),
                                           np.array([.5, .2]))
  with pytest.raises(ValueError, match='smaller than num_gt'):
    per_class_ap.compute_precision_recall(
        np.array([.5, .4]), np.array([True, True]), 1)


def test_precision_recall_helpers():
  assert per_class_ap.compute_precision_recall(
      np.array([.5]), np.array([False]), 0) == (None, None)
  assert np.isnan(per_class_ap.compute_average_precision(None, None))
  assert per_class_ap.compute_average_precision(np.zeros(0), np.zeros(0)) == 0.0
  # Scores out of order are sorted: .9 TP, .6 FP, .3 TP of 4 instances.
  precision, recall = per_class_ap.compute_precision_recall(
      np.array([.3, .9, .6]), np.array([1., 1., 0.]), 4)
  np.testing.assert_allclose(precision, [1., 1 / 2, 2 / 3])
  np.testing.assert_allclose(recall, [1 / 4, 1 / 4, 2 / 4])
