"""Groundtruth clean-up of one decoded example, for transform_input_data.

Per-box fields are kept or dropped together; NaN boxes and unknown classes
are dropped, inverted boxes refused; class lists become k-hot vectors;
multiclass scores become per-box rows; identical boxes can be merged.
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields

_IN = fields.InputDataFields

# Fields with one row per groundtruth box: kept or dropped together.
PER_BOX_FIELDS = (
    _IN.groundtruth_boxes, _IN.groundtruth_classes, _IN.groundtruth_weights,
    _IN.groundtruth_confidences, _IN.groundtruth_is_crowd,
    _IN.groundtruth_area, _IN.groundtruth_difficult, _IN.groundtruth_group_of,
    _IN.groundtruth_instance_masks, _IN.groundtruth_keypoints,
    _IN.groundtruth_keypoint_visibilities, _IN.groundtruth_keypoint_weights,
    _IN.groundtruth_label_types, _IN.multiclass_scores)


def keep_boxes(tensor_dict, keep):
  """Gathers the rows `keep` of every per-box field."""
  for field in PER_BOX_FIELDS:
    if field in tensor_dict:
      tensor_dict[field] = tf.gather(tensor_dict[field], keep)
  return tensor_dict


# Optional per-box fields a record may leave out; the decoder then returns
# them empty, and they are filled with this default per box.
_OPTIONAL_PER_BOX_DEFAULTS = (
    (_IN.groundtruth_is_crowd, False), (_IN.groundtruth_area, 0.0),
    (_IN.groundtruth_difficult, 0), (_IN.groundtruth_group_of, False),
    (_IN.groundtruth_label_types, 0))


def fill_missing_per_box_fields(tensor_dict):
  """Gives absent optional per-box fields one default entry per box."""
  num_boxes = tf.shape(tensor_dict[_IN.groundtruth_boxes])[0]
  for field, default in _OPTIONAL_PER_BOX_DEFAULTS:
    if field in tensor_dict:
      values = tensor_dict[field]
      fill = tf.fill([num_boxes], tf.constant(default, values.dtype))
      tensor_dict[field] = tf.cond(
          tf.logical_and(tf.equal(tf.size(values), 0), num_boxes > 0),
          lambda fill=fill: fill, lambda values=values: values)
  return tensor_dict


def drop_invalid_groundtruth(tensor_dict):
  """Drops boxes with NaN coordinates or unknown classes (-1).

  Such boxes come from label-map mismatches and hand-made annotations; one
  would otherwise turn the loss into NaN or crash target assignment.
  """
  boxes = tensor_dict[_IN.groundtruth_boxes]
  valid = tf.logical_not(tf.reduce_any(tf.math.is_nan(boxes), axis=1))
  if _IN.groundtruth_classes in tensor_dict:
    valid = tf.logical_and(valid, tensor_dict[_IN.groundtruth_classes] > 0)
  return keep_boxes(tensor_dict, tf.reshape(tf.where(valid), [-1]))


def _record(tensor_dict):
  """`source_id=..., filename=...` of the example, as the decoder names it."""
  return tf.strings.join([
      'source_id=', tensor_dict.get(_IN.source_id, ''),
      ', filename=', tensor_dict.get(_IN.filename, '')])


def _checked_boxes(tensor_dict, checks):
  """The boxes of tensor_dict, made to depend on the assertions `checks`."""
  with tf.control_dependencies(checks):
    tensor_dict[_IN.groundtruth_boxes] = tf.identity(
        tensor_dict[_IN.groundtruth_boxes])
  return tensor_dict


def refuse_inverted_boxes(tensor_dict):
  """Fails the input pipeline on a box with ymax < ymin or xmax < xmin.

  As the original (InvalidArgumentError at run time); the message names the
  example in the format of the decoder's checks, which record_scanner turns
  into the file and record.
  """
  ymin, xmin, ymax, xmax = tf.split(tensor_dict[_IN.groundtruth_boxes], 4,
                                    axis=1)
  check = tf.debugging.Assert(
      tf.reduce_all(tf.logical_and(ymax >= ymin, xmax >= xmin)),
      ['Inverted (ymin > ymax or xmin > xmax) groundtruth boxes in record',
       _record(tensor_dict), 'boxes (ymin, xmin, ymax, xmax):',
       tensor_dict[_IN.groundtruth_boxes]], summarize=100)
  return _checked_boxes(tensor_dict, [check])


def refuse_misfit_masks(tensor_dict):
  """Fails the input pipeline on instance masks that do not fit the record.

  The decoder gives PNG masks as the original's does, at their own size and
  as many as the record holds; for training and evaluation each box needs
  one mask of the image's size. Records converted without masks, or with
  masks of another image, would otherwise misalign targets or fail deep in
  training.

  Args:
    tensor_dict: decoder output with image, groundtruth_boxes and
      groundtruth_instance_masks [N, H, W].

  Returns:
    tensor_dict, its boxes depending on the checks (InvalidArgumentError at
    run time naming the record, in the decoder's format).
  """
  masks = tensor_dict[_IN.groundtruth_instance_masks]
  num_masks, num_boxes = (tf.shape(masks)[0],
                          tf.shape(tensor_dict[_IN.groundtruth_boxes])[0])
  mask_size = tf.shape(masks)[1:3]
  image_size = tf.shape(tensor_dict[_IN.image])[:2]
  record = _record(tensor_dict)
  check_count = tf.debugging.Assert(tf.equal(num_masks, num_boxes), [
      'image/object/mask holds a different number of masks than there are '
      'boxes in record', record, 'masks:', num_masks, 'boxes:', num_boxes])
  check_size = tf.debugging.Assert(
      tf.logical_or(tf.equal(num_masks, 0),
                    tf.reduce_all(tf.equal(mask_size, image_size))),
      ['image/object/mask size differs from the image size in record',
       record, 'mask (height, width):', mask_size, 'image:', image_size])
  return _checked_boxes(tensor_dict, [check_count, check_size])


# The record keys of the per-object lists whose lengths must match the
# boxes' (after fill_missing_per_box_fields gave absent ones a default).
PER_OBJECT_KEYS = (
    (_IN.groundtruth_classes, 'image/object/class/label'),
    (_IN.groundtruth_weights, 'image/object/weight'),
    (_IN.groundtruth_area, 'image/object/area'),
    (_IN.groundtruth_is_crowd, 'image/object/is_crowd'),
    (_IN.groundtruth_difficult, 'image/object/difficult'),
    (_IN.groundtruth_group_of, 'image/object/group_of'))
UNKNOWN_CLASS = -1
# The first parts of the two messages of refuse_bad_objects (record_scanner
# recognises them by their ` in record` ending).
LENGTHS_PROBLEM = ('image/object lists (class/label or class/text, weight, '
                   'area, is_crowd, difficult, group_of) differ in length '
                   'from the boxes in record')
CLASS_PROBLEM = ('class ids outside 1..num_classes (ids are 1-based; 0 is '
                 'the background) in record')


def refuse_bad_objects(tensor_dict, num_classes):
  """Fails the input pipeline on per-object lists a record cannot mean.

  Lists whose lengths differ from the box count, and class ids that are 0
  or above num_classes, would otherwise be a shape error once training has
  begun or a box silently trained as background. Ids of -1 (class texts
  the label map does not know) stay, to be dropped as in the original.

  Args:
    tensor_dict: decoder output with groundtruth_boxes and
      groundtruth_classes, after fill_missing_per_box_fields.
    num_classes: classes without background.

  Returns:
    tensor_dict, its boxes depending on the checks (InvalidArgumentError at
    run time naming the record, in the decoder's format).
  """
  num_boxes = tf.shape(tensor_dict[_IN.groundtruth_boxes])[0]
  lengths = [(key, tf.shape(tensor_dict[field])[0])
             for field, key in PER_OBJECT_KEYS if field in tensor_dict]
  record = _record(tensor_dict)
  check_lengths = tf.debugging.Assert(
      tf.reduce_all([tf.equal(length, num_boxes) for _, length in lengths]),
      [LENGTHS_PROBLEM, record, 'boxes:', num_boxes] +
      [item for key, length in lengths for item in (key + ':', length)])
  classes = tensor_dict[_IN.groundtruth_classes]
  known = tf.logical_and(classes >= fields.LABEL_ID_OFFSET,
                         classes <= num_classes)
  check_classes = tf.debugging.Assert(
      tf.reduce_all(tf.logical_or(known, tf.equal(classes, UNKNOWN_CLASS))),
      [CLASS_PROBLEM, record, 'num_classes:', num_classes, 'ids:', classes],
      summarize=100)
  return _checked_boxes(tensor_dict, [check_lengths, check_classes])


def multiclass_scores_or_one_hot(scores, classes, num_classes):
  """[N, num_classes] class targets from multiclass_scores.

  The scores come as the records hold them, flat [N * num_classes] (or
  already [N, num_classes]). Empty scores (a record without them) fall back
  to the one-hot classes, the targets without use_multiclass_scores. (The
  original's fallback one-hot encodes the 1-based ids without removing the
  label offset, shifting every class by one; here the offset is removed.)
  """
  return tf.cond(
      tf.size(scores) > 0,
      lambda: tf.reshape(scores, [tf.shape(classes)[0], num_classes]),
      lambda: tf.one_hot(classes - fields.LABEL_ID_OFFSET, num_classes))


def k_hot(class_ids, num_classes, empty_means_all):
  """1-based class ids → [num_classes] k-hot (-1 entries ignored)."""
  class_ids = tf.boolean_mask(class_ids,
                              class_ids >= fields.LABEL_ID_OFFSET)
  k_hot = tf.reduce_max(
      tf.one_hot(class_ids - fields.LABEL_ID_OFFSET, num_classes), axis=0)
  k_hot = tf.reshape(k_hot, [num_classes])
  if not empty_means_all:
    return k_hot
  return tf.cond(tf.size(class_ids) > 0, lambda: k_hot,
                 lambda: tf.ones([num_classes]))


def merge_boxes_with_multiple_labels(boxes, classes, confidences, num_classes):
  """Merges identical boxes into one box with a k-hot class target.

  Args:
    boxes: [N, 4] float32.
    classes: [N] int32 0-based classes.
    confidences: [N] float32.
    num_classes: number of classes.

  Returns:
    merged_boxes [M, 4], merged_classes [M, num_classes] k-hot,
    merged_confidences [M, num_classes], merged_box_indices [M] (the first
    input row of each merged box).
  """
  keys = tf.strings.reduce_join(tf.strings.as_string(boxes, precision=6),
                                axis=1, separator=',')
  unique_keys, group = tf.unique(keys)
  num_groups = tf.size(unique_keys)
  one_hot = tf.one_hot(classes, num_classes)
  merged_classes = tf.minimum(
      tf.math.unsorted_segment_sum(one_hot, group, num_groups), 1.0)
  merged_confidences = tf.math.unsorted_segment_max(
      one_hot * tf.expand_dims(confidences, 1), group, num_groups)
  first = tf.math.unsorted_segment_min(tf.range(tf.shape(boxes)[0]), group,
                                       num_groups)
  return (tf.gather(boxes, first), merged_classes, merged_confidences, first)
