"""box_list_ops against hand-computed geometry."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops as ops

# Box A: 2x2 at origin (area 4); box B: 2x3 (area 6) overlapping A in a 1x1
# square [1,1]-[2,2]; box C far away.
A = [0., 0., 2., 2.]
B = [1., 1., 3., 4.]
C = [10., 10., 11., 11.]


def _boxes(rows):
  return box_list.BoxList(tf.constant(np.array(rows, np.float32).reshape(-1, 4)))


def test_area_and_height_width(execute):
  def graph():
    boxes = _boxes([A, B])
    return ops.area(boxes), ops.height_width(boxes)
  areas, (heights, widths) = execute(graph)
  np.testing.assert_allclose(areas, [4., 6.])
  np.testing.assert_allclose(heights, [2., 2.])
  np.testing.assert_allclose(widths, [2., 3.])


def test_intersection_iou_ioa(execute):
  def graph():
    first, second = _boxes([A, B]), _boxes([B, C])
    return (ops.intersection(first, second), ops.iou(first, second),
            ops.ioa(first, second))
  inter, iou, ioa = execute(graph)
  np.testing.assert_allclose(inter, [[1., 0.], [6., 0.]])
  # A vs B: 1 / (4 + 6 - 1) = 1/9; B vs B: 1.
  np.testing.assert_allclose(iou, [[1. / 9., 0.], [1., 0.]], rtol=1e-6)
  # Over the area of the second-list box: A∩B / |B| = 1/6.
  np.testing.assert_allclose(ioa, [[1. / 6., 0.], [1., 0.]], rtol=1e-6)


def test_matched_iou_and_zero_area_boxes(execute):
  def graph():
    first = _boxes([A, [0., 0., 0., 0.]])
    second = _boxes([B, [0., 0., 0., 0.]])
    return ops.matched_iou(first, second), ops.iou(first, second)
  matched, full = execute(graph)
  np.testing.assert_allclose(matched, [1. / 9., 0.], rtol=1e-6)
  assert not np.isnan(full).any()


def test_empty_lists_give_empty_shaped_results(execute):
  def graph():
    empty = _boxes(np.zeros([0, 4]))
    return (ops.iou(empty, _boxes([A])), ops.area(empty),
            ops.clip_to_window(empty, tf.constant([0., 0., 1., 1.])).get(),
            ops.non_max_suppression(
                _with_scores(empty, []), 0.5, 10).get(),
            ops.pad_or_clip_box_list(empty, 3).get())
  iou, area, clipped, nms, padded = execute(graph)
  assert iou.shape == (0, 1) and area.shape == (0,)
  assert clipped.shape == (0, 4) and nms.shape == (0, 4)
  np.testing.assert_array_equal(padded, np.zeros([3, 4]))


def _with_scores(boxes, scores):
  boxes.add_field('scores', tf.constant(scores, tf.float32))
  return boxes


def test_clip_to_window_and_filtering(execute):
  def graph():
    boxes = _with_scores(_boxes([[-1., -1., 1., 1.], C]), [0.9, 0.8])
    window = tf.constant([0., 0., 5., 5.])
    return (ops.clip_to_window(boxes, window).get(),
            ops.clip_to_window(boxes, window).get_field('scores'),
            ops.clip_to_window(boxes, window,
                               filter_nonoverlapping=False).get())
  kept, scores, unfiltered = execute(graph)
  np.testing.assert_allclose(kept, [[0., 0., 1., 1.]])
  np.testing.assert_allclose(scores, [0.9])
  np.testing.assert_allclose(unfiltered, [[0., 0., 1., 1.], [5., 5., 5., 5.]])


def test_prune_outside_and_completely_outside(execute):
  def graph():
    boxes = _boxes([A, B, C])
    window = tf.constant([0., 0., 3., 3.])
    inside, inside_idx = ops.prune_outside_window(boxes, window)
    touching, touching_idx = ops.prune_completely_outside_window(boxes, window)
    return inside.get(), inside_idx, touching.get(), touching_idx
  inside, inside_idx, _, touching_idx = execute(graph)
  np.testing.assert_allclose(inside, [A])  # B's xmax 4 > 3.
  np.testing.assert_array_equal(inside_idx, [0])
  np.testing.assert_array_equal(touching_idx, [0, 1])


def test_prune_non_overlapping_boxes(execute):
  def graph():
    kept, idx = ops.prune_non_overlapping_boxes(_boxes([A, C]), _boxes([B]),
                                                min_overlap=0.2)
    return kept.get(), idx
  kept, idx = execute(graph)
  # IoA over A's area: 1/4 >= 0.2; C does not overlap.
  np.testing.assert_allclose(kept, [A])
  np.testing.assert_array_equal(idx, [0])


def test_change_coordinate_frame_and_scale(execute):
  def graph():
    boxes = _boxes([[2., 2., 4., 6.]])
    window = tf.constant([2., 2., 6., 10.])
    return (ops.change_coordinate_frame(boxes, window).get(),
            ops.scale(boxes, 0.5, 2.).get())
  changed, scaled = execute(graph)
  # Window height 4, width 8: (2-2)/4, (2-2)/8, (4-2)/4, (6-2)/8.
  np.testing.assert_allclose(changed, [[0., 0., 0.5, 0.5]])
  np.testing.assert_allclose(scaled, [[1., 4., 2., 12.]])


def test_normalized_absolute_round_trip_and_range_checks(execute):
  def graph():
    absolute = ops.to_absolute_coordinates(_boxes([[0.5, 0.25, 1., 1.]]), 100,
                                           200)
    return absolute.get(), ops.to_normalized_coordinates(absolute, 100,
                                                         200).get()
  absolute, normalized = execute(graph)
  np.testing.assert_allclose(absolute, [[50., 50., 100., 200.]])
  np.testing.assert_allclose(normalized, [[0.5, 0.25, 1., 1.]])
  with pytest.raises(tf.errors.InvalidArgumentError, match='not normalized'):
    execute(lambda: ops.to_absolute_coordinates(_boxes([[0., 0., 5., 5.]]),
                                                10, 10).get())
  with pytest.raises(tf.errors.InvalidArgumentError, match='normalized'):
    execute(lambda: ops.to_normalized_coordinates(
        _boxes([[0., 0., .5, .5]]), 10, 10).get())


def test_gather_boolean_mask_static_and_dynamic(execute):
  def graph():
    boxes = _with_scores(_boxes([A, B, C]), [0.1, 0.2, 0.3])
    indices = tf.constant([2, 0])
    mask = tf.constant([True, False, True])
    return (ops.gather(boxes, indices).get_field('scores'),
            ops.gather(boxes, indices, use_static_shapes=True).get(),
            ops.boolean_mask(boxes, mask).get_field('scores'),
            ops.boolean_mask(boxes, mask, use_static_shapes=True,
                             indicator_sum=2).get())
  scores, static, masked, masked_static = execute(graph)
  np.testing.assert_allclose(scores, [0.3, 0.1])
  np.testing.assert_allclose(static, [C, A])
  np.testing.assert_allclose(masked, [0.1, 0.3])
  np.testing.assert_allclose(masked_static, [A, C])
  with pytest.raises(ValueError, match='rank 1'):
    ops.gather(_boxes([A]), tf.constant([[0]]))
  with pytest.raises(ValueError, match='int32 or int64'):
    ops.gather(_boxes([A]), tf.constant([0.]))


def test_concatenate_sort_filter(execute):
  def graph():
    first = _with_scores(_boxes([A]), [0.2])
    second = _with_scores(_boxes([B, C]), [0.9, 0.5])
    joined = ops.concatenate([first, second])
    return (joined.get_field('scores'),
            ops.sort_by_field(joined, 'scores').get(),
            ops.sort_by_field(joined, 'scores',
                              ops.SortOrder.ascend).get_field('scores'),
            ops.filter_greater_than(joined, 0.4).get_field('scores'))
  joined, by_score, ascending, above = execute(graph)
  np.testing.assert_allclose(joined, [0.2, 0.9, 0.5])
  np.testing.assert_allclose(by_score, [B, C, A])
  np.testing.assert_allclose(ascending, [0.2, 0.5, 0.9])
  np.testing.assert_allclose(above, [0.9, 0.5])
  with pytest.raises(ValueError, match='field'):
    ops.concatenate([_with_scores(_boxes([A]), [1.]), _boxes([B])])


def test_non_max_suppression_drops_overlaps(execute):
  def graph():
    # Second box overlaps the first with IoU 0.81 (0.9x0.9 inside 1x1).
    boxes = _with_scores(_boxes([[0., 0., 1., 1.], [0., 0., .9, .9], C]),
                         [0.9, 0.8, 0.7])
    return ops.non_max_suppression(boxes, 0.5, 10).get_field('scores')
  np.testing.assert_allclose(execute(graph), [0.9, 0.7])


def test_pad_or_clip_keeps_static_shape(execute):
  def graph():
    boxes = _with_scores(_boxes([A, B, C]), [1., 2., 3.])
    clipped = ops.pad_or_clip_box_list(boxes, 2)
    padded = ops.pad_or_clip_box_list(boxes, 4)
    assert clipped.get().shape.as_list() == [2, 4]
    assert padded.get_field('scores').shape.as_list() == [4]
    return clipped.get(), padded.get_field('scores')
  clipped, padded = execute(graph)
  np.testing.assert_allclose(clipped, [A, B])
  np.testing.assert_allclose(padded, [1., 2., 3., 0.])


def test_sq_dist(execute):
  def graph():
    return ops.sq_dist(_boxes([[0., 0., 1., 1.]]), _boxes([[1., 1., 2., 3.]]))
  # Differences 1, 1, 1, 2 -> 1 + 1 + 1 + 4.
  np.testing.assert_allclose(execute(graph), [[7.]])


def test_pad_or_clip_to_a_tensor_length_keeps_the_box_dimension(execute):
  def graph():
    boxes = _boxes([A, B, C])
    padded = ops.pad_or_clip_box_list(boxes, tf.constant(5))
    assert padded.get().shape.as_list()[1:] == [4]
    return padded.get()
  np.testing.assert_allclose(execute(graph), [A, B, C, [0] * 4, [0] * 4])


@pytest.mark.parametrize('dynamic', [False, True])
def test_every_op_accepts_an_empty_list(execute, dynamic):
  def graph(boxes):
    empty = box_list.BoxList(tf.reshape(boxes, [-1, 4]))
    empty.add_field('scores', tf.zeros(tf.shape(empty.get())[:1]))
    one = _boxes([A])
    window = tf.constant([0., 0., 5., 5.])
    no_indices = tf.zeros([0], tf.int32)
    return {
        'height_width': tf.stack(ops.height_width(empty)),
        'scale': ops.scale(empty, 2., 3.).get(),
        'prune_outside': ops.prune_outside_window(empty, window)[0].get(),
        'prune_completely_outside':
            ops.prune_completely_outside_window(empty, window)[0].get(),
        'intersection': ops.intersection(empty, one),
        'matched_iou': ops.matched_iou(empty, empty),
        'ioa': ops.ioa(one, empty),
        'prune_empty': ops.prune_non_overlapping_boxes(empty, one)[0].get(),
        # A has no box to overlap, so it is pruned too.
        'prune_against_empty':
            ops.prune_non_overlapping_boxes(one, empty)[0].get(),
        'change_frame': ops.change_coordinate_frame(empty, window).get(),
        'normalized': ops.to_normalized_coordinates(empty, 10, 10).get(),
        'absolute': ops.to_absolute_coordinates(empty, 10, 10).get(),
        'gather': ops.gather(empty, no_indices).get_field('scores'),
        'matmul_gather':
            ops.gather(empty, no_indices, use_static_shapes=True).get(),
        'boolean_mask': ops.boolean_mask(
            empty, tf.zeros(tf.shape(empty.get())[:1], tf.bool)).get(),
        'concatenate': ops.concatenate([empty, empty]).get(),
        'sort': ops.sort_by_field(empty, 'scores').get(),
        'filter': ops.filter_greater_than(empty, 0.).get(),
    }
  results = execute(graph, [np.zeros([0, 4], np.float32)], dynamic=dynamic)
  expected_shapes = {'height_width': (2, 0), 'intersection': (0, 1),
                     'matched_iou': (0,), 'ioa': (1, 0), 'gather': (0,)}
  for name, value in results.items():
    assert value.shape == expected_shapes.get(name, (0, 4)), name


def test_filter_greater_than_takes_n_by_1_scores(execute):
  def graph():
    boxes = _boxes([A, B, C])
    boxes.add_field('scores', tf.constant([[.3], [.6], [.5]]))
    return ops.filter_greater_than(boxes, .4).get()
  np.testing.assert_allclose(execute(graph), [B, C])
  with tf.Graph().as_default():
    for scores in ([[.3, .6]], [[[.3]]]):
      boxes = _boxes([A] * len(scores))
      boxes.add_field('scores', tf.constant(scores))
      with pytest.raises(ValueError, match=r'\[N\] or \[N, 1\]'):
        ops.filter_greater_than(boxes, .4)
