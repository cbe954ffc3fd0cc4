"""ROI crops from a feature pyramid: each box from the level it belongs to.

A two-stage detector on a feature pyramid (Lin et al., "Feature Pyramid
Networks for Object Detection", 2017, section 4.2) crops each proposal from
one pyramid level, chosen by the box's size: the larger the box, the
coarser the level. One feature map is the single-level case: every box is
cropped from it.

The rule, as the original applies it to boxes normalized to an image of
height H and width W, with L levels (index 0 the finest):

  level = clip(floor(log2(sqrt(h * w) * sqrt(H * W) / 224)) + L - 2, 0, L - 1)

so a box of 224 pixels (the pretraining images' size) is cropped from
index L - 2.
"""
import math

import tensorflow as tf

from od_estimator.core import shape_utils

# Side of the images the backbone was pretrained on (ImageNet).
PRETRAINING_IMAGE_SIZE = 224.0
# Keeps log2 finite for boxes without area (padding): they go to level 0.
_MIN_SCALED_SIZE = 1e-8


def fpn_feature_levels(num_levels, unit_scale_index, image_ratio, boxes):
  """The pyramid level index of every box.

  Args:
    num_levels: number of pyramid levels (> 0).
    unit_scale_index: the level index of a box as large as the pretraining
      images, in [0, num_levels).
    image_ratio: scalar, the image's side (square root of its area) over
      the pretraining images'.
    boxes: [batch, num_boxes, 4] float32 normalized ymin, xmin, ymax, xmax.

  Returns:
    [batch, num_boxes] int32 level indices in [0, num_levels).

  Raises:
    ValueError: for num_levels < 1 or unit_scale_index out of range.
  """
  if num_levels < 1:
    raise ValueError('num_levels must be > 0, got %d.' % num_levels)
  if not 0 <= unit_scale_index < num_levels:
    raise ValueError('unit_scale_index must be in [0, %d), got %d.' % (
        num_levels, unit_scale_index))
  sizes = boxes[:, :, 2:4] - boxes[:, :, 0:2]
  scaled_side = tf.sqrt(tf.reduce_prod(sizes, axis=2)) * image_ratio
  log2_side = tf.math.log(tf.maximum(scaled_side, _MIN_SCALED_SIZE)) / (
      math.log(2.0))
  levels = tf.cast(tf.floor(log2_side), tf.int32) + unit_scale_index
  return tf.clip_by_value(levels, 0, num_levels - 1)


def image_box_levels(num_levels, image_shape, boxes):
  """fpn_feature_levels with the original's settings for an image batch.

  Args:
    num_levels: number of pyramid levels.
    image_shape: [4] int32 shape of the (padded) image batch the boxes are
      normalized to.
    boxes: [batch, num_boxes, 4] float32 normalized.

  Returns:
    [batch, num_boxes] int32; all zeros with one level.
  """
  if num_levels == 1:
    return tf.zeros(shape_utils.combined_static_and_dynamic_shape(boxes)[:2],
                    tf.int32)
  image_side = tf.sqrt(tf.cast(image_shape[1] * image_shape[2], tf.float32))
  return fpn_feature_levels(num_levels, num_levels - 2,
                            image_side / PRETRAINING_IMAGE_SIZE, boxes)


def multilevel_crop_and_resize(crop_and_resize_fn, feature_maps, boxes,
                               box_levels, crop_size):
  """Crops every box from the feature map of its level.

  Args:
    crop_and_resize_fn: fn(features [batch, h, w, depth], boxes [batch, n,
      4] normalized, crop_size) -> [batch, n, crop_h, crop_w, depth]
      (spatial_transform_ops' native or matrix-product crop).
    feature_maps: list of [batch, h_l, w_l, depth] tensors, finest first,
      of one depth; a single map is cropped directly.
    boxes: [batch, num_boxes, 4] float32 normalized to the image.
    box_levels: [batch, num_boxes] int32 index into feature_maps (unused
      with one map).
    crop_size: [crop_height, crop_width].

  Returns:
    [batch, num_boxes, crop_height, crop_width, depth]: each box's crop of
    its level's map.
  """
  if len(feature_maps) == 1:
    return crop_and_resize_fn(feature_maps[0], boxes, crop_size)
  with tf.name_scope('MultiLevelCropAndResize'):
    result = None
    for level, features in enumerate(feature_maps):
      cropped = crop_and_resize_fn(features, boxes, crop_size)
      if result is None:
        result = cropped
        continue
      # Static shapes throughout: every level is cropped, each box keeps
      # its own level's crop.
      chosen = tf.equal(box_levels, level)[:, :, tf.newaxis, tf.newaxis,
                                           tf.newaxis]
      result = tf.where(chosen, cropped, result)
    return result
