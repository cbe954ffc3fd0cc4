"""Grid anchors on a single feature map, as in the Faster R-CNN RPN.

Every cell of the feature map gets one anchor per (aspect ratio, scale)
pair; see Ren et al., "Faster R-CNN: Towards Real-Time Object Detection with
Region Proposal Networks", 2015.
"""
import tensorflow as tf

from od_estimator.core import anchor_generator
from od_estimator.core import box_list


def _to_float32(value):
  """Returns value (number, sequence or tensor) as a float32 tensor."""
  return tf.cast(tf.convert_to_tensor(value), tf.float32)


class GridAnchorGenerator(anchor_generator.AnchorGenerator):
  """Anchors of several scales and aspect ratios on one regular grid."""

  def __init__(self,
               scales=(0.5, 1.0, 2.0),
               aspect_ratios=(0.5, 1.0, 2.0),
               base_anchor_size=None,
               anchor_stride=None,
               anchor_offset=None):
    """Creates a GridAnchorGenerator.

    Args:
      scales: sequence of float anchor scales, relative to base_anchor_size.
      aspect_ratios: sequence of float aspect ratios (width / height).
      base_anchor_size: [height, width] of a scale 1, aspect ratio 1 anchor
        (list or [2] float tensor); default [256, 256].
      anchor_stride: [y, x] distance between the centers of adjacent cells
        (list or [2] float tensor); default [16, 16].
      anchor_offset: [y, x] center of the top-left cell's anchors (list or
        [2] float tensor); default [0, 0]. Zero suits VALID-padded networks
        with an even receptive field; other paddings need their own value.
    """
    self._scales = scales
    self._aspect_ratios = aspect_ratios
    self._base_anchor_size = (
        [256, 256] if base_anchor_size is None else base_anchor_size)
    self._anchor_stride = [16, 16] if anchor_stride is None else anchor_stride
    self._anchor_offset = [0, 0] if anchor_offset is None else anchor_offset

  def name_scope(self):
    return 'GridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns [len(scales) * len(aspect_ratios)]."""
    return [len(self._scales) * len(self._aspect_ratios)]

  def _generate(self, feature_map_shape_list):
    """Builds the anchors for one feature map.

    Args:
      feature_map_shape_list: a list holding one (height, width) pair.

    Returns:
      a one element list holding a BoxList of height * width *
      len(scales) * len(aspect_ratios) anchors in absolute coordinates, with
      an all-zero float32 'feature_map_index' field.

    Raises:
      ValueError: if feature_map_shape_list is not a list of one pair.
    """
    if not (isinstance(feature_map_shape_list, list) and
            len(feature_map_shape_list) == 1):
      raise ValueError('feature_map_shape_list must be a list of length 1, '
                       'got %r.' % (feature_map_shape_list,))
    grid_height, grid_width = anchor_generator.unpack_feature_map_shape(
        feature_map_shape_list[0])
    scales = _to_float32(self._scales)
    aspect_ratios = _to_float32(self._aspect_ratios)
    # All (aspect ratio, scale) pairs with the scale varying fastest; this
    # fixes the anchor order inside a cell, which box predictors rely on.
    scales_grid = tf.reshape(
        scales[tf.newaxis, :] * tf.ones_like(aspect_ratios)[:, tf.newaxis],
        [-1])
    aspect_ratios_grid = tf.reshape(
        aspect_ratios[:, tf.newaxis] * tf.ones_like(scales)[tf.newaxis, :],
        [-1])
    anchors = tile_anchors(grid_height, grid_width, scales_grid,
                           aspect_ratios_grid, self._base_anchor_size,
                           self._anchor_stride, self._anchor_offset)
    num_anchors = anchors.num_boxes_static()
    if num_anchors is None:
      num_anchors = anchors.num_boxes()
    anchors.add_field('feature_map_index', tf.zeros([num_anchors]))
    return [anchors]


def tile_anchors(grid_height,
                 grid_width,
                 scales,
                 aspect_ratios,
                 base_anchor_size,
                 anchor_stride,
                 anchor_offset):
  """Places a basis set of boxes on every point of a regular grid.

  Basis box k has height scales[k] / sqrt(aspect_ratios[k]) *
  base_anchor_size[0] and width scales[k] * sqrt(aspect_ratios[k]) *
  base_anchor_size[1]. Grid point (i, j) is centered at
  (i * anchor_stride[0] + anchor_offset[0],
   j * anchor_stride[1] + anchor_offset[1]).

  Args:
    grid_height: number of grid rows (int or int scalar tensor).
    grid_width: number of grid columns (int or int scalar tensor).
    scales: [K] float scale of each basis box (sequence or tensor).
    aspect_ratios: [K] float aspect ratio (width / height) of each basis box;
      scales and aspect_ratios are paired elementwise (and broadcast when one
      has length 1).
    base_anchor_size: [2] float height, width of a scale 1, ratio 1 box.
    anchor_stride: [2] float y, x distance between adjacent grid points.
    anchor_offset: [2] float y, x center of grid point (0, 0).

  Returns:
    BoxList of grid_height * grid_width * K boxes, [N, 4] float32 ymin, xmin,
    ymax, xmax, ordered with the basis index varying fastest, then the column,
    then the row. The shape is static when grid sizes and K are.
  """
  scales = _to_float32(scales)
  aspect_ratios = _to_float32(aspect_ratios)
  base_anchor_size = _to_float32(base_anchor_size)
  anchor_stride = _to_float32(anchor_stride)
  anchor_offset = _to_float32(anchor_offset)

  ratio_sqrts = tf.sqrt(aspect_ratios)
  heights = scales / ratio_sqrts * base_anchor_size[0]
  widths = scales * ratio_sqrts * base_anchor_size[1]
  y_centers = (tf.cast(tf.range(grid_height), tf.float32) * anchor_stride[0] +
               anchor_offset[0])
  x_centers = (tf.cast(tf.range(grid_width), tf.float32) * anchor_stride[1] +
               anchor_offset[1])

  # Lay everything out as [rows, columns, K] by broadcasting; adding an exact
  # zero tensor of that shape fills the missing axis of each coordinate while
  # keeping static shapes whenever the inputs have them.
  y_centers = y_centers[:, tf.newaxis, tf.newaxis]
  x_centers = x_centers[tf.newaxis, :, tf.newaxis]
  half_heights = 0.5 * heights[tf.newaxis, tf.newaxis, :]
  half_widths = 0.5 * widths[tf.newaxis, tf.newaxis, :]
  zeros = (tf.zeros_like(y_centers) + tf.zeros_like(x_centers) +
           tf.zeros_like(half_heights + half_widths))
  corners = tf.stack([
      y_centers - half_heights + zeros,
      x_centers - half_widths + zeros,
      y_centers + half_heights + zeros,
      x_centers + half_widths + zeros,
  ], axis=3)
  return box_list.BoxList(tf.reshape(corners, [-1, 4]))
