"""Non-max suppression of detections: per class, class-agnostic and batched.

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
import collections
import contextlib
import functools

import numpy as np
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import standard_fields as fields
from od_estimator.core import shape_utils

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


def _gather_padded(boxlist, indices, num_valid, size):
  """Gathers `size` rows; slots at or past num_valid become zero rows.

  A zero row is appended to the list and invalid slots point at it, so the
  padding is all zeros and gathering works even when the list is empty.

  Returns:
    (BoxList with `size` rows, [size] bool validity mask).
  """
  def append_zero_row(tensor):
    # Constant paddings keep the static trailing dimensions.
    return tf.pad(tensor, [[0, 1]] + [[0, 0]] * (tensor.shape.ndims - 1))

  num_boxes = boxlist.num_boxes()
  extended = box_list.BoxList(append_zero_row(boxlist.get()))
  for field in boxlist.get_extra_fields():
    extended.add_field(field, append_zero_row(boxlist.get_field(field)))
  valid = tf.range(size) < num_valid
  safe_indices = tf.where(valid, indices, tf.fill([size], num_boxes))
  return box_list_ops.gather(extended, safe_indices), valid


def _add_optional_fields(boxlist, masks, boundaries, additional_fields):
  """Adds the given per-box masks, boundaries and extra fields to boxlist."""
  if masks is not None:
    boxlist.add_field(_MASKS, masks)
  if boundaries is not None:
    boxlist.add_field(_BOUNDARIES, boundaries)
  for key, tensor in (additional_fields or {}).items():
    boxlist.add_field(key, tensor)


def _run_nms(boxlist, max_selection_size, iou_thresh, score_thresh,
             pad_to_max_output_size, soft_nms_sigma, use_hard_nms):
  """Runs single-class NMS on a BoxList with a scores field.

  Args:
    boxlist: BoxList with a rank-1 `scores` field.
    max_selection_size: int, the most boxes to keep.
    iou_thresh: float IoU above which a lower-scored box is suppressed.
    score_thresh: float; boxes scoring at or below it are dropped.
    pad_to_max_output_size: return exactly max_selection_size rows.
    soft_nms_sigma: Gaussian soft-NMS sigma; 0 means hard NMS.
    use_hard_nms: use the plain hard-NMS op (no soft-NMS kernel).

  Returns:
    (selected BoxList, [M] bool validity mask).
  """
  boxes = boxlist.get()
  scores = boxlist.get_field(_SCORES)
  if pad_to_max_output_size:
    # NonMaxSuppressionV4 is the padded greedy NMS kernel; unlike the tiled
    # tf.image.non_max_suppression_padded it accepts empty inputs and any
    # corner order.
    indices, num_valid = tf.raw_ops.NonMaxSuppressionV4(
        boxes=boxes, scores=scores, max_output_size=max_selection_size,
        iou_threshold=iou_thresh, score_threshold=score_thresh,
        pad_to_max_output_size=True)
    return _gather_padded(boxlist, indices, num_valid, max_selection_size)
  if use_hard_nms:
    if soft_nms_sigma != 0.0:
      raise ValueError('use_hard_nms cannot be combined with soft_nms_sigma')
    indices = tf.image.non_max_suppression(
        boxes, scores, max_selection_size, iou_threshold=iou_thresh,
        score_threshold=score_thresh)
    selected_scores = None
  else:
    # Soft-NMS decays overlapping scores instead of dropping boxes, so the
    # returned scores replace the input ones.
    indices, selected_scores = tf.image.non_max_suppression_with_scores(
        boxes, scores, max_selection_size, iou_threshold=iou_thresh,
        score_threshold=score_thresh, soft_nms_sigma=soft_nms_sigma)
  selected = box_list_ops.gather(boxlist, indices)
  if selected_scores is not None:
    selected.add_field(_SCORES, selected_scores)
  return selected, tf.ones_like(indices, dtype=tf.bool)


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


def _class_candidates(class_idx, class_boxes, scores, class_masks,
                      class_boundaries, additional_fields):
  """BoxList of one class's NMS candidates: boxes, scores, classes, extras."""
  class_scores = scores[:, class_idx]
  candidates = box_list.BoxList(class_boxes)
  candidates.add_field(_SCORES, class_scores)
  # Added before NMS so padded slots get class 0 like every other field.
  candidates.add_field(_CLASSES,
                       tf.fill(tf.shape(class_scores), float(class_idx)))
  _add_optional_fields(candidates, class_masks, class_boundaries,
                       additional_fields)
  return candidates


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
  with tf.name_scope(scope or 'MultiClassNonMaxSuppression'):
    per_class_boxes = tf.unstack(boxes, axis=1)
    per_class_masks = None if masks is None else tf.unstack(masks, axis=1)
    per_class_boundaries = (None if boundaries is None
                            else tf.unstack(boundaries, axis=1))
    selected_lists = []
    valid_masks = []
    for class_idx in range(num_classes):
      box_idx = class_idx if len(per_class_boxes) > 1 else 0
      candidates = _class_candidates(
          class_idx, per_class_boxes[box_idx], scores,
          None if per_class_masks is None else per_class_masks[box_idx],
          (None if per_class_boundaries is None
           else per_class_boundaries[box_idx]),
          additional_fields)
      with _nms_device(use_cpu_nms):
        selected, valid = _run_nms(
            candidates, max_size_per_class, iou_thresh, score_thresh,
            pad_to_max_output_size, soft_nms_sigma, use_hard_nms)
      selected_lists.append(selected)
      valid_masks.append(valid)
    return _finalize(box_list_ops.concatenate(selected_lists),
                     tf.concat(valid_masks, 0), clip_window,
                     change_coordinate_frame, max_total_size,
                     pad_to_max_output_size)


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


def _clip_boxes(boxes, clip_window):
  """Clips [batch, n, 4] boxes to per-image [batch or 1, 4] windows."""
  window = clip_window[:, tf.newaxis, :]
  lower = tf.concat([window[..., :2], window[..., :2]], axis=-1)
  upper = tf.concat([window[..., 2:], window[..., 2:]], axis=-1)
  return tf.minimum(tf.maximum(boxes, lower), upper)


def _combined_nms(boxes, scores, score_thresh, iou_thresh, max_size_per_class,
                  max_total_size, clip_window, change_coordinate_frame,
                  num_valid_boxes, masks, additional_fields, soft_nms_sigma,
                  scope, use_static_shapes, parallel_iterations,
                  use_class_agnostic_nms, max_classes_per_detection):
  """batch_multiclass_non_max_suppression via CombinedNonMaxSuppression."""
  unsupported = [
      ('change_coordinate_frame', change_coordinate_frame),
      ('num_valid_boxes', num_valid_boxes is not None),
      ('masks', masks is not None),
      ('soft_nms_sigma', soft_nms_sigma != 0.0),
      ('use_class_agnostic_nms', use_class_agnostic_nms)]
  for name, used in unsupported:
    if used:
      raise ValueError('%s is not supported with use_combined_nms' % name)
  ignored = [('additional_fields', additional_fields is not None),
             ('parallel_iterations', parallel_iterations != 32),
             ('max_classes_per_detection', max_classes_per_detection > 1)]
  for name, used in ignored:
    if used:
      tf.compat.v1.logging.warning('%s is ignored by combined NMS', name)
  with tf.name_scope(scope or 'CombinedNonMaxSuppression'):
    # Without an explicit window the op clips boxes to [0, 1].
    nmsed_boxes, nmsed_scores, nmsed_classes, num_detections = (
        tf.image.combined_non_max_suppression(
            boxes, scores, max_output_size_per_class=max_size_per_class,
            max_total_size=max_total_size, iou_threshold=iou_thresh,
            score_threshold=score_thresh, pad_per_class=use_static_shapes,
            clip_boxes=clip_window is None))
    if clip_window is not None:
      if clip_window.shape.ndims == 1:
        clip_window = clip_window[tf.newaxis]  # Broadcast over the batch.
      nmsed_boxes = _clip_boxes(nmsed_boxes, clip_window)
    return (nmsed_boxes, nmsed_scores, nmsed_classes, None, None,
            num_detections)


def _batch_output_size(boxes, scores, clip_window, change_coordinate_frame,
                       max_total_size, max_size_per_class,
                       use_class_agnostic_nms):
  """Checks the batch NMS arguments; returns the padded detections length.

  Raises:
    ValueError: on badly shaped boxes or scores, change_coordinate_frame
      without a clip_window, or class-agnostic NMS without max_total_size.
  """
  if boxes.shape.ndims != 4 or scores.shape.ndims != 3:
    raise ValueError('boxes must be [batch, num_anchors, q, 4] and scores '
                     '[batch, num_anchors, num_classes]; got %s and %s' %
                     (boxes.shape, scores.shape))
  q = _static_dim(boxes.shape[2])
  num_classes = _static_dim(scores.shape[2])
  if num_classes is None or q not in (1, num_classes):
    raise ValueError('boxes third dimension (q=%s) must be 1 or the static '
                     'number of classes (%s)' % (q, num_classes))
  if change_coordinate_frame and clip_window is None:
    raise ValueError('change_coordinate_frame=True needs a clip_window')
  if max_total_size > 0:
    return max_total_size
  if use_class_agnostic_nms:
    raise ValueError('class-agnostic batch NMS needs max_total_size > 0')
  return num_classes * max_size_per_class


def _image_nms_fn(use_class_agnostic_nms, score_thresh, iou_thresh,
                  max_size_per_class, max_classes_per_detection,
                  max_total_size, change_coordinate_frame, use_static_shapes,
                  use_partitioned_nms, soft_nms_sigma, use_hard_nms,
                  use_cpu_nms):
  """The single-image NMS with every batch-wide setting bound.

  Returns:
    A function of (boxes, scores, clip_window=, masks=, additional_fields=)
    returning (BoxList, num_valid) as multiclass_non_max_suppression does.
  """
  if use_class_agnostic_nms:
    nms = functools.partial(
        class_agnostic_non_max_suppression,
        max_classes_per_detection=max_classes_per_detection)
  else:
    nms = functools.partial(multiclass_non_max_suppression,
                            max_size_per_class=max_size_per_class)
  return functools.partial(
      nms, score_thresh=score_thresh, iou_thresh=iou_thresh,
      max_total_size=max_total_size,
      change_coordinate_frame=change_coordinate_frame,
      pad_to_max_output_size=use_static_shapes,
      use_partitioned_nms=use_partitioned_nms, soft_nms_sigma=soft_nms_sigma,
      use_hard_nms=use_hard_nms, use_cpu_nms=use_cpu_nms)


def _batch_defaults(boxes, num_valid_boxes, masks, clip_window):
  """Fills in the optional per-image inputs of batch NMS.

  Returns:
    ([batch] num_valid_boxes, masks or [batch, num_anchors, q, 1, 1] dummy
    masks, [batch, 4] clip windows: given, or one covering all boxes).
  """
  batch_size, num_anchors, q = (
      shape_utils.combined_static_and_dynamic_shape(boxes)[:3])
  if num_valid_boxes is None:
    num_valid_boxes = tf.fill(tf.reshape(batch_size, [1]), num_anchors)
  # Dummy masks keep a single per-image function; dropped afterwards.
  if masks is None:
    masks = tf.zeros(tf.stack([batch_size, num_anchors, q, 1, 1]))
  if clip_window is None:
    clip_window = tf.stack([
        tf.reduce_min(boxes[..., 0]), tf.reduce_min(boxes[..., 1]),
        tf.reduce_max(boxes[..., 2]), tf.reduce_max(boxes[..., 3])])
  if clip_window.shape.ndims == 1:
    clip_window = tf.tile(clip_window[tf.newaxis], tf.stack([batch_size, 1]))
  return num_valid_boxes, masks, clip_window


def _single_image_nms(args, image_nms, field_keys, output_size,
                      use_static_shapes):
  """NMS of one image, its outputs padded to output_size with zeros.

  Args:
    args: boxes, scores, masks, clip window, the additional fields in
      field_keys' order, and the number of valid anchors of one image.
    image_nms: function from _image_nms_fn.
    field_keys: names of the additional fields.
    output_size: int, the padded number of detections.
    use_static_shapes: padded NMS (anchors past the valid ones are scored
      lowest instead of sliced off).

  Returns:
    [boxes, scores, classes, masks, *fields, num_detections].
  """
  image_boxes, image_scores, image_masks, image_window = args[:4]
  image_fields = collections.OrderedDict(zip(field_keys, args[4:-1]))
  image_num_valid = args[-1]
  if use_static_shapes:
    # Padding anchors get the lowest score instead of being sliced off,
    # which would make the shapes dynamic.
    image_scores = tf.where(
        (tf.range(tf.shape(image_scores)[0]) <
         image_num_valid)[:, tf.newaxis],
        image_scores, tf.fill(tf.shape(image_scores),
                              np.finfo(np.float32).min))
  else:
    image_boxes = image_boxes[:image_num_valid]
    image_scores = image_scores[:image_num_valid]
    image_masks = image_masks[:image_num_valid]
    image_fields = collections.OrderedDict(
        (key, value[:image_num_valid]) for key, value in image_fields.items())
  nmsed, num_detections = image_nms(
      image_boxes, image_scores, clip_window=image_window, masks=image_masks,
      additional_fields=image_fields)
  nmsed = box_list_ops.pad_or_clip_box_list(nmsed, output_size)
  # Padded NMS leaves -1 scores in unused slots: zero every output there.
  valid = tf.range(output_size) < num_detections
  outputs = [nmsed.get(), nmsed.get_field(_SCORES),
             nmsed.get_field(_CLASSES), nmsed.get_field(_MASKS)]
  outputs += [nmsed.get_field(key) for key in field_keys]
  outputs = [
      tf.where(tf.reshape(valid, [-1] + [1] * (t.shape.ndims - 1)), t,
               tf.zeros_like(t)) for t in outputs]
  return outputs + [num_detections]


def _map_nms_over_batch(image_nms, output_size, boxes, scores, clip_window,
                        num_valid_boxes, masks, additional_fields,
                        use_static_shapes, use_dynamic_map_fn,
                        parallel_iterations):
  """Maps image_nms over the batch; returns batch NMS's six outputs."""
  # Sorted so the flattened map_fn arguments always line up with the keys.
  ordered_fields = collections.OrderedDict(
      sorted((additional_fields or {}).items()))
  num_valid_boxes, image_masks, clip_window = _batch_defaults(
      boxes, num_valid_boxes, masks, clip_window)
  elems = ([boxes, scores, image_masks, clip_window] +
           list(ordered_fields.values()) + [num_valid_boxes])
  dtypes = ([tf.float32, tf.float32, tf.float32, image_masks.dtype] +
            [t.dtype for t in ordered_fields.values()] + [tf.int32])
  map_fn = tf.map_fn if use_dynamic_map_fn else (
      shape_utils.static_or_dynamic_map_fn)
  outputs = map_fn(
      functools.partial(_single_image_nms, image_nms=image_nms,
                        field_keys=list(ordered_fields),
                        output_size=output_size,
                        use_static_shapes=use_static_shapes),
      elems=elems, dtype=dtypes, parallel_iterations=parallel_iterations)
  nmsed_boxes, nmsed_scores, nmsed_classes, nmsed_masks = outputs[:4]
  nmsed_fields = dict(zip(ordered_fields, outputs[4:-1])) or None
  if masks is None:
    nmsed_masks = None
  return (nmsed_boxes, nmsed_scores, nmsed_classes, nmsed_masks,
          nmsed_fields, outputs[-1])


def batch_multiclass_non_max_suppression(
    boxes, scores, score_thresh, iou_thresh, max_size_per_class,
    max_total_size=0, clip_window=None, change_coordinate_frame=False,
    num_valid_boxes=None, masks=None, additional_fields=None,
    soft_nms_sigma=0.0, scope=None, use_static_shapes=False,
    use_partitioned_nms=False, parallel_iterations=32,
    use_class_agnostic_nms=False, max_classes_per_detection=1,
    use_dynamic_map_fn=False, use_combined_nms=False, use_hard_nms=False,
    use_cpu_nms=False):
  """Runs NMS on every image of a batch and pads the results.

  Args:
    boxes: [batch, num_anchors, q, 4] float32; q is 1 or num_classes.
    scores: [batch, num_anchors, num_classes] float32 (num_classes static);
      non-negative when use_static_shapes is True.
    score_thresh, iou_thresh, max_size_per_class, soft_nms_sigma,
      use_partitioned_nms, use_hard_nms, use_cpu_nms: see
      multiclass_non_max_suppression.
    max_total_size: detections kept per image and the padded output length;
      0 pads to num_classes * max_size_per_class.
    clip_window: optional [batch, 4] or [4] float32 window(s). Without it a
      window covering all boxes is used, which still drops zero-area boxes.
    change_coordinate_frame: express outputs relative to clip_window.
    num_valid_boxes: optional [batch] int32; anchors past it are ignored.
    masks: optional [batch, num_anchors, q, mask_height, mask_width] float32.
    additional_fields: optional {name: [batch, num_anchors, ...]} tensors.
    scope: name scope.
    use_static_shapes: use padded NMS so every output shape is static.
    parallel_iterations: tf.map_fn parallelism (dynamic batch size).
    use_class_agnostic_nms: one NMS over all classes per image.
    max_classes_per_detection: see class_agnostic_non_max_suppression.
    use_dynamic_map_fn: always loop with tf.map_fn instead of unrolling a
      static batch.
    use_combined_nms: use the fused CombinedNonMaxSuppression op (no masks,
      additional fields, soft-NMS, num_valid_boxes or class-agnostic mode).

  Returns:
    nmsed_boxes: [batch, max_detections, 4] float32.
    nmsed_scores: [batch, max_detections] float32.
    nmsed_classes: [batch, max_detections] float32, 0-based.
    nmsed_masks: [batch, max_detections, mask_height, mask_width] float32,
      or None without masks.
    nmsed_additional_fields: {name: [batch, max_detections, ...]}, or None.
    num_detections: [batch] int32. Entries past num_detections[i] are zeros.

  Raises:
    ValueError: on bad shapes or unsupported argument combinations.
  """
  if use_combined_nms:
    return _combined_nms(
        boxes, scores, score_thresh, iou_thresh, max_size_per_class,
        max_total_size, clip_window, change_coordinate_frame,
        num_valid_boxes, masks, additional_fields, soft_nms_sigma, scope,
        use_static_shapes, parallel_iterations, use_class_agnostic_nms,
        max_classes_per_detection)
  output_size = _batch_output_size(
      boxes, scores, clip_window, change_coordinate_frame, max_total_size,
      max_size_per_class, use_class_agnostic_nms)
  image_nms = _image_nms_fn(
      use_class_agnostic_nms, score_thresh, iou_thresh, max_size_per_class,
      max_classes_per_detection, max_total_size, change_coordinate_frame,
      use_static_shapes, use_partitioned_nms, soft_nms_sigma, use_hard_nms,
      use_cpu_nms)
  with tf.name_scope(scope or 'BatchMultiClassNonMaxSuppression'):
    return _map_nms_over_batch(
        image_nms, output_size, boxes, scores, clip_window, num_valid_boxes,
        masks, additional_fields, use_static_shapes, use_dynamic_map_fn,
        parallel_iterations)
