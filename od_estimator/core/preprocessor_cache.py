"""PreprocessorCache: remembers the random draws of preprocessing ops.

Passing one cache to several `preprocessor.preprocess` calls (or to several
calls of one op) makes them take the same random decisions: the first call
stores each draw under (function id, key), later calls reuse the stored
tensor instead of drawing again. Used to augment copies of an input (e.g.
several views of one image) identically.
"""
import collections


class PreprocessorCache(object):
  """Stores random draws per preprocessing function id and key."""

  # Function ids, as in the original Object Detection API.
  ROTATION90 = 'rotation90'
  HORIZONTAL_FLIP = 'horizontal_flip'
  VERTICAL_FLIP = 'vertical_flip'
  PIXEL_VALUE_SCALE = 'pixel_value_scale'
  IMAGE_SCALE = 'image_scale'
  RGB_TO_GRAY = 'rgb_to_gray'
  ADJUST_BRIGHTNESS = 'adjust_brightness'
  ADJUST_CONTRAST = 'adjust_contrast'
  ADJUST_HUE = 'adjust_hue'
  ADJUST_SATURATION = 'adjust_saturation'
  DISTORT_COLOR = 'distort_color'
  STRICT_CROP_IMAGE = 'strict_crop_image'
  CROP_IMAGE = 'crop_image'
  PAD_IMAGE = 'pad_image'
  CROP_TO_ASPECT_RATIO = 'crop_to_aspect_ratio'
  RESIZE_METHOD = 'resize_method'
  PAD_TO_ASPECT_RATIO = 'pad_to_aspect_ratio'
  BLACK_PATCHES = 'black_patches'
  ADD_BLACK_PATCH = 'add_black_patch'
  SELECTOR = 'selector'
  SELECTOR_TUPLES = 'selector_tuples'
  SELF_CONCAT_IMAGE = 'self_concat_image'
  SSD_CROP_SELECTOR_ID = 'ssd_crop_selector_id'
  SSD_CROP_PAD_SELECTOR_ID = 'ssd_crop_pad_selector_id'
  JPEG_QUALITY = 'jpeg_quality'
  DOWNSCALE_TO_TARGET_PIXELS = 'downscale_to_target_pixels'
  PATCH_GAUSSIAN = 'patch_gaussian'
  SQUARE_CROP_BY_SCALE = 'square_crop_scale'

  # Ops of this package the original had no id for (so no cache support).
  DROP_LABEL_PROBABILISTICALLY = 'drop_label_probabilistically'
  JITTER_BOXES = 'jitter_boxes'
  CROP_PAD_IMAGE = 'crop_pad_image'
  SSD_CROP_FIXED_ASPECT_RATIO = 'ssd_crop_fixed_aspect_ratio'
  SSD_CROP_PAD_FIXED_ASPECT_RATIO = 'ssd_crop_pad_fixed_aspect_ratio'
  ABSOLUTE_PAD_IMAGE = 'absolute_pad_image'
  SCALE_CROP_AND_PAD_TO_SQUARE = 'scale_crop_and_pad_to_square'
  AUTOAUGMENT_IMAGE = 'autoaugment_image'

  _VALID_FNS = frozenset([
      ROTATION90, HORIZONTAL_FLIP, VERTICAL_FLIP, PIXEL_VALUE_SCALE,
      IMAGE_SCALE, RGB_TO_GRAY, ADJUST_BRIGHTNESS, ADJUST_CONTRAST,
      ADJUST_HUE, ADJUST_SATURATION, DISTORT_COLOR, STRICT_CROP_IMAGE,
      CROP_IMAGE, PAD_IMAGE, CROP_TO_ASPECT_RATIO, RESIZE_METHOD,
      PAD_TO_ASPECT_RATIO, BLACK_PATCHES, ADD_BLACK_PATCH, SELECTOR,
      SELECTOR_TUPLES, SELF_CONCAT_IMAGE, SSD_CROP_SELECTOR_ID,
      SSD_CROP_PAD_SELECTOR_ID, JPEG_QUALITY, DOWNSCALE_TO_TARGET_PIXELS,
      PATCH_GAUSSIAN, SQUARE_CROP_BY_SCALE, DROP_LABEL_PROBABILISTICALLY,
      JITTER_BOXES, CROP_PAD_IMAGE, SSD_CROP_FIXED_ASPECT_RATIO,
      SSD_CROP_PAD_FIXED_ASPECT_RATIO, ABSOLUTE_PAD_IMAGE,
      SCALE_CROP_AND_PAD_TO_SQUARE, AUTOAUGMENT_IMAGE])

  def __init__(self):
    self._history = collections.defaultdict(dict)

  def clear(self):
    """Forgets every stored draw."""
    self._history = collections.defaultdict(dict)

  def get(self, function_id, key):
    """Returns the draw stored for (function_id, key), or None."""
    return self._history[function_id].get(key)

  def update(self, function_id, key, value):
    """Stores a draw.

    Raises:
      ValueError: if function_id is not one of the class's ids.
    """
    if function_id not in self._VALID_FNS:
      raise ValueError('Function id not recognized: %s.' % str(function_id))
    self._history[function_id][key] = value
