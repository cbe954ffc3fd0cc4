"""Tensor helpers clients of an exported model use, under the original's names.

`reframe_box_masks_to_image_masks` pastes the exported, box-relative
`detection_masks` into the image, as the original's
object_detection.utils.ops function of that name does (same arguments, same
numbers): evaluation reframes masks with it too.
"""
import tensorflow as tf


def reframe_image_corners_relative_to_boxes(boxes):
  """The image's corners [0, 0, 1, 1] in each box's own frame.

  Args:
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.

  Returns:
    [N, 4] float32: where the image's top-left and bottom-right corners fall
    when the box spans [0, 1] in both directions (a box thinner than 1e-4 is
    taken as 1e-4 wide, so the division stays finite).
  """
  ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=1)
  height = tf.maximum(ymax - ymin, 1e-4)
  width = tf.maximum(xmax - xmin, 1e-4)
  return tf.stack([-ymin / height, -xmin / width, (1.0 - ymin) / height,
                   (1.0 - xmin) / width], axis=1)


def reframe_box_masks_to_image_masks(box_masks, boxes, image_height,
                                     image_width, resize_method='bilinear'):
  """Pastes masks given relative to their boxes into image-sized masks.

  Each mask is resampled over its box; pixels outside the box are 0.

  Args:
    box_masks: [N, mask_height, mask_width] masks, e.g. the exported
      detection_masks of one image (float probabilities).
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax of the masks'
      boxes (the exported detection_boxes).
    image_height: int or scalar int32 tensor, the output height.
    image_width: int or scalar int32 tensor, the output width.
    resize_method: 'bilinear' or 'nearest'; uint8 masks always use
      'nearest'.

  Returns:
    [N, image_height, image_width] masks of box_masks' dtype (threshold
    float masks, e.g. > 0.5, for binary ones).
  """
  if box_masks.dtype == tf.uint8:
    resize_method = 'nearest'

  def reframe():
    count = tf.shape(box_masks)[0]
    pasted = tf.image.crop_and_resize(
        tf.expand_dims(box_masks, axis=3),
        reframe_image_corners_relative_to_boxes(boxes),
        tf.range(count), [image_height, image_width], method=resize_method,
        extrapolation_value=0)
    return tf.cast(pasted, box_masks.dtype)

  image_masks = tf.cond(
      tf.shape(box_masks)[0] > 0, reframe,
      lambda: tf.zeros([0, image_height, image_width, 1], box_masks.dtype))
  return tf.squeeze(image_masks, axis=3)
