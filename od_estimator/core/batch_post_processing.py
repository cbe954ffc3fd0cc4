"""Non-max suppression over a batch of images, padded to one output length.

Each image goes through post_processing's single-image NMS (unrolled over a
static batch or looped with tf.map_fn), or the whole batch through the
fused CombinedNonMaxSuppression op. Conventions (box order, 0-based classes,
padded slots) are post_processing's.
"""
import collections
import functools

import numpy as np
import tensorflow as tf

from od_estimator.core import box_list_ops
from od_estimator.core import post_processing
from od_estimator.core import shape_utils
from od_estimator.core import standard_fields as fields

_SCORES = fields.BoxListFields.scores
_CLASSES = fields.BoxListFields.classes
_MASKS = fields.BoxListFields.masks
_static_dim = shape_utils.get_dim_as_int


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
        post_processing.class_agnostic_non_max_suppression,
        max_classes_per_detection=max_classes_per_detection)
  else:
    nms = functools.partial(post_processing.multiclass_non_max_suppression,
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
      post_processing.multiclass_non_max_suppression.
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
    max_classes_per_detection: see
      post_processing.class_agnostic_non_max_suppression.
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
