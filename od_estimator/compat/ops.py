"""The original's object_detection.utils.ops, for scripts written for it.

Nothing in od_estimator imports this module: the helpers it uses live in
their homes and are re-exported here under the original's names
(reframe_box_masks_to_image_masks and the crops from
core/spatial_transform_ops, the padding and upsampling helpers from
models/feature_map_generators, the groundtruth filters from
groundtruth_filters, the sequence-example frame helpers from
input_pipeline/sequence_frames); the others, defined below, exist for the
original's users only. The same arguments give the same numbers as the original.
"""
import tensorflow as tf

from od_estimator.core import box_list_ops
from od_estimator.core import shape_utils
# The original's names kept in their homes. pylint: disable=unused-import
from od_estimator.compat.groundtruth_filters import (
    filter_groundtruth_with_crowd_boxes,
    filter_groundtruth_with_nan_box_coordinates, filter_unrecognized_classes,
    replace_nan_groundtruth_label_scores_with_ones, retain_groundtruth,
    retain_groundtruth_with_positive_classes)
from od_estimator.core.spatial_transform_ops import (
    matmul_crop_and_resize, native_crop_and_resize,
    reframe_box_masks_to_image_masks, reframe_image_corners_relative_to_boxes)
from od_estimator.models.feature_map_generators import (
    fixed_padding, nearest_neighbor_upsampling, pad_to_multiple)
# pylint: enable=unused-import
from od_estimator.input_pipeline import sequence_frames

# The original's names of the sequence-example frame helpers (they return
# a new dict where the original's update the given one).
tile_context_tensors = sequence_frames.tile_sequence_tensors
decode_image = sequence_frames.decode_frame_image


def expanded_shape(orig_shape, start_dim, num_dims):
  """Shape vector `orig_shape` with `num_dims` ones inserted at `start_dim`.

  Args:
    orig_shape: int32 [rank] shape tensor.
    start_dim: int scalar, where the ones go.
    num_dims: int scalar, how many ones.

  Returns:
    int32 [rank + num_dims] tensor (for tf.reshape: expand_dims many times).
  """
  with tf.name_scope('ExpandedShape'):
    orig_shape = tf.convert_to_tensor(orig_shape, tf.int32)
    ones = tf.ones(tf.reshape(num_dims, [1]), tf.int32)
    return tf.concat([orig_shape[:start_dim], ones, orig_shape[start_dim:]],
                     axis=0)


def meshgrid(x, y):
  """numpy.meshgrid for tensors of any rank.

  Returns:
    (xgrid, ygrid), both of shape y.shape + x.shape: xgrid varies x over
    its last dimensions, ygrid varies y over its first ones.
  """
  with tf.name_scope('Meshgrid'):
    x = tf.convert_to_tensor(x)
    y = tf.convert_to_tensor(y)
    x_shape = expanded_shape(tf.shape(x), 0, tf.rank(y))
    y_shape = expanded_shape(tf.shape(y), tf.rank(y), tf.rank(x))
    xgrid = tf.tile(tf.reshape(x, x_shape), y_shape)
    ygrid = tf.tile(tf.reshape(y, y_shape), x_shape)
    grid_shape = y.get_shape().concatenate(x.get_shape())
    xgrid.set_shape(grid_shape)
    ygrid.set_shape(grid_shape)
    return xgrid, ygrid


def normalized_to_image_coordinates(normalized_boxes, image_shape,
                                    parallel_iterations=32):
  """Scales a batch of normalized boxes to pixels.

  Args:
    normalized_boxes: [batch, num_boxes, 4] ymin, xmin, ymax, xmax in [0, 1].
    image_shape: [4] image shape [batch, height, width, channels].
    parallel_iterations: kept for the original's signature (the scaling is
      one broadcast multiplication, no map_fn).

  Returns:
    [batch, num_boxes, 4] boxes in pixels, normalized_boxes' dtype.
  """
  del parallel_iterations
  height = tf.cast(image_shape[1], normalized_boxes.dtype)
  width = tf.cast(image_shape[2], normalized_boxes.dtype)
  return normalized_boxes * tf.stack([height, width, height, width])


def padded_one_hot_encoding(indices, depth, left_pad):
  """One-hot float32 rows with `left_pad` zero columns on the left.

  Args:
    indices: int [num_indices] tensor (rank 1).
    depth: non-negative int, the one-hot depth.
    left_pad: non-negative int.

  Returns:
    float32 [num_indices, depth + left_pad], or None when depth is 0.

  Raises:
    ValueError: for a negative or non-integer depth or left_pad, or indices
      not of rank 1.
  """
  for name, value in (('depth', depth), ('left_pad', left_pad)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise ValueError('`%s` must be a non-negative integer.' % name)
  if depth == 0:
    return None
  rank = len(indices.get_shape().as_list())
  if rank != 1:
    raise ValueError('`indices` must have rank 1, but has rank=%s' % rank)
  one_hot = tf.one_hot(tf.cast(indices, tf.int64), depth, dtype=tf.float32)
  return tf.reshape(tf.pad(one_hot, [[0, 0], [left_pad, 0]]),
                    [-1, depth + left_pad])


def indices_to_dense_vector(indices, size, indices_value=1.,
                            default_value=0, dtype=tf.float32):
  """[size] vector: indices_value at `indices`, default_value elsewhere.

  Args:
    indices: int [K] tensor (any order, repeats allowed).
    size: int scalar (may be a tensor, e.g. tf.shape(x)[0]).
    indices_value: value at the indices.
    default_value: value elsewhere.
    dtype: the vector's dtype.
  """
  size = tf.cast(size, tf.int32)
  indices = tf.cast(tf.reshape(indices, [-1]), tf.int32)
  hit = tf.scatter_nd(tf.expand_dims(indices, 1),
                      tf.ones_like(indices, tf.int32), [size]) > 0
  return tf.where(hit, tf.fill([size], tf.cast(indices_value, dtype)),
                  tf.fill([size], tf.cast(default_value, dtype)))


def reduce_sum_trailing_dimensions(tensor, ndims):
  """Sums over every dimension after the first `ndims`."""
  return tf.reduce_sum(tensor, axis=tuple(range(ndims, tensor.shape.ndims)))


def matmul_gather_on_zeroth_axis(params, indices, scope=None):
  """tf.gather(params, indices) as a one-hot matmul (static shapes, TPU).

  Returns:
    params' dtype, shape indices.shape + params.shape[1:].
  """
  gathered = box_list_ops.matmul_gather_on_zeroth_axis(
      params, tf.reshape(indices, [-1]), scope=scope)
  indices_shape = shape_utils.combined_static_and_dynamic_shape(indices)
  params_shape = shape_utils.combined_static_and_dynamic_shape(params)
  return tf.reshape(gathered, indices_shape + params_shape[1:])


def fpn_feature_levels(num_levels, unit_scale_index, image_ratio, boxes):
  """The FPN level each box is cropped from, by its area (FPN paper 4.2).

  Args:
    num_levels: int > 0, feature levels available.
    unit_scale_index: 0-based level matching the pretraining resolution.
    image_ratio: float, input image size over pretraining image size.
    boxes: [batch, num_boxes, 4] normalized boxes.

  Returns:
    int32 [batch, num_boxes] levels in [0, num_levels).
  """
  assert num_levels > 0, (
      '`num_levels` must be > 0. Found {}'.format(num_levels))
  assert 0 <= unit_scale_index < num_levels, (
      '`unit_scale_index` must be in [0, {}). Found {}.'.format(
          num_levels, unit_scale_index))
  sizes = boxes[:, :, 2:4] - boxes[:, :, 0:2]
  log2_side = tf.math.log(tf.sqrt(tf.reduce_prod(sizes, axis=2)) *
                          image_ratio) / tf.cast(tf.math.log(2.0),
                                                 boxes.dtype)
  levels = tf.cast(tf.floor(log2_side) + unit_scale_index, tf.int32)
  return tf.clip_by_value(levels, 0, num_levels - 1)


def bfloat16_to_float32_nested(input_nested):
  """Casts every bfloat16 tensor of nested dicts/lists/tuples to float32."""
  if isinstance(input_nested, tf.Tensor):
    if input_nested.dtype == tf.bfloat16:
      return tf.cast(input_nested, tf.float32)
    return input_nested
  if isinstance(input_nested, (list, tuple)):
    return [bfloat16_to_float32_nested(value) for value in input_nested]
  if isinstance(input_nested, dict):
    return {key: bfloat16_to_float32_nested(value)
            for key, value in input_nested.items()}
  return input_nested


def gather_with_padding_values(input_tensor, indices, padding_value):
  """tf.gather along axis 0 where index -1 gathers `padding_value`.

  Args:
    input_tensor: [M, d1, ...] tensor.
    indices: int [L], indices into input_tensor or -1.
    padding_value: [d1, ...] value for the -1 entries.

  Returns:
    [L, d1, ...] tensor.
  """
  padded = tf.concat([tf.expand_dims(padding_value, 0), input_tensor], 0)
  return tf.gather(padded, indices + 1)

