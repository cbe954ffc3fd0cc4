"""Image (and instance mask) resizing ops used by the image resizers.

Every resize function takes a single image [height, width, channels] and
optional instance masks [num_instances, height, width] and returns a list
`[resized_image, resized_masks, true_image_shape]`, without the masks entry
when no masks are given. `true_image_shape` is an int32 [3] tensor holding
the shape of the image content before any padding.

Resizing uses TF1's `tf.compat.v1.image.resize_images` (no half-pixel
centers), so pixels match the original Object Detection API; masks are always
resized with nearest neighbour so they stay binary. Whenever the input's
spatial shape is static, output sizes are computed in Python (with float32
arithmetic identical to the graph ops) so the outputs have static shapes.
"""
import math

import numpy as np
import tensorflow as tf

from od_estimator.core import shape_utils

ResizeMethod = tf.compat.v1.image.ResizeMethod


def _check_rank3(image):
  if image.shape.rank != 3:
    raise ValueError('image must be a rank 3 tensor [height, width, channels], '
                     'got shape %s' % image.shape)


def _is_static(*dims):
  return all(isinstance(dim, int) for dim in dims)


def _resize_masks(masks, size, align_corners):
  """Nearest-neighbour resize of [N, H, W] masks to size = [new_h, new_w]."""
  resized = tf.compat.v1.image.resize_images(
      masks[:, :, :, tf.newaxis], size,
      method=ResizeMethod.NEAREST_NEIGHBOR, align_corners=align_corners)
  return resized[:, :, :, 0]


def _shape_vector(height, width, channels):
  if _is_static(height, width, channels):
    return tf.constant([height, width, channels], tf.int32)
  return tf.stack([height, width, channels])


def resize_image(image, masks=None, new_height=600, new_width=1024,
                 method=ResizeMethod.BILINEAR, align_corners=False):
  """Resizes an image (and masks) to exactly new_height x new_width.

  Args:
    image: [height, width, channels] tensor.
    masks: optional [num_instances, height, width] float32 tensor.
    new_height: output height (int or scalar int32 tensor).
    new_width: output width (int or scalar int32 tensor).
    method: a tf.compat.v1.image.ResizeMethod for the image.
    align_corners: TF1 align_corners flag for both image and masks.

  Returns:
    [resized_image [new_height, new_width, channels] (float32 unless
    method is NEAREST_NEIGHBOR), resized_masks [num_instances, new_height,
    new_width] if masks is given, true_image_shape [3] int32].
  """
  channels = shape_utils.combined_static_and_dynamic_shape(image)[-1]
  size = [new_height, new_width]
  result = [tf.compat.v1.image.resize_images(
      image, size, method=method, align_corners=align_corners)]
  if masks is not None:
    result.append(_resize_masks(masks, size, align_corners))
  result.append(_shape_vector(new_height, new_width, channels))
  return result


def _range_size_static(height, width, min_dimension, max_dimension):
  """Python twin of _range_size_dynamic, in float32 like the graph ops."""
  f32 = np.float32
  if height < width:
    target_height, target_width = min_dimension, max_dimension
  else:
    target_height, target_width = max_dimension, min_dimension
  scale = min(f32(target_height) / f32(height), f32(target_width) / f32(width))
  # np.round rounds half to even, as tf.round does.
  return (int(np.round(f32(scale) * f32(height))),
          int(np.round(f32(scale) * f32(width))))


def _range_size_dynamic(height, width, min_dimension, max_dimension):
  landscape = tf.less(height, width)
  target_height = tf.where(landscape, min_dimension, max_dimension)
  target_width = tf.where(landscape, max_dimension, min_dimension)
  height = tf.cast(height, tf.float32)
  width = tf.cast(width, tf.float32)
  scale = tf.minimum(tf.cast(target_height, tf.float32) / height,
                     tf.cast(target_width, tf.float32) / width)
  return (tf.cast(tf.round(scale * height), tf.int32),
          tf.cast(tf.round(scale * width), tf.int32))


def _pad_with_values(image, max_dimension, pad_height, pad_width, values):
  """Pads [h, w, C] at the bottom/right, channel c with values[c]."""
  paddings = [[0, pad_height], [0, pad_width], [0, 0]]
  # 1 over the image, 0 over the padding; works without static channels.
  inside = tf.pad(tf.ones_like(image[:, :, :1]), paddings)
  padded = (tf.pad(image, paddings) +
            (1 - inside) * tf.constant(values, image.dtype))
  padded.set_shape([max_dimension, max_dimension, image.shape[-1]])
  return padded


def resize_to_range(image, masks=None, min_dimension=None,
                    max_dimension=None, method=ResizeMethod.BILINEAR,
                    align_corners=False, pad_to_max_dimension=False,
                    per_channel_pad_value=(0, 0, 0)):
  """Resizes keeping the aspect ratio so the image fits the size range.

  The scale is the largest that makes the short side at most min_dimension
  and the long side at most max_dimension: the short side becomes
  min_dimension unless that would push the long side past max_dimension, in
  which case the long side becomes max_dimension. E.g. 480x640 with
  min_dimension=600, max_dimension=1024 becomes 600x800; 300x1000 becomes
  307x1024.

  Args:
    image: [height, width, channels] tensor.
    masks: optional [num_instances, height, width] float32 tensor.
    min_dimension: int, target size of the shorter side.
    max_dimension: int, cap on the longer side.
    method: a tf.compat.v1.image.ResizeMethod for the image.
    align_corners: TF1 align_corners flag.
    pad_to_max_dimension: pad the resized image at the bottom and right to
      [max_dimension, max_dimension] (masks are padded with zeros).
    per_channel_pad_value: one pad value per image channel.

  Returns:
    [resized_image, resized_masks (if masks given), true_image_shape [3]
    int32: the resized size before padding].

  Raises:
    ValueError: if the image is not rank 3, a dimension is missing, or the
      pad values do not match the number of channels.
  """
  _check_rank3(image)
  if min_dimension is None or max_dimension is None:
    raise ValueError('resize_to_range needs both min_dimension and '
                     'max_dimension.')
  height, width, channels = shape_utils.combined_static_and_dynamic_shape(
      image)
  if _is_static(height, width):
    new_height, new_width = _range_size_static(height, width, min_dimension,
                                               max_dimension)
  else:
    new_height, new_width = _range_size_dynamic(height, width, min_dimension,
                                                max_dimension)
  new_size = [new_height, new_width]
  new_image = tf.compat.v1.image.resize_images(
      image, new_size, method=method, align_corners=align_corners)
  true_shape = _shape_vector(new_height, new_width, channels)

  if pad_to_max_dimension:
    if (image.shape[-1] is not None and
        len(per_channel_pad_value) != image.shape[-1]):
      raise ValueError('per_channel_pad_value has %d values but the image has '
                       '%d channels.' % (len(per_channel_pad_value),
                                         image.shape[-1]))
    new_image = _pad_with_values(new_image, max_dimension,
                                 max_dimension - new_height,
                                 max_dimension - new_width,
                                 per_channel_pad_value)

  result = [new_image]
  if masks is not None:
    new_masks = _resize_masks(masks, new_size, align_corners)
    if pad_to_max_dimension:
      new_masks = tf.pad(new_masks, [[0, 0], [0, max_dimension - new_height],
                                     [0, max_dimension - new_width]])
      new_masks.set_shape([None, max_dimension, max_dimension])
    result.append(new_masks)
  result.append(true_shape)
  return result


def _scaled_size(height, width, bound, shrink):
  """Aspect-preserving size whose short (long) side is at least (most) bound.

  Args:
    height: int or int32 scalar tensor.
    width: int or int32 scalar tensor.
    bound: int, the min_dimension (shrink=False) or max_dimension
      (shrink=True).
    shrink: True to cap the long side, False to raise the short side.

  Returns:
    (new_height, new_width), truncated towards zero like the original;
    Python ints when the inputs are ints.
  """
  if _is_static(height, width):
    h, w, bound = np.float32(height), np.float32(width), np.float32(bound)
    side = max(h, w) if shrink else min(h, w)
    ratio = (min(side, bound) if shrink else max(side, bound)) / side
    return int(h * ratio), int(w * ratio)
  h = tf.cast(height, tf.float32)
  w = tf.cast(width, tf.float32)
  bound = float(bound)
  side = tf.maximum(h, w) if shrink else tf.minimum(h, w)
  target = tf.minimum(side, bound) if shrink else tf.maximum(side, bound)
  ratio = target / side
  return tf.cast(h * ratio, tf.int32), tf.cast(w * ratio, tf.int32)


def _resize_with_corners(image, masks, new_height, new_width, method):
  """Resize with align_corners=True, the original's min/max resizers."""
  channels = shape_utils.combined_static_and_dynamic_shape(image)[-1]
  size = [new_height, new_width]
  result = [tf.compat.v1.image.resize_images(image, size, method=method,
                                             align_corners=True)]
  if masks is not None:
    result.append(_resize_masks(masks, size, align_corners=True))
  result.append(_shape_vector(new_height, new_width, channels))
  return result


def resize_to_min_dimension(image, masks=None, min_dimension=600,
                            method=ResizeMethod.BILINEAR):
  """Upscales, keeping the aspect ratio, so the short side >= min_dimension.

  Images whose short side already reaches min_dimension keep their size.
  New sizes are truncated: int(side * min_dimension / short_side).

  Args:
    image: [height, width, channels] tensor.
    masks: optional [num_instances, height, width] float32 tensor.
    min_dimension: int, the smallest allowed short side.
    method: a tf.compat.v1.image.ResizeMethod for the image.

  Returns:
    [resized_image, resized_masks (if masks given), true_image_shape [3]].

  Raises:
    ValueError: if the image is not rank 3.
  """
  _check_rank3(image)
  height, width, _ = shape_utils.combined_static_and_dynamic_shape(image)
  new_height, new_width = _scaled_size(height, width, min_dimension,
                                       shrink=False)
  return _resize_with_corners(image, masks, new_height, new_width, method)


def resize_to_max_dimension(image, masks=None, max_dimension=600,
                            method=ResizeMethod.BILINEAR):
  """Downscales, keeping the aspect ratio, so the long side <= max_dimension.

  Images whose long side is already within max_dimension keep their size.
  New sizes are truncated: int(side * max_dimension / long_side).

  Args:
    image: [height, width, channels] tensor.
    masks: optional [num_instances, height, width] float32 tensor.
    max_dimension: int, the largest allowed long side.
    method: a tf.compat.v1.image.ResizeMethod for the image.

  Returns:
    [resized_image, resized_masks (if masks given), true_image_shape [3]].

  Raises:
    ValueError: if the image is not rank 3.
  """
  _check_rank3(image)
  height, width, _ = shape_utils.combined_static_and_dynamic_shape(image)
  new_height, new_width = _scaled_size(height, width, max_dimension,
                                       shrink=True)
  return _resize_with_corners(image, masks, new_height, new_width, method)


def pad_to_multiple(tensor, multiple):
  """Zero-pads height and width (bottom, right) up to a multiple.

  Args:
    tensor: [batch, height, width, channels] tensor.
    multiple: positive int.

  Returns:
    The padded tensor; e.g. [1, 3, 5, 1] with multiple 4 -> [1, 4, 8, 1].
    Static dimensions stay static.
  """
  if multiple == 1:
    return tensor
  shape = shape_utils.combined_static_and_dynamic_shape(tensor)

  def padded(size):
    if isinstance(size, int):
      return int(math.ceil(size / multiple)) * multiple
    return (size + multiple - 1) // multiple * multiple

  pad_height = padded(shape[1]) - shape[1]
  pad_width = padded(shape[2]) - shape[2]
  return tf.pad(tensor, [[0, 0], [0, pad_height], [0, pad_width], [0, 0]])


def resize_pad_to_multiple(image, masks=None, multiple=1):
  """Zero-pads the image (and masks) so height and width are multiples.

  Args:
    image: [height, width, channels] tensor.
    masks: optional [num_instances, height, width] tensor.
    multiple: positive int.

  Returns:
    [padded_image, padded_masks (if masks given), true_image_shape [3]: the
    input image's shape]. E.g. 101x199 with multiple 4 -> 104x200.

  Raises:
    ValueError: if the image is not rank 3.
  """
  _check_rank3(image)
  height, width, channels = shape_utils.combined_static_and_dynamic_shape(
      image)
  result = [pad_to_multiple(image[tf.newaxis], multiple)[0]]
  if masks is not None:
    # Masks as one "image" whose channels are the instances.
    padded = pad_to_multiple(tf.transpose(masks, [1, 2, 0])[tf.newaxis],
                             multiple)[0]
    result.append(tf.transpose(padded, [2, 0, 1]))
  result.append(_shape_vector(height, width, channels))
  return result


def rgb_to_gray(image):
  """[..., 3] RGB -> [..., 1] luma (0.2989 R + 0.5870 G + 0.1140 B).

  Integer images are converted through float and back, as
  tf.image.convert_image_dtype does; float images keep their value range.
  """
  return tf.image.rgb_to_grayscale(image)
