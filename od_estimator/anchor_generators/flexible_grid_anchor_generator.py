"""Grid anchors with explicit per-layer sizes, aspect ratios and strides.

Unlike the SSD and RetinaNet generators, nothing ties one layer's anchors to
another's, so this generator can express either of them and more.
"""
import tensorflow as tf

from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.core import anchor_generator
from od_estimator.core import box_list_ops


class FlexibleGridAnchorGenerator(anchor_generator.AnchorGenerator):
  """Anchors for several feature maps, each fully specified by the caller."""

  def __init__(self, base_sizes, aspect_ratios, anchor_strides, anchor_offsets,
               normalize_coordinates=True):
    """Creates a FlexibleGridAnchorGenerator.

    Args:
      base_sizes: list (one per layer) of tuples of anchor sizes in pixels;
        e.g. [(32, 64), (128,)] puts 2 anchors on each cell of layer 0 and 1
        on each cell of layer 1.
      aspect_ratios: list (one per layer) of tuples of aspect ratios, paired
        elementwise with base_sizes; a single ratio applies to every size.
      anchor_strides: list (one per layer) of (y, x) strides in pixels.
      anchor_offsets: list (one per layer) of (y, x) pixel centers of the
        (0, 0) anchors.
      normalize_coordinates: whether generate() returns normalized
        coordinates (it then needs im_height and im_width).

    Raises:
      ValueError: if the four lists differ in length, or a layer's
        aspect_ratios has neither one entry nor as many as its base_sizes.
    """
    num_layers = len(base_sizes)
    for arg, arg_name in ((aspect_ratios, 'aspect_ratios'),
                          (anchor_strides, 'anchor_strides'),
                          (anchor_offsets, 'anchor_offsets')):
      if len(arg) != num_layers:
        raise ValueError('%s has %d layers but base_sizes has %d.' %
                         (arg_name, len(arg), num_layers))
    for layer, (sizes, ratios) in enumerate(zip(base_sizes, aspect_ratios)):
      if len(ratios) not in (1, len(sizes)):
        raise ValueError(
            'Layer %d has %d base_sizes but %d aspect_ratios; give one ratio '
            'or one per size.' % (layer, len(sizes), len(ratios)))
    self._base_sizes = base_sizes
    self._aspect_ratios = aspect_ratios
    self._anchor_strides = anchor_strides
    self._anchor_offsets = anchor_offsets
    self._normalize_coordinates = normalize_coordinates

  def name_scope(self):
    return 'FlexibleGridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns the number of base sizes of each layer."""
    return [len(sizes) for sizes in self._base_sizes]

  def _generate(self, feature_map_shape_list, im_height=1, im_width=1):
    """Builds the anchors of every layer.

    Args:
      feature_map_shape_list: list of (height, width) pairs, one per layer.
      im_height: image height (int or scalar tensor), needed when
        normalize_coordinates is set.
      im_width: image width, like im_height.

    Returns:
      list of BoxList, one per layer, each with an all-zero float32
      'feature_map_index' field (as the original API does).

    Raises:
      ValueError: if normalized coordinates were requested but im_height or
        im_width is left at 1.
    """
    if self._normalize_coordinates and any(
        not tf.is_tensor(size) and size == 1 for size in (im_height, im_width)):
      raise ValueError(
          'Normalized coordinates were requested upon construction of the '
          'FlexibleGridAnchorGenerator (normalize_coordinates), but generate '
          'was called without im_height and im_width.')
    anchors_list = []
    for (feature_map_shape, base_sizes, aspect_ratios, anchor_stride,
         anchor_offset) in zip(feature_map_shape_list, self._base_sizes,
                               self._aspect_ratios, self._anchor_strides,
                               self._anchor_offsets):
      height, width = anchor_generator.unpack_feature_map_shape(
          feature_map_shape)
      # Sizes are already in pixels, so the base anchor is the unit box.
      anchors = grid_anchor_generator.tile_anchors(
          height, width, base_sizes, aspect_ratios, [1.0, 1.0],
          anchor_stride, anchor_offset)
      num_anchors = anchors.num_boxes_static()
      if num_anchors is None:
        num_anchors = anchors.num_boxes()
      anchors.add_field('feature_map_index', tf.zeros([num_anchors]))
      if self._normalize_coordinates:
        anchors = box_list_ops.to_normalized_coordinates(
            anchors, im_height, im_width, check_range=False)
      anchors_list.append(anchors)
    return anchors_list
