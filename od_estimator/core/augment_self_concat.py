"""random_self_concat_image: tiles the image with a copy of itself.

With independent draws the image is stacked on top of itself (vertical) and
/ or placed next to itself (horizontal). Every object then appears twice:
the old boxes are squeezed into the first half along that axis and a copy
of each, shifted by half the new size, lands in the second half; labels,
weights, confidences and multiclass scores are repeated in the same order
(all original instances first, then all copies).
"""
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import preprocessor_cache

_CACHE_ID = preprocessor_cache.PreprocessorCache.SELF_CONCAT_IMAGE


def _concat_masks(masks, axis):
  """[N, H, W] -> [2N, H', W']: originals in the first half, copies after."""
  zeros = tf.zeros_like(masks)
  first = tf.concat([masks, zeros], axis=axis + 1)
  second = tf.concat([zeros, masks], axis=axis + 1)
  return tf.concat([first, second], axis=0)


def _concat_once(tensors, axis):
  """Concatenates image and annotations along axis 0 (rows) or 1 (cols)."""
  image, boxes, per_box, extras = tensors
  if axis == 0:
    box_scale, box_shift = [0.5, 1.0, 0.5, 1.0], [0.5, 0.0, 0.5, 0.0]
  else:
    box_scale, box_shift = [1.0, 0.5, 1.0, 0.5], [0.0, 0.5, 0.0, 0.5]
  image = tf.concat([image, image], axis=axis)
  old_boxes = boxes * tf.constant(box_scale)
  boxes = tf.concat([old_boxes, old_boxes + tf.constant(box_shift)], axis=0)
  per_box = [tf.concat([t, t], axis=0) for t in per_box]
  extras = dict(extras)
  if 'masks' in extras:
    extras['masks'] = _concat_masks(extras['masks'], axis)
  if 'keypoints' in extras:
    old_keypoints = extras['keypoints'] * tf.constant(box_scale[:2])
    extras['keypoints'] = tf.concat(
        [old_keypoints, old_keypoints + tf.constant(box_shift[:2])], axis=0)
  return image, boxes, per_box, extras


def _maybe_concat(predicate, tensors, axis):
  return tf.cond(predicate, lambda: _concat_once(tensors, axis),
                 lambda: tf.nest.map_structure(tf.identity, tensors))


def random_self_concat_image(image,
                             boxes,
                             labels,
                             label_weights=None,
                             label_confidences=None,
                             multiclass_scores=None,
                             masks=None,
                             keypoints=None,
                             concat_vertical_probability=0.1,
                             concat_horizontal_probability=0.1,
                             seed=None,
                             preprocess_vars_cache=None):
  """Randomly concatenates the image with itself, vertically and / or
  horizontally (two independent draws, vertical applied first).

  Args:
    image: [H, W, C] float32.
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    labels: [N] int32 classes.
    label_weights: optional [N] float32 (required by the original; optional
      here so pipelines without weights can use the op).
    label_confidences: optional [N] float32.
    multiclass_scores: optional [N, num_classes] float32.
    masks: optional [N, H, W] instance masks (an addition to the original,
      which did not move masks with this op): the copy of instance i is the
      mask of instance i moved into the second half, zeros elsewhere.
    keypoints: optional [N, K, 2] normalized y, x (addition, as masks).
    concat_vertical_probability: probability of stacking the image on top
      of itself (height doubles).
    concat_horizontal_probability: probability of placing the image next to
      itself (width doubles).
    seed: random seed (the horizontal draw uses seed + 1, as the original).
    preprocess_vars_cache: optional PreprocessorCache; calls sharing one
      make the same choices.

  Returns:
    A list: image [H', W', C], boxes [N', 4], labels [N'], then for each of
    label_weights, label_confidences, multiclass_scores, masks, keypoints
    that was given its [N', ...] counterpart; N' is N, 2N or 4N.
  """
  with tf.name_scope('RandomSelfConcatImage'):
    def draw():
      vertical = augment_common.random_decision(
          concat_vertical_probability, seed=seed)
      horizontal = augment_common.random_decision(
          concat_horizontal_probability,
          seed=seed + 1 if seed else None)
      return tf.stack([vertical, horizontal])

    decisions = augment_common.get_or_create_random_var(
        draw, _CACHE_ID, preprocess_vars_cache)
    per_box = [t for t in (labels, label_weights, label_confidences,
                           multiclass_scores) if t is not None]
    extras = {name: t for name, t in (('masks', masks),
                                       ('keypoints', keypoints))
              if t is not None}
    tensors = _maybe_concat(decisions[0], (image, boxes, per_box, extras),
                            axis=0)
    image, boxes, per_box, extras = _maybe_concat(decisions[1], tensors,
                                                  axis=1)
    image.set_shape([None, None, image.shape[-1]])
    return [image, boxes] + list(per_box) + [
        extras[name] for name in ('masks', 'keypoints') if name in extras]
