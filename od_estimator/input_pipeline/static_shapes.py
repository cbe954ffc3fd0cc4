"""Every input tensor padded (or clipped) to a static shape, for batching
and TPUs: `max_number_of_boxes` rows per box field, the image at the
resizer's fixed size, context features at `max_num_context_features`."""
import tensorflow as tf

from od_estimator.core import shape_utils
from od_estimator.core import standard_fields as fields
from od_estimator.input_pipeline import context_features

_IN = fields.InputDataFields


def _check_additional_channels_merged(tensor_dict):
  """Refuses an image that the additional channels were not merged into.

  As the original: transform_input_data concatenates them to the image
  (original_image keeps the 3 channels it had before); padding expects that.
  """
  def channels(field):
    return tensor_dict[field].shape[-1] if field in tensor_dict else None
  extra = channels(_IN.image_additional_channels)
  image = channels(_IN.image)
  if not extra or image is None:
    return
  if extra >= image or channels(_IN.original_image) == image:
    raise ValueError(
        'image has %d channels but image_additional_channels has %d: the '
        'image must already be concatenated with its additional channels '
        '(transform_input_data does it)' % (image, extra))


def pad_input_data_to_static_shapes(tensor_dict, max_num_boxes, num_classes,
                                    spatial_image_shape=None,
                                    max_num_context_features=None,
                                    context_feature_length=None):
  """Pads (or clips) every tensor so the batch has fully defined shapes.

  Args:
    tensor_dict: transform_input_data's output.
    max_num_boxes: rows of every per-box tensor.
    num_classes: classes without background.
    spatial_image_shape: [height, width] of the preprocessed image when the
      resizer fixes it; None or [-1, -1] keeps it dynamic.
    max_num_context_features: rows of context_features (Context R-CNN's
      context_config), when the example has them.
    context_feature_length: their length (context_config); a record of
      another length fails at run time naming both.

  Returns:
    The padded dict; num_groundtruth_boxes is capped at max_num_boxes. With
    context_features [max_num_context_features, context_feature_length] it
    has valid_context_size, their real rows (see context_features).

  Raises:
    ValueError: for a field with no known padded shape, for
      context_features without the two context sizes, or when
      image_additional_channels are given but the image (or, with as many
      channels as the image, original_image) does not carry them yet.
  """
  if not spatial_image_shape or list(spatial_image_shape) == [-1, -1]:
    height, width = None, None
  else:
    height, width = spatial_image_shape
  _check_additional_channels_merged(tensor_dict)
  if _IN.context_features in tensor_dict:
    tensor_dict = context_features.with_valid_context_size(
        tensor_dict, max_num_context_features, context_feature_length)

  def channels(field):
    return tensor_dict[field].shape.as_list()[-1]

  def per_box_tail(field):
    return tensor_dict[field].shape.as_list()[1:]

  shapes = {
      _IN.image: [height, width, None],
      _IN.original_image_spatial_shape: [2],
      _IN.source_id: [], _IN.filename: [], _IN.key: [],
      _IN.true_image_shape: [3], _IN.num_groundtruth_boxes: [],
      _IN.groundtruth_boxes: [max_num_boxes, 4],
      _IN.groundtruth_classes: [max_num_boxes, num_classes],
      _IN.groundtruth_confidences: [max_num_boxes, num_classes],
      _IN.groundtruth_instance_masks: [max_num_boxes, height, width],
      _IN.groundtruth_labeled_classes: [num_classes],
      _IN.groundtruth_image_classes: [num_classes],
      _IN.groundtruth_image_confidences: [num_classes],
      _IN.groundtruth_verified_neg_classes: [num_classes],
      _IN.groundtruth_not_exhaustive_classes: [num_classes],
      _IN.context_feature_length: [],
      _IN.context_features: [max_num_context_features,
                             context_feature_length],
      _IN.valid_context_size: [],
      _IN.is_annotated: [],
  }
  for field in (_IN.groundtruth_weights, _IN.groundtruth_is_crowd,
                _IN.groundtruth_area, _IN.groundtruth_difficult,
                _IN.groundtruth_group_of, _IN.groundtruth_label_types):
    shapes[field] = [max_num_boxes]
  for field in (_IN.groundtruth_keypoints,
                _IN.groundtruth_keypoint_visibilities,
                _IN.groundtruth_keypoint_weights):
    if field in tensor_dict:
      shapes[field] = [max_num_boxes] + per_box_tail(field)
  for field in (_IN.original_image, _IN.image_additional_channels):
    if field in tensor_dict:
      shapes[field] = [height, width, channels(field)]
  if _IN.image in tensor_dict:
    shapes[_IN.image] = [height, width, channels(_IN.image)]
  padded = {}
  for field, tensor in tensor_dict.items():
    if field not in shapes:
      raise ValueError('No padded shape is known for input field %r' % field)
    padded[field] = shape_utils.pad_or_clip_nd(tensor, shapes[field])
  if _IN.num_groundtruth_boxes in padded:
    padded[_IN.num_groundtruth_boxes] = tf.minimum(
        padded[_IN.num_groundtruth_boxes], max_num_boxes)
  return padded
