"""Helpers shared by the augmentation modules (geometry, crop, pad, color).

Four groups:
  * random draws: scalar uniforms, integers, coin flips and a random choice
    between a fixed number of code paths;
  * per-box selection: applying one gather / boolean mask to every tensor
    whose first dimension indexes boxes, so boxes, labels, weights, masks and
    keypoints never get out of step;
  * keypoint geometry on [num_instances, num_keypoints, 2] tensors holding
    y, x coordinates (normalized unless a function says otherwise);
  * crop / pad windows: moving boxes, keypoints and DensePose points into a
    window's normalized frame (augment_crop and augment_pad).

Every function builds graph ops and keeps static shapes whenever the inputs
have them.
"""
import functools
import inspect
import threading

import numpy as np
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops


# ----------------------------------------------------------------------------
# Random draws.
# ----------------------------------------------------------------------------


class _RandomStream(object):
  """Seed of a cached op call; its draws are stateless, numbered in order."""

  def __init__(self, seed):
    self.seed = seed
    self.count = 0

  def next_seed(self):
    self.count += 1
    return tf.random.experimental.stateless_fold_in(self.seed, self.count)


# The stream of the cached op being built (None outside one); ops nested in
# a cached op (e.g. random_crop_image in ssd_random_crop) draw from it too.
_stream = threading.local()


def _active_stream():
  return getattr(_stream, 'value', None)


def uses_preprocess_vars_cache(function_id):
  """Decorates a random op to take a `preprocess_vars_cache` argument.

  Without a cache (or inside another cached op) the op runs as written.
  With one, the op's random seed is taken from the cache under function_id
  (drawn and stored on first use) and every draw the op makes through this
  module's random functions is a stateless draw from that seed, numbered in
  build order. Two calls sharing the cache thus make the same choices for
  inputs of the same shapes, also inside tf.cond / switch_case branches,
  which capture the seed from the enclosing graph.

  Args:
    function_id: a PreprocessorCache class constant.

  Returns:
    The decorator.
  """
  def decorator(func):
    @functools.wraps(func)
    def wrapper(*args, preprocess_vars_cache=None, **kwargs):
      if preprocess_vars_cache is None or _active_stream() is not None:
        return func(*args, **kwargs)
      seed = get_or_create_random_var(
          lambda: tf.random.uniform([2], maxval=2**62, dtype=tf.int64,
                                    seed=kwargs.get('seed')),
          function_id, preprocess_vars_cache, key='seed')
      _stream.value = _RandomStream(seed)
      try:
        return func(*args, **kwargs)
      finally:
        _stream.value = None

    signature = inspect.signature(func)
    wrapper.__signature__ = signature.replace(parameters=list(
        signature.parameters.values()) + [inspect.Parameter(
            'preprocess_vars_cache', inspect.Parameter.KEYWORD_ONLY,
            default=None)])
    return wrapper
  return decorator


def random_uniform(shape, minval=0.0, maxval=None, dtype=tf.float32,
                   seed=None):
  """tf.random.uniform, or its stateless form inside a cached op."""
  stream = _active_stream()
  if stream is None:
    return tf.random.uniform(shape, minval=minval, maxval=maxval,
                             dtype=dtype, seed=seed)
  if dtype.is_integer:
    minval = tf.cast(minval, dtype)
    maxval = tf.cast(maxval, dtype)
  return tf.random.stateless_uniform(shape, stream.next_seed(),
                                     minval=minval, maxval=maxval,
                                     dtype=dtype)


def random_normal(shape, stddev=1.0, seed=None):
  """tf.random.normal (mean 0), or its stateless form inside a cached op."""
  stream = _active_stream()
  if stream is None:
    return tf.random.normal(shape, stddev=stddev, seed=seed)
  return tf.random.stateless_normal(shape, stream.next_seed(), stddev=stddev)


def sample_distorted_bounding_box(image_size, bounding_boxes, **kwargs):
  """SampleDistortedBoundingBoxV2 seeded from the graph seed, or its
  stateless form inside a cached op. Returns begin, size, bboxes."""
  stream = _active_stream()
  if stream is None:
    graph_seed, op_seed = tf.compat.v1.get_seed(None)
    return tf.raw_ops.SampleDistortedBoundingBoxV2(
        image_size=image_size, bounding_boxes=bounding_boxes,
        seed=graph_seed or 0, seed2=op_seed or 0, **kwargs)
  return tf.raw_ops.StatelessSampleDistortedBoundingBox(
      image_size=image_size, bounding_boxes=bounding_boxes,
      seed=stream.next_seed(), **kwargs)


def random_uniform_scalar(minval=0.0, maxval=1.0, seed=None):
  """Returns a float32 scalar drawn uniformly from [minval, maxval)."""
  return random_uniform([], minval=minval, maxval=maxval, dtype=tf.float32,
                        seed=seed)


def random_integer(minval, maxval, seed=None):
  """Returns an int32 scalar drawn uniformly from [minval, maxval)."""
  return random_uniform([], minval=minval, maxval=maxval, dtype=tf.int32,
                        seed=seed)


def random_decision(probability, seed=None):
  """Returns a bool scalar that is True with the given probability.

  The draw is `uniform[0, 1) < probability`, so probability 0 never fires
  and probability 1 always does.

  Args:
    probability: float or float32 scalar tensor in [0, 1].
    seed: random seed.

  Returns:
    bool scalar tensor.
  """
  return tf.less(random_uniform_scalar(seed=seed), probability)


def get_or_create_random_var(generator_fn, function_id, preprocess_vars_cache,
                             key=''):
  """Returns generator_fn(), or the draw a PreprocessorCache already holds.

  Without a cache every call draws anew. With one, the first call stores
  its draw under (function_id, key) and later calls get the same tensor
  back, so ops built twice with one cache make the same random choices.

  Args:
    generator_fn: function of no arguments returning the random tensor(s).
    function_id: one of the PreprocessorCache class constants.
    preprocess_vars_cache: PreprocessorCache or None.
    key: identifies one of several draws of the same function.

  Returns:
    The (possibly cached) draw.
  """
  if preprocess_vars_cache is None:
    return generator_fn()
  value = preprocess_vars_cache.get(function_id, key)
  if value is None:
    value = generator_fn()
    preprocess_vars_cache.update(function_id, key, value)
  return value


def cond_or_identity(predicate, true_fn, value, keep_shape=True):
  """tf.cond(predicate, true_fn, identity of value), keeping value's shape.

  tf.cond may lose a partially known static shape; with keep_shape (for ops
  that preserve it, like flips and colour changes) it is set back. Ops that
  change the shape (rotation) pass keep_shape=False.
  """
  result = tf.cond(predicate, true_fn, lambda: tf.identity(value))
  if keep_shape:
    result.set_shape(value.shape)
  return result


def apply_with_random_selector(x, func, num_cases, seed=None):
  """Returns func(x, case) for one case drawn uniformly from [0, num_cases).

  Only the selected branch runs (tf.switch_case), so expensive alternatives
  cost nothing when they are not chosen. `func` receives the case as a
  Python int, which lets it pick Python-level options per branch.

  Args:
    x: a tensor or a (nested) tuple of tensors.
    func: function (x, case) -> tensor or nested structure of tensors; every
      case must return the same structure and dtypes.
    num_cases: Python int > 0.
    seed: random seed.

  Returns:
    The selected branch's output.
  """
  selector = random_integer(0, num_cases, seed=seed)
  branches = [(lambda case=case: func(x, case)) for case in range(num_cases)]
  return tf.switch_case(selector, branches)


# ----------------------------------------------------------------------------
# Per-box selection.
# ----------------------------------------------------------------------------


def gather_per_box(indices, per_box_tensors):
  """Gathers the same rows from every per-box tensor.

  Args:
    indices: [M] int32 indices into the box dimension.
    per_box_tensors: sequence of tensors whose first dimension is N (boxes,
      labels, weights, masks, keypoints, ...); None entries are passed
      through so callers can keep a fixed tuple layout.

  Returns:
    A tuple aligned with per_box_tensors: each tensor gathered to [M, ...],
    None kept as None.
  """
  return tuple(None if t is None else tf.gather(t, indices)
               for t in per_box_tensors)


def boolean_mask_per_box(indicator, per_box_tensors):
  """Keeps the rows where `indicator` is True in every per-box tensor.

  Args:
    indicator: [N] bool tensor.
    per_box_tensors: sequence of tensors with first dimension N, or None.

  Returns:
    A tuple aligned with per_box_tensors with the selected rows; None stays
    None.
  """
  indices = tf.reshape(tf.where(indicator), [-1])
  return gather_per_box(tf.cast(indices, tf.int32), per_box_tensors)


# ----------------------------------------------------------------------------
# Keypoints.
# ----------------------------------------------------------------------------


def _has_permutation(permutation):
  """True unless the permutation is None or an empty Python sequence."""
  if permutation is None:
    return False
  if isinstance(permutation, (list, tuple, np.ndarray)):
    return len(permutation) > 0
  return True


def permute_keypoint_axis(tensor, permutation):
  """Reorders the keypoint axis (axis 1) of a per-keypoint tensor.

  Used for keypoints themselves and for companions such as visibilities and
  depths that must follow the same reordering.

  Args:
    tensor: [num_instances, num_keypoints, ...] tensor.
    permutation: None, an empty list (no reordering), or a list / [K] int32
      tensor where output keypoint k is input keypoint permutation[k].

  Returns:
    The reordered tensor, same shape.
  """
  if not _has_permutation(permutation):
    return tensor
  return tf.gather(tensor, permutation, axis=1)


def flip_keypoints_horizontal(keypoints, flip_point, flip_permutation=None):
  """Mirrors keypoint x coordinates around x = flip_point.

  Args:
    keypoints: [N, K, 2] float32 y, x.
    flip_point: float or float32 scalar; 0.5 for a normalized image flip.
    flip_permutation: optional keypoint reordering (see
      permute_keypoint_axis), e.g. swapping left and right eyes.

  Returns:
    [N, K, 2] float32 flipped keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  keypoints = permute_keypoint_axis(keypoints, flip_permutation)
  y, x = keypoints[:, :, 0], keypoints[:, :, 1]
  return tf.stack([y, 2.0 * flip_point - x], axis=2)


def flip_keypoints_vertical(keypoints, flip_point, flip_permutation=None):
  """Mirrors keypoint y coordinates around y = flip_point.

  Args:
    keypoints: [N, K, 2] float32 y, x.
    flip_point: float or float32 scalar; 0.5 for a normalized image flip.
    flip_permutation: optional keypoint reordering (see
      permute_keypoint_axis).

  Returns:
    [N, K, 2] float32 flipped keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  keypoints = permute_keypoint_axis(keypoints, flip_permutation)
  y, x = keypoints[:, :, 0], keypoints[:, :, 1]
  return tf.stack([2.0 * flip_point - y, x], axis=2)


def rot90_keypoints(keypoints, rotation_permutation=None):
  """Rotates normalized keypoints 90 degrees counter-clockwise.

  Counter-clockwise rotation sends the right edge of the image to the top,
  so (y, x) becomes (1 - x, y).

  Args:
    keypoints: [N, K, 2] float32 normalized y, x.
    rotation_permutation: optional keypoint reordering (see
      permute_keypoint_axis).

  Returns:
    [N, K, 2] float32 rotated keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  keypoints = permute_keypoint_axis(keypoints, rotation_permutation)
  y, x = keypoints[:, :, 0], keypoints[:, :, 1]
  return tf.stack([1.0 - x, y], axis=2)


def scale_keypoints(keypoints, y_scale, x_scale):
  """Multiplies keypoint y by y_scale and x by x_scale.

  Args:
    keypoints: [N, K, 2] float32 y, x.
    y_scale: number or scalar tensor (any numeric dtype).
    x_scale: number or scalar tensor (any numeric dtype).

  Returns:
    [N, K, 2] float32 scaled keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  scale = tf.stack([tf.cast(y_scale, tf.float32),
                    tf.cast(x_scale, tf.float32)])
  return keypoints * scale


def change_keypoint_coordinate_frame(keypoints, window):
  """Expresses keypoints relative to a window.

  The window's corner becomes the origin and its height / width become 1,
  which is what a crop to that window does to normalized coordinates.

  Args:
    keypoints: [N, K, 2] float32 y, x.
    window: [4] float32 ymin, xmin, ymax, xmax in the same frame.

  Returns:
    [N, K, 2] float32 keypoints in window coordinates.
  """
  keypoints.shape.assert_has_rank(3)
  window = tf.cast(window, tf.float32)
  origin = tf.stack([window[0], window[1]])
  size = tf.stack([window[2] - window[0], window[3] - window[1]])
  # Times the reciprocal, not divided: the original's rounding.
  return (keypoints - origin) * (1.0 / size)


def clip_keypoints_to_window(keypoints, window):
  """Clamps keypoints into a window (NaN keypoints stay NaN).

  Args:
    keypoints: [N, K, 2] float32 y, x.
    window: [4] float32 ymin, xmin, ymax, xmax.

  Returns:
    [N, K, 2] float32 clipped keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  window = tf.cast(window, tf.float32)
  low = tf.stack([window[0], window[1]])
  high = tf.stack([window[2], window[3]])
  return tf.minimum(tf.maximum(keypoints, low), high)


def prune_keypoints_outside_window(keypoints, window):
  """Replaces keypoints that fall outside a window by NaN.

  NaN is the convention for "keypoint not visible", so instances keep their
  keypoint count (static shapes) while lost keypoints drop out of losses.

  Args:
    keypoints: [N, K, 2] float32 y, x.
    window: [4] float32 ymin, xmin, ymax, xmax; borders count as inside.

  Returns:
    [N, K, 2] float32 keypoints.
  """
  keypoints.shape.assert_has_rank(3)
  window = tf.cast(window, tf.float32)
  y, x = keypoints[:, :, 0], keypoints[:, :, 1]
  inside = tf.logical_and(
      tf.logical_and(y >= window[0], y <= window[2]),
      tf.logical_and(x >= window[1], x <= window[3]))
  inside = tf.tile(tf.expand_dims(inside, 2), [1, 1, 2])
  return tf.where(inside, keypoints,
                  tf.fill(tf.shape(keypoints), np.float32(np.nan)))


# ----------------------------------------------------------------------------
# Crop / pad windows.
# ----------------------------------------------------------------------------

_UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


def present(*tensors):
  """Returns the given tensors without the Nones, as a tuple."""
  return tuple(t for t in tensors if t is not None)


def _to_window(window):
  return tf.cast(window, tf.float32)


def crop_boxes(boxes, window, overlap_thresh, clip_boxes):
  """Keeps boxes that meet a window and re-expresses them in its frame.

  A box is kept when it is not completely outside the window and at least
  `overlap_thresh` of its area lies inside it.

  Args:
    boxes: [N, 4] float32.
    window: [4] float32 ymin, xmin, ymax, xmax in the boxes' frame.
    overlap_thresh: minimum fraction of a box's area inside the window.
    clip_boxes: clip the kept boxes to the window.

  Returns:
    new_boxes: [M, 4] float32 in the window's normalized frame.
    keep: [M] int32 indices of the kept input boxes.
  """
  window = _to_window(window)
  boxes = tf.reshape(boxes, [-1, 4])
  boxlist = box_list.BoxList(boxes)
  boxlist.add_field('index', tf.range(tf.shape(boxes)[0]))
  boxlist, _ = box_list_ops.prune_completely_outside_window(boxlist, window)
  boxlist, _ = box_list_ops.prune_non_overlapping_boxes(
      boxlist, box_list.BoxList(tf.reshape(window, [1, 4])), overlap_thresh)
  boxlist = box_list_ops.change_coordinate_frame(boxlist, window)
  if clip_boxes:
    boxlist = box_list_ops.clip_to_window(
        boxlist, tf.constant(_UNIT_WINDOW), filter_nonoverlapping=False)
  return boxlist.get(), boxlist.get_field('index')


def boxes_to_window(boxes, window):
  """Re-expresses boxes in a window's frame without dropping any."""
  boxlist = box_list.BoxList(tf.reshape(boxes, [-1, 4]))
  return box_list_ops.change_coordinate_frame(boxlist,
                                              _to_window(window)).get()


def keypoints_to_window(keypoints, window, prune):
  """Changes keypoint frame; with prune, keypoints left outside become NaN."""
  keypoints = change_keypoint_coordinate_frame(keypoints, window)
  if prune:
    keypoints = prune_keypoints_outside_window(
        keypoints, tf.constant(_UNIT_WINDOW))
  return keypoints


def densepose_coords_to_window(surface_coords, window):
  """Moves DensePose y, x (of y, x, v, u) into a window's frame."""
  window = _to_window(window)
  origin = window[:2]
  size = window[2:] - window[:2]
  return tf.concat([(surface_coords[:, :, :2] - origin) / size,
                    surface_coords[:, :, 2:]], axis=-1)
