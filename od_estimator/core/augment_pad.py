"""Padding and square crop-and-pad augmentations (single image, no batch).

Random padding (to a random size, by a random number of pixels, or to an
aspect ratio) and the ops that cut a square around a random scale and fill
what falls outside the image with zeros (CenterNet and EfficientDet
styles). The random_crop_image family lives in augment_crop.

Padding moves boxes, keypoints and DensePose points with the image content
and drops nothing; the square crops drop boxes outside the square with all
their per-box tensors and clip the rest. Optional inputs that are None are
left out of the returned tuple, so each op returns the tensors it was given
(M is the number of boxes kept).

Shared argument conventions (the op docstrings list only the rest):
  image: [H, W, C] float32.
  boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
  labels: [N] int32.
  label_weights, label_confidences: [N] float32 or None.
  masks: [N, H, W] float32 or None.
  keypoints: [N, K, 2] float32 normalized y, x or None; keypoints that a
    square crop leaves outside the image become NaN.
  densepose_surface_coords: [N, P, 4] float32 y, x, v, u or None.
  seed: op-level random seed.
"""
import numpy as np
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import preprocessor_cache

_CACHE = preprocessor_cache.PreprocessorCache
_UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


def _pad_to(tensor, offset_y, offset_x, height, width):
  """Pads the row / column axes of a [..., h, w, C] tensor to height, width.

  tf.pad instead of tf.image.pad_to_bounding_box: a fraction of the ops.
  """
  shape = tf.shape(tensor)
  rank = tensor.shape.ndims
  paddings = [[0, 0]] * (rank - 3) + [
      [offset_y, height - shape[rank - 3] - offset_y],
      [offset_x, width - shape[rank - 2] - offset_x], [0, 0]]
  return tf.pad(tensor, paddings)


@augment_common.uses_preprocess_vars_cache(_CACHE.PAD_IMAGE)
def random_pad_image(image, boxes, masks=None, keypoints=None,
                     densepose_surface_coords=None, min_image_size=None,
                     max_image_size=None, pad_color=None, center_pad=False,
                     seed=None):
  """Randomly pads the image to a size in [min_image_size, max_image_size).

  The image is placed at a random (or centred) offset; boxes, keypoints and
  DensePose points keep their place on the image content.

  Args:
    image, boxes, masks, keypoints, densepose_surface_coords, seed: see the
      module docstring; masks are padded with zeros.
    min_image_size: [2] int32 (height, width); defaults to the image size and
      is never smaller than it.
    max_image_size: [2] int32; defaults to twice the image size and is never
      smaller than the image.
    pad_color: [C] float32 padding colour; defaults to the image's mean.
    center_pad: centre the image instead of a random offset.

  Returns:
    (image [h, w, C], boxes [N, 4]) then masks [N, h, w], keypoints and
    densepose_surface_coords when given.
  """
  if pad_color is None:
    pad_color = tf.reduce_mean(image, axis=[0, 1])
  image_shape = tf.shape(image)
  height, width = image_shape[0], image_shape[1]
  image_size = tf.stack([height, width])
  if max_image_size is None:
    max_image_size = image_size * 2
  max_image_size = tf.maximum(tf.cast(max_image_size, tf.int32), image_size)
  if min_image_size is None:
    min_image_size = image_size
  min_image_size = tf.maximum(tf.cast(min_image_size, tf.int32), image_size)

  def draw(low, high):
    # Uniform in [low, high), or `high` for an empty range; tf.where instead
    # of tf.cond keeps the graph small.
    value = low + augment_common.random_integer(
        0, tf.maximum(high - low, 1), seed)
    return tf.where(high > low, value, high)

  target_height = draw(min_image_size[0], max_image_size[0])
  target_width = draw(min_image_size[1], max_image_size[1])
  if center_pad:
    offset_height = (target_height - height) // 2
    offset_width = (target_width - width) // 2
  else:
    offset_height = draw(0, target_height - height)
    offset_width = draw(0, target_width - width)

  def pad(tensor):
    return _pad_to(tensor, offset_height, offset_width, target_height,
                   target_width)

  # Zero padding of (image - colour), plus the colour, pads with the colour.
  pad_color = tf.cast(pad_color, tf.float32)
  new_image = pad(image - pad_color) + pad_color
  window = tf.cast(tf.stack([
      -offset_height, -offset_width, target_height - offset_height,
      target_width - offset_width]), tf.float32) / tf.cast(
          tf.stack([height, width, height, width]), tf.float32)
  new_boxes = augment_common.boxes_to_window(boxes, window)
  if masks is not None:
    masks = pad(masks[:, :, :, tf.newaxis])[:, :, :, 0]
  if keypoints is not None:
    keypoints = augment_common.keypoints_to_window(keypoints, window,
                                                   prune=False)
  if densepose_surface_coords is not None:
    densepose_surface_coords = augment_common.densepose_coords_to_window(
        densepose_surface_coords, window)
  return augment_common.present(new_image, new_boxes, masks, keypoints,
                                densepose_surface_coords)


@augment_common.uses_preprocess_vars_cache(_CACHE.ABSOLUTE_PAD_IMAGE)
def random_absolute_pad_image(image, boxes, masks=None, keypoints=None,
                              densepose_surface_coords=None,
                              max_height_padding=None, max_width_padding=None,
                              pad_color=None, seed=None):
  """Pads by a random number of pixels in [0, max_*_padding) per axis.

  Args:
    image, boxes, masks, keypoints, densepose_surface_coords, pad_color,
      seed: as random_pad_image.
    max_height_padding: int32 scalar, exclusive bound on the added rows.
    max_width_padding: int32 scalar, exclusive bound on the added columns.

  Returns:
    As random_pad_image.
  """
  min_image_size = tf.shape(image)[:2]
  max_image_size = min_image_size + tf.cast(
      tf.stack([max_height_padding, max_width_padding]), tf.int32)
  return random_pad_image(
      image, boxes, masks=masks, keypoints=keypoints,
      densepose_surface_coords=densepose_surface_coords,
      min_image_size=min_image_size, max_image_size=max_image_size,
      pad_color=pad_color, seed=seed)


@augment_common.uses_preprocess_vars_cache(_CACHE.PAD_TO_ASPECT_RATIO)
def random_pad_to_aspect_ratio(image, boxes, masks=None, keypoints=None,
                               aspect_ratio=1.0,
                               min_padded_size_ratio=(1.0, 1.0),
                               max_padded_size_ratio=(2.0, 2.0), seed=None):
  """Zero-pads the bottom / right of the image to the given aspect ratio.

  The smallest padding reaching the ratio is scaled by a random factor
  chosen so the output stays within [min, max]_padded_size_ratio times the
  image size where the ratio allows it (the ratio always wins).

  Args:
    image, boxes, masks, keypoints, seed: see the module docstring.
    aspect_ratio: target width / height.
    min_padded_size_ratio: (height, width) minimum output / input ratios.
    max_padded_size_ratio: (height, width) maximum output / input ratios.

  Returns:
    (image, boxes [N, 4]) then masks and keypoints when given.

  Raises:
    ValueError: if the image is not rank 3.
  """
  if image.shape.ndims != 3:
    raise ValueError('Image should be a 3D tensor, got shape %s' %
                     image.shape)
  with tf.name_scope('RandomPadToAspectRatio'):
    image_shape = tf.cast(tf.shape(image), tf.float32)
    height, width = image_shape[0], image_shape[1]
    image_ratio = width / height
    target_height = tf.where(image_ratio <= aspect_ratio, height,
                             width / aspect_ratio)
    target_width = tf.where(image_ratio >= aspect_ratio, width,
                            height * aspect_ratio)
    min_height = tf.maximum(min_padded_size_ratio[0] * height, target_height)
    min_width = tf.maximum(min_padded_size_ratio[1] * width, target_width)
    max_height = tf.maximum(max_padded_size_ratio[0] * height, target_height)
    max_width = tf.maximum(max_padded_size_ratio[1] * width, target_width)
    max_scale = tf.minimum(max_height / target_height,
                           max_width / target_width)
    min_scale = tf.minimum(max_scale, tf.maximum(min_height / target_height,
                                                 min_width / target_width))
    scale = augment_common.random_uniform_scalar(min_scale, max_scale, seed)
    target_height = tf.round(scale * target_height)
    target_width = tf.round(scale * target_width)
    out_height = tf.cast(target_height, tf.int32)
    out_width = tf.cast(target_width, tf.int32)

    new_image = _pad_to(image, 0, 0, out_height, out_width)
    window = tf.stack([0.0, 0.0, target_height / height,
                       target_width / width])
    result = [new_image, augment_common.boxes_to_window(boxes, window)]
    if masks is not None:
      result.append(_pad_to(masks[:, :, :, tf.newaxis], 0, 0, out_height,
                            out_width)[:, :, :, 0])
    if keypoints is not None:
      result.append(augment_common.keypoints_to_window(keypoints, window,
                                                       prune=False))
    return tuple(result)


def _get_crop_border(border, size):
  """Divides `border` by the smallest power of two making it <= size / 2."""
  border = tf.cast(border, tf.float32)
  size = tf.cast(size, tf.float32)
  exponent = tf.math.ceil(tf.math.log(2.0 * border / size) / np.log(2.0))
  divisor = tf.cast(tf.clip_by_value(tf.pow(2.0, exponent), 1.0, border),
                    tf.int32)
  return tf.cast(border, tf.int32) // divisor


def _crop_instances_to_frame(window, boxes, labels, label_weights,
                             label_confidences, keypoints):
  """Keeps boxes meeting a window, clipped in its frame (square crops).

  As the original's square crops: boxes move into the window's frame first,
  then those wholly outside [0, 1] are dropped (boxes without area stay)
  and the rest clipped.
  """
  unit = tf.constant(_UNIT_WINDOW)
  boxlist = box_list_ops.change_coordinate_frame(
      box_list.BoxList(tf.reshape(boxes, [-1, 4])), window)
  boxlist, keep = box_list_ops.prune_completely_outside_window(boxlist, unit)
  new_boxes = box_list_ops.clip_to_window(
      boxlist, unit, filter_nonoverlapping=False).get()
  labels, label_weights, label_confidences, keypoints = (
      augment_common.gather_per_box(
          keep, (labels, label_weights, label_confidences, keypoints)))
  if keypoints is not None:
    keypoints = augment_common.keypoints_to_window(keypoints, window,
                                                   prune=True)
  return new_boxes, keep, labels, label_weights, label_confidences, keypoints


@augment_common.uses_preprocess_vars_cache(_CACHE.SQUARE_CROP_BY_SCALE)
def random_square_crop_by_scale(image, boxes, labels, label_weights,
                                label_confidences=None, masks=None,
                                keypoints=None, max_border=128, scale_min=0.6,
                                scale_max=1.3, num_scales=8, seed=None):
  """Crops a square whose side is a random scale of the longer image side.

  The crop is centred on a random pixel at least a border away from the
  image edges; parts outside the image are zero-filled (CenterNet style).

  Args:
    image ... keypoints, seed: see the module docstring.
    max_border: largest border in pixels; halved until it is below half of
      each image dimension.
    scale_min: smallest scale.
    scale_max: largest scale.
    num_scales: number of evenly spaced scales in [scale_min, scale_max].

  Returns:
    (image [S, S, C], boxes [M, 4], labels [M], label_weights [M]) then
    label_confidences, masks [M, S, S] and keypoints when given.
  """
  image_shape = tf.shape(image)
  height, width = image_shape[0], image_shape[1]
  scales = tf.linspace(float(scale_min), float(scale_max), num_scales)
  scale = scales[augment_common.random_integer(0, num_scales, seed)]
  size = tf.cast(scale * tf.cast(tf.maximum(height, width), tf.float32),
                 tf.int32)
  h_border = _get_crop_border(max_border, height)
  w_border = _get_crop_border(max_border, width)
  y_center = augment_common.random_integer(h_border, height - h_border + 1,
                                           seed)
  x_center = augment_common.random_integer(w_border, width - w_border + 1,
                                           seed)
  half_size = size // 2
  crop_ymin, crop_xmin = y_center - half_size, x_center - half_size
  # Image part of the square crop, and where it lands inside the output.
  ymin, xmin = tf.maximum(crop_ymin, 0), tf.maximum(crop_xmin, 0)
  ymax = tf.minimum(y_center + half_size, height)
  xmax = tf.minimum(x_center + half_size, width)
  offset_y, offset_x = ymin - crop_ymin, xmin - crop_xmin

  def crop_and_pad(tensor):
    return _pad_to(tensor[..., ymin:ymax, xmin:xmax, :], offset_y, offset_x,
                   size, size)

  new_image = crop_and_pad(image)
  # Output pixel (r, c) shows input pixel (crop_ymin + r, crop_xmin + c).
  window = tf.cast(tf.stack([crop_ymin, crop_xmin, crop_ymin + size,
                             crop_xmin + size]), tf.float32) / tf.cast(
                                 tf.stack([height, width, height, width]),
                                 tf.float32)
  (new_boxes, keep, labels, label_weights, label_confidences,
   keypoints) = _crop_instances_to_frame(window, boxes, labels, label_weights,
                                         label_confidences, keypoints)
  if masks is not None:
    masks = crop_and_pad(tf.gather(masks, keep)[:, :, :, tf.newaxis])[..., 0]
  return augment_common.present(new_image, new_boxes, labels, label_weights,
                                label_confidences, masks, keypoints)


@augment_common.uses_preprocess_vars_cache(_CACHE.SCALE_CROP_AND_PAD_TO_SQUARE)
def random_scale_crop_and_pad_to_square(
    image, boxes, labels, label_weights, masks=None, keypoints=None,
    label_confidences=None, scale_min=0.1, scale_max=2.0, output_size=512,
    resize_method=tf.image.ResizeMethod.BILINEAR, seed=None):
  """Rescales, randomly crops and zero-pads to an output_size square.

  The image is resized so its longer side is output_size * s with s drawn
  from [scale_min, scale_max); an output_size square is then cut at a random
  offset (only where the scaled image is larger) and padded at the
  bottom / right (EfficientDet style). Three uniform draws with the op seed,
  in the original's order: the scale, the row offset, the column offset
  (each a fraction of the room the scaled image leaves).

  Args:
    image ... label_confidences, seed: see the module docstring.
    scale_min: smallest scale.
    scale_max: largest scale.
    output_size: int, side of the square output.
    resize_method: tf.image.ResizeMethod of the image and the masks (TF1
      resize semantics, as the original: bilinear masks are not 0/1 at the
      edges of a rescale).

  Returns:
    (image [output_size, output_size, C], boxes [M, 4], labels [M],
    label_weights [M]) then masks, keypoints and label_confidences when
    given (this op's original order).
  """
  image_shape = tf.shape(image)
  scale = augment_common.random_uniform_scalar(scale_min, scale_max, seed)
  longest = tf.cast(tf.maximum(image_shape[0], image_shape[1]), tf.float32)

  def scaled_side(side):
    # (scale * output_size) * (side / longest): the original's rounding.
    return tf.cast(scale * output_size * (tf.cast(side, tf.float32) /
                                          longest), tf.int32)

  scaled_height = scaled_side(image_shape[0])
  scaled_width = scaled_side(image_shape[1])

  def random_offset(scaled):
    room = tf.maximum(0.0, tf.cast(scaled - output_size, tf.float32))
    return tf.cast(room * augment_common.random_uniform_scalar(seed=seed),
                   tf.int32)

  offset_y = random_offset(scaled_height)
  offset_x = random_offset(scaled_width)

  def scale_crop_pad(tensor):
    tensor = tf.compat.v1.image.resize_images(
        tensor, tf.stack([scaled_height, scaled_width]), method=resize_method)
    tensor = tensor[..., offset_y:offset_y + output_size,
                    offset_x:offset_x + output_size, :]
    padded = _pad_to(tensor, 0, 0, output_size, output_size)
    padded.set_shape(tensor.shape[:-3].concatenate(
        [output_size, output_size, tensor.shape[-1]]))
    return padded

  new_image = scale_crop_pad(image)
  window = tf.cast(tf.stack([offset_y, offset_x, offset_y + output_size,
                             offset_x + output_size]), tf.float32) / tf.cast(
                                 tf.stack([scaled_height, scaled_width,
                                           scaled_height, scaled_width]),
                                 tf.float32)
  (new_boxes, keep, labels, label_weights, label_confidences,
   keypoints) = _crop_instances_to_frame(window, boxes, labels, label_weights,
                                         label_confidences, keypoints)
  if masks is not None:
    masks = scale_crop_pad(tf.gather(masks, keep)[:, :, :, tf.newaxis])[..., 0]
  return augment_common.present(new_image, new_boxes, labels, label_weights,
                                masks, keypoints, label_confidences)
