"""core.region_similarity_calculator."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import region_similarity_calculator as rsc
from od_estimator.core import standard_fields as fields

# Areas: boxes1 [3*2=6, 5*1=5]; boxes2 [3*4=12, 1*1=1, 20*20=400].
BOXES1 = np.array([[4, 3, 7, 5], [5, 6, 10, 7]], np.float32)
BOXES2 = np.array([[3, 4, 6, 8], [14, 14, 15, 15], [0, 0, 20, 20]],
                  np.float32)
# Intersections: box1_0 & box2_0 = (6-4)*(5-4) = 2, box1_0 lies inside
# box2_2 (6); box1_1 & box2_0 = (6-5)*(7-6) = 1, box1_1 inside box2_2 (5);
# nothing meets box2_1.
INTERSECTIONS = np.array([[2, 0, 6], [1, 0, 5]], np.float32)


def _compare(calculator, scores=None):
  def graph_fn(b1, b2):
    boxlist1 = box_list.BoxList(b1)
    if scores is not None:
      boxlist1.add_field(fields.BoxListFields.scores, tf.constant(scores))
    return calculator.compare(boxlist1, box_list.BoxList(b2))
  return graph_fn


def test_iou(execute):
  # union = area1 + area2 - intersection.
  expected = [[2 / (6 + 12 - 2), 0, 6 / (6 + 400 - 6)],
              [1 / (5 + 12 - 1), 0, 5 / (5 + 400 - 5)]]
  out = execute(_compare(rsc.IouSimilarity()), [BOXES1, BOXES2])
  np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_ioa_divides_by_second_area(execute):
  expected = [[2 / 12, 0, 6 / 400], [1 / 12, 0, 5 / 400]]
  out = execute(_compare(rsc.IoaSimilarity()), [BOXES1, BOXES2])
  np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_neg_sq_dist(execute):
  # e.g. box1_0 - box2_0 = [1, -1, 1, -3] -> 1 + 1 + 1 + 9 = 12;
  # box1_0 - box2_1 = [-10, -11, -8, -10] -> 100 + 121 + 64 + 100 = 385;
  # box1_0 - box2_2 = [4, 3, -13, -15] -> 16 + 9 + 169 + 225 = 419;
  # box1_1 - box2_0 = [2, 2, 4, -1] -> 4 + 4 + 16 + 1 = 25;
  # box1_1 - box2_1 = [-9, -8, -5, -8] -> 81 + 64 + 25 + 64 = 234;
  # box1_1 - box2_2 = [5, 6, -10, -13] -> 25 + 36 + 100 + 169 = 330.
  expected = -np.array([[12, 385, 419], [25, 234, 330]], np.float32)
  out = execute(_compare(rsc.NegSqDistSimilarity()), [BOXES1, BOXES2])
  np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize('threshold, expected', [
    # IoUs [[0.125, 0, 0.015], [0.0625, 0, 0.0125]]: only (0, 0) > 0.1.
    (0.1, [[0.3, 0, 0], [0, 0, 0]]),
    # Every overlapping pair > 0 takes its row's score.
    (0., [[0.3, 0, 0.3], [0.6, 0, 0.6]]),
])
def test_thresholded_iou(execute, threshold, expected):
  calculator = rsc.ThresholdedIouSimilarity(iou_threshold=threshold)
  out = execute(_compare(calculator, scores=np.array([0.3, 0.6], np.float32)),
                [BOXES1, BOXES2])
  np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_thresholded_iou_threshold_is_strict(execute):
  # IoU exactly 1 is not > 1.
  calculator = rsc.ThresholdedIouSimilarity(iou_threshold=1.)
  box = np.array([[0, 0, 1, 1]], np.float32)
  out = execute(_compare(calculator, scores=np.array([0.7], np.float32)),
                [box, box])
  np.testing.assert_allclose(out, [[0.]])


def test_thresholded_iou_needs_scores():
  with tf.Graph().as_default():
    boxes = box_list.BoxList(tf.constant(BOXES1))
    with pytest.raises(ValueError, match='scores'):
      rsc.ThresholdedIouSimilarity().compare(boxes, boxes)


@pytest.mark.parametrize('calculator', [
    rsc.IouSimilarity(), rsc.IoaSimilarity(), rsc.NegSqDistSimilarity()])
def test_empty_and_degenerate(execute, calculator):
  empty = np.zeros([0, 4], np.float32)
  assert execute(_compare(calculator), [empty, BOXES2]).shape == (0, 3)
  assert execute(_compare(calculator), [BOXES1, empty]).shape == (2, 0)
  # Zero-area boxes: no NaN (IoU/IoA 0, distance well defined).
  points = np.array([[1, 1, 1, 1]], np.float32)
  assert np.all(np.isfinite(execute(_compare(calculator), [points, points])))


def test_compare_scope_and_static_shape():
  with tf.Graph().as_default():
    out = rsc.IouSimilarity().compare(
        box_list.BoxList(tf.constant(BOXES1)),
        box_list.BoxList(tf.constant(BOXES2)), scope='MyCompare')
    assert out.name.startswith('MyCompare/')
    assert out.shape.as_list() == [2, 3]


def test_base_is_abstract():
  with pytest.raises(TypeError):
    rsc.RegionSimilarityCalculator()
