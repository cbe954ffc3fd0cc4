"""The image and box operations of the AutoAugment detection policy v0.

Images are [H, W, 3] uint8 (autoaugment_image casts to and from float);
boxes are [N, 4] normalized ymin, xmin, ymax, xmax. Box arithmetic follows
the original Object Detection API: corners go to integer pixels
(truncated), move with the image, come back normalized, are clipped to
[0, 1], and a box left with zero height or width is widened (max at least
0.05, min at most 0.95). Pixels uncovered by a geometric op take the value
REPLACE (grey 128), sampled nearest-neighbour like the original.
"""
import math

import tensorflow as tf

from od_estimator.core import augment_common

REPLACE = 128
_BOX_AREA_DELTA = 0.05


def _size(image):
  shape = tf.shape(image)
  return shape[0], shape[1]


def _to_pixels(boxes, height, width):
  """Integer (truncated) pixel corners ymin, xmin, ymax, xmax of boxes."""
  scale = tf.cast(tf.stack([height, width, height, width]), tf.float32)
  return tf.unstack(tf.cast(boxes * scale, tf.int32), num=4, axis=1)


def _finish_boxes(ymin, xmin, ymax, xmax, height, width):
  """Pixel corners (any numeric type) -> clipped normalized boxes [N, 4]."""
  height = tf.cast(height, tf.float32)
  width = tf.cast(width, tf.float32)
  ymin, ymax = [tf.clip_by_value(tf.cast(v, tf.float32) / height, 0., 1.)
                for v in (ymin, ymax)]
  xmin, xmax = [tf.clip_by_value(tf.cast(v, tf.float32) / width, 0., 1.)
                for v in (xmin, xmax)]

  def widen(low, high):
    flat = tf.equal(high - low, 0.0)
    return (tf.where(flat, tf.minimum(low, 1.0 - _BOX_AREA_DELTA), low),
            tf.where(flat, tf.maximum(high, _BOX_AREA_DELTA), high))

  ymin, ymax = widen(ymin, ymax)
  xmin, xmax = widen(xmin, xmax)
  return tf.stack([ymin, xmin, ymax, xmax], axis=1)


def _transform(image, matrix):
  """Projective transform; matrix maps output (x, y) to input (x, y).

  matrix is [a0, a1, a2, b0, b1, b2, c0, c1] as in ImageProjectiveTransform.
  """
  height, width = _size(image)
  result = tf.raw_ops.ImageProjectiveTransformV3(
      images=image[tf.newaxis],
      transforms=tf.cast(tf.reshape(matrix, [1, 8]), tf.float32),
      output_shape=tf.stack([height, width]),
      fill_value=float(REPLACE), interpolation='NEAREST',
      fill_mode='CONSTANT')[0]
  result.set_shape(image.shape)
  return result


def _blend(image1, image2, factor):
  """image1 + factor * (image2 - image1), clipped to 0..255, as uint8."""
  image1 = tf.cast(image1, tf.float32)
  image2 = tf.cast(image2, tf.float32)
  blended = image1 + factor * (image2 - image1)
  return tf.cast(tf.clip_by_value(blended, 0.0, 255.0), tf.uint8)


# ----------------------------------------------------------------------------
# Geometric ops: image and boxes move together.
# ----------------------------------------------------------------------------


def translate_with_boxes(image, boxes, pixels, horizontal):
  """Moves the content by -pixels along x (horizontal) or y."""
  pixels = tf.cast(pixels, tf.float32)
  zero = tf.constant(0.0)
  dx, dy = (pixels, zero) if horizontal else (zero, pixels)
  image = _transform(image, tf.stack([1., 0., dx, 0., 1., dy, 0., 0.]))
  height, width = _size(image)
  ymin, xmin, ymax, xmax = _to_pixels(boxes, height, width)
  shift = tf.cast(pixels, tf.int32)
  if horizontal:
    xmin, xmax = tf.maximum(0, xmin - shift), tf.minimum(width, xmax - shift)
  else:
    ymin, ymax = tf.maximum(0, ymin - shift), tf.minimum(height, ymax - shift)
  return image, _finish_boxes(ymin, xmin, ymax, xmax, height, width)


def shear_with_boxes(image, boxes, level, horizontal):
  """Shears: output x = input x - level * y (horizontal), or y likewise."""
  level = tf.cast(level, tf.float32)
  zero = tf.constant(0.0)
  one = tf.constant(1.0)
  if horizontal:
    matrix = tf.stack([one, level, zero, zero, one, zero, zero, zero])
  else:
    matrix = tf.stack([one, zero, zero, level, one, zero, zero, zero])
  image = _transform(image, matrix)
  height, width = _size(image)
  ymin, xmin, ymax, xmax = [tf.cast(v, tf.float32)
                            for v in _to_pixels(boxes, height, width)]
  # Corners [N, 4] in y and x, moved like the content, truncated to ints.
  ys = tf.stack([ymin, ymin, ymax, ymax], axis=1)
  xs = tf.stack([xmin, xmax, xmin, xmax], axis=1)
  if horizontal:
    xs = xs - level * ys
  else:
    ys = ys - level * xs
  ys = tf.cast(ys, tf.int32)
  xs = tf.cast(xs, tf.int32)
  return image, _finish_boxes(
      tf.reduce_min(ys, 1), tf.reduce_min(xs, 1), tf.reduce_max(ys, 1),
      tf.reduce_max(xs, 1), height, width)


def rotate_with_boxes(image, boxes, degrees):
  """Rotates counterclockwise by degrees about the image centre."""
  radians = tf.cast(degrees, tf.float32) * (math.pi / 180.0)
  height, width = _size(image)
  h = tf.cast(height, tf.float32)
  w = tf.cast(width, tf.float32)
  cos, sin = tf.cos(radians), tf.sin(radians)
  x_offset = ((w - 1) - (cos * (w - 1) - sin * (h - 1))) / 2.0
  y_offset = ((h - 1) - (sin * (w - 1) + cos * (h - 1))) / 2.0
  image = _transform(image, tf.stack(
      [cos, -sin, x_offset, sin, cos, y_offset, 0.0, 0.0]))
  # Corners relative to the centre, y pointing up, truncated to ints.
  up_min = -tf.cast(h * (boxes[:, 0] - 0.5), tf.int32)
  up_max = -tf.cast(h * (boxes[:, 2] - 0.5), tf.int32)
  left = tf.cast(w * (boxes[:, 1] - 0.5), tf.int32)
  right = tf.cast(w * (boxes[:, 3] - 0.5), tf.int32)
  ys = tf.cast(tf.stack([up_min, up_min, up_max, up_max], 1), tf.float32)
  xs = tf.cast(tf.stack([left, right, left, right], 1), tf.float32)
  # Rotated like the content, truncated to whole pixels as the original.
  new_ys = tf.cast(tf.cast(cos * ys + sin * xs, tf.int32), tf.float32)
  new_xs = tf.cast(tf.cast(cos * xs - sin * ys, tf.int32), tf.float32)
  return image, _finish_boxes(
      (0.5 * h - tf.reduce_max(new_ys, 1)),
      tf.reduce_min(new_xs, 1) + 0.5 * w,
      (0.5 * h - tf.reduce_min(new_ys, 1)),
      tf.reduce_max(new_xs, 1) + 0.5 * w, height, width)


def translate_y_only_boxes(image, boxes, probability, pixels, seed=None):
  """Moves the content inside each box by -pixels along y, boxes unchanged.

  Each box is picked with probability / 3 (as the original's box-only ops),
  boxes are visited in a random order; rows moved in from outside a box are
  REPLACE.
  """
  num_boxes = tf.shape(boxes)[0]
  picked = augment_common.random_uniform(
      [num_boxes], seed=seed) < probability / 3.0
  order = tf.argsort(augment_common.random_uniform([num_boxes], seed=seed))
  height, width = _size(image)
  ymin, xmin, ymax, xmax = _to_pixels(boxes, height, width)
  ymax = tf.minimum(ymax, height - 1)
  xmax = tf.minimum(xmax, width - 1)
  rows = tf.range(height)
  source_rows = rows + tf.cast(pixels, tf.int32)
  cols = tf.range(width)

  def body(i, image):
    k = order[i]
    in_rows = (rows >= ymin[k]) & (rows <= ymax[k])
    in_cols = (cols >= xmin[k]) & (cols <= xmax[k])
    inside = (in_rows[:, tf.newaxis] & in_cols[tf.newaxis, :])[..., None]
    valid = ((source_rows >= ymin[k]) & (source_rows <= ymax[k]))
    shifted = tf.gather(image, tf.clip_by_value(source_rows, 0, height - 1))
    moved = tf.where(valid[:, None, None], shifted,
                     tf.constant(REPLACE, image.dtype))
    new_image = tf.where(inside & picked[k], moved, image)
    return i + 1, new_image

  _, image = tf.while_loop(lambda i, _: i < num_boxes, body,
                           [tf.constant(0), image])
  return image, boxes


# ----------------------------------------------------------------------------
# Pixel ops: boxes unchanged.
# ----------------------------------------------------------------------------


def equalize(image):
  """Histogram equalization per channel, as PIL's ImageOps.equalize."""
  def channel(values):
    values = tf.cast(values, tf.int32)
    histogram = tf.math.bincount(values, minlength=256, maxlength=256)
    nonzero = tf.boolean_mask(histogram, histogram > 0)
    step = (tf.reduce_sum(nonzero) - nonzero[-1]) // 255
    safe_step = tf.maximum(step, 1)
    lut = (tf.cumsum(histogram) + safe_step // 2) // safe_step
    lut = tf.clip_by_value(tf.concat([[0], lut[:-1]], 0), 0, 255)
    return tf.where(tf.equal(step, 0), values, tf.gather(lut, values))

  channels = [channel(image[:, :, c]) for c in range(3)]
  return tf.cast(tf.stack(channels, axis=2), tf.uint8)


def color(image, factor):
  """Saturation as PIL's ImageEnhance.Color (blend with the grey image)."""
  grey = tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image))
  return _blend(grey, image, factor)


def sharpness(image, factor):
  """PIL's ImageEnhance.Sharpness: blend with a 3x3 smoothed image."""
  kernel = tf.constant([[1., 1., 1.], [1., 5., 1.], [1., 1., 1.]]) / 13.0
  kernel = tf.tile(kernel[:, :, None, None], [1, 1, 3, 1])
  smooth = tf.nn.depthwise_conv2d(tf.cast(image, tf.float32)[tf.newaxis],
                                  kernel, [1, 1, 1, 1], padding='VALID')[0]
  smooth = tf.cast(tf.clip_by_value(smooth, 0.0, 255.0), tf.uint8)
  # The one-pixel border keeps the original pixels.
  inner = tf.pad(tf.ones_like(smooth), [[1, 1], [1, 1], [0, 0]])
  smooth = tf.where(tf.equal(inner, 1),
                    tf.pad(smooth, [[1, 1], [1, 1], [0, 0]]), image)
  return _blend(smooth, image, factor)


def cutout(image, pad_size, seed=None):
  """Sets a (2 pad_size)^2 square at a random centre (clipped) to REPLACE."""
  height, width = _size(image)
  center_y = augment_common.random_integer(0, height, seed=seed)
  center_x = augment_common.random_integer(0, width, seed=seed)
  rows = tf.range(height)
  cols = tf.range(width)
  in_rows = (rows >= center_y - pad_size) & (rows < center_y + pad_size)
  in_cols = (cols >= center_x - pad_size) & (cols < center_x + pad_size)
  inside = (in_rows[:, tf.newaxis] & in_cols[tf.newaxis, :])[..., None]
  return tf.where(inside, tf.constant(REPLACE, image.dtype), image)
