"""Masks of an eval dict in the original images' frame, for the evaluators.

Detection masks are box-relative probabilities and groundtruth masks are at
the model input's size; the mask evaluators take both as binary masks of
the original images (eval_util.result_dict_for_batched_example converts
them, or model_lib's TPU metric_fn later).
"""
import tensorflow as tf

from od_estimator.core import spatial_transform_ops
from od_estimator.core import standard_fields as fields

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields


# Eval dict key of the detections' normalized boxes while its masks are not
# yet in the original images' frame (see masks_to_original_images).
UNFRAMED_MASKS_BOXES = 'unframed_masks_detection_boxes'


def _pad_masks(masks, height, width):
  """[N, h, w] → [N, height, width], zeros below and right."""
  shape = tf.shape(masks)
  return tf.pad(masks, [[0, 0], [0, height - shape[1]],
                        [0, width - shape[2]]])


def detection_masks_to_images(masks, boxes, num_detections,
                              original_image_spatial_shapes):
  """Box-relative detection masks → binary masks of the original images.

  As the original's evaluation: each image's masks are pasted into its
  original size with spatial_transform_ops.reframe_box_masks_to_image_masks
  (bilinear) and thresholded at 0.5. One image at a time and only its num_detections
  masks, so the float intermediate stays [num_detections, height, width]
  (e.g. 100 x 800 x 1365) whatever the batch size.

  Args:
    masks: [B, N, mask_height, mask_width] float32 probabilities.
    boxes: [B, N, 4] normalized ymin, xmin, ymax, xmax.
    num_detections: [B] int32.
    original_image_spatial_shapes: [B, 2] int32 height, width.

  Returns:
    [B, N, max height, max width] uint8 in {0, 1}; image i's masks fill its
    top-left original height x width, zeros elsewhere and past its
    detections.
  """
  padded = tf.reduce_max(original_image_spatial_shapes, axis=0)
  max_detections = tf.shape(masks)[1]

  def one_image(args):
    image_masks, image_boxes, count, shape = args
    pasted = spatial_transform_ops.reframe_box_masks_to_image_masks(
        image_masks[:count], image_boxes[:count], shape[0], shape[1])
    binary = tf.cast(tf.greater(pasted, 0.5), tf.uint8)
    binary = tf.pad(binary, [[0, max_detections - count], [0, 0], [0, 0]])
    return _pad_masks(binary, padded[0], padded[1])

  return tf.map_fn(one_image, [masks, boxes, num_detections,
                               original_image_spatial_shapes],
                   fn_output_signature=tf.uint8, parallel_iterations=1,
                   back_prop=False)


def groundtruth_masks_to_images(masks, true_image_shapes,
                                original_image_spatial_shapes):
  """Groundtruth masks of the model input → binary masks of the originals.

  As the original: the true (unpadded) part of each image's masks is
  resized to the original size, nearest neighbour with aligned corners.

  Args:
    masks: [B, N, H, W] float32 0/1 at the preprocessed image size.
    true_image_shapes: [B, 3] int32, the unpadded part of H, W.
    original_image_spatial_shapes: [B, 2] int32 height, width.

  Returns:
    [B, N, max height, max width] uint8, image i's in its top-left corner.
  """
  padded = tf.reduce_max(original_image_spatial_shapes, axis=0)

  def one_image(args):
    image_masks, true_shape, shape = args
    image_masks = image_masks[:, :true_shape[0], :true_shape[1]]
    resized = tf.compat.v1.image.resize_nearest_neighbor(
        tf.expand_dims(image_masks, 3), shape, align_corners=True)
    binary = tf.cast(tf.greater(tf.squeeze(resized, 3), 0.5), tf.uint8)
    return _pad_masks(binary, padded[0], padded[1])

  return tf.map_fn(one_image, [masks, true_image_shapes,
                               original_image_spatial_shapes],
                   fn_output_signature=tf.uint8, parallel_iterations=1,
                   back_prop=False)


def masks_to_original_images(eval_dict):
  """An eval dict's masks, binary in the original images' frame.

  Detection masks are pasted from their boxes (detection_masks_to_images),
  groundtruth masks resized from the model input (groundtruth_masks_to_
  images). result_dict_for_batched_example does it unless asked not to:
  on a TPU, model_lib does it in the host's metric_fn, as the original
  sizes are known only at run time.

  Args:
    eval_dict: result_dict_for_batched_example(..., reframe_masks=False).

  Returns:
    A new dict with uint8 [B, N, max height, max width] masks; the dict
    itself when its masks were already converted.
  """
  if UNFRAMED_MASKS_BOXES not in eval_dict:
    return eval_dict
  result = dict(eval_dict)
  boxes = result.pop(UNFRAMED_MASKS_BOXES)
  shapes = result[_IN.original_image_spatial_shape]
  if _DET.detection_masks in result:
    result[_DET.detection_masks] = detection_masks_to_images(
        result[_DET.detection_masks], boxes, result[_DET.num_detections],
        shapes)
  if _IN.groundtruth_instance_masks in result:
    masks = tf.cast(result[_IN.groundtruth_instance_masks], tf.float32)
    true_shapes = result.get(_IN.true_image_shape)
    if true_shapes is None:  # Masks without padding.
      true_shapes = tf.tile(tf.expand_dims(tf.shape(masks)[2:4], 0),
                            [tf.shape(masks)[0], 1])
    result[_IN.groundtruth_instance_masks] = groundtruth_masks_to_images(
        masks, true_shapes, shapes)
  return result
