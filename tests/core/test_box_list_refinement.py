"""The original's box_list_ops additions, called as its users call them:
giou, l1, scale_height_width, box voting and refinement, random box choices,
concatenate's argument checks."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops


def _boxlist(rows, **fields):
  boxes = box_list.BoxList(tf.constant(np.array(rows, np.float32).reshape(-1,
                                                                          4)))
  for name, values in fields.items():
    boxes.add_field(name, tf.constant(values))
  return boxes


def test_giou_pairwise(execute):
  def graph_fn():
    first = _boxlist([[0, 0, 2, 2], [0, 0, 1, 1]])
    second = _boxlist([[0, 0, 2, 2], [3, 3, 4, 4], [1, 1, 3, 3]])
    return (box_list_ops.giou(first, second),
            box_list_ops.matched_giou(first, _boxlist([[0, 0, 2, 2],
                                                       [0, 0, 1, 1]])))
  pairwise, matched = execute(graph_fn)
  # [0,0,2,2] vs [3,3,4,4]: IoU 0, enclosing 16, union 5 -> -11/16.
  # [0,0,2,2] vs [1,1,3,3]: IoU 1/7, enclosing 9, union 7 -> 1/7 - 2/9.
  # [0,0,1,1] vs [0,0,2,2]: IoU 1/4, enclosing = union -> 1/4.
  # [0,0,1,1] vs [3,3,4,4]: enclosing 16, union 2 -> -14/16.
  # [0,0,1,1] vs [1,1,3,3]: enclosing 9, union 5 -> -4/9.
  np.testing.assert_allclose(
      pairwise, [[1., -11. / 16, 1. / 7 - 2. / 9],
                 [0.25, -14. / 16, -4. / 9]], rtol=1e-6)
  np.testing.assert_allclose(matched, [1., 1.])


def test_giou_of_zero_area_boxes_is_zero(execute):
  out = execute(lambda: box_list_ops.giou(_boxlist([[1, 1, 1, 1]]),
                                          _boxlist([[1, 1, 1, 1]])))
  np.testing.assert_array_equal(out, [[0.]])


def test_l1_pairwise_on_centers_and_sizes(execute):
  out = execute(lambda: box_list_ops.l1(
      _boxlist([[0, 0, 2, 2]]), _boxlist([[0, 0, 2, 2], [1, 0, 5, 4]])))
  # Second: center (3, 2) size (4, 4) vs (1, 1) (2, 2): 2 + 1 + 2 + 2.
  np.testing.assert_allclose(out, [[0., 7.]])


def test_scale_height_width_keeps_centers_and_fields(execute):
  def graph_fn():
    boxes = box_list_ops.scale_height_width(
        _boxlist([[1, 2, 3, 6]], scores=[0.5]), 2.0, 0.5)
    return boxes.get(), boxes.get_field('scores')
  boxes, scores = execute(graph_fn)
  np.testing.assert_allclose(boxes, [[0, 3, 4, 5]])
  np.testing.assert_allclose(scores, [0.5])


def test_box_voting_averages_matching_boxes(execute):
  def graph_fn():
    pool = _boxlist([[0.1, 0.1, 0.4, 0.4], [0.1, 0.1, 0.5, 0.5],
                     [0.6, 0.6, 0.8, 0.8]], scores=[0.8, 0.2, 0.5])
    selected = _boxlist([[0.1, 0.1, 0.4, 0.4], [0.6, 0.6, 0.8, 0.8]],
                        labels=[1, 2])
    voted = box_list_ops.box_voting(selected, pool, iou_thresh=0.5)
    return voted.get(), voted.get_field('scores'), voted.get_field('labels')
  boxes, scores, labels = execute(graph_fn)
  # First: boxes 0 and 1 vote (IoU 0.5625), weighted 0.8 / 0.2.
  np.testing.assert_allclose(boxes, [[0.1, 0.1, 0.42, 0.42],
                                     [0.6, 0.6, 0.8, 0.8]], rtol=1e-5)
  np.testing.assert_allclose(scores, [0.5, 0.5], rtol=1e-6)
  np.testing.assert_array_equal(labels, [1, 2])


def test_box_voting_fails_for_an_unmatched_box(execute):
  def graph_fn():
    pool = _boxlist([[0.1, 0.1, 0.4, 0.4]], scores=[0.8])
    return box_list_ops.box_voting(_boxlist([[0.6, 0.6, 0.8, 0.8]]),
                                   pool).get()
  with pytest.raises(tf.errors.InvalidArgumentError, match='must match'):
    execute(graph_fn)


def test_box_voting_argument_checks():
  with tf.Graph().as_default():
    pool = _boxlist([[0, 0, 1, 1]], scores=[1.])
    with pytest.raises(ValueError, match='iou_thresh'):
      box_list_ops.box_voting(pool, pool, iou_thresh=1.5)
    with pytest.raises(ValueError, match='selected_boxes'):
      box_list_ops.box_voting(pool.get(), pool)
    with pytest.raises(ValueError, match='scores'):
      box_list_ops.refine_boxes(_boxlist([[0, 0, 1, 1]]), 0.5, 10)
    with pytest.raises(ValueError, match='classes'):
      box_list_ops.refine_boxes_multi_class(pool, 2, 0.5, 10)


def test_refine_boxes_multi_class(execute):
  def graph_fn():
    pool = _boxlist([[0.1, 0.1, 0.4, 0.4], [0.1, 0.1, 0.45, 0.45],
                     [0.1, 0.1, 0.4, 0.4], [0.6, 0.6, 0.8, 0.8]],
                    scores=[0.9, 0.3, 0.6, 0.7], classes=[0, 0, 1, 1])
    refined = box_list_ops.refine_boxes_multi_class(pool, 2, 0.5, 10)
    single = box_list_ops.refine_boxes(pool, 0.5, 10)
    return (refined.get_field('scores'), refined.get_field('classes'),
            single.num_boxes())
  scores, classes, single_count = execute(graph_fn)
  # Class 0: one voted box (mean 0.6); class 1: two separate boxes.
  np.testing.assert_allclose(scores, [0.7, 0.6, 0.6], rtol=1e-6)
  np.testing.assert_array_equal(sorted(classes), [0, 1, 1])
  assert single_count == 2


def test_select_random_box_and_default(execute):
  def graph_fn():
    boxes = _boxlist([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]])
    return (box_list_ops.select_random_box(boxes, seed=1),
            box_list_ops.select_random_box(_boxlist(np.zeros([0, 4]))))
  (box, valid), (default, default_valid) = execute(graph_fn)
  assert valid and not default_valid
  assert box.shape == (1, 4)
  assert any(np.allclose(box[0], row)
             for row in ([.1, .2, .3, .4], [.5, .6, .7, .8]))
  np.testing.assert_array_equal(default, [[-1, -1, -1, -1]])


def test_get_minimal_coverage_box(execute):
  def graph_fn():
    return (box_list_ops.get_minimal_coverage_box(
        _boxlist([[0.1, 0.5, 0.3, 0.6], [0.2, 0.1, 0.9, 0.4]])),
            box_list_ops.get_minimal_coverage_box(_boxlist(np.zeros([0, 4]))))
  cover, default = execute(graph_fn)
  np.testing.assert_allclose(cover, [[0.1, 0.1, 0.9, 0.6]])
  np.testing.assert_array_equal(default, [[0, 0, 1, 1]])


def test_sample_boxes_by_jittering(execute):
  def graph_fn():
    return box_list_ops.sample_boxes_by_jittering(
        _boxlist([[0.2, 0.2, 0.4, 0.4]]), 50, stddev=0.1).get()
  sampled = execute(graph_fn)
  assert sampled.shape == (50, 4)
  assert sampled.min() >= 0 and sampled.max() <= 1
  assert np.all(sampled[:, 2] >= sampled[:, 0])
  assert np.all(sampled[:, 3] >= sampled[:, 1])
  # Corners move by at most a few standard deviations of the 0.2 box size.
  assert np.abs(sampled - [0.2, 0.2, 0.4, 0.4]).max() < 0.2


def test_concatenate_rejects_non_boxlists():
  with tf.Graph().as_default():
    boxes = _boxlist([[0, 0, 1, 1]])
    with pytest.raises(ValueError, match='BoxList objects'):
      box_list_ops.concatenate([boxes, boxes.get()])
    with pytest.raises(ValueError, match='non-empty list'):
      box_list_ops.concatenate(boxes)


def test_visualize_boxes_in_image(execute):
  image = execute(lambda: box_list_ops.visualize_boxes_in_image(
      tf.zeros([8, 8, 3]), _boxlist([[2, 2, 6, 6]])))
  assert image.shape == (8, 8, 3)
  assert image[2, 2:7].max() > 0 and image[4, 4].max() == 0


def test_visualize_boxes_in_image_as_the_originals_test(execute):
  # The original's case: a 6 x 4 image, two boxes in pixels; where any
  # channel is drawn.
  def graph_fn():
    drawn = box_list_ops.visualize_boxes_in_image(
        tf.zeros((6, 4, 3)), _boxlist([[0, 0, 5, 3], [0, 0, 3, 2]]))
    return tf.cast(tf.reduce_sum(drawn, 2) > 0, tf.float32)

  np.testing.assert_array_equal(execute(graph_fn), [
      [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 0, 1, 0], [1, 1, 1, 0],
      [0, 0, 0, 0]])
