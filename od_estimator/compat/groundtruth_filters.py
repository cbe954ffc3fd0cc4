"""The original's utils/ops groundtruth filters (compat.ops gives them):
keep the boxes of a decoded tensor dict that are not crowd, NaN, unknown
or background, with every per-box field.
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields

_IN = fields.InputDataFields
# Per-box fields gathered row by row.
_PER_BOX = (_IN.groundtruth_boxes, _IN.groundtruth_classes,
            _IN.groundtruth_confidences, _IN.groundtruth_keypoints,
            _IN.groundtruth_keypoint_visibilities,
            _IN.groundtruth_instance_masks)
# Per-box fields the decoder leaves empty when a record lacks them: they
# are gathered as [num_boxes, -1] rows, so an empty one stays empty.
_PER_BOX_OR_EMPTY = (_IN.groundtruth_is_crowd, _IN.groundtruth_area,
                     _IN.groundtruth_difficult, _IN.groundtruth_label_types)


def retain_groundtruth(tensor_dict, valid_indices):
  """tensor_dict with the per-box fields cut to valid_indices.

  Args:
    tensor_dict: decoded tensors keyed by InputDataFields; must hold
      groundtruth_boxes. Fields not per box are kept as they are.
    valid_indices: int [K] or [K, 1] indices of the boxes to keep (tensor
      or numpy).

  Returns:
    A new dict.

  Raises:
    ValueError: for valid_indices of another shape, or without
      groundtruth_boxes.
  """
  shape = tf.TensorShape(valid_indices.shape).as_list()
  if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)):
    raise ValueError('The shape of valid_indices is invalid.')
  if _IN.groundtruth_boxes not in tensor_dict:
    raise ValueError('%s not present in input tensor dict.' %
                     _IN.groundtruth_boxes)
  valid_indices = tf.reshape(valid_indices, [-1])
  # At least 1, so the reshape below works without boxes.
  num_boxes = tf.maximum(tf.shape(tensor_dict[_IN.groundtruth_boxes])[0], 1)
  kept = {}
  for key, value in tensor_dict.items():
    if key in _PER_BOX:
      kept[key] = tf.gather(value, valid_indices)
    elif key in _PER_BOX_OR_EMPTY:
      kept[key] = tf.reshape(tf.gather(tf.reshape(value, [num_boxes, -1]),
                                       valid_indices), [-1])
    else:
      kept[key] = value
  return kept


def _classes(tensor_dict):
  if _IN.groundtruth_classes not in tensor_dict:
    raise ValueError('`groundtruth classes` not in tensor_dict.')
  return tensor_dict[_IN.groundtruth_classes]


def retain_groundtruth_with_positive_classes(tensor_dict):
  """Keeps the boxes of class > 0 (ValueError without classes)."""
  return retain_groundtruth(tensor_dict,
                            tf.where(tf.greater(_classes(tensor_dict), 0)))


def filter_unrecognized_classes(tensor_dict):
  """Drops the boxes the decoder labelled -1 (a class the label map
  lacks); ValueError without classes."""
  return retain_groundtruth(tensor_dict,
                            tf.where(tf.greater(_classes(tensor_dict), -1)))


def replace_nan_groundtruth_label_scores_with_ones(label_scores):
  """label_scores with NaN entries replaced by 1.0."""
  return tf.where(tf.math.is_nan(label_scores), tf.ones_like(label_scores),
                  label_scores)


def filter_groundtruth_with_crowd_boxes(tensor_dict):
  """Drops crowd boxes when groundtruth_is_crowd is present."""
  if _IN.groundtruth_is_crowd not in tensor_dict:
    return tensor_dict
  return retain_groundtruth(tensor_dict, tf.where(tf.logical_not(
      tensor_dict[_IN.groundtruth_is_crowd])))


def filter_groundtruth_with_nan_box_coordinates(tensor_dict):
  """Drops the boxes with a NaN coordinate."""
  boxes = tensor_dict[_IN.groundtruth_boxes]
  return retain_groundtruth(tensor_dict, tf.where(tf.logical_not(
      tf.reduce_any(tf.math.is_nan(boxes), axis=1))))
