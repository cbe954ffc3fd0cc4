"""Grid anchors over the levels of a feature pyramid, as in RetinaNet.

Level l has stride 2**l and base anchor size anchor_scale * 2**l; each cell
gets len(aspect_ratios) * scales_per_octave anchors. See Lin et al., "Focal
Loss for Dense Object Detection", 2017.
"""
import numbers

import tensorflow as tf

from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.core import anchor_generator
from od_estimator.core import box_list_ops


def _is_python_int(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_unit_size(value):
  """True for a static image size of 1, i.e. 'image size not supplied'."""
  return not tf.is_tensor(value) and value == 1


class MultiscaleGridAnchorGenerator(anchor_generator.AnchorGenerator):
  """Anchors for pyramid levels min_level..max_level."""

  def __init__(self, min_level, max_level, anchor_scale, aspect_ratios,
               scales_per_octave, normalize_coordinates=True):
    """Creates a MultiscaleGridAnchorGenerator.

    Args:
      min_level: finest pyramid level (stride 2**min_level).
      max_level: coarsest pyramid level, inclusive.
      anchor_scale: base anchor size in units of the level's stride, e.g. 4
        gives 4 * 2**l pixel anchors on level l.
      aspect_ratios: sequence of float aspect ratios placed on every cell.
      scales_per_octave: number of intermediate scales 2**(i /
        scales_per_octave), i = 0 .. scales_per_octave - 1.
      normalize_coordinates: whether generate() returns anchors in
        normalized coordinates (it then needs im_height and im_width).
    """
    self._aspect_ratios = aspect_ratios
    self._scales_per_octave = scales_per_octave
    self._normalize_coordinates = normalize_coordinates
    scales = [2**(float(i) / scales_per_octave)
              for i in range(scales_per_octave)]
    aspects = list(aspect_ratios)
    self._anchor_grid_info = []
    for level in range(min_level, max_level + 1):
      self._anchor_grid_info.append({
          'level': level,
          'info': [scales, aspects,
                   [2**level * anchor_scale, 2**level * anchor_scale],
                   [2**level, 2**level]],
      })

  def name_scope(self):
    return 'MultiscaleGridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns len(aspect_ratios) * scales_per_octave for every level."""
    return len(self._anchor_grid_info) * [
        len(self._aspect_ratios) * self._scales_per_octave]

  def _generate(self, feature_map_shape_list, im_height=1, im_width=1):
    """Builds the anchors of every pyramid level.

    Anchors of a level are centered at stride / 2 + k * stride along an axis
    when the image size along it is a static multiple of the stride (or 1, or
    when both sizes are tensors); otherwise the first center is at 0.

    Args:
      feature_map_shape_list: list of (height, width) pairs, finest level
        first.
      im_height: image height, a Python int or an int scalar tensor (train
        with static sizes; tensors are fine for inference).
      im_width: image width, like im_height.

    Returns:
      list of BoxList, one per level, in absolute or normalized coordinates
      (see normalize_coordinates); within a cell the aspect ratio is the
      outer and the scale the inner loop.

    Raises:
      ValueError: if normalized coordinates were requested but im_height or
        im_width is left at 1.
    """
    if self._normalize_coordinates and (
        _is_unit_size(im_height) or _is_unit_size(im_width)):
      raise ValueError(
          'Normalized coordinates were requested upon construction of the '
          'MultiscaleGridAnchorGenerator (normalize_coordinates), but generate '
          'was called without im_height and im_width.')
    anchors_list = []
    for feature_map_shape, grid_info in zip(feature_map_shape_list,
                                            self._anchor_grid_info):
      level = grid_info['level']
      stride = 2**level
      scales, aspect_ratios, base_anchor_size, anchor_stride = (
          grid_info['info'])
      feat_h, feat_w = anchor_generator.unpack_feature_map_shape(
          feature_map_shape)
      # Centering the grid in the image needs the image to be tiled exactly
      # by the stride, which can only be checked for static sizes.
      anchor_offset = [0, 0]
      if _is_python_int(im_height) and _is_python_int(im_width):
        if im_height % stride == 0 or im_height == 1:
          anchor_offset[0] = stride / 2.0
        if im_width % stride == 0 or im_width == 1:
          anchor_offset[1] = stride / 2.0
      if tf.is_tensor(im_height) and tf.is_tensor(im_width):
        anchor_offset = [stride / 2.0, stride / 2.0]
      generator = grid_anchor_generator.GridAnchorGenerator(
          scales,
          aspect_ratios,
          base_anchor_size=base_anchor_size,
          anchor_stride=anchor_stride,
          anchor_offset=anchor_offset)
      (anchors,) = generator.generate(feature_map_shape_list=[(feat_h,
                                                               feat_w)])
      if self._normalize_coordinates:
        anchors = box_list_ops.to_normalized_coordinates(
            anchors, im_height, im_width, check_range=False)
      anchors_list.append(anchors)
    return anchors_list
