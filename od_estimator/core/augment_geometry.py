"""Geometric augmentations: flips, rotation, rescaling, box jitter, patches.

Each op works on one image (no batch dimension) and mirrors the public name,
argument order and return order of the original object detection API's
preprocessor ops, minus `preprocess_vars_cache`. Conventions:
  image      [H, W, C] float32
  boxes      [N, 4] float32 normalized ymin, xmin, ymax, xmax
  masks      [N, H, W] float32 instance masks aligned with the image
  keypoints  [N, K, 2] float32 normalized y, x
Random ops draw one decision per call and apply it to every tensor they
return, so boxes, masks and keypoints stay consistent with the image.
"""
import functools

import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import preprocessor_cache
from od_estimator.core import shape_utils

_CACHE = preprocessor_cache.PreprocessorCache

# The four methods random_resize_method chooses from, as v1 resize method ids
# (the only enum the v1 resize API with align_corners understands).
_RESIZE_METHODS_V1 = (
    tf.compat.v1.image.ResizeMethod.BILINEAR,
    tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
    tf.compat.v1.image.ResizeMethod.BICUBIC,
    tf.compat.v1.image.ResizeMethod.AREA,
)

# TF2 spells resize methods as strings; map them onto the v1 ids.
_RESIZE_METHOD_NAMES = {
    'bilinear': tf.compat.v1.image.ResizeMethod.BILINEAR,
    'nearest': tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
    'bicubic': tf.compat.v1.image.ResizeMethod.BICUBIC,
    'area': tf.compat.v1.image.ResizeMethod.AREA,
}

_JITTER_RATIO_RANGES = {
    'default': (-1.0, 1.0),
    'shrink': (-1.0, 0.0),
    'expand': (0.0, 1.0),
    'shrink_symmetric': (-1.0, 0.0),
    'expand_symmetric': (0.0, 1.0),
    'shrink_symmetric_xy': (-1.0, 0.0),
    'expand_symmetric_xy': (0.0, 1.0),
}


def _box_columns(boxes):
  # Column slices rather than tf.unstack: works when the 4 is not static.
  return [boxes[:, i] for i in range(4)]


def _split_box_columns(boxes):
  # [N, 1] columns from tf.split, re-joined with tf.concat below: unlike
  # column slices this also passes through the original's "no boxes" tensor
  # tf.constant([[]]) of shape [1, 0] (four [1, 0] parts).
  return tf.split(boxes, num_or_size_splits=4, axis=1)


def _flip_boxes_left_right(boxes):
  ymin, xmin, ymax, xmax = _split_box_columns(boxes)
  return tf.concat([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1)


def _flip_boxes_up_down(boxes):
  ymin, xmin, ymax, xmax = _split_box_columns(boxes)
  return tf.concat([1.0 - ymax, xmin, 1.0 - ymin, xmax], axis=1)


def _rot90_boxes(boxes):
  # Counter-clockwise: (y, x) -> (1 - x, y), so the old x range becomes the
  # new (reversed) y range and the old y range the new x range.
  ymin, xmin, ymax, xmax = _split_box_columns(boxes)
  return tf.concat([1.0 - xmax, ymin, 1.0 - xmin, ymax], axis=1)


def _rot90_masks(masks):
  # Same pixel mapping as tf.image.rot90 on the image: transpose H and W,
  # then reverse the new rows.
  return tf.reverse(tf.transpose(masks, [0, 2, 1]), axis=[1])


def _cond_given(predicate, transforms):
  """Transforms every given tensor where predicate holds (one draw for all).

  Args:
    predicate: scalar bool tensor.
    transforms: (value, fn) pairs, or (value, fn, False) where fn changes
      the value's shape; pairs whose value is None are skipped.

  Returns:
    A list with fn(value) where predicate holds, else value, for each value
    given, in order.
  """
  return [augment_common.cond_or_identity(
      predicate, functools.partial(fn, value), value, *keep_shape)
          for value, fn, *keep_shape in transforms if value is not None]


def _check_keypoint_args(keypoints, permutation):
  if keypoints is not None and permutation is None:
    raise ValueError(
        'keypoints are provided but keypoint_flip_permutation is not provided')


@augment_common.uses_preprocess_vars_cache(_CACHE.HORIZONTAL_FLIP)
def random_horizontal_flip(image,
                           boxes=None,
                           masks=None,
                           keypoints=None,
                           keypoint_visibilities=None,
                           densepose_part_ids=None,
                           densepose_surface_coords=None,
                           keypoint_depths=None,
                           keypoint_depth_weights=None,
                           keypoint_flip_permutation=None,
                           probability=0.5,
                           seed=None):
  """Randomly mirrors the image and its annotations left-right.

  Args:
    image: [H, W, C] float32.
    boxes: optional [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    masks: optional [N, H, W] float32 instance masks.
    keypoints: optional [N, K, 2] float32 normalized y, x.
    keypoint_visibilities: optional [N, K] bool; reordered with keypoints.
    densepose_part_ids: not supported, must be None.
    densepose_surface_coords: not supported, must be None.
    keypoint_depths: optional [N, K] float32; reordered with keypoints.
    keypoint_depth_weights: optional [N, K] float32; reordered with keypoints.
    keypoint_flip_permutation: list or [K] int32 tensor mapping flipped
      keypoint k to source keypoint permutation[k] (e.g. swaps left / right
      eyes). Required when keypoints are given; an empty list keeps the
      order.
    probability: probability of flipping.
    seed: random seed.

  Returns:
    A tuple: image (same static shape as the input), then for each of boxes,
    masks, keypoints, keypoint_visibilities, keypoint_depths and
    keypoint_depth_weights that was given, its flipped counterpart (the
    keypoint companions only when keypoint_flip_permutation is given).

  Raises:
    ValueError: if keypoints are given without keypoint_flip_permutation, or
      if DensePose tensors are given (flipping them needs the DensePose UV
      symmetry tables, which this implementation does not ship).
  """
  _check_keypoint_args(keypoints, keypoint_flip_permutation)
  if densepose_part_ids is not None or densepose_surface_coords is not None:
    raise ValueError('DensePose flipping (densepose_part_ids / '
                     'densepose_surface_coords) is not supported')
  with tf.name_scope('RandomHorizontalFlip'):
    do_flip = augment_common.random_decision(probability, seed=seed)
    permutation = keypoint_flip_permutation
    transforms = [
        (image, tf.image.flip_left_right),
        (boxes, _flip_boxes_left_right),
        (masks, lambda t: tf.reverse(t, axis=[2])),
        (keypoints, lambda t: augment_common.flip_keypoints_horizontal(
            t, 0.5, permutation))]
    if permutation is not None:
      # Per-keypoint companions only need the same reordering.
      transforms += [
          (companion, lambda t: augment_common.permute_keypoint_axis(
              t, permutation))
          for companion in (keypoint_visibilities, keypoint_depths,
                            keypoint_depth_weights)]
    return tuple(_cond_given(do_flip, transforms))


@augment_common.uses_preprocess_vars_cache(_CACHE.VERTICAL_FLIP)
def random_vertical_flip(image,
                         boxes=None,
                         masks=None,
                         keypoints=None,
                         keypoint_flip_permutation=None,
                         probability=0.5,
                         seed=None):
  """Randomly mirrors the image and its annotations up-down.

  Args:
    image: [H, W, C] float32.
    boxes: optional [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    masks: optional [N, H, W] float32 instance masks.
    keypoints: optional [N, K, 2] float32 normalized y, x.
    keypoint_flip_permutation: list or [K] int32 tensor; required with
      keypoints (see random_horizontal_flip).
    probability: probability of flipping.
    seed: random seed.

  Returns:
    A tuple: image (same static shape), then boxes, masks, keypoints for
    each one given.

  Raises:
    ValueError: if keypoints are given without keypoint_flip_permutation.
  """
  _check_keypoint_args(keypoints, keypoint_flip_permutation)
  with tf.name_scope('RandomVerticalFlip'):
    do_flip = augment_common.random_decision(probability, seed=seed)
    return tuple(_cond_given(do_flip, [
        (image, tf.image.flip_up_down),
        (boxes, _flip_boxes_up_down),
        (masks, lambda t: tf.reverse(t, axis=[1])),
        (keypoints, lambda t: augment_common.flip_keypoints_vertical(
            t, 0.5, keypoint_flip_permutation))]))


@augment_common.uses_preprocess_vars_cache(_CACHE.ROTATION90)
def random_rotation90(image,
                      boxes=None,
                      masks=None,
                      keypoints=None,
                      keypoint_rot_permutation=None,
                      probability=0.5,
                      seed=None):
  """Randomly rotates the image and annotations 90 degrees counter-clockwise.

  Combined with both flips this yields all eight rotation / reflection
  variants. A rotated [H, W, C] image is [W, H, C], so the output height and
  width are only static when H == W.

  Args:
    image: [H, W, C] float32.
    boxes: optional [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    masks: optional [N, H, W] float32 instance masks.
    keypoints: optional [N, K, 2] float32 normalized y, x.
    keypoint_rot_permutation: optional list or [K] int32 tensor reordering
      keypoints after rotation; None or empty keeps the order.
    probability: probability of rotating.
    seed: random seed.

  Returns:
    A tuple: image, then boxes, masks, keypoints for each one given.
  """
  with tf.name_scope('RandomRotation90'):
    do_rotate = augment_common.random_decision(probability, seed=seed)
    # Height and width swap: no static shape to restore on image and masks.
    return tuple(_cond_given(do_rotate, [
        (image, tf.image.rot90, False),
        (boxes, _rot90_boxes),
        (masks, _rot90_masks, False),
        (keypoints, lambda t: augment_common.rot90_keypoints(
            t, keypoint_rot_permutation))]))


def _resize_masks_nearest(masks, size, align_corners):
  """Resizes [N, H, W] masks with nearest neighbour (keeps them binary)."""
  resized = tf.compat.v1.image.resize_nearest_neighbor(
      tf.expand_dims(masks, 3), size, align_corners=align_corners)
  return tf.squeeze(resized, axis=3)


@augment_common.uses_preprocess_vars_cache(_CACHE.IMAGE_SCALE)
def random_image_scale(image,
                       masks=None,
                       min_scale_ratio=0.5,
                       max_scale_ratio=2.0,
                       seed=None):
  """Rescales the image (and masks) by one random factor.

  New size is floor(H * s), floor(W * s) with s ~ U[min_scale_ratio,
  max_scale_ratio). The image is resized bilinearly with aligned corners,
  masks with nearest neighbour. Normalized boxes need no change.

  Args:
    image: [H, W, C] float32.
    masks: optional [N, H, W] float32 instance masks.
    min_scale_ratio: lower bound of the scale factor.
    max_scale_ratio: upper bound of the scale factor.
    seed: random seed.

  Returns:
    A tuple: resized image [H', W', C], then resized masks [N, H', W'] if
    masks were given.
  """
  with tf.name_scope('RandomImageScale'):
    image_shape = tf.shape(image)
    scale = augment_common.random_uniform_scalar(
        min_scale_ratio, max_scale_ratio, seed=seed)
    new_size = tf.cast(
        tf.cast(image_shape[:2], tf.float32) * scale, tf.int32)
    result = [tf.compat.v1.image.resize_images(
        image, new_size, align_corners=True)]
    if masks is not None:
      result.append(_resize_masks_nearest(masks, new_size,
                                          align_corners=True))
    return tuple(result)


def _to_v1_resize_method(method):
  """Accepts v1 resize ids or TF2 method names; returns the v1 id."""
  if isinstance(method, str):
    if method not in _RESIZE_METHOD_NAMES:
      raise ValueError('Unsupported resize method: %r' % method)
    return _RESIZE_METHOD_NAMES[method]
  if method not in _RESIZE_METHODS_V1:
    raise ValueError('Unsupported resize method: %r' % method)
  return method


@augment_common.uses_preprocess_vars_cache(_CACHE.RESIZE_METHOD)
def random_resize_method(image, masks=None, target_size=None):
  """Resizes the image to target_size with a randomly chosen method.

  The method is drawn uniformly from bilinear, nearest neighbour, bicubic
  and area. The original resizes the image only, leaving masks at the old
  size for later ops to crop wrongly; here masks follow (nearest neighbour).

  Args:
    image: [H, W, C] float32.
    masks: optional [N, H, W] float32 instance masks. The original's
      positional call random_resize_method(image, target_size) still works.
    target_size: [target_height, target_width] (ints or int32 tensor).

  Returns:
    [target_height, target_width, C] float32 image (static when target_size
    is a Python list of ints), then the resized masks when given.
  """
  if target_size is None and isinstance(masks, (list, tuple)):
    masks, target_size = None, masks
  with tf.name_scope('RandomResizeMethod'):
    def resize(x, case):
      resized = tf.compat.v1.image.resize_images(
          x, target_size, method=_RESIZE_METHODS_V1[case])
      # Nearest neighbour keeps the input dtype while the others return
      # float32; make every branch agree.
      return tf.cast(resized, tf.float32)
    new_image = augment_common.apply_with_random_selector(
        image, resize, num_cases=len(_RESIZE_METHODS_V1))
    if masks is None:
      return new_image
    return new_image, _resize_masks_nearest(masks, target_size,
                                            align_corners=False)


def resize_image(image,
                 masks=None,
                 new_height=600,
                 new_width=1024,
                 method=tf.compat.v1.image.ResizeMethod.BILINEAR,
                 align_corners=False):
  """Resizes the image (and masks) to a fixed size.

  Args:
    image: [H, W, C] tensor.
    masks: optional [N, H, W] float32 instance masks; always resized with
      nearest neighbour so they stay binary.
    new_height: int or int32 scalar, output height.
    new_width: int or int32 scalar, output width.
    method: v1 resize method id (tf.compat.v1.image.ResizeMethod) or one of
      'bilinear', 'nearest', 'bicubic', 'area'.
    align_corners: whether input and output corner pixels are aligned.

  Returns:
    A list: resized image [new_height, new_width, C], then resized masks
    [N, new_height, new_width] if masks were given, then the int32 [3]
    resized image shape [new_height, new_width, C]. The shape's position
    therefore depends on whether masks are given.

  Raises:
    ValueError: if method is not one of the supported methods.
  """
  method = _to_v1_resize_method(method)
  with tf.name_scope('ResizeImage'):
    new_size = tf.stack([new_height, new_width])
    new_image = tf.compat.v1.image.resize_images(
        image, new_size, method=method, align_corners=align_corners)
    # Keep the output size static when it is given as Python ints (the
    # stacked size tensor hides it from shape inference in some paths).
    if isinstance(new_height, int) and isinstance(new_width, int):
      new_image.set_shape([new_height, new_width, image.shape[2]])
    channels = shape_utils.combined_static_and_dynamic_shape(image)[2]
    result = [new_image]
    if masks is not None:
      new_masks = _resize_masks_nearest(masks, new_size, align_corners)
      if isinstance(new_height, int) and isinstance(new_width, int):
        new_masks.set_shape([masks.shape[0], new_height, new_width])
      result.append(new_masks)
    result.append(tf.stack([new_height, new_width, channels]))
    return result


@augment_common.uses_preprocess_vars_cache(_CACHE.JITTER_BOXES)
def random_jitter_boxes(boxes, ratio=0.05, jitter_mode='default', seed=None):
  """Randomly moves box edges by up to `ratio` of the box size.

  Args:
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    ratio: maximum relative change of the box height / width. In 'default'
      mode each edge moves independently by up to ratio * size / 2.
    jitter_mode: one of
      'default': every edge moves in or out independently;
      'shrink' / 'expand': every edge moves independently, only inwards /
        outwards;
      'shrink_symmetric' / 'expand_symmetric': height and width change by
        independent factors, box centre fixed;
      'shrink_symmetric_xy' / 'expand_symmetric_xy': height and width change
        by the same factor, box centre fixed.
      In the symmetric modes the factor is limited so the box stays inside
      the image, keeping the centre exact.
    seed: random seed.

  Returns:
    [N, 4] float32 jittered boxes clipped to [0, 1].

  Raises:
    ValueError: for an unknown jitter_mode.
  """
  if jitter_mode not in _JITTER_RATIO_RANGES:
    raise ValueError('Unknown jitter mode - %s' % jitter_mode)
  low, high = (r * ratio for r in _JITTER_RATIO_RANGES[jitter_mode])
  with tf.name_scope('RandomJitterBoxes'):
    ymin, xmin, ymax, xmax = _box_columns(boxes)
    ycenter, xcenter = (ymin + ymax) / 2.0, (xmin + xmax) / 2.0
    height, width = ymax - ymin, xmax - xmin
    # Degenerate boxes would divide by zero in the symmetric limits below.
    height = tf.maximum(tf.abs(height), 1e-6)
    width = tf.maximum(tf.abs(width), 1e-6)
    num_boxes = tf.shape(boxes)[0]

    if jitter_mode.endswith(('symmetric', 'symmetric_xy')):
      factors = 1.0 + augment_common.random_uniform([num_boxes, 2], low, high,
                                                    seed=seed)
      # Largest size factor whose box, centred at the same point, stays in
      # [0, 1]: twice the distance to the nearest border over the size.
      max_height_factor = 2.0 * tf.minimum(ycenter, 1.0 - ycenter) / height
      max_width_factor = 2.0 * tf.minimum(xcenter, 1.0 - xcenter) / width
      max_height_factor = tf.abs(max_height_factor)
      max_width_factor = tf.abs(max_width_factor)
      height_factor, width_factor = factors[:, 0], factors[:, 1]
      if jitter_mode.endswith('_xy'):
        width_factor = height_factor
        max_height_factor = max_width_factor = tf.minimum(
            max_height_factor, max_width_factor)
      height_factor = tf.clip_by_value(height_factor, -max_height_factor,
                                       max_height_factor)
      width_factor = tf.clip_by_value(width_factor, -max_width_factor,
                                      max_width_factor)
      half_height = height * height_factor / 2.0
      half_width = width * width_factor / 2.0
      jittered = tf.stack([ycenter - half_height, xcenter - half_width,
                           ycenter + half_height, xcenter + half_width],
                          axis=1)
    else:
      # One factor per edge: each edge sits at centre -/+ size * factor / 2.
      factors = 1.0 + augment_common.random_uniform([num_boxes, 4], low, high,
                                                    seed=seed)
      jittered = tf.stack([ycenter - height * factors[:, 0] / 2.0,
                           xcenter - width * factors[:, 1] / 2.0,
                           ycenter + height * factors[:, 2] / 2.0,
                           xcenter + width * factors[:, 3] / 2.0], axis=1)
    jittered = tf.clip_by_value(jittered, 0.0, 1.0)
    return jittered


@augment_common.uses_preprocess_vars_cache(_CACHE.BLACK_PATCHES)
def random_black_patches(image,
                         max_black_patches=10,
                         probability=0.5,
                         size_to_image_ratio=0.1,
                         random_seed=None):
  """Blacks out up to max_black_patches random squares of the image.

  Each of the max_black_patches tries independently adds, with the given
  probability, a square of side floor(size_to_image_ratio * min(H, W))
  pixels whose top-left corner is drawn uniformly so that it starts in the
  first (1 - size_to_image_ratio) of each axis.

  Args:
    image: [H, W, C] float32.
    max_black_patches: number of tries.
    probability: chance that each try adds a patch.
    size_to_image_ratio: patch side relative to the shorter image side.
    random_seed: random seed.

  Returns:
    [H, W, C] float32 image with the same static shape.
  """
  with tf.name_scope('RandomBlackPatchInImage'):
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    float_height = tf.cast(height, tf.float32)
    float_width = tf.cast(width, tf.float32)
    patch_size = tf.cast(
        tf.minimum(float_height, float_width) * size_to_image_ratio, tf.int32)
    # All tries are drawn in one op: [tries, (apply, y, x)].
    draws = augment_common.random_uniform([max_black_patches, 3], maxval=1.0,
                                          seed=random_seed)
    apply_patch = draws[:, 0] < probability
    top = tf.cast(draws[:, 1] * (1.0 - size_to_image_ratio) * float_height,
                  tf.int32)
    left = tf.cast(draws[:, 2] * (1.0 - size_to_image_ratio) * float_width,
                   tf.int32)
    rows = tf.range(height)[tf.newaxis, :]
    cols = tf.range(width)[tf.newaxis, :]
    in_rows = tf.logical_and(rows >= top[:, tf.newaxis],
                             rows < (top + patch_size)[:, tf.newaxis])
    in_cols = tf.logical_and(cols >= left[:, tf.newaxis],
                             cols < (left + patch_size)[:, tf.newaxis])
    # [tries, H, W] coverage of each applied patch, merged over tries.
    covered = tf.logical_and(
        tf.logical_and(in_rows[:, :, tf.newaxis], in_cols[:, tf.newaxis, :]),
        apply_patch[:, tf.newaxis, tf.newaxis])
    covered = tf.reduce_any(covered, axis=0)
    keep = 1.0 - tf.cast(covered, image.dtype)
    return image * keep[:, :, tf.newaxis]


def scale_boxes_to_pixel_coordinates(image, boxes, keypoints=None):
  """Converts normalized boxes (and keypoints) to pixel coordinates.

  Args:
    image: [H, W, C] tensor; only its size is used.
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    keypoints: optional [N, K, 2] float32 normalized y, x.

  Returns:
    A tuple: the unchanged image, [N, 4] float32 boxes multiplied by
    (H, W, H, W), and [N, K, 2] float32 keypoints multiplied by (H, W) if
    keypoints were given.
  """
  with tf.name_scope('ScaleBoxesToPixelCoordinates'):
    image_shape = tf.shape(image)
    height, width = image_shape[0], image_shape[1]
    # BoxList needs the static 4; reshape supplies it for dynamic inputs.
    scaled_boxes = box_list_ops.scale(
        box_list.BoxList(tf.reshape(boxes, [-1, 4])), height, width).get()
    result = [image, scaled_boxes]
    if keypoints is not None:
      result.append(augment_common.scale_keypoints(keypoints, height, width))
    return tuple(result)
