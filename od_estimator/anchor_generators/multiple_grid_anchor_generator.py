"""Grid anchors on several feature maps, as in SSD.

Each feature map has its own list of (scale, aspect ratio) box specs; see
Liu et al., "SSD: Single Shot MultiBox Detector", 2016, section 2.2. Anchors
are in normalized coordinates unless strides/offsets are given in pixels and
generate() is called without the image size.
"""
import math

import tensorflow as tf

from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.core import anchor_generator
from od_estimator.core import box_list_ops


def _is_list_of_pairs(value):
  return all(isinstance(item, tuple) and len(item) == 2 for item in value)


class MultipleGridAnchorGenerator(anchor_generator.AnchorGenerator):
  """Anchors for several feature maps, each with its own box specs."""

  def __init__(self,
               box_specs_list,
               base_anchor_size=None,
               anchor_strides=None,
               anchor_offsets=None,
               clip_window=None):
    """Creates a MultipleGridAnchorGenerator.

    Example: box_specs_list=[[(.1, 1.), (.1, 2.)], [(.2, 1.), (.3, 1.)]]
    places two anchors on every cell of the first feature map and two on
    every cell of the second.

    Args:
      box_specs_list: list (one entry per feature map) of lists of
        (scale, aspect_ratio) tuples.
      base_anchor_size: [height, width] of a scale 1, aspect ratio 1 anchor
        (list or [2] float tensor); default [256, 256]. Both are relative to
        the shorter image side, so equal values give square anchors on
        non-square images.
      anchor_strides: optional list of (y, x) strides in pixels, one per
        feature map. Default: 1 / feature map size (normalized units).
      anchor_offsets: optional list of (y, x) centers of the (0, 0) anchors in
        pixels, one per feature map. Default: half the stride.
      clip_window: optional [4] float tensor ymin, xmin, ymax, xmax to clip
        the anchors to (clipped anchors are kept, never dropped).

    Raises:
      ValueError: if box_specs_list is not a list of lists of pairs, if
        anchor_strides or anchor_offsets are not lists of pairs as long as
        box_specs_list, or if clip_window is not a [4] tensor.
    """
    if not (isinstance(box_specs_list, list) and
            all(isinstance(specs, list) for specs in box_specs_list) and
            all(_is_list_of_pairs(specs) for specs in box_specs_list)):
      raise ValueError('box_specs_list must be a list of lists of '
                       '(scale, aspect_ratio) tuples.')
    self._box_specs = box_specs_list
    self._base_anchor_size = (
        [256, 256] if base_anchor_size is None else base_anchor_size)
    self._anchor_strides = anchor_strides
    self._anchor_offsets = anchor_offsets
    if clip_window is not None and clip_window.shape.as_list() != [4]:
      raise ValueError('clip_window must be None or a tensor of shape [4].')
    self._clip_window = clip_window
    # An empty spec list (a layer without anchors) unzips to nothing.
    self._scales = [tuple(s for s, _ in specs) for specs in box_specs_list]
    self._aspect_ratios = [
        tuple(a for _, a in specs) for specs in box_specs_list]
    for arg, arg_name in ((anchor_strides, 'anchor_strides'),
                          (anchor_offsets, 'anchor_offsets')):
      if not arg:
        continue
      if not (isinstance(arg, list) and len(arg) == len(box_specs_list)):
        raise ValueError('%s must be a list as long as box_specs_list (%d).' %
                         (arg_name, len(box_specs_list)))
      if not _is_list_of_pairs(arg):
        raise ValueError('%s must be a list of (y, x) tuples.' % arg_name)

  def name_scope(self):
    return 'MultipleGridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns the number of box specs of each feature map."""
    return [len(specs) for specs in self._box_specs]

  def _generate(self, feature_map_shape_list, im_height=1, im_width=1):
    """Builds the anchors of every feature map.

    Layer l yields height_l * width_l * len(box_specs_list[l]) anchors, the
    box spec index varying fastest, then x, then y.

    Args:
      feature_map_shape_list: list of (height, width) pairs, one per entry of
        box_specs_list.
      im_height: image height (int or scalar tensor). Pixel strides and
        offsets are divided by it; with the default 1 they are used as given.
      im_width: image width, used like im_height.

    Returns:
      list of BoxList, one per feature map, each with a float32
      'feature_map_index' field holding the layer index.

    Raises:
      ValueError: if feature_map_shape_list is not a list of pairs as long as
        box_specs_list.
    """
    if not (isinstance(feature_map_shape_list, list) and
            len(feature_map_shape_list) == len(self._box_specs)):
      raise ValueError('feature_map_shape_list must be a list as long as '
                       'box_specs_list (%d).' % len(self._box_specs))
    grid_shapes = [anchor_generator.unpack_feature_map_shape(shape)
                   for shape in feature_map_shape_list]
    im_height = tf.cast(im_height, tf.float32)
    im_width = tf.cast(im_width, tf.float32)

    if self._anchor_strides:
      anchor_strides = [
          (tf.cast(stride[0], tf.float32) / im_height,
           tf.cast(stride[1], tf.float32) / im_width)
          for stride in self._anchor_strides]
    else:
      # One cell of the feature map, in normalized image units.
      anchor_strides = [
          (1.0 / tf.cast(height, tf.float32), 1.0 / tf.cast(width, tf.float32))
          for height, width in grid_shapes]
    if self._anchor_offsets:
      anchor_offsets = [
          (tf.cast(offset[0], tf.float32) / im_height,
           tf.cast(offset[1], tf.float32) / im_width)
          for offset in self._anchor_offsets]
    else:
      anchor_offsets = [(0.5 * stride[0], 0.5 * stride[1])
                        for stride in anchor_strides]

    # Anchor sizes are relative to the shorter image side.
    min_im_shape = tf.minimum(im_height, im_width)
    base_anchor_size = tf.cast(
        tf.convert_to_tensor(self._base_anchor_size), tf.float32)
    base_anchor_size = tf.stack([
        min_im_shape / im_height * base_anchor_size[0],
        min_im_shape / im_width * base_anchor_size[1]])

    anchors_list = []
    for index, ((height, width), scales, aspect_ratios, stride,
                offset) in enumerate(zip(grid_shapes, self._scales,
                                         self._aspect_ratios, anchor_strides,
                                         anchor_offsets)):
      anchors = grid_anchor_generator.tile_anchors(
          grid_height=height,
          grid_width=width,
          scales=scales,
          aspect_ratios=aspect_ratios,
          base_anchor_size=base_anchor_size,
          anchor_stride=tf.stack(stride),
          anchor_offset=tf.stack(offset))
      if self._clip_window is not None:
        anchors = box_list_ops.clip_to_window(
            anchors, self._clip_window, filter_nonoverlapping=False)
      num_anchors = anchors.num_boxes_static()
      if num_anchors is None:
        num_anchors = anchors.num_boxes()
      anchors.add_field('feature_map_index',
                        tf.fill([num_anchors], float(index)))
      anchors_list.append(anchors)
    return anchors_list


def create_ssd_anchors(num_layers=6,
                       min_scale=0.2,
                       max_scale=0.95,
                       scales=None,
                       aspect_ratios=(1.0, 2.0, 3.0, 1.0 / 2, 1.0 / 3),
                       interpolated_scale_aspect_ratio=1.0,
                       base_anchor_size=None,
                       anchor_strides=None,
                       anchor_offsets=None,
                       reduce_boxes_in_lowest_layer=True):
  """Creates the SSD default boxes as a MultipleGridAnchorGenerator.

  Feature maps are expected finest first. Layer l gets scale s_l (linearly
  spaced from min_scale to max_scale unless `scales` is given) with every
  aspect ratio, plus one box of scale sqrt(s_l * s_{l+1}) (s_{num_layers} =
  1) and aspect ratio interpolated_scale_aspect_ratio. With
  reduce_boxes_in_lowest_layer the first layer instead gets the three boxes
  (0.1, 1.0), (s_0, 2.0), (s_0, 0.5).

  Args:
    num_layers: number of feature maps.
    min_scale: scale of the finest layer (float).
    max_scale: scale of the coarsest layer (float).
    scales: optional explicit per-layer scales; when non-empty, min_scale and
      max_scale are ignored. Only the first num_layers entries are used.
    aspect_ratios: aspect ratios placed on every layer (but see
      reduce_boxes_in_lowest_layer).
    interpolated_scale_aspect_ratio: aspect ratio of the extra interpolated
      scale box; 0 (or less) leaves that box out.
    base_anchor_size: [height, width] of a scale 1 box relative to the shorter
      image side; default [1.0, 1.0].
    anchor_strides: optional list of (y, x) strides in pixels per layer; see
      MultipleGridAnchorGenerator.
    anchor_offsets: optional list of (y, x) offsets in pixels per layer; see
      MultipleGridAnchorGenerator.
    reduce_boxes_in_lowest_layer: whether the first layer uses the fixed
      three boxes above.

  Returns:
    a MultipleGridAnchorGenerator.

  Raises:
    ValueError: if num_layers < 2 and no scales are given (the linear
      spacing needs two end points).
  """
  if base_anchor_size is None:
    base_anchor_size = [1.0, 1.0]
  if scales:
    scales = [float(scale) for scale in scales]
  else:
    if num_layers < 2:
      raise ValueError('num_layers must be at least 2 when scales are not '
                       'given, got %d.' % num_layers)
    scales = [min_scale + (max_scale - min_scale) * i / (num_layers - 1)
              for i in range(num_layers)]
  # The scale after the last layer, only used for its interpolated box.
  scales = scales + [1.0]

  box_specs_list = []
  for layer, scale, scale_next in zip(range(num_layers), scales[:-1],
                                      scales[1:]):
    if layer == 0 and reduce_boxes_in_lowest_layer:
      layer_box_specs = [(0.1, 1.0), (scale, 2.0), (scale, 0.5)]
    else:
      layer_box_specs = [(scale, aspect_ratio)
                         for aspect_ratio in aspect_ratios]
      if interpolated_scale_aspect_ratio > 0.0:
        layer_box_specs.append((math.sqrt(scale * scale_next),
                                interpolated_scale_aspect_ratio))
    box_specs_list.append(layer_box_specs)

  return MultipleGridAnchorGenerator(box_specs_list, base_anchor_size,
                                     anchor_strides, anchor_offsets)
