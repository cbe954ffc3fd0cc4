"""Operations on BoxLists: geometry, overlap, selection and padding.

Every function takes BoxLists (boxes ymin, xmin, ymax, xmax) and returns new
BoxLists or tensors; inputs are never modified. Functions that select boxes
carry the extra fields along. All of them accept empty lists.
"""
import tensorflow as tf

from od_estimator.core import box_list
# The original's giou, l1 and random box choices live in sibling modules.
# pylint: disable=unused-import
from od_estimator.core.box_list_distances import giou, l1, matched_giou
from od_estimator.core.box_list_sampling import (
    get_minimal_coverage_box, sample_boxes_by_jittering, select_random_box)
# pylint: enable=unused-import
from od_estimator.core import shape_utils


class SortOrder:
  ascend = 1
  descend = 2


def _corners(boxlist):
  """Returns ymin, xmin, ymax, xmax, each [N, 1]."""
  return tf.split(boxlist.get(), 4, axis=1)


def _copy_extra_fields(target, source, fields=None):
  fields = source.get_extra_fields() if fields is None else fields
  for field in fields:
    target.add_field(field, source.get_field(field))
  return target


def area(boxlist, scope=None):
  """Returns [N] float32 box areas."""
  with tf.name_scope(scope or 'Area'):
    ymin, xmin, ymax, xmax = _corners(boxlist)
    return tf.squeeze((ymax - ymin) * (xmax - xmin), [1])


def height_width(boxlist, scope=None):
  """Returns ([N] heights, [N] widths)."""
  with tf.name_scope(scope or 'HeightWidth'):
    ymin, xmin, ymax, xmax = _corners(boxlist)
    return tf.squeeze(ymax - ymin, [1]), tf.squeeze(xmax - xmin, [1])


def scale(boxlist, y_scale, x_scale, scope=None):
  """Multiplies y coordinates by y_scale and x coordinates by x_scale."""
  with tf.name_scope(scope or 'Scale'):
    y_scale = tf.cast(y_scale, tf.float32)
    x_scale = tf.cast(x_scale, tf.float32)
    ymin, xmin, ymax, xmax = _corners(boxlist)
    scaled = box_list.BoxList(tf.concat(
        [y_scale * ymin, x_scale * xmin, y_scale * ymax, x_scale * xmax], 1))
    return _copy_extra_fields(scaled, boxlist)


def scale_height_width(boxlist, y_scale, x_scale, scope=None):
  """Scales box heights by y_scale and widths by x_scale about their centers."""
  with tf.name_scope(scope or 'ScaleHeightWidth'):
    ycenter, xcenter, height, width = boxlist.get_center_coordinates_and_sizes()
    half_height = 0.5 * tf.cast(y_scale, tf.float32) * height
    half_width = 0.5 * tf.cast(x_scale, tf.float32) * width
    scaled = box_list.BoxList(tf.stack(
        [ycenter - half_height, xcenter - half_width,
         ycenter + half_height, xcenter + half_width], 1))
    return _copy_extra_fields(scaled, boxlist)


def clip_to_window(boxlist, window, filter_nonoverlapping=True, scope=None):
  """Clips boxes to a window, optionally dropping those left with no area.

  Args:
    boxlist: BoxList.
    window: [4] float32 ymin, xmin, ymax, xmax of the clipping window.
    filter_nonoverlapping: drop boxes whose clipped area is zero.
    scope: name scope.

  Returns:
    The clipped BoxList (fewer rows when filtering).
  """
  with tf.name_scope(scope or 'ClipToWindow'):
    ymin, xmin, ymax, xmax = _corners(boxlist)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    ymin = tf.clip_by_value(ymin, win_ymin, win_ymax)
    ymax = tf.clip_by_value(ymax, win_ymin, win_ymax)
    xmin = tf.clip_by_value(xmin, win_xmin, win_xmax)
    xmax = tf.clip_by_value(xmax, win_xmin, win_xmax)
    clipped = _copy_extra_fields(
        box_list.BoxList(tf.concat([ymin, xmin, ymax, xmax], 1)), boxlist)
    if filter_nonoverlapping:
      keep = tf.reshape(tf.where(area(clipped) > 0.0), [-1])
      clipped = gather(clipped, keep)
    return clipped


def prune_outside_window(boxlist, window, scope=None):
  """Drops boxes not entirely inside the window.

  Returns:
    (pruned BoxList, [M] int64 indices of the kept boxes).
  """
  with tf.name_scope(scope or 'PruneOutsideWindow'):
    ymin, xmin, ymax, xmax = _corners(boxlist)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    outside = tf.concat([ymin < win_ymin, xmin < win_xmin,
                         ymax > win_ymax, xmax > win_xmax], 1)
    keep = tf.reshape(tf.where(tf.logical_not(tf.reduce_any(outside, 1))),
                      [-1])
    return gather(boxlist, keep), keep


def prune_completely_outside_window(boxlist, window, scope=None):
  """Drops boxes that do not overlap the window at all.

  Returns:
    (pruned BoxList, [M] int64 indices of the kept boxes).
  """
  with tf.name_scope(scope or 'PruneCompletelyOutsideWindow'):
    ymin, xmin, ymax, xmax = _corners(boxlist)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    outside = tf.concat([ymin >= win_ymax, xmin >= win_xmax,
                         ymax <= win_ymin, xmax <= win_xmin], 1)
    keep = tf.reshape(tf.where(tf.logical_not(tf.reduce_any(outside, 1))),
                      [-1])
    return gather(boxlist, keep), keep


def intersection(boxlist1, boxlist2, scope=None):
  """Returns [N, M] pairwise intersection areas."""
  with tf.name_scope(scope or 'Intersection'):
    ymin1, xmin1, ymax1, xmax1 = _corners(boxlist1)
    ymin2, xmin2, ymax2, xmax2 = _corners(boxlist2)
    heights = tf.maximum(0.0, tf.minimum(ymax1, tf.transpose(ymax2)) -
                         tf.maximum(ymin1, tf.transpose(ymin2)))
    widths = tf.maximum(0.0, tf.minimum(xmax1, tf.transpose(xmax2)) -
                        tf.maximum(xmin1, tf.transpose(xmin2)))
    return heights * widths


def matched_intersection(boxlist1, boxlist2, scope=None):
  """Returns [N] intersection areas of box i of each list (same N)."""
  with tf.name_scope(scope or 'MatchedIntersection'):
    ymin1, xmin1, ymax1, xmax1 = _corners(boxlist1)
    ymin2, xmin2, ymax2, xmax2 = _corners(boxlist2)
    heights = tf.maximum(0.0, tf.minimum(ymax1, ymax2) -
                         tf.maximum(ymin1, ymin2))
    widths = tf.maximum(0.0, tf.minimum(xmax1, xmax2) -
                        tf.maximum(xmin1, xmin2))
    return tf.reshape(heights * widths, [-1])


def iou(boxlist1, boxlist2, scope=None):
  """Returns [N, M] pairwise intersection-over-union; 0 where union is 0."""
  with tf.name_scope(scope or 'IOU'):
    intersections = intersection(boxlist1, boxlist2)
    unions = (tf.expand_dims(area(boxlist1), 1) +
              tf.expand_dims(area(boxlist2), 0) - intersections)
    return tf.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections),
                    tf.truediv(intersections, tf.maximum(unions, 1e-12)))


def matched_iou(boxlist1, boxlist2, scope=None):
  """Returns [N] IoU of box i of each list (same N); 0 where union is 0."""
  with tf.name_scope(scope or 'MatchedIOU'):
    intersections = matched_intersection(boxlist1, boxlist2)
    unions = area(boxlist1) + area(boxlist2) - intersections
    return tf.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections),
                    tf.truediv(intersections, tf.maximum(unions, 1e-12)))


def ioa(boxlist1, boxlist2, scope=None):
  """Returns [N, M] intersection over the area of the boxlist2 box.

  Not symmetric: ioa(b1, b2)[i, j] = |b1_i ∩ b2_j| / |b2_j|.
  """
  with tf.name_scope(scope or 'IOA'):
    intersections = intersection(boxlist1, boxlist2)
    areas = tf.expand_dims(area(boxlist2), 0)
    return tf.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections),
                    tf.truediv(intersections, tf.maximum(areas, 1e-12)))


def sq_dist(boxlist1, boxlist2, scope=None):
  """Returns [N, M] squared distances between the boxes as 4-vectors."""
  with tf.name_scope(scope or 'SqDist'):
    norm1 = tf.reduce_sum(tf.square(boxlist1.get()), 1, keepdims=True)
    norm2 = tf.reduce_sum(tf.square(boxlist2.get()), 1, keepdims=True)
    inner = tf.matmul(boxlist1.get(), boxlist2.get(), transpose_b=True)
    return norm1 + tf.transpose(norm2) - 2.0 * inner


def prune_non_overlapping_boxes(boxlist1, boxlist2, min_overlap=0.0,
                                scope=None):
  """Keeps boxlist1 boxes whose IoA with some boxlist2 box is >= min_overlap.

  Returns:
    (pruned boxlist1, [M] int64 indices of the kept boxes).
  """
  with tf.name_scope(scope or 'PruneNonOverlappingBoxes'):
    overlaps = ioa(boxlist2, boxlist1)  # [M2, N1]: over the boxlist1 area.
    best = tf.reduce_max(overlaps, axis=0)
    keep = tf.reshape(tf.where(best >= min_overlap), [-1])
    return gather(boxlist1, keep), keep


def prune_small_boxes(boxlist, min_side, scope=None):
  """Keeps boxes whose height and width are both at least min_side."""
  with tf.name_scope(scope or 'PruneSmallBoxes'):
    height, width = height_width(boxlist)
    keep = tf.reshape(tf.where(tf.logical_and(height >= min_side,
                                              width >= min_side)), [-1])
    return gather(boxlist, keep)


def change_coordinate_frame(boxlist, window, scope=None):
  """Expresses boxes relative to a window, which becomes [0, 0, 1, 1].

  Args:
    boxlist: BoxList in the same frame as `window`.
    window: [4] ymin, xmin, ymax, xmax.
    scope: name scope.

  Returns:
    BoxList in the window's normalized frame (not clipped).
  """
  with tf.name_scope(scope or 'ChangeCoordinateFrame'):
    height = window[2] - window[0]
    width = window[3] - window[1]
    shifted = box_list.BoxList(
        boxlist.get() - [window[0], window[1], window[0], window[1]])
    return _copy_extra_fields(scale(shifted, 1.0 / height, 1.0 / width),
                              boxlist)


def _range_check(boxes, check_range, maximum, condition, message):
  if not check_range:
    return tf.no_op()
  return tf.compat.v1.assert_equal(condition(tf.reduce_max(boxes), maximum),
                                   True, message=message)


def to_normalized_coordinates(boxlist, height, width, check_range=True,
                              scope=None):
  """Divides absolute pixel coordinates by the image height and width.

  Args:
    boxlist: BoxList in absolute coordinates.
    height, width: image size (ints or scalar tensors).
    check_range: assert at run time that the input is not already
      normalized (some coordinate > 1.01).
    scope: name scope.
  """
  with tf.name_scope(scope or 'ToNormalizedCoordinates'):
    height = tf.cast(height, tf.float32)
    width = tf.cast(width, tf.float32)
    boxes = boxlist.get()
    check = _range_check(
        boxes, check_range and boxlist.num_boxes_static() != 0, 1.01,
        lambda biggest, limit: tf.logical_or(
            biggest > limit, tf.equal(tf.size(boxes), 0)),
        'boxes look normalized already (all coordinates <= 1.01)')
    with tf.control_dependencies([check]):
      return scale(boxlist, 1.0 / height, 1.0 / width)


def to_absolute_coordinates(boxlist, height, width, check_range=True,
                            maximum_normalized_coordinate=1.1, scope=None):
  """Multiplies normalized coordinates by the image height and width.

  Args:
    boxlist: BoxList in normalized coordinates.
    height, width: image size (ints or scalar tensors).
    check_range: assert at run time that no coordinate exceeds
      maximum_normalized_coordinate.
    maximum_normalized_coordinate: the largest coordinate accepted.
    scope: name scope.
  """
  with tf.name_scope(scope or 'ToAbsoluteCoordinates'):
    height = tf.cast(height, tf.float32)
    width = tf.cast(width, tf.float32)
    boxes = boxlist.get()
    check = _range_check(
        boxes, check_range, maximum_normalized_coordinate,
        lambda biggest, limit: biggest <= limit,
        'boxes are not normalized (a coordinate exceeds %s)' %
        maximum_normalized_coordinate)
    with tf.control_dependencies([check]):
      return scale(boxlist, height, width)


def gather(boxlist, indices, fields=None, scope=None, use_static_shapes=False):
  """Selects boxes (and fields) by index.

  Args:
    boxlist: BoxList.
    indices: [M] int32/int64 indices.
    fields: extra fields to carry (default all).
    scope: name scope.
    use_static_shapes: gather with a one-hot matmul, which keeps static
      shapes and is fast on TPU.

  Returns:
    BoxList of M boxes.

  Raises:
    ValueError: if indices is not rank 1 or not an integer tensor.
  """
  with tf.name_scope(scope or 'Gather'):
    if indices.shape.ndims != 1:
      raise ValueError('indices must be rank 1, got %s' % indices.shape)
    if indices.dtype not in (tf.int32, tf.int64):
      raise ValueError('indices must be int32 or int64, got %s' %
                       indices.dtype.name)
    take = (matmul_gather_on_zeroth_axis if use_static_shapes
            else tf.gather)
    result = box_list.BoxList(take(boxlist.get(), indices))
    for field in boxlist.get_extra_fields() if fields is None else fields:
      result.add_field(field, take(boxlist.get_field(field), indices))
    return result


def matmul_gather_on_zeroth_axis(params, indices, scope=None):
  """tf.gather(params, indices) as a one-hot matmul (static shapes, TPU)."""
  with tf.name_scope(scope or 'MatMulGather'):
    shape = shape_utils.combined_static_and_dynamic_shape(params)
    flat = tf.reshape(params, [shape[0], -1])
    one_hot = tf.one_hot(indices, shape[0], dtype=flat.dtype)
    if flat.dtype in (tf.int32, tf.int64, tf.bool):
      gathered = tf.cast(tf.matmul(tf.cast(one_hot, tf.float32),
                                   tf.cast(flat, tf.float32)), params.dtype)
    else:
      gathered = tf.matmul(one_hot, flat)
    return tf.reshape(gathered, [tf.size(indices)] + shape[1:])


def boolean_mask(boxlist, indicator, fields=None, scope=None,
                 use_static_shapes=False, indicator_sum=None):
  """Keeps the boxes where `indicator` is True.

  Args:
    boxlist: BoxList of N boxes.
    indicator: [N] bool.
    fields: extra fields to carry (default all).
    scope: name scope.
    use_static_shapes: select with a matmul gather; needs indicator_sum.
    indicator_sum: int, the number of True entries, when known statically.

  Returns:
    BoxList of the selected boxes.
  """
  with tf.name_scope(scope or 'BooleanMask'):
    if indicator.shape.ndims != 1:
      raise ValueError('indicator must be rank 1, got %s' % indicator.shape)
    if indicator.dtype != tf.bool:
      raise ValueError('indicator must be bool, got %s' % indicator.dtype.name)
    if use_static_shapes:
      if indicator_sum is None:
        raise ValueError('use_static_shapes needs indicator_sum')
      # The k-th True entry goes to output row k - 1 through a one-hot
      # product (no tf.where, whose output size depends on the data);
      # missing rows select index 0.
      selected = tf.cast(indicator, tf.float32)
      rows = tf.cast(tf.cumsum(selected) * selected, tf.int32) - 1
      selector = tf.one_hot(rows, indicator_sum, dtype=tf.float32)
      positions = tf.cast(tf.range(tf.shape(indicator)[0]), tf.float32)
      selected = tf.cast(tf.tensordot(positions, selector, axes=[0, 0]),
                         tf.int32)
      return gather(boxlist, selected, fields, use_static_shapes=True)
    result = box_list.BoxList(tf.boolean_mask(boxlist.get(), indicator))
    for field in boxlist.get_extra_fields() if fields is None else fields:
      result.add_field(field,
                       tf.boolean_mask(boxlist.get_field(field), indicator))
    return result


def concatenate(boxlists, fields=None, scope=None):
  """Concatenates BoxLists that have the same fields.

  Raises:
    ValueError: if boxlists is not a non-empty list of BoxLists, or a field is
      missing from one of them.
  """
  with tf.name_scope(scope or 'Concatenate'):
    if not isinstance(boxlists, (list, tuple)) or not boxlists:
      raise ValueError('concatenate needs a non-empty list of BoxLists')
    if not all(isinstance(b, box_list.BoxList) for b in boxlists):
      raise ValueError('all elements of boxlists should be BoxList objects')
    result = box_list.BoxList(tf.concat([b.get() for b in boxlists], 0))
    fields = boxlists[0].get_extra_fields() if fields is None else fields
    for field in fields:
      for boxlist in boxlists:
        if not boxlist.has_field(field):
          raise ValueError('every BoxList must have field %r' % field)
      result.add_field(field, tf.concat(
          [b.get_field(field) for b in boxlists], 0))
    return result


def sort_by_field(boxlist, field, order=SortOrder.descend, scope=None):
  """Sorts boxes by a rank-1 field (descending by default).

  Raises:
    ValueError: if the field is missing or not rank 1.
  """
  with tf.name_scope(scope or 'SortByField'):
    if order not in (SortOrder.descend, SortOrder.ascend):
      raise ValueError('order must be SortOrder.descend or SortOrder.ascend')
    values = boxlist.get_field(field)
    if values.shape.ndims != 1:
      raise ValueError('field %r must be rank 1 to sort by it' % field)
    _, indices = tf.nn.top_k(values, k=boxlist.num_boxes(), sorted=True)
    if order == SortOrder.ascend:
      indices = tf.reverse(indices, [0])
    return gather(boxlist, indices)


def filter_field_value_equals(boxlist, field, value, scope=None):
  """Keeps boxes whose rank-1 `field` equals `value`."""
  with tf.name_scope(scope or 'FilterFieldValueEquals'):
    keep = tf.reshape(tf.where(tf.equal(boxlist.get_field(field), value)),
                      [-1])
    return gather(boxlist, keep)


def filter_greater_than(boxlist, thresh, scope=None):
  """Keeps boxes whose 'scores' field ([N] or [N, 1]) exceeds thresh."""
  with tf.name_scope(scope or 'FilterGreaterThan'):
    scores = boxlist.get_field('scores')
    if scores.shape.ndims not in (1, 2) or (
        scores.shape.ndims == 2 and scores.shape[1] != 1):
      raise ValueError('scores must be [N] or [N, 1], got %s' % scores.shape)
    if scores.shape.ndims == 2:
      scores = tf.squeeze(scores, [1])
    keep = tf.reshape(tf.where(scores > thresh), [-1])
    return gather(boxlist, keep)


def non_max_suppression(boxlist, thresh, max_output_size, scope=None):
  """Greedy single-class NMS on the 'scores' field.

  Args:
    boxlist: BoxList with an [N] 'scores' field.
    thresh: IoU above which the lower-scored box is dropped.
    max_output_size: at most this many boxes are kept.
    scope: name scope.

  Returns:
    BoxList of the kept boxes, highest score first.
  """
  with tf.name_scope(scope or 'NonMaxSuppression'):
    if not 0.0 <= thresh <= 1.0:
      raise ValueError('IoU threshold must be in [0, 1], got %s' % thresh)
    keep = tf.image.non_max_suppression(
        boxlist.get(), boxlist.get_field('scores'), max_output_size,
        iou_threshold=thresh)
    return gather(boxlist, keep)


def pad_or_clip_box_list(boxlist, num_boxes, scope=None):
  """Pads with zero boxes (and zero fields) or clips to num_boxes rows."""
  with tf.name_scope(scope or 'PadOrClipBoxList'):
    result = box_list.BoxList(shape_utils.pad_or_clip_tensor(
        boxlist.get(), num_boxes))
    for field in boxlist.get_extra_fields():
      result.add_field(field, shape_utils.pad_or_clip_tensor(
          boxlist.get_field(field), num_boxes))
    return result


def _check_unit_interval(**values):
  for name, value in values.items():
    if not 0.0 <= value <= 1.0:
      raise ValueError('%s must be between 0 and 1' % name)


def _check_pool(pool_boxes, *fields):
  if not isinstance(pool_boxes, box_list.BoxList):
    raise ValueError('pool_boxes must be a BoxList')
  for field in fields:
    if not pool_boxes.has_field(field):
      raise ValueError('pool_boxes must have a %r field' % field)


def box_voting(selected_boxes, pool_boxes, iou_thresh=0.5):
  """Box voting (Gidaris and Komodakis, ICCV 2015).

  Each selected box moves to the score-weighted mean of the pool boxes that
  overlap it with IoU > iou_thresh, and takes their mean score.

  Args:
    selected_boxes: BoxList of K boxes, usually NMS survivors of pool_boxes.
    pool_boxes: BoxList of N boxes with an [N] non-negative 'scores' field.
    iou_thresh: IoU above which a pool box votes.

  Returns:
    BoxList of K boxes with selected_boxes' fields and the averaged 'scores'.
    Running it fails (InvalidArgumentError) when a selected box matches no
    pool box or a score is negative.

  Raises:
    ValueError: if iou_thresh is not in [0, 1], an argument is not a BoxList
      or pool_boxes has no 'scores'.
  """
  _check_unit_interval(iou_thresh=iou_thresh)
  if not isinstance(selected_boxes, box_list.BoxList):
    raise ValueError('selected_boxes must be a BoxList')
  _check_pool(pool_boxes, 'scores')
  votes = tf.cast(iou(selected_boxes, pool_boxes) > iou_thresh, tf.float32)
  num_votes = tf.reduce_sum(votes, 1)
  scores = tf.expand_dims(pool_boxes.get_field('scores'), 1)
  checks = [
      tf.Assert(tf.reduce_all(num_votes > 0),
                ['Each box in selected_boxes must match with at least one box '
                 'in pool_boxes.']),
      tf.Assert(tf.reduce_all(scores >= 0), ['Scores must be non negative.'])]
  with tf.control_dependencies(checks):
    score_sums = tf.matmul(votes, scores)
  voted = box_list.BoxList(
      tf.matmul(votes, pool_boxes.get() * scores) / score_sums)
  _copy_extra_fields(voted, selected_boxes)
  voted.add_field('scores', tf.reshape(score_sums, [-1]) / num_votes)
  return voted


def refine_boxes(pool_boxes, nms_iou_thresh, nms_max_detections,
                 voting_iou_thresh=0.5):
  """Non-max suppression followed by box voting over the whole pool.

  Args:
    pool_boxes: BoxList with an [N] 'scores' field.
    nms_iou_thresh: IoU threshold of the suppression.
    nms_max_detections: at most this many boxes are kept.
    voting_iou_thresh: IoU threshold of the voting.

  Returns:
    BoxList of the refined boxes.

  Raises:
    ValueError: if a threshold is not in [0, 1], pool_boxes is not a BoxList
      or has no 'scores'.
  """
  _check_unit_interval(nms_iou_thresh=nms_iou_thresh,
                       voting_iou_thresh=voting_iou_thresh)
  _check_pool(pool_boxes, 'scores')
  kept = non_max_suppression(pool_boxes, nms_iou_thresh, nms_max_detections)
  return box_voting(kept, pool_boxes, voting_iou_thresh)


def refine_boxes_multi_class(pool_boxes, num_classes, nms_iou_thresh,
                             nms_max_detections, voting_iou_thresh=0.5):
  """refine_boxes class by class; the result is sorted by score.

  Args:
    pool_boxes: BoxList with [N] 'scores' and [N] integer 'classes' fields.
    num_classes: classes 0 .. num_classes - 1 are refined.
    nms_iou_thresh: IoU threshold of the suppression.
    nms_max_detections: at most this many boxes are kept per class.
    voting_iou_thresh: IoU threshold of the voting.

  Returns:
    BoxList of the refined boxes of every class, highest score first.

  Raises:
    ValueError: if a threshold is not in [0, 1], pool_boxes is not a BoxList
      or lacks 'scores' or 'classes'.
  """
  _check_unit_interval(nms_iou_thresh=nms_iou_thresh,
                       voting_iou_thresh=voting_iou_thresh)
  _check_pool(pool_boxes, 'scores', 'classes')
  refined = [refine_boxes(filter_field_value_equals(pool_boxes, 'classes', i),
                          nms_iou_thresh, nms_max_detections,
                          voting_iou_thresh)
             for i in range(num_classes)]
  return sort_by_field(concatenate(refined), 'scores')


def visualize_boxes_in_image(image, boxlist, normalized=False, scope=None):
  """Draws the boxes on a [height, width, channels] image.

  Boxes are in absolute pixel coordinates unless `normalized`. Returns the
  [height, width, channels] image with the boxes (as the original's).
  """
  with tf.name_scope(scope or 'VisualizeBoxesInImage'):
    if not normalized:
      shape = tf.cast(tf.shape(image), tf.float32)
      boxlist = scale(boxlist, 1.0 / shape[0], 1.0 / shape[1])
    return tf.image.draw_bounding_boxes(image[tf.newaxis],
                                        boxlist.get()[tf.newaxis],
                                        colors=None)[0]
