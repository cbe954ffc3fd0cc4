"""Non-max suppression of one image's detections: per class or class-agnostic.

batch_post_processing runs these over a batch.

All functions build graph ops. Boxes are ymin, xmin, ymax, xmax. Classes in
the outputs are 0-based float32 indices into the score columns, so any
background column must be removed before calling these functions.

Two output modes exist:
  * dynamic (default): only the surviving boxes are returned.
  * padded (`pad_to_max_output_size` / `use_static_shapes`): outputs have a
    fixed, statically known length; unused slots hold zero boxes and, in the
    single-image functions, a score of -1. Scores are then assumed to be
    greater than -1 (probabilities), which is how invalid slots sort last.
"""
import contextlib

import numpy as np
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import standard_fields as fields

_SCORES = fields.BoxListFields.scores
_CLASSES = fields.BoxListFields.classes
_MASKS = fields.BoxListFields.masks
_BOUNDARIES = fields.BoxListFields.boundaries
_KEYPOINTS = fields.BoxListFields.keypoints

# Score given to unused slots of padded outputs.
_INVALID_SCORE = -1.0


def _static_dim(dim):
  return tf.compat.dimension_value(dim)


def _validate_inputs(boxes, scores, iou_thresh, change_coordinate_frame,
                     clip_window, pad_to_max_output_size, soft_nms_sigma):
  """Checks the single-image NMS arguments.

  Raises:
    ValueError: on an iou_thresh outside [0, 1], badly shaped boxes or scores,
      change_coordinate_frame without a clip_window, or soft-NMS with
      padding.
  """
  if not 0.0 <= iou_thresh <= 1.0:
    raise ValueError('iou_thresh must be in [0, 1], got %s' % iou_thresh)
  if scores.shape.ndims != 2:
    raise ValueError('scores must be rank 2 [k, num_classes], got %s' %
                     scores.shape)
  if _static_dim(scores.shape[1]) is None:
    raise ValueError('scores must have a static number of classes')
  if boxes.shape.ndims != 3 or _static_dim(boxes.shape[2]) != 4:
    raise ValueError('boxes must have shape [k, q, 4], got %s' % boxes.shape)
  q = _static_dim(boxes.shape[1])
  if q not in (1, _static_dim(scores.shape[1])):
    raise ValueError('boxes second dimension (q=%s) must be 1 or the number '
                     'of classes (%s)' % (q, _static_dim(scores.shape[1])))
  if change_coordinate_frame and clip_window is None:
    raise ValueError('change_coordinate_frame=True needs a clip_window')
  if pad_to_max_output_size and soft_nms_sigma != 0.0:
    raise ValueError('soft_nms_sigma != 0 is not supported with '
                     'pad_to_max_output_size=True')


def _nms_device(use_cpu_nms):
  return tf.device('/cpu:0') if use_cpu_nms else contextlib.nullcontext()


def _gather_rows(tensor, rows, valid, columns=None):
  """tensor[rows] ([k, ...] tensor), or tensor[rows, columns] ([k, q, ...]).

  Where `valid` (None: everywhere) is False the row is all zeros: a zero
  row is appended and invalid slots point at it, which also works when the
  tensor has no rows.
  """
  if valid is not None:
    # Constant paddings keep the static trailing dimensions.
    num_rows = tf.shape(tensor)[0]
    tensor = tf.pad(tensor, [[0, 1]] + [[0, 0]] * (tensor.shape.ndims - 1))
    rows = tf.where(valid, rows, tf.fill(tf.shape(rows), num_rows))
  if columns is None:
    return tf.gather(tensor, rows)
  return tf.gather_nd(tensor, tf.stack([rows, columns], axis=1))


def _gather_boxlist(boxlist, indices, valid):
  """The BoxList's rows `indices`, zeros where `valid` (None: all) is False."""
  selected = box_list.BoxList(_gather_rows(boxlist.get(), indices, valid))
  for field in boxlist.get_extra_fields():
    selected.add_field(field, _gather_rows(boxlist.get_field(field), indices,
                                           valid))
  return selected


def _add_optional_fields(boxlist, masks, boundaries, additional_fields):
  """Adds the given per-box masks, boundaries and extra fields to boxlist."""
  if masks is not None:
    boxlist.add_field(_MASKS, masks)
  if boundaries is not None:
    boxlist.add_field(_BOUNDARIES, boundaries)
  for key, tensor in (additional_fields or {}).items():
    boxlist.add_field(key, tensor)


def _select(boxes, scores, max_selection_size, iou_thresh, score_thresh,
            pad_to_max_output_size, soft_nms_sigma, use_hard_nms):
  """Runs single-class NMS on [k, 4] boxes and their [k] scores.

  Args:
    max_selection_size: int, the most boxes to keep.
    iou_thresh: float IoU above which a lower-scored box is suppressed.
    score_thresh: float; boxes scoring at or below it are dropped.
    pad_to_max_output_size: return exactly max_selection_size rows.
    soft_nms_sigma: Gaussian soft-NMS sigma; 0 means hard NMS.
    use_hard_nms: use the plain hard-NMS op (no soft-NMS kernel).

  Returns:
    (indices [M] int32 of the kept boxes, their new scores [M] or None when
    the scores are unchanged, [M] bool validity mask or None when every row
    is valid).
  """
  if pad_to_max_output_size:
    # NonMaxSuppressionV4 is the padded greedy NMS kernel; unlike the tiled
    # tf.image.non_max_suppression_padded it accepts empty inputs and any
    # corner order.
    indices, num_valid = tf.raw_ops.NonMaxSuppressionV4(
        boxes=boxes, scores=scores, max_output_size=max_selection_size,
        iou_threshold=iou_thresh, score_threshold=score_thresh,
        pad_to_max_output_size=True)
    return indices, None, tf.range(max_selection_size) < num_valid
  if use_hard_nms:
    if soft_nms_sigma != 0.0:
      raise ValueError('use_hard_nms cannot be combined with soft_nms_sigma')
    indices = tf.image.non_max_suppression(
        boxes, scores, max_selection_size, iou_threshold=iou_thresh,
        score_threshold=score_thresh)
    return indices, None, None
  # Soft-NMS decays overlapping scores instead of dropping boxes, so the
  # returned scores replace the input ones.
  indices, selected_scores = tf.image.non_max_suppression_with_scores(
      boxes, scores, max_selection_size, iou_threshold=iou_thresh,
      score_threshold=score_thresh, soft_nms_sigma=soft_nms_sigma)
  return indices, selected_scores, None


def _run_nms(boxlist, *nms_args):
  """_select on a BoxList with a scores field: (selected BoxList, [M] bool
  validity mask); padded rows are zeros."""
  indices, selected_scores, valid = _select(
      boxlist.get(), boxlist.get_field(_SCORES), *nms_args)
  selected = _gather_boxlist(boxlist, indices, valid)
  if selected_scores is not None:
    selected.add_field(_SCORES, selected_scores)
  if valid is None:
    valid = tf.ones_like(indices, dtype=tf.bool)
  return selected, valid


def _sort_valid_first(boxlist, valid):
  """Sorts valid rows by decreasing score, followed by the invalid rows."""
  key = tf.where(valid, boxlist.get_field(_SCORES),
                 tf.fill(tf.shape(valid), -np.inf))
  _, order = tf.nn.top_k(key, k=tf.size(key), sorted=True)
  return box_list_ops.gather(boxlist, order), tf.gather(valid, order)


def _keypoints_to_window_frame(keypoints, window):
  """Expresses [k, num_keypoints, 2] (y, x) keypoints relative to window."""
  origin = window[:2]
  return (keypoints - origin) / (window[2:] - origin)


def _finalize(selected, valid, clip_window, change_coordinate_frame,
              max_total_size, pad_to_max_output_size):
  """Shared tail of the NMS functions: clip, prune, sort, cap and pad.

  Args:
    selected: BoxList of NMS survivors (and padding) with scores.
    valid: [M] bool mask of real survivors in `selected`.
    clip_window: optional [4] window to clip to.
    change_coordinate_frame: express boxes relative to clip_window.
    max_total_size: int cap on the output length (0: no cap).
    pad_to_max_output_size: keep a fixed output length.

  Returns:
    (sorted BoxList, scalar int32 number of valid rows, which come first).
  """
  if clip_window is not None:
    # Boxes left with no area inside the window are dropped, as are
    # zero-area boxes in general (callers pass a covering window for that).
    selected = box_list_ops.clip_to_window(
        selected, clip_window, filter_nonoverlapping=False)
    valid = tf.logical_and(valid, box_list_ops.area(selected) > 0.0)
  size = selected.num_boxes_static()
  selected, valid = _sort_valid_first(selected, valid)
  num_valid = tf.reduce_sum(tf.cast(valid, tf.int32))
  selected.add_field(_SCORES, tf.where(
      valid, selected.get_field(_SCORES),
      tf.fill(tf.shape(valid), _INVALID_SCORE)))
  if change_coordinate_frame:
    selected = box_list_ops.change_coordinate_frame(selected, clip_window)
    if selected.has_field(_KEYPOINTS):
      selected.add_field(_KEYPOINTS, _keypoints_to_window_frame(
          selected.get_field(_KEYPOINTS), clip_window))
  if max_total_size:
    if size is not None:
      size = min(max_total_size, size)
      keep = size
    else:
      keep = tf.minimum(max_total_size, selected.num_boxes())
    num_valid = tf.minimum(num_valid, keep)
  else:
    keep = size if size is not None else selected.num_boxes()
  if not pad_to_max_output_size:
    keep = num_valid
  # Gathering a static-length range restores the static shape lost by the
  # dynamic-k sort.
  return box_list_ops.gather(selected, tf.range(keep)), num_valid


def multiclass_non_max_suppression(
    boxes, scores, score_thresh, iou_thresh, max_size_per_class,
    max_total_size=0, clip_window=None, change_coordinate_frame=False,
    masks=None, boundaries=None, pad_to_max_output_size=False,
    use_partitioned_nms=False, additional_fields=None, soft_nms_sigma=0.0,
    use_hard_nms=False, use_cpu_nms=False, scope=None):
  """Greedy NMS run independently for every class of one image.

  Args:
    boxes: [k, q, 4] float32 boxes; q is 1 (shared by all classes) or
      num_classes (one box per class).
    scores: [k, num_classes] float32 scores (num_classes static).
    score_thresh: boxes scoring at or below this are dropped before NMS.
    iou_thresh: float in [0, 1]; a box overlapping a kept one of the same
      class by more than this is suppressed.
    max_size_per_class: int, boxes kept per class.
    max_total_size: int, boxes kept over all classes; 0 keeps them all.
    clip_window: optional [4] float32 ymin, xmin, ymax, xmax; survivors are
      clipped to it and those left with zero area dropped.
    change_coordinate_frame: express the output relative to clip_window.
    masks: optional [k, q, mask_height, mask_width] float32 masks.
    boundaries: optional [k, q, boundary_height, boundary_width] float32.
    pad_to_max_output_size: return a fixed number of rows:
      num_classes * max_size_per_class, capped by max_total_size.
    use_partitioned_nms: accepted for config compatibility; the padded
      kernel already gives the exact greedy result on every device.
    additional_fields: optional {name: [k, ...] tensor} carried along.
    soft_nms_sigma: Gaussian soft-NMS sigma (Bodla et al. 2017); 0 is hard
      NMS. Not available with pad_to_max_output_size.
    use_hard_nms: use the hard-NMS kernel (for runtimes lacking soft-NMS).
    use_cpu_nms: place the NMS ops on the CPU.
    scope: name scope.

  Returns:
    sorted_boxes: BoxList sorted by decreasing score with fields scores,
      classes (float32, 0-based), masks/boundaries/additional fields when
      given. Padded slots (padded mode) come last with score -1.
    num_valid_boxes: int32 scalar, the number of real detections.

  Raises:
    ValueError: on bad shapes or thresholds, or soft-NMS with padding.
  """
  del use_partitioned_nms  # Same selection as the padded kernel.
  _validate_inputs(boxes, scores, iou_thresh, change_coordinate_frame,
                   clip_window, pad_to_max_output_size, soft_nms_sigma)
  num_classes = _static_dim(scores.shape[1])
  class_specific = _static_dim(boxes.shape[1]) > 1
  with tf.name_scope(scope or 'MultiClassNonMaxSuppression'):
    # Each class's NMS picks row indices; the rows of every field are then
    # gathered once for all classes (class by class, in class order).
    per_class_boxes = tf.unstack(boxes, axis=1)
    per_class_scores = tf.unstack(scores, axis=1)
    selections = []
    for class_idx in range(num_classes):
      with _nms_device(use_cpu_nms):
        selections.append(_select(
            per_class_boxes[class_idx if class_specific else 0],
            per_class_scores[class_idx], max_size_per_class, iou_thresh,
            score_thresh, pad_to_max_output_size, soft_nms_sigma,
            use_hard_nms))
    indices, selected_scores, valids = zip(*selections)
    rows = tf.concat(indices, 0)
    if pad_to_max_output_size:
      valid = tf.concat(valids, 0)
      class_ids = tf.constant(np.repeat(np.arange(num_classes, dtype=np.int32),
                                        max_size_per_class))
    else:
      valid = None
      class_ids = tf.repeat(tf.range(num_classes),
                            tf.stack([tf.size(index) for index in indices]))

    def per_class(tensor):
      """Rows of a [k, q, ...] tensor: each class's own entry when q > 1."""
      if class_specific:
        return _gather_rows(tensor, rows, valid, class_ids)
      return _gather_rows(tensor[:, 0], rows, valid)

    selected = box_list.BoxList(per_class(boxes))
    if selected_scores[0] is not None:
      selected.add_field(_SCORES, tf.concat(selected_scores, 0))
    else:
      selected.add_field(_SCORES, _gather_rows(scores, rows, valid, class_ids))
    classes = tf.cast(class_ids, tf.float32)
    if valid is not None:
      classes = tf.where(valid, classes, tf.zeros_like(classes))
    selected.add_field(_CLASSES, classes)
    _add_optional_fields(
        selected, None if masks is None else per_class(masks),
        None if boundaries is None else per_class(boundaries),
        {key: _gather_rows(tensor, rows, valid)
         for key, tensor in (additional_fields or {}).items()})
    if valid is None:
      valid = tf.ones_like(rows, dtype=tf.bool)
    return _finalize(selected, valid, clip_window, change_coordinate_frame,
                     max_total_size, pad_to_max_output_size)


def class_agnostic_non_max_suppression(boxes,
                                       scores,
                                       score_thresh,
                                       iou_thresh,
                                       max_classes_per_detection=1,
                                       max_total_size=0,
                                       clip_window=None,
                                       change_coordinate_frame=False,
                                       masks=None,
                                       boundaries=None,
                                       pad_to_max_output_size=False,
                                       use_partitioned_nms=False,
                                       additional_fields=None,
                                       soft_nms_sigma=0.0,
                                       use_hard_nms=False,
                                       use_cpu_nms=False,
                                       scope=None):
  """Greedy NMS over all classes at once, each box scored by its best class.

  Arguments and outputs are as in multiclass_non_max_suppression, except:

  Args:
    max_classes_per_detection: must be 1 (one class per kept box).
    max_total_size: boxes kept in total; 0 keeps all survivors (dynamic mode
      only: padded mode needs a positive size).

  Returns:
    (sorted BoxList, int32 scalar number of valid boxes); each box's class is
    the argmax of its scores and, when q > 1, its box is that class's box.

  Raises:
    ValueError: on bad arguments, max_classes_per_detection > 1, soft-NMS
      with padding, or padding without a positive max_total_size.
  """
  del use_partitioned_nms  # Same selection as the padded kernel.
  _validate_inputs(boxes, scores, iou_thresh, change_coordinate_frame,
                   clip_window, pad_to_max_output_size, soft_nms_sigma)
  if max_classes_per_detection > 1:
    raise ValueError('max_classes_per_detection > 1 is not supported')
  if pad_to_max_output_size and max_total_size <= 0:
    raise ValueError('pad_to_max_output_size needs max_total_size > 0')
  with tf.name_scope(scope or 'ClassAgnosticNonMaxSuppression'):
    class_ids = tf.argmax(scores, axis=1, output_type=tf.int32)

    def best_class_entry(tensor):
      # [k, q, ...] -> [k, ...]: the entry predicted for the best class.
      if _static_dim(tensor.shape[1]) > 1:
        return tf.gather(tensor, class_ids, axis=1, batch_dims=1)
      return tensor[:, 0]

    candidates = box_list.BoxList(best_class_entry(boxes))
    candidates.add_field(_SCORES, tf.reduce_max(scores, axis=1))
    candidates.add_field(_CLASSES, tf.cast(class_ids, tf.float32))
    _add_optional_fields(
        candidates, None if masks is None else best_class_entry(masks),
        None if boundaries is None else best_class_entry(boundaries),
        additional_fields)
    max_selection_size = (max_total_size if max_total_size > 0
                          else candidates.num_boxes())
    with _nms_device(use_cpu_nms):
      selected, valid = _run_nms(
          candidates, max_selection_size, iou_thresh, score_thresh,
          pad_to_max_output_size, soft_nms_sigma, use_hard_nms)
    return _finalize(selected, valid, clip_window, change_coordinate_frame,
                     max_total_size, pad_to_max_output_size)
