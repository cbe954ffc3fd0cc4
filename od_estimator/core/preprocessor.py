"""Runs a list of augmentation / preprocessing ops over a tensor dict.

The ops themselves live in augment_color, augment_geometry, augment_crop,
augment_pad (and image_resizing for the resize-to-range family); they are
re-exported here under the original Object Detection API names, so
`preprocessor.random_horizontal_flip` and friends keep working.

Tensor dict convention (as in the original): the image is rank 4,
[1, height, width, channels] float32, while the ops take a rank 3 image.
`preprocess` strips the leading 1, runs the ops and puts it back.

A preprocess option is a pair (function, kwargs). The function arg map says
which tensor-dict entries a function takes as its leading positional
arguments and, in the same order, which entries its outputs replace; a None
entry means "not carried by this pipeline" and is passed as None and left
out of the outputs (the ops likewise only return the tensors they got).
"""
import inspect

import tensorflow as tf

from od_estimator.core import standard_fields as fields
# Re-exported ops (original names). pylint: disable=unused-import
from od_estimator.core.augment_autoaugment import autoaugment_image
from od_estimator.core.augment_color import adjust_gamma
from od_estimator.core.augment_color import convert_class_logits_to_softmax
from od_estimator.core.augment_color import drop_label_probabilistically
from od_estimator.core.augment_color import image_to_float
from od_estimator.core.augment_color import normalize_image
from od_estimator.core.augment_color import one_hot_encoding
from od_estimator.core.augment_color import random_adjust_brightness
from od_estimator.core.augment_color import random_adjust_contrast
from od_estimator.core.augment_color import random_adjust_hue
from od_estimator.core.augment_color import random_adjust_saturation
from od_estimator.core.augment_color import random_distort_color
from od_estimator.core.augment_color import random_jpeg_quality
from od_estimator.core.augment_color import random_patch_gaussian
from od_estimator.core.augment_color import random_pixel_value_scale
from od_estimator.core.augment_color import random_rgb_to_gray
from od_estimator.core.augment_color import remap_labels
from od_estimator.core.augment_color import retain_boxes_above_threshold
from od_estimator.core.augment_color import rgb_to_gray
from od_estimator.core.augment_color import subtract_channel_mean
from od_estimator.core.augment_crop import random_crop_image
from od_estimator.core.augment_crop import random_crop_pad_image
from od_estimator.core.augment_crop import random_crop_to_aspect_ratio
from od_estimator.core.augment_crop import ssd_random_crop
from od_estimator.core.augment_crop import ssd_random_crop_fixed_aspect_ratio
from od_estimator.core.augment_crop import ssd_random_crop_pad
from od_estimator.core.augment_crop import (
    ssd_random_crop_pad_fixed_aspect_ratio)
from od_estimator.core.augment_downscale import (
    random_downscale_to_target_pixels)
from od_estimator.core.augment_geometry import random_black_patches
from od_estimator.core.augment_geometry import random_horizontal_flip
from od_estimator.core.augment_geometry import random_image_scale
from od_estimator.core.augment_geometry import random_jitter_boxes
from od_estimator.core.augment_geometry import random_resize_method
from od_estimator.core.augment_geometry import random_rotation90
from od_estimator.core.augment_geometry import random_vertical_flip
from od_estimator.core.augment_geometry import resize_image
from od_estimator.core.augment_geometry import scale_boxes_to_pixel_coordinates
from od_estimator.core.augment_pad import random_absolute_pad_image
from od_estimator.core.augment_pad import random_pad_image
from od_estimator.core.augment_pad import random_pad_to_aspect_ratio
from od_estimator.core.augment_pad import random_scale_crop_and_pad_to_square
from od_estimator.core.augment_pad import random_square_crop_by_scale
from od_estimator.core.augment_self_concat import random_self_concat_image
from od_estimator.core.image_resizing import resize_pad_to_multiple
from od_estimator.core.image_resizing import resize_to_max_dimension
from od_estimator.core.image_resizing import resize_to_min_dimension
from od_estimator.core.image_resizing import resize_to_range
# pylint: enable=unused-import


# The tensor-dict key each slot of an op's argument layout stands for. The
# ones carried only when their include_* flag (get_default_func_arg_map) is
# set are in _CARRIED_IF_INCLUDED.
_ALWAYS_CARRIED = {
    'image': fields.InputDataFields.image,
    'boxes': fields.InputDataFields.groundtruth_boxes,
    'classes': fields.InputDataFields.groundtruth_classes,
    'image_classes': fields.InputDataFields.groundtruth_image_classes,
}
_CARRIED_IF_INCLUDED = {
    'weights': fields.InputDataFields.groundtruth_weights,
    'confidences': fields.InputDataFields.groundtruth_confidences,
    'scores': fields.InputDataFields.multiclass_scores,
    'masks': fields.InputDataFields.groundtruth_instance_masks,
    'keypoints': fields.InputDataFields.groundtruth_keypoints,
    'visibilities': fields.InputDataFields.groundtruth_keypoint_visibilities,
}
# Slots the ops keep for mask weights / DensePose / keypoint depths, which
# this pipeline never carries.
_NEVER_CARRIED = ('mask_weights', 'dp_num_points', 'dp_part_ids',
                  'dp_surface_coords', 'keypoint_depths',
                  'keypoint_depth_weights')

_IMAGE_ONLY = ('image',)
_IMAGE_AND_MASKS = ('image', 'masks')
# The common layouts of ops that drop boxes.
_LABELLED = ('image', 'boxes', 'classes', 'weights', 'confidences', 'scores')
_LABELLED_MASKS_KEYPOINTS = _LABELLED + ('masks', 'keypoints')
_LABEL_OPS = ('boxes', 'classes', 'weights', 'confidences', 'scores', 'masks',
              'keypoints')

# Op -> the slots of its leading positional arguments (and of its outputs).
_ARG_SLOTS = {
    # Pixel-only ops.
    normalize_image: _IMAGE_ONLY,
    random_pixel_value_scale: _IMAGE_ONLY,
    random_rgb_to_gray: _IMAGE_ONLY,
    random_adjust_brightness: _IMAGE_ONLY,
    random_adjust_contrast: _IMAGE_ONLY,
    random_adjust_hue: _IMAGE_ONLY,
    random_adjust_saturation: _IMAGE_ONLY,
    random_distort_color: _IMAGE_ONLY,
    random_black_patches: _IMAGE_ONLY,
    random_jpeg_quality: _IMAGE_ONLY,
    random_patch_gaussian: _IMAGE_ONLY,
    adjust_gamma: _IMAGE_ONLY,
    image_to_float: _IMAGE_ONLY,
    subtract_channel_mean: _IMAGE_ONLY,
    rgb_to_gray: _IMAGE_ONLY,
    # Resizing (the original gives random_resize_method no masks).
    random_resize_method: _IMAGE_AND_MASKS,
    random_image_scale: _IMAGE_AND_MASKS,
    resize_image: _IMAGE_AND_MASKS,
    resize_to_range: _IMAGE_AND_MASKS,
    resize_to_min_dimension: _IMAGE_AND_MASKS,
    resize_to_max_dimension: _IMAGE_AND_MASKS,
    resize_pad_to_multiple: _IMAGE_AND_MASKS,
    random_downscale_to_target_pixels: _IMAGE_AND_MASKS,
    # Geometry.
    random_horizontal_flip: ('image', 'boxes', 'masks', 'keypoints',
                             'visibilities', 'dp_part_ids',
                             'dp_surface_coords', 'keypoint_depths',
                             'keypoint_depth_weights'),
    random_vertical_flip: ('image', 'boxes', 'masks', 'keypoints'),
    random_rotation90: ('image', 'boxes', 'masks', 'keypoints'),
    # Image and boxes only, as the original (preprocess refuses masks and
    # keypoints in the dict, which would be left misaligned).
    autoaugment_image: ('image', 'boxes'),
    random_jitter_boxes: ('boxes',),
    scale_boxes_to_pixel_coordinates: ('image', 'boxes', 'keypoints'),
    # Crops and pads.
    random_crop_image: _LABELLED + ('masks', 'mask_weights', 'keypoints',
                                    'visibilities', 'dp_num_points',
                                    'dp_part_ids', 'dp_surface_coords'),
    random_pad_image: ('image', 'boxes', 'masks', 'keypoints',
                       'dp_surface_coords'),
    random_absolute_pad_image: ('image', 'boxes', 'masks', 'keypoints',
                                'dp_surface_coords'),
    # The original gives these two neither masks nor keypoints.
    random_crop_pad_image: _LABELLED_MASKS_KEYPOINTS,
    random_crop_to_aspect_ratio: _LABELLED_MASKS_KEYPOINTS,
    random_pad_to_aspect_ratio: ('image', 'boxes', 'masks', 'keypoints'),
    ssd_random_crop: _LABELLED_MASKS_KEYPOINTS,
    ssd_random_crop_pad: _LABELLED_MASKS_KEYPOINTS,
    ssd_random_crop_fixed_aspect_ratio: _LABELLED_MASKS_KEYPOINTS,
    ssd_random_crop_pad_fixed_aspect_ratio: _LABELLED_MASKS_KEYPOINTS,
    random_square_crop_by_scale: ('image', 'boxes', 'classes', 'weights',
                                  'confidences', 'masks', 'keypoints'),
    # Masks and keypoints are an addition to the original's map.
    random_self_concat_image: _LABELLED_MASKS_KEYPOINTS,
    random_scale_crop_and_pad_to_square: ('image', 'boxes', 'classes',
                                          'weights', 'masks', 'keypoints',
                                          'confidences'),
    # Label-only ops.
    retain_boxes_above_threshold: _LABEL_OPS,
    drop_label_probabilistically: _LABEL_OPS,
    remap_labels: ('classes',),
    one_hot_encoding: ('image_classes',),
    convert_class_logits_to_softmax: ('scores',),
}


def get_default_func_arg_map(include_label_weights=True,
                             include_label_confidences=False,
                             include_multiclass_scores=False,
                             include_instance_masks=False,
                             include_keypoints=False,
                             include_keypoint_visibilities=False,
                             *,
                             include_instance_mask_weights=False,
                             include_dense_pose=False,
                             include_keypoint_depths=False):
  """Maps every op to the tensor-dict keys of its leading arguments.

  Args:
    include_label_weights: ops that drop boxes also carry
      groundtruth_weights.
    include_label_confidences: ... and groundtruth_confidences.
    include_multiclass_scores: ... and multiclass_scores.
    include_instance_masks: geometric ops also transform
      groundtruth_instance_masks.
    include_keypoints: geometric ops also transform groundtruth_keypoints.
    include_keypoint_visibilities: ... and groundtruth_keypoint_visibilities.
    include_instance_mask_weights: accepted for call compatibility with the
      original; must be False (no such field here).
    include_dense_pose: as above, must be False.
    include_keypoint_depths: as above, must be False.

  Returns:
    dict: op function -> tuple of InputDataFields keys (or None), aligned
    with the op's positional arguments and its outputs.

  Raises:
    ValueError: if an unsupported include_* flag is True.
  """
  for flag, value in (('include_instance_mask_weights',
                       include_instance_mask_weights),
                      ('include_dense_pose', include_dense_pose),
                      ('include_keypoint_depths', include_keypoint_depths)):
    if value:
      raise ValueError('%s is not supported by this preprocessor' % flag)
  included = {'weights': include_label_weights,
              'confidences': include_label_confidences,
              'scores': include_multiclass_scores,
              'masks': include_instance_masks,
              'keypoints': include_keypoints,
              'visibilities': include_keypoint_visibilities}
  slot_keys = dict.fromkeys(_NEVER_CARRIED)
  slot_keys.update(_ALWAYS_CARRIED)
  slot_keys.update({slot: key if included[slot] else None
                    for slot, key in _CARRIED_IF_INCLUDED.items()})
  return {func: tuple(slot_keys[slot] for slot in slots)
          for func, slots in _ARG_SLOTS.items()}


# Ops without random choices: a preprocess_vars_cache has nothing to fix.
_DETERMINISTIC_OPS = frozenset([
    normalize_image, adjust_gamma, image_to_float, subtract_channel_mean,
    rgb_to_gray, resize_image, resize_to_range, resize_to_min_dimension,
    resize_to_max_dimension, resize_pad_to_multiple,
    scale_boxes_to_pixel_coordinates, retain_boxes_above_threshold,
    remap_labels, one_hot_encoding, convert_class_logits_to_softmax])


def _function_name(func):
  return getattr(func, '__name__', repr(func))


# Ops that move image content but cannot move masks or keypoints.
_IMAGE_AND_BOXES_ONLY_OPS = frozenset([autoaugment_image])


def _check_no_masks_or_keypoints(func, tensor_dict):
  for key in (fields.InputDataFields.groundtruth_instance_masks,
              fields.InputDataFields.groundtruth_keypoints):
    if key in tensor_dict:
      raise ValueError(
          '%s transforms only the image and boxes; the input carries %s, '
          'which it would leave misaligned. Remove it from '
          'data_augmentation_options or drop the %s.' %
          (_function_name(func), key, key))


def _takes_cache(func):
  try:
    return 'preprocess_vars_cache' in inspect.signature(func).parameters
  except (TypeError, ValueError):
    return False


def preprocess(tensor_dict, preprocess_options, func_arg_map=None,
               preprocess_vars_cache=None):
  """Applies the preprocess options, in order, to a tensor dict.

  Args:
    tensor_dict: dict of InputDataFields key -> tensor. The image, if any,
      is [1, H, W, C] float32; boxes [N, 4] normalized ymin, xmin, ymax,
      xmax; classes [N] int32; masks [N, H, W]; keypoints [N, K, 2].
    preprocess_options: list of (function, kwargs dict) pairs, e.g. as
      returned by preprocessor_builder.build.
    func_arg_map: op -> tuple of keys (see get_default_func_arg_map, the
      default).
    preprocess_vars_cache: optional preprocessor_cache.PreprocessorCache,
      passed to every op that takes one: calls sharing a cache make the
      same random choices (for inputs of the same shapes). Two steps of the
      same op in one list share their draws, as in the original.

  Returns:
    A new dict with the same keys: entries the ops touched are replaced by
    their outputs (image again [1, H', W', C]), the others are passed
    through. The input dict is not modified.

  Raises:
    ValueError: if a function is missing from func_arg_map, needs a key the
      dict lacks, or the image is not [1, H, W, C]; or if a cache is given
      and an op outside this module takes random choices without one.
  """
  if func_arg_map is None:
    func_arg_map = get_default_func_arg_map()
  tensor_dict = dict(tensor_dict)
  image_key = fields.InputDataFields.image

  if image_key in tensor_dict:
    images = tensor_dict[image_key]
    if images.shape.rank != 4:
      raise ValueError('images in tensor_dict should be rank 4 [1, height, '
                       'width, channels], got shape %s' % images.shape)
    if images.shape[0] is not None and images.shape[0] != 1:
      raise ValueError('images in tensor_dict must hold exactly one image, '
                       'got shape %s' % images.shape)
    tensor_dict[image_key] = tf.squeeze(images, axis=0)

  for func, params in preprocess_options:
    if func not in func_arg_map:
      raise ValueError('The function %s does not exist in func_arg_map' %
                       _function_name(func))
    arg_names = func_arg_map[func]
    if func in _IMAGE_AND_BOXES_ONLY_OPS:
      _check_no_masks_or_keypoints(func, tensor_dict)
    for name in arg_names:
      if name is not None and name not in tensor_dict:
        raise ValueError('The function %s requires argument %s' %
                         (_function_name(func), name))
    args = [None if name is None else tensor_dict[name] for name in arg_names]
    if preprocess_vars_cache is not None:
      if _takes_cache(func):
        params = dict(params, preprocess_vars_cache=preprocess_vars_cache)
      elif func not in _DETERMINISTIC_OPS:
        raise ValueError(
            'preprocess_vars_cache is given but the function %s takes no '
            'preprocess_vars_cache argument, so its random choices could '
            'not be repeated' % _function_name(func))
    results = func(*args, **params)
    if not isinstance(results, (list, tuple)):
      results = (results,)
    # Outputs line up with the keys that were actually passed; extra outputs
    # (e.g. the true image shape of resize ops) are dropped.
    for name, result in zip([n for n in arg_names if n is not None], results):
      tensor_dict[name] = result

  if image_key in tensor_dict:
    tensor_dict[image_key] = tf.expand_dims(tensor_dict[image_key], 0)
  return tensor_dict
