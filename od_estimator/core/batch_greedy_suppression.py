"""Greedy non-max suppression of a whole batch, without an N x N IOU matrix.

Selects exactly what tf.image.non_max_suppression (NonMaxSuppressionV3,
score_threshold -inf) selects image by image: boxes are visited by
descending score (equal scores: lower index first), and a box is kept unless
its IOU with an already kept box is above iou_threshold; NaN and -inf scores
are never selected. The IOU of a pair is computed with the kernel's float32
formula (corners reordered by min/max, 0 when an area is not positive), so
the comparisons with the threshold are the kernel's.

The kernel compares each box with every kept one (O(N^2) per image, serial).
Here only pairs that can overlap by more than the threshold are compared:
with IOU > t the intersection's height exceeds t times either box's height,
so with boxes sorted by ymin, a box can only be suppressed by or suppress a
later box whose ymin lies within (1 - t) of its own height (widened for
float rounding). Those pairs' IOUs give the suppression edges, and the
greedy keep flags are their fixed point: keep(b) = valid(b) and no kept box
ranked before b has an edge to b. Iterating that map from all-valid fixes
the flags in rank order (a box's flag only depends on earlier ones), so the
loop ends at the greedy result.
"""
import tensorflow as tf

from od_estimator.core import shape_utils

# Widening of the ymin window over the real-arithmetic bound, far above the
# few float32 roundings the kernel's IOU and the window's sums make.
_WINDOW_FACTOR = 1.01
_WINDOW_RELATIVE_SLACK = 1e-4
_WINDOW_ABSOLUTE_SLACK = 1e-6


def _corners_and_areas(boxes):
  """[..., 4] boxes -> ymin, xmin, ymax, xmax, area as the kernel's IOU."""
  y1, x1, y2, x2 = tf.unstack(boxes, num=4, axis=-1)
  ymin, ymax = tf.minimum(y1, y2), tf.maximum(y1, y2)
  xmin, xmax = tf.minimum(x1, x2), tf.maximum(x1, x2)
  return ymin, xmin, ymax, xmax, (ymax - ymin) * (xmax - xmin)


def pairwise_iou(corners_a, corners_b):
  """IOU of corresponding boxes, float32 operation for operation the kernel's.

  Args:
    corners_a, corners_b: tuples (ymin, xmin, ymax, xmax, area) of
      same-shaped tensors (from _corners_and_areas).

  Returns:
    IOUs, 0 where either area is not positive.
  """
  ymin_a, xmin_a, ymax_a, xmax_a, area_a = corners_a
  ymin_b, xmin_b, ymax_b, xmax_b, area_b = corners_b
  intersection = (
      tf.maximum(tf.minimum(ymax_a, ymax_b) - tf.maximum(ymin_a, ymin_b), 0.)
      * tf.maximum(tf.minimum(xmax_a, xmax_b) - tf.maximum(xmin_a, xmin_b),
                   0.))
  iou = intersection / (area_a + area_b - intersection)
  return tf.where((area_a > 0.) & (area_b > 0.), iou, tf.zeros_like(iou))


def _candidate_pairs(corners, iou_threshold):
  """Pairs of boxes (flat batch indices) that may overlap above the threshold.

  Every pair of boxes of finite geometry of one image whose IOU can exceed
  iou_threshold (in [0, 1]) appears once; boxes with an area not positive or
  a corner or area not finite appear in none.
  """
  ymin, _, ymax, _, area = corners
  batch_size, num_boxes = shape_utils.combined_static_and_dynamic_shape(ymin)
  isolated = tf.logical_not((area > 0.) & _finite_geometry(corners))
  # Isolated boxes sort last and have empty windows.
  keys = tf.where(isolated, tf.fill(tf.shape(ymin), float('inf')), ymin)
  by_ymin = tf.argsort(keys, axis=1, stable=True)
  sorted_keys = tf.gather(keys, by_ymin, batch_dims=1)
  sorted_heights = tf.gather(ymax - ymin, by_ymin, batch_dims=1)
  window = ((1. - iou_threshold) * _WINDOW_FACTOR + _WINDOW_RELATIVE_SLACK) * (
      sorted_heights) + _WINDOW_ABSOLUTE_SLACK * tf.abs(sorted_keys)
  window_ends = tf.searchsorted(sorted_keys, sorted_keys + window,
                                side='right', out_type=tf.int32)
  positions = tf.range(num_boxes, dtype=tf.int32)[tf.newaxis, :]
  starts = positions + 1
  sorted_isolated = tf.gather(isolated, by_ymin, batch_dims=1)
  limits = tf.where(sorted_isolated, starts, tf.maximum(window_ends, starts))
  offsets = (tf.range(batch_size, dtype=tf.int32) * num_boxes)[:, tf.newaxis]
  later = tf.ragged.range(tf.reshape(starts + offsets, [-1]),
                          tf.reshape(limits + offsets, [-1]),
                          row_splits_dtype=tf.int32)
  flat_by_ymin = tf.reshape(by_ymin + offsets, [-1])
  first = tf.gather(flat_by_ymin, later.value_rowids())
  second = tf.gather(flat_by_ymin, later.flat_values)
  return first, second


def _finite_geometry(corners):
  """Whether each box's corners and area are finite."""
  return tf.math.is_finite(corners[4]) & tf.reduce_all(
      tf.math.is_finite(tf.stack(corners[:4], axis=-1)), axis=-1)


def _kernel_image_by_image(boxes, scores, iou_threshold):
  """The kernel's selections, padded to [batch, num_boxes] with a mask."""
  num_boxes = shape_utils.combined_static_and_dynamic_shape(scores)[1]

  def select(inputs):
    indices = tf.image.non_max_suppression(inputs[0], inputs[1], num_boxes,
                                           iou_threshold)
    count = tf.size(indices)
    padded = tf.pad(indices, [[0, num_boxes - count]])
    padded.set_shape(inputs[1].shape)
    return padded, tf.range(num_boxes) < count

  return tf.map_fn(select, (boxes, scores),
                   fn_output_signature=(tf.int32, tf.bool))


def _greedy_over_candidate_pairs(corners, scores, selectable, iou_threshold):
  """Greedy NMS of boxes of finite geometry: (score order, kept flags)."""
  batch_size, num_boxes = shape_utils.combined_static_and_dynamic_shape(
      scores)
  total = batch_size * num_boxes
  order = tf.argsort(
      tf.where(selectable, scores, tf.fill(tf.shape(scores), float('-inf'))),
      axis=1, direction='DESCENDING', stable=True)
  offsets = (tf.range(batch_size, dtype=tf.int32) * num_boxes)[:, tf.newaxis]
  flat_order = tf.reshape(order + offsets, [-1])
  rank = tf.scatter_nd(flat_order[:, tf.newaxis],
                       tf.range(total, dtype=tf.int32), [total])

  first, second = _candidate_pairs(corners, iou_threshold)
  flat_corners = [tf.reshape(value, [-1]) for value in corners]
  overlaps = pairwise_iou([tf.gather(v, first) for v in flat_corners],
                          [tf.gather(v, second) for v in flat_corners])
  edges = tf.where(overlaps > iou_threshold)[:, 0]
  first = tf.gather(first, edges)
  second = tf.gather(second, edges)
  first_leads = tf.gather(rank, first) < tf.gather(rank, second)
  leaders = tf.where(first_leads, first, second)
  followers = tf.where(first_leads, second, first)
  flat_selectable = tf.reshape(selectable, [-1])

  def step(keep, unused_changed):
    suppressed = tf.math.unsorted_segment_max(
        tf.cast(tf.gather(keep, leaders), tf.int32), followers, total) > 0
    new_keep = flat_selectable & tf.logical_not(suppressed)
    return new_keep, tf.reduce_any(tf.not_equal(new_keep, keep))

  keep, _ = tf.while_loop(lambda unused_keep, changed: changed, step,
                          (flat_selectable, tf.constant(True)))
  return order, tf.reshape(tf.gather(keep, flat_order),
                           [batch_size, num_boxes])


def batch_greedy_suppression(boxes, scores, iou_threshold):
  """Greedy NMS of every image, as tf.image.non_max_suppression selects.

  Args:
    boxes: [batch, num_boxes, 4] float32 (any corner order, as the kernel).
    scores: [batch, num_boxes] float32.
    iou_threshold: Python float in [0, 1].

  Returns:
    indices: [batch, num_boxes] int32 box indices.
    selected: [batch, num_boxes] bool: indices[b][selected[b]] are the boxes
      the kernel selects in image b, in its selection order (with
      max_output_size k: the first k of them).

  Raises:
    ValueError: if iou_threshold is outside [0, 1] (the kernel's range).
  """
  if not 0. <= iou_threshold <= 1.:
    raise ValueError('iou_threshold must be in [0, 1], got %r' %
                     (iou_threshold,))
  with tf.name_scope('BatchGreedySuppression'):
    boxes = tf.stop_gradient(boxes)
    scores = tf.stop_gradient(scores)
    corners = _corners_and_areas(boxes)
    # The kernel's candidates: score > -inf (so never NaN).
    selectable = scores > float('-inf')
    # A candidate with an infinite or NaN corner or area can have a NaN IOU,
    # which the kernel treats as a soft suppression to score 0 (the box
    # re-enters the queue there): left to the kernel itself.
    return tf.cond(
        tf.reduce_any(selectable & tf.logical_not(_finite_geometry(corners))),
        lambda: _kernel_image_by_image(boxes, scores, iou_threshold),
        lambda: _greedy_over_candidate_pairs(corners, scores, selectable,
                                             iou_threshold))
