"""The confusion matrix on hand-built images: matches, confusions, false
detections and misses counted where they belong."""
import numpy as np

from od_estimator.metrics import confusion_matrix

CAT, DOG = 1, 2
_BOX_A = [0, 0, 10, 10]
_BOX_B = [20, 20, 30, 30]
_BOX_C = [40, 40, 50, 50]


def test_counts_matches_confusions_false_detections_and_misses():
  matrix = confusion_matrix.ConfusionMatrix([CAT, DOG], iou_threshold=0.5,
                                            min_score=0.5)
  # A: a cat found as a cat. B: a dog detected as a cat. C: a cat missed.
  # A second, lower detection on A finds no free groundtruth: false.
  # A detection scoring under min_score is left out.
  errors = matrix.add(
      groundtruth_boxes=[_BOX_A, _BOX_B, _BOX_C],
      groundtruth_classes=[CAT, DOG, CAT],
      detection_boxes=[[0, 0, 10, 9], _BOX_B, [0, 0, 10, 10], _BOX_C],
      detection_scores=[0.9, 0.8, 0.7, 0.3],
      detection_classes=[CAT, CAT, DOG, CAT])
  # Rows: background, cat, dog (groundtruth); columns: detected.
  np.testing.assert_array_equal(matrix.counts, [[0, 0, 1],
                                                [1, 1, 0],
                                                [0, 1, 0]])
  # The missed cat, the false dog, the dog as a cat.
  assert errors == (1, 1, 1) and errors.total == 3
  assert str(errors) == '1 missed, 1 false, 1 wrong class'
  # Counts add up over images; an image with neither adds nothing.
  assert matrix.add(np.zeros([0, 4]), [], np.zeros([0, 4]), [], []) == (
      0, 0, 0)
  assert matrix.add([_BOX_A], [DOG], np.zeros([0, 4]), [], []).missed == 1
  assert matrix.counts[2, 0] == 1


def test_the_best_overlap_above_the_iou_threshold_is_taken():
  half = [0, 0, 10, 5]  # IoU 0.5 with _BOX_A
  pairs = confusion_matrix.match_image(
      [_BOX_A, [0, 0, 10, 6]], [CAT, DOG], [half], [0.9], [DOG],
      iou_threshold=0.5)
  assert pairs == [(DOG, DOG), (CAT, confusion_matrix.BACKGROUND)]
  pairs = confusion_matrix.match_image([_BOX_A], [CAT], [half], [0.9], [CAT],
                                       iou_threshold=0.6)
  assert pairs == [(confusion_matrix.BACKGROUND, CAT),
                   (CAT, confusion_matrix.BACKGROUND)]
