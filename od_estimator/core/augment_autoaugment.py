"""autoaugment_image: the AutoAugment detection policy v0 on image and boxes.

A policy is a list of sub-policies; each image gets one sub-policy drawn
uniformly, whose operations (name, probability, magnitude) run in order,
each with its probability. Magnitudes 0..10 (_MAX_LEVEL) map to arguments
as in the original Object Detection API: translate 250 px (TranslateY of
box content only: 120 px, each box picked with probability / 3), shear 0.3,
rotate 30 degrees (those three negated half of the time), cutout half-size
100 px, enhance factor level / 10 * 1.8 + 0.1. The image is cast to uint8
(truncated) for the ops and returned as float32, as in the original.
"""
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import autoaugment_ops as ops
from od_estimator.core import preprocessor_cache

_CACHE_ID = preprocessor_cache.PreprocessorCache.AUTOAUGMENT_IMAGE
_MAX_LEVEL = 10.0
_TRANSLATE_PIXELS = 250.0
_TRANSLATE_BOX_PIXELS = 120.0
_SHEAR = 0.3
_ROTATE_DEGREES = 30.0
_CUTOUT_PIXELS = 100.0

# The original's policy v0 (AutoAugment detection paper).
POLICIES = {
    'v0': [
        [('TranslateX_BBox', 0.6, 4), ('Equalize', 0.8, 10)],
        [('TranslateY_Only_BBoxes', 0.2, 2), ('Cutout', 0.8, 8)],
        [('Sharpness', 0.0, 8), ('ShearX_BBox', 0.4, 0)],
        [('ShearY_BBox', 1.0, 2), ('TranslateY_Only_BBoxes', 0.6, 6)],
        [('Rotate_BBox', 0.6, 10), ('Color', 1.0, 6)],
    ],
}


def _signed(value, seed):
  """value or -value, each with probability 1/2."""
  negate = augment_common.random_decision(0.5, seed=seed)
  return tf.where(negate, -value, value)


def _enhance_factor(level):
  return level / _MAX_LEVEL * 1.8 + 0.1


def _build_op(name, probability, level, seed):
  """(function of (image, boxes) -> (image, boxes), probability)."""
  fraction = level / _MAX_LEVEL
  if name in ('TranslateX_BBox', 'TranslateY_BBox'):
    pixels = _signed(tf.constant(fraction * _TRANSLATE_PIXELS), seed)
    horizontal = name == 'TranslateX_BBox'
    return (lambda image, boxes: ops.translate_with_boxes(
        image, boxes, pixels, horizontal)), probability
  if name in ('ShearX_BBox', 'ShearY_BBox'):
    shear = _signed(tf.constant(fraction * _SHEAR), seed)
    horizontal = name == 'ShearX_BBox'
    return (lambda image, boxes: ops.shear_with_boxes(
        image, boxes, shear, horizontal)), probability
  if name == 'Rotate_BBox':
    degrees = _signed(tf.constant(fraction * _ROTATE_DEGREES), seed)
    return (lambda image, boxes: ops.rotate_with_boxes(
        image, boxes, degrees)), probability
  if name == 'TranslateY_Only_BBoxes':
    pixels = _signed(tf.constant(fraction * _TRANSLATE_BOX_PIXELS), seed)
    # The per-box draws carry the probability; the op itself always runs.
    return (lambda image, boxes: ops.translate_y_only_boxes(
        image, boxes, probability, pixels, seed=seed)), 1.0
  if name == 'Cutout':
    pad_size = int(fraction * _CUTOUT_PIXELS)
    return (lambda image, boxes: (ops.cutout(image, pad_size, seed=seed),
                                  boxes)), probability
  if name == 'Equalize':
    return (lambda image, boxes: (ops.equalize(image), boxes)), probability
  if name in ('Color', 'Sharpness'):
    op = ops.color if name == 'Color' else ops.sharpness
    factor = _enhance_factor(level)
    return (lambda image, boxes: (op(image, factor), boxes)), probability
  raise ValueError('AutoAugment operation %s is not supported' % name)


def _apply_sub_policy(image, boxes, sub_policy, seed):
  for name, probability, level in sub_policy:
    func, probability = _build_op(name, probability, level, seed)
    apply = augment_common.random_decision(probability, seed=seed)
    image, boxes = tf.cond(
        apply, lambda func=func, i=image, b=boxes: func(i, b),
        lambda i=image, b=boxes: (tf.identity(i), tf.identity(b)))
    image.set_shape([None, None, 3])
    boxes.set_shape([None, 4])
  return image, boxes


def apply_policy(image, boxes, policy, seed=None):
  """Applies one uniformly drawn sub-policy of policy to uint8 image, boxes.

  Args:
    image: [H, W, 3] uint8.
    boxes: [N, 4] float32 normalized boxes.
    policy: list of sub-policies, each a list of (op name, probability,
      magnitude 0..10).
    seed: random seed.

  Returns:
    (image [H, W, 3] uint8, boxes [N, 4]).
  """
  return augment_common.apply_with_random_selector(
      (image, boxes),
      lambda x, case: _apply_sub_policy(x[0], x[1], policy[case], seed),
      len(policy), seed=seed)


@augment_common.uses_preprocess_vars_cache(_CACHE_ID)
def autoaugment_image(image, boxes, policy_name='v0', seed=None):
  """Applies an AutoAugment detection policy to an image and its boxes.

  Only image and boxes are transformed (as in the original); preprocess
  refuses the op when the tensor dict carries masks or keypoints.

  Args:
    image: [H, W, 3] float32 with values in 0..255.
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    policy_name: name of the policy; only 'v0' is supported.
    seed: random seed.

  Returns:
    (image [H, W, 3] float32, boxes [N, 4] float32).

  Raises:
    ValueError: if policy_name is not a supported policy, or the image has
      other than 3 channels.
  """
  if policy_name not in POLICIES:
    raise ValueError('autoaugment_image policy_name %r is not supported; '
                     'supported: %s' % (policy_name, sorted(POLICIES)))
  if image.shape[-1] != 3:
    raise ValueError('autoaugment_image needs an RGB image [H, W, 3], got '
                     'shape %s' % image.shape)
  with tf.name_scope('AutoAugmentImage'):
    uint8_image = tf.cast(image, tf.uint8)
    new_image, new_boxes = apply_policy(
        uint8_image, tf.cast(boxes, tf.float32), POLICIES[policy_name],
        seed=seed)
    new_image = tf.cast(new_image, tf.float32)
    new_image.set_shape(image.shape)
    new_boxes.set_shape(boxes.shape)
    return new_image, new_boxes
