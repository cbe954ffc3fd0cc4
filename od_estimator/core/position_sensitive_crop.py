"""Position-sensitive crops of boxes out of score maps (R-FCN's ROI pooling).

R-FCN: Dai, Li, He and Sun, https://arxiv.org/abs/1605.06409. A box is
split into num_spatial_bins = [bins_y, bins_x] bins; bin (y, x) reads its own
group of channels of the score map, group y * bins_x + x of bins_y * bins_x
equal, contiguous groups, so the output has depth / (bins_y * bins_x)
channels. Each bin is a bilinear crop_and_resize to crop_size / bins.

- global_pool=True (R-FCN): every bin's crop is averaged to one value per
  channel and the bins are averaged together: [num_boxes, 1, 1, channels].
- global_pool=False (instance FCN's assembling,
  https://arxiv.org/abs/1603.08678): the bins' crops are placed side by
  side, bin (y, x) at rows y * bin_height... and columns x * bin_width...,
  giving [num_boxes, crop_height, crop_width, channels].

Boxes are normalized ymin, xmin, ymax, xmax as in spatial_transform_ops.
When every shape is static the crops are the matrix-product form, so the op
compiles with XLA (TPU); otherwise tf.image.crop_and_resize.
"""
import tensorflow as tf

from od_estimator.core import shape_utils
from od_estimator.core import spatial_transform_ops


def _bin_crop_size(crop_size, num_spatial_bins):
  """[bin_height, bin_width] after checking crop_size against the bins.

  Raises:
    ValueError: if a number of bins is below 1 or does not divide its crop
      dimension.
  """
  if len(crop_size) != 2 or len(num_spatial_bins) != 2:
    raise ValueError('crop_size and num_spatial_bins must hold two ints '
                     '(height, width), got %r and %r'
                     % (crop_size, num_spatial_bins))
  bin_crop_size = []
  for num_bins, crop_dim in zip(num_spatial_bins, crop_size):
    if num_bins < 1:
      raise ValueError('num_spatial_bins should be >= 1, got %r'
                       % (num_spatial_bins,))
    if crop_dim % num_bins != 0:
      raise ValueError('crop_size should be divisible by num_spatial_bins, '
                       'got crop_size %r and num_spatial_bins %r'
                       % (crop_size, num_spatial_bins))
    bin_crop_size.append(crop_dim // num_bins)
  return bin_crop_size


def _bin_boxes(boxes, num_spatial_bins):
  """The boxes of every bin, in channel-group order (row by row).

  Args:
    boxes: [batch, num_boxes, 4] float tensor.
    num_spatial_bins: [bins_y, bins_x].

  Returns:
    A list of bins_y * bins_x [batch, num_boxes, 4] tensors.
  """
  ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=-1)
  bins_y, bins_x = num_spatial_bins
  step_y = (ymax - ymin) / bins_y
  step_x = (xmax - xmin) / bins_x
  return [tf.stack([ymin + bin_y * step_y, xmin + bin_x * step_x,
                    ymin + (bin_y + 1) * step_y, xmin + (bin_x + 1) * step_x],
                   axis=-1)
          for bin_y in range(bins_y) for bin_x in range(bins_x)]


def batch_position_sensitive_crop_regions(images, boxes, crop_size,
                                          num_spatial_bins, global_pool,
                                          scope=None):
  """Position-sensitive crops of each image's boxes.

  Args:
    images: [batch, height, width, depth] tensor, depth a multiple of
      bins_y * bins_x.
    boxes: [batch, num_boxes, 4] float tensor, normalized ymin, xmin, ymax,
      xmax; the boxes of image i are boxes[i]. ymin > ymax flips a crop.
    crop_size: [crop_height, crop_width] positive ints.
    num_spatial_bins: [bins_y, bins_x] ints >= 1 dividing crop_height and
      crop_width.
    global_pool: average each box's bins to one value per channel.
    scope: optional name scope; 'PositionSensitiveCropRegions' by default.

  Returns:
    [batch, num_boxes, K, L, depth / (bins_y * bins_x)] float32 tensor, with
    K, L = 1, 1 when global_pool, crop_height, crop_width otherwise.

  Raises:
    ValueError: if the bins do not divide crop_size, or a static depth.
  """
  bin_crop_size = _bin_crop_size(crop_size, num_spatial_bins)
  bins_y, bins_x = num_spatial_bins
  total_bins = bins_y * bins_x
  depth = tf.compat.dimension_value(images.shape[-1])
  if depth is not None and depth % total_bins != 0:
    raise ValueError('the depth of the score maps (%d) should be divisible '
                     'by the number of spatial bins %d x %d'
                     % (depth, bins_y, bins_x))
  with tf.name_scope(scope or 'PositionSensitiveCropRegions'):
    if images.shape.is_fully_defined() and boxes.shape.is_fully_defined():
      crop_fn = spatial_transform_ops.matmul_crop_and_resize
    else:
      crop_fn = spatial_transform_ops.native_crop_and_resize
    # [batch, num_boxes, bin_height, bin_width, channels] per bin.
    crops = [tf.cast(crop_fn(split, bin_boxes, bin_crop_size), tf.float32)
             for split, bin_boxes in zip(
                 tf.split(images, total_bins, axis=3),
                 _bin_boxes(tf.cast(boxes, tf.float32), num_spatial_bins))]
    if global_pool:
      return tf.reduce_mean(tf.add_n(crops) / total_bins, axis=[2, 3],
                            keepdims=True)
    batch, num_boxes, _, _, channels = (
        shape_utils.combined_static_and_dynamic_shape(crops[0]))
    # [bins_y, bins_x, batch, num_boxes, bin_height, bin_width, channels]
    # -> [batch, num_boxes, bins_y, bin_height, bins_x, bin_width, channels].
    grid = tf.reshape(tf.stack(crops), [bins_y, bins_x, batch, num_boxes] +
                      bin_crop_size + [channels])
    grid = tf.transpose(grid, [2, 3, 0, 4, 1, 5, 6])
    return tf.reshape(grid, [batch, num_boxes, crop_size[0], crop_size[1],
                             channels])


def position_sensitive_crop_regions(image, boxes, crop_size, num_spatial_bins,
                                    global_pool, scope=None):
  """Position-sensitive crops of boxes out of one image.

  Args:
    image: [height, width, depth] tensor, depth a multiple of
      bins_y * bins_x.
    boxes: [num_boxes, 4] float tensor, normalized ymin, xmin, ymax, xmax.
    crop_size: [crop_height, crop_width] positive ints.
    num_spatial_bins: [bins_y, bins_x] ints >= 1 dividing crop_size.
    global_pool: average each box's bins to one value per channel.
    scope: optional name scope.

  Returns:
    [num_boxes, K, L, depth / (bins_y * bins_x)] float32 tensor, K, L = 1, 1
    when global_pool, crop_height, crop_width otherwise.

  Raises:
    ValueError: as batch_position_sensitive_crop_regions.
  """
  return batch_position_sensitive_crop_regions(
      tf.expand_dims(image, 0), tf.expand_dims(boxes, 0), crop_size,
      num_spatial_bins, global_pool, scope=scope)[0]
