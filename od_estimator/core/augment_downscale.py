"""random_downscale_to_target_pixels: shrinks large images to a pixel budget.

A target pixel count is drawn from [min_target_pixels, max_target_pixels);
an image with more pixels than that is resized (bilinear, masks nearest
neighbour, as the original's resize_image) to both sides times
sqrt(target / pixels), rounded down. Smaller images are left alone.
Normalized boxes and keypoints need no change.
"""
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import augment_geometry
from od_estimator.core import preprocessor_cache

_CACHE_ID = preprocessor_cache.PreprocessorCache.DOWNSCALE_TO_TARGET_PIXELS


def _downscale(image, masks, target_pixels):
  """Resizes image (bilinear) and masks (nearest) to about target_pixels."""
  shape = tf.shape(image)
  height = tf.cast(shape[0], tf.float32)
  width = tf.cast(shape[1], tf.float32)
  scale = tf.sqrt(tf.cast(target_pixels, tf.float32) / (height * width))
  resized = augment_geometry.resize_image(
      image, masks, tf.cast(scale * height, tf.int32),
      tf.cast(scale * width, tf.int32))
  result = {'image': resized[0]}
  if masks is not None:
    result['masks'] = resized[1]
  return result


def random_downscale_to_target_pixels(image,
                                      masks=None,
                                      min_target_pixels=300000,
                                      max_target_pixels=800000,
                                      random_coef=0.0,
                                      seed=None,
                                      preprocess_vars_cache=None):
  """Randomly downscales an image to a random number of pixels.

  Args:
    image: [H, W, C] float32.
    masks: optional [N, H, W] instance masks.
    min_target_pixels: smallest target pixel count (> 0).
    max_target_pixels: largest target pixel count, exclusive (> 0).
    random_coef: probability of leaving the image unchanged; 0 always
      downscales (images above the target), 1 never does.
    seed: random seed.
    preprocess_vars_cache: optional PreprocessorCache; calls sharing one
      make the same choices.

  Returns:
    A tuple: image [H', W', C], then masks [N, H', W'] if masks were given.

  Raises:
    ValueError: if min_target_pixels or max_target_pixels is not positive.
  """
  if min_target_pixels <= 0:
    raise ValueError('Minimum target pixels must be positive, got %s' %
                     min_target_pixels)
  if max_target_pixels <= 0:
    raise ValueError('Maximum target pixels must be positive, got %s' %
                     max_target_pixels)
  with tf.name_scope('RandomDownscaleToTargetPixels'):
    keep_draw = augment_common.get_or_create_random_var(
        lambda: augment_common.random_uniform_scalar(seed=seed), _CACHE_ID,
        preprocess_vars_cache)
    target_pixels = augment_common.get_or_create_random_var(
        lambda: augment_common.random_integer(
            min_target_pixels, max_target_pixels, seed=seed),
        _CACHE_ID, preprocess_vars_cache, key='target_pixels')
    shape = tf.shape(image)
    num_pixels = shape[0] * shape[1]
    do_downscale = tf.logical_and(keep_draw >= random_coef,
                                  num_pixels > target_pixels)
    tensors = {'image': tf.cast(image, tf.float32)}
    if masks is not None:
      tensors['masks'] = masks
    result = tf.cond(do_downscale,
                     lambda: _downscale(image, masks, target_pixels),
                     lambda: tf.nest.map_structure(tf.identity, tensors))
    result['image'].set_shape([None, None, image.shape[-1]])
    if masks is None:
      return (result['image'],)
    result['masks'].set_shape([masks.shape[0], None, None])
    return result['image'], result['masks']
