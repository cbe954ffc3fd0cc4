"""Crop-and-resize of boxes out of batched feature maps (ROI crops), and
the way back: box-relative masks pasted into image-sized ones.

Two forms of the same bilinear op, as tf.image.crop_and_resize defines it:

- native_crop_and_resize calls tf.image.crop_and_resize;
- matmul_crop_and_resize computes it as two batched matrix products per box,
  with fixed shapes only, so it compiles with XLA: the form for TPUs, where
  the native op is not supported.

Boxes are normalized ymin, xmin, ymax, xmax; a coordinate y maps to the pixel
position y * (height - 1), so [0, 1] spans the first to the last pixel
centre. Boxes may reach outside the image (those samples take
extrapolation_value) and may have ymin > ymax (a flipped crop).

reframe_box_masks_to_image_masks (the original's utils.ops function, which
evaluation and detect use) crops the other way: each box-relative mask is
resampled over its box of an image-sized mask.
"""
import tensorflow as tf

from od_estimator.core import shape_utils


def native_crop_and_resize(image, boxes, crop_size, scope=None):
  """Crops boxes out of each image with tf.image.crop_and_resize.

  Args:
    image: [batch, height, width, depth] tensor.
    boxes: [batch, num_boxes, 4] float tensor, normalized ymin, xmin, ymax,
      xmax; the boxes of image i are boxes[i].
    crop_size: [crop_height, crop_width] ints.
    scope: optional name scope; 'CropAndResize' by default.

  Returns:
    [batch, num_boxes, crop_height, crop_width, depth] float32 crops.
  """
  with tf.name_scope(scope or 'CropAndResize'):
    batch, num_boxes = shape_utils.combined_static_and_dynamic_shape(
        boxes)[:2]
    box_indices = tf.repeat(tf.range(batch), num_boxes)
    crops = tf.image.crop_and_resize(image, tf.reshape(boxes, [-1, 4]),
                                     box_indices, crop_size)
    depth = shape_utils.combined_static_and_dynamic_shape(crops)[3]
    return tf.reshape(crops, [batch, num_boxes, crop_size[0], crop_size[1],
                              depth])


def _interpolation_matrix(start, end, crop_length, image_length, dtype):
  """Bilinear weights from one image axis to one crop axis, per box.

  Args:
    start: [batch, num_boxes] normalized box start along the axis.
    end: [batch, num_boxes] normalized box end.
    crop_length: int, samples along the axis.
    image_length: int or int32 scalar, pixels along the axis.
    dtype: float dtype of the result.

  Returns:
    weights: [batch, num_boxes, crop_length, image_length]; row k holds the
      two bilinear weights of sample k, or zeros when the sample falls
      outside the image.
    inside: [batch, num_boxes, crop_length] float, 1 for samples inside.
  """
  last_pixel = tf.cast(image_length - 1, tf.float32)
  start = tf.expand_dims(start, -1)
  end = tf.expand_dims(end, -1)
  # Sample positions in pixels, computed in the order the native kernel
  # does: the same float32 rounding decides alike whether a sample on the
  # image border falls inside.
  if crop_length > 1:
    spacing = (end - start) * last_pixel / (crop_length - 1)
    positions = (start * last_pixel +
                 tf.range(crop_length, dtype=tf.float32) * spacing)
  else:
    positions = 0.5 * (start + end) * last_pixel
  inside = tf.logical_and(positions >= 0, positions <= last_pixel)
  low = tf.floor(positions)
  fraction = positions - low
  low = tf.cast(low, tf.int32)
  # one_hot of an index outside [0, image_length) is all zeros: the weight
  # past the last pixel (always 0 there) and outside samples drop out.
  weights = (tf.one_hot(low, image_length) * tf.expand_dims(1 - fraction, -1) +
             tf.one_hot(low + 1, image_length) *
             tf.expand_dims(fraction, -1))
  inside = tf.cast(inside, tf.float32)
  weights *= tf.expand_dims(inside, -1)
  return tf.cast(weights, dtype), tf.cast(inside, dtype)


def matmul_crop_and_resize(image, boxes, crop_size, extrapolation_value=0.0,
                           scope=None):
  """Crops boxes out of each image by bilinear interpolation matrices.

  Equals tf.image.crop_and_resize (bilinear, the same extrapolation) up to
  float rounding. Each box's crop is Wy @ image @ Wx^T, per channel, with
  Wy [crop_height, height] and Wx [crop_width, width] holding at most two
  non-zero bilinear weights per row: only matrix products and fixed shapes,
  which TPUs run well. The memory it needs grows with num_boxes *
  crop_height * width * depth (or the transposed product, whichever is
  smaller).

  Args:
    image: [batch, height, width, depth] tensor; height and width must be
      static. Integer images are cast to float32.
    boxes: [batch, num_boxes, 4] float tensor, normalized ymin, xmin, ymax,
      xmax; the boxes of image i are boxes[i].
    crop_size: [crop_height, crop_width] positive ints.
    extrapolation_value: value of the samples falling outside the image.
    scope: optional name scope; 'MatMulCropAndResize' by default.

  Returns:
    [batch, num_boxes, crop_height, crop_width, depth] crops, float32 (or
    the image's float dtype).

  Raises:
    ValueError: if crop_size is not two positive ints, or the image's height
      or width is not static.
  """
  crop_height, crop_width = crop_size
  if not (isinstance(crop_height, int) and isinstance(crop_width, int) and
          crop_height > 0 and crop_width > 0):
    raise ValueError('crop_size must be two positive ints, got %r'
                     % (crop_size,))
  height, width = image.shape[1:3]
  if height is None or width is None:
    raise ValueError('matmul_crop_and_resize needs a static image height '
                     'and width, got image shape %s' % image.shape)
  with tf.name_scope(scope or 'MatMulCropAndResize'):
    if not image.dtype.is_floating:
      image = tf.cast(image, tf.float32)
    dtype = image.dtype
    ymin, xmin, ymax, xmax = tf.unstack(tf.cast(boxes, tf.float32), axis=-1)
    weights_y, inside_y = _interpolation_matrix(ymin, ymax, crop_height,
                                                height, dtype)
    weights_x, inside_x = _interpolation_matrix(xmin, xmax, crop_width,
                                                width, dtype)
    # Contract the axis whose intermediate result is smaller first.
    if crop_height * width <= height * crop_width:
      rows = tf.einsum('bnyh,bhwd->bnywd', weights_y, image)
      crops = tf.einsum('bnxw,bnywd->bnyxd', weights_x, rows)
    else:
      columns = tf.einsum('bnxw,bhwd->bnhxd', weights_x, image)
      crops = tf.einsum('bnyh,bnhxd->bnyxd', weights_y, columns)
    if not (isinstance(extrapolation_value, (int, float)) and
            extrapolation_value == 0):
      inside = (tf.expand_dims(inside_y, 3) * tf.expand_dims(inside_x, 2))
      crops += tf.expand_dims(
          (1 - inside) * tf.cast(extrapolation_value, dtype), -1)
    return crops


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
