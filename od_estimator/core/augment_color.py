"""Photometric augmentations and label-only preprocessing ops.

Each op works on one image (no batch dimension) and mirrors the public name,
argument order and return order of the original object detection API's
preprocessor ops, minus `preprocess_vars_cache`. Conventions:
  image      [H, W, C] float32, values in [0, 255] unless an op says otherwise
  boxes      [N, 4] float32 normalized ymin, xmin, ymax, xmax
  labels     [N] int32 class ids
  masks      [N, H, W] float32 instance masks
  keypoints  [N, K, 2] float32 normalized y, x
Colour ops only touch the first three (RGB) channels, so extra channels such
as depth pass through unchanged. Label ops that drop boxes drop the same rows
from every per-box tensor.
"""
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import preprocessor_cache

_CACHE = preprocessor_cache.PreprocessorCache

# ITU-R BT.601 luma weights for R, G, B.
_GRAY_WEIGHTS = (0.2989, 0.5870, 0.1140)


def _rgb_to_grayscale(image):
  """[..., 3] RGB -> [..., 1] luma, in the input's dtype.

  Written as a weighted sum rather than tf.image.rgb_to_grayscale so that it
  only uses ops that quantization-aware graphs support.
  """
  image = tf.convert_to_tensor(image)
  float_image = tf.image.convert_image_dtype(image, tf.float32)
  gray = tf.reduce_sum(float_image * tf.constant(_GRAY_WEIGHTS), axis=-1,
                       keepdims=True)
  gray.set_shape(image.shape[:-1].concatenate([1]))
  return tf.image.convert_image_dtype(gray, image.dtype)


def _augment_only_rgb_channels(image, augment_function):
  """Applies augment_function to channels 0..2 and keeps the others."""
  if image.shape[-1] == 3:
    return augment_function(image)
  augmented = augment_function(image[:, :, :3])
  return tf.concat([augmented, image[:, :, 3:]], axis=-1)


def _on_unit_range(image, adjust_fn):
  """Runs a tf.image colour op (which expects [0, 1]) on a [0, 255] image."""
  def adjust(rgb):
    return tf.clip_by_value(adjust_fn(rgb / 255.0) * 255.0, 0.0, 255.0)
  return _augment_only_rgb_channels(image, adjust)


def _random_adjust(image, adjust_fn, minval, maxval, seed):
  """adjust_fn(rgb, value) on the [0, 1] scale, value ~ U[minval, maxval)."""
  value = augment_common.random_uniform_scalar(minval, maxval, seed=seed)
  return _on_unit_range(image, lambda rgb: adjust_fn(rgb, value))


def _unless_random_coef(image, augment_fn, random_coef, seed):
  """augment_fn(), or the image when a U[0, 1) draw is below random_coef."""
  do_augment = tf.greater_equal(
      augment_common.random_uniform_scalar(seed=seed), random_coef)
  return augment_common.cond_or_identity(do_augment, augment_fn, image)


def normalize_image(image, original_minval, original_maxval, target_minval,
                    target_maxval):
  """Maps pixel values linearly from one range to another.

  Args:
    image: [H, W, C] tensor (cast to float32).
    original_minval: value that maps to target_minval.
    original_maxval: value that maps to target_maxval.
    target_minval: lower end of the target range.
    target_maxval: upper end of the target range.

  Returns:
    [H, W, C] float32 image.
  """
  original_minval = float(original_minval)
  original_maxval = float(original_maxval)
  target_minval = float(target_minval)
  target_maxval = float(target_maxval)
  with tf.name_scope('NormalizeImage'):
    image = tf.cast(image, tf.float32)
    scale = (target_maxval - target_minval) / (original_maxval -
                                               original_minval)
    return (image - original_minval) * scale + target_minval


@augment_common.uses_preprocess_vars_cache(_CACHE.PIXEL_VALUE_SCALE)
def random_pixel_value_scale(image, minval=0.9, maxval=1.1, seed=None):
  """Multiplies every pixel value by its own factor from U[minval, maxval).

  Args:
    image: [H, W, C] float32 in [0, 255].
    minval: lowest factor.
    maxval: highest factor (exclusive).
    seed: random seed.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('RandomPixelValueScale'):
    factors = augment_common.random_uniform(
        tf.shape(image), minval=minval, maxval=maxval, seed=seed)
    return tf.clip_by_value(image * factors, 0.0, 255.0)


@augment_common.uses_preprocess_vars_cache(_CACHE.RGB_TO_GRAY)
def random_rgb_to_gray(image, probability=0.1, seed=None):
  """With the given probability replaces RGB by its gray value (3 times).

  Args:
    image: [H, W, C] float32 in [0, 255], C >= 3.
    probability: chance of converting, in [0, 1].
    seed: random seed.

  Returns:
    [H, W, C] float32 image.
  """
  def to_gray3(rgb):
    return tf.image.grayscale_to_rgb(_rgb_to_grayscale(rgb))

  with tf.name_scope('RandomRGBtoGray'):
    do_gray = augment_common.random_decision(probability, seed=seed)
    return augment_common.cond_or_identity(
        do_gray, lambda: _augment_only_rgb_channels(image, to_gray3), image)


def adjust_gamma(image, gamma=1.0, gain=1.0):
  """Applies out = 255 * gain * (in / 255) ** gamma to the RGB channels.

  Args:
    image: [H, W, C] float32 in [0, 255].
    gamma: non-negative exponent.
    gain: multiplier.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('AdjustGamma'):
    return _on_unit_range(
        image, lambda rgb: tf.image.adjust_gamma(rgb, gamma, gain))


@augment_common.uses_preprocess_vars_cache(_CACHE.ADJUST_BRIGHTNESS)
def random_adjust_brightness(image, max_delta=0.2, seed=None):
  """Adds delta * 255 to the RGB channels, delta ~ U[-max_delta, max_delta).

  Args:
    image: [H, W, C] float32 in [0, 255].
    max_delta: largest brightness change as a fraction of 255, in [0, 1).
    seed: random seed.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('RandomAdjustBrightness'):
    return _random_adjust(image, tf.image.adjust_brightness, -max_delta,
                          max_delta, seed)


@augment_common.uses_preprocess_vars_cache(_CACHE.ADJUST_CONTRAST)
def random_adjust_contrast(image, min_delta=0.8, max_delta=1.25, seed=None):
  """Scales each channel's deviation from its mean by f ~ U[min, max).

  out = mean_c + f * (in - mean_c), mean_c being the channel's mean over the
  whole image.

  Args:
    image: [H, W, C] float32 in [0, 255].
    min_delta: lowest contrast factor.
    max_delta: highest contrast factor (exclusive).
    seed: random seed.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('RandomAdjustContrast'):
    return _random_adjust(image, tf.image.adjust_contrast, min_delta,
                          max_delta, seed)


@augment_common.uses_preprocess_vars_cache(_CACHE.ADJUST_HUE)
def random_adjust_hue(image, max_delta=0.02, seed=None):
  """Rotates hue by delta ~ U[-max_delta, max_delta) of a full turn.

  Args:
    image: [H, W, C] float32 in [0, 255].
    max_delta: largest hue shift, in [0, 0.5].
    seed: random seed.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('RandomAdjustHue'):
    return _random_adjust(image, tf.image.adjust_hue, -max_delta, max_delta,
                          seed)


@augment_common.uses_preprocess_vars_cache(_CACHE.ADJUST_SATURATION)
def random_adjust_saturation(image, min_delta=0.8, max_delta=1.25,
                             seed=None):
  """Multiplies saturation (HSV) by a factor ~ U[min_delta, max_delta).

  Args:
    image: [H, W, C] float32 in [0, 255].
    min_delta: lowest saturation factor.
    max_delta: highest saturation factor (exclusive).
    seed: random seed.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].
  """
  with tf.name_scope('RandomAdjustSaturation'):
    return _random_adjust(image, tf.image.adjust_saturation, min_delta,
                          max_delta, seed)


@augment_common.uses_preprocess_vars_cache(_CACHE.DISTORT_COLOR)
def random_distort_color(image, color_ordering=0):
  """Chains random brightness, saturation, hue and contrast changes.

  Ranges: brightness +-32/255, saturation and contrast factors in [0.5, 1.5),
  hue +-0.2. Order 0: brightness, saturation, hue, contrast. Order 1:
  brightness, contrast, saturation, hue.

  Args:
    image: [H, W, C] float32 in [0, 255].
    color_ordering: 0 or 1, see above.

  Returns:
    [H, W, C] float32 image clipped to [0, 255].

  Raises:
    ValueError: if color_ordering is not 0 or 1.
  """
  def brightness(x):
    return random_adjust_brightness(x, max_delta=32. / 255.)

  def saturation(x):
    return random_adjust_saturation(x, min_delta=0.5, max_delta=1.5)

  def hue(x):
    return random_adjust_hue(x, max_delta=0.2)

  def contrast(x):
    return random_adjust_contrast(x, min_delta=0.5, max_delta=1.5)

  orders = {0: (brightness, saturation, hue, contrast),
            1: (brightness, contrast, saturation, hue)}
  if color_ordering not in orders:
    raise ValueError('color_ordering must be in {0, 1}, got %r' %
                     (color_ordering,))
  with tf.name_scope('RandomDistortColor'):
    for op in orders[color_ordering]:
      image = op(image)
    return image


@augment_common.uses_preprocess_vars_cache(_CACHE.JPEG_QUALITY)
def random_jpeg_quality(image, min_jpeg_quality=0, max_jpeg_quality=100,
                        random_coef=0.0, seed=None):
  """Re-encodes the image as JPEG with a random quality.

  Args:
    image: [H, W, C] float32 in [0, 255], C in {1, 3}.
    min_jpeg_quality: lowest quality (inclusive).
    max_jpeg_quality: highest quality (exclusive).
    random_coef: chance of returning the image unchanged.
    seed: random seed.

  Returns:
    [H, W, C] float32 image (integer-valued after re-encoding).
  """
  def encode_decode():
    quality = augment_common.random_integer(min_jpeg_quality,
                                            max_jpeg_quality, seed=seed)
    # JPEG works on uint8; clip first so out-of-range floats do not wrap.
    as_uint8 = tf.cast(tf.clip_by_value(image, 0.0, 255.0), tf.uint8)
    return tf.cast(tf.image.adjust_jpeg_quality(as_uint8, quality),
                   tf.float32)

  with tf.name_scope('RandomJpegQuality'):
    image = tf.cast(image, tf.float32)
    return _unless_random_coef(image, encode_decode, random_coef, seed)


def _square_patch_mask(y, x, patch_size, height, width):
  """[H, W] bool mask of a patch_size square centred at (y, x).

  Rows y - floor(s / 2) .. y + ceil(s / 2) - 1 (likewise columns), clipped to
  the image; an even size therefore extends one more pixel up / left.
  """
  start_y = y - patch_size // 2
  start_x = x - patch_size // 2
  end_y = start_y + patch_size
  end_x = start_x + patch_size
  rows = tf.range(height)
  cols = tf.range(width)
  in_rows = tf.logical_and(rows >= start_y, rows < end_y)
  in_cols = tf.logical_and(cols >= start_x, cols < end_x)
  return tf.logical_and(in_rows[:, tf.newaxis], in_cols[tf.newaxis, :])


@augment_common.uses_preprocess_vars_cache(_CACHE.PATCH_GAUSSIAN)
def random_patch_gaussian(image, min_patch_size=1, max_patch_size=250,
                          min_gaussian_stddev=0.0, max_gaussian_stddev=1.0,
                          random_coef=0.0, seed=None):
  """Adds gaussian noise inside one random square patch (Patch Gaussian).

  Noise is added on the [0, 1] scale and clipped to [0, 1] there. The patch
  centre is uniform over the pixels; the patch may extend past the border.

  Args:
    image: [H, W, C] float32 in [0, 255].
    min_patch_size: smallest patch side (inclusive), >= 1.
    max_patch_size: largest patch side (exclusive).
    min_gaussian_stddev: smallest noise stddev (inclusive), [0, 1] scale.
    max_gaussian_stddev: largest noise stddev (exclusive), [0, 1] scale.
    random_coef: chance of returning the image unchanged.
    seed: random seed.

  Returns:
    [H, W, C] float32 image.

  Raises:
    ValueError: if min_patch_size < 1.
  """
  if min_patch_size < 1:
    raise ValueError('min_patch_size must be >= 1, got %r' % min_patch_size)

  def sub_seed(offset):
    # Same-shaped draws with one op seed would repeat each other (y == x).
    return None if seed is None else seed + offset

  def add_noise():
    shape = tf.shape(image)
    patch_size = augment_common.random_integer(min_patch_size, max_patch_size,
                                               seed=sub_seed(1))
    stddev = augment_common.random_uniform_scalar(
        min_gaussian_stddev, max_gaussian_stddev, seed=sub_seed(2))
    y = augment_common.random_integer(0, shape[0], seed=sub_seed(3))
    x = augment_common.random_integer(0, shape[1], seed=sub_seed(4))
    noise = augment_common.random_normal(shape, stddev=stddev,
                                         seed=sub_seed(5))
    scaled = image / 255.0
    noisy = tf.clip_by_value(scaled + noise, 0.0, 1.0)
    mask = _square_patch_mask(y, x, patch_size, shape[0], shape[1])
    mask = tf.broadcast_to(mask[:, :, tf.newaxis], shape)
    return tf.where(mask, noisy, scaled) * 255.0

  with tf.name_scope('RandomPatchGaussian'):
    image = tf.cast(image, tf.float32)
    return _unless_random_coef(image, add_noise, random_coef, seed)


def image_to_float(image):
  """Casts the image to float32 (values unchanged)."""
  with tf.name_scope('ImageToFloat'):
    return tf.cast(image, tf.float32)


def subtract_channel_mean(image, means=None):
  """Subtracts a per-channel mean.

  Args:
    image: [H, W, C] float32.
    means: C floats.

  Returns:
    [H, W, C] float32 image.

  Raises:
    ValueError: if the image is not rank 3 or len(means) != C.
  """
  if image.shape.rank != 3:
    raise ValueError('Input must be of size [height, width, channels]')
  # An unknown channel count cannot be checked here; broadcasting will.
  if means is None or (image.shape[-1] is not None and
                       len(means) != image.shape[-1]):
    raise ValueError('len(means) must match the number of channels (%s), got '
                     '%r' % (image.shape[-1], means))
  with tf.name_scope('SubtractChannelMean'):
    return image - tf.constant(list(means), dtype=image.dtype)


def one_hot_encoding(labels, num_classes=None):
  """Multi-hot vector of the image-level labels.

  Args:
    labels: [M] int tensor of class indices in [0, num_classes).
    num_classes: length of the output.

  Returns:
    [num_classes] int32 tensor, 1 where a label occurs, else 0 (all zeros
    for an empty label list).

  Raises:
    ValueError: if num_classes is not given.
  """
  if num_classes is None:
    raise ValueError('num_classes must be specified')
  with tf.name_scope('OneHotEncoding'):
    # Sum + clip instead of a max, so zero labels give zeros, not INT_MIN.
    counts = tf.reduce_sum(tf.one_hot(labels, num_classes, 1, 0), axis=0)
    return tf.minimum(counts, 1)


def rgb_to_gray(image):
  """Converts an RGB image to a single gray channel.

  Args:
    image: [H, W, 3] float32.

  Returns:
    [H, W, 1] image, 0.2989 R + 0.5870 G + 0.1140 B.
  """
  return _rgb_to_grayscale(image)


def convert_class_logits_to_softmax(multiclass_scores, temperature=1.0):
  """Turns per-box class logits into probabilities, softmax(logits / T).

  Args:
    multiclass_scores: [N, num_classes] float32 logits.
    temperature: T > 0; larger values flatten the distribution.

  Returns:
    [N, num_classes] float32 probabilities.
  """
  scaled = tf.multiply(multiclass_scores, 1.0 / temperature,
                       name='scale_logits')
  return tf.nn.softmax(scaled, name='softmax')


def _gather_label_tensors(keep, boxes, labels, label_weights,
                          label_confidences, multiclass_scores, masks,
                          keypoints):
  """Keeps the rows where [N] bool keep holds, in each tensor given."""
  indices = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
  gathered = augment_common.gather_per_box(
      indices, (boxes, labels, label_weights, label_confidences,
                multiclass_scores, masks, keypoints))
  return [t for t in gathered if t is not None]


def retain_boxes_above_threshold(boxes, labels, label_weights,
                                 label_confidences=None,
                                 multiclass_scores=None, masks=None,
                                 keypoints=None, threshold=0.0):
  """Keeps boxes whose label weight is > threshold or NaN (unknown).

  Args:
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    labels: [N] int32.
    label_weights: [N] float32.
    label_confidences: optional [N] float32.
    multiclass_scores: optional [N, num_classes] float32.
    masks: optional [N, H, W] float32.
    keypoints: optional [N, K, 2] float32.
    threshold: Python float.

  Returns:
    A list: boxes [M, 4], labels [M], label_weights [M], then
    label_confidences, multiclass_scores, masks and keypoints (M rows each)
    for those given.
  """
  with tf.name_scope('RetainBoxesAboveThreshold'):
    keep = tf.logical_or(label_weights > threshold,
                         tf.math.is_nan(label_weights))
    return _gather_label_tensors(keep, boxes, labels, label_weights,
                                 label_confidences, multiclass_scores, masks,
                                 keypoints)


@augment_common.uses_preprocess_vars_cache(_CACHE.DROP_LABEL_PROBABILISTICALLY)
def drop_label_probabilistically(boxes, labels, label_weights,
                                 label_confidences=None,
                                 multiclass_scores=None, masks=None,
                                 keypoints=None, dropped_label=None,
                                 drop_probability=0.0, seed=None):
  """Drops each box of class dropped_label with probability drop_probability.

  Every box draws independently; boxes of other classes are always kept.

  Args:
    boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
    labels: [N] int32.
    label_weights: [N] float32, or None when the pipeline carries no
      weights (then it is neither gathered nor returned).
    label_confidences: optional [N] float32.
    multiclass_scores: optional [N, num_classes] float32.
    masks: optional [N, H, W] float32.
    keypoints: optional [N, K, 2] float32.
    dropped_label: class id to drop.
    drop_probability: chance of dropping each such box.
    seed: random seed.

  Returns:
    A list: boxes [M, 4], labels [M], label_weights [M], then
    label_confidences, multiclass_scores, masks and keypoints (M rows each)
    for those given.
  """
  with tf.name_scope('DropLabelProbabilistically'):
    draws = augment_common.random_uniform(tf.shape(labels), maxval=1.0,
                                          seed=seed)
    keep = tf.logical_or(draws > drop_probability,
                         tf.not_equal(labels, tf.cast(dropped_label,
                                                      labels.dtype)))
    return _gather_label_tensors(keep, boxes, labels, label_weights,
                                 label_confidences, multiclass_scores, masks,
                                 keypoints)


def remap_labels(labels, original_labels=None, new_label=None):
  """Replaces every label found in original_labels by new_label.

  Args:
    labels: [N] int tensor (any rank works).
    original_labels: iterable of ints to replace (None or empty: no change).
    new_label: int replacement.

  Returns:
    [N] tensor of the labels' dtype and shape.
  """
  original_labels = list(original_labels or [])
  if not original_labels:
    return tf.identity(labels)
  with tf.name_scope('RemapLabels'):
    targets = tf.constant(original_labels, dtype=labels.dtype)
    hit = tf.reduce_any(tf.equal(labels[..., tf.newaxis], targets), axis=-1)
    return tf.where(hit, tf.fill(tf.shape(labels),
                                 tf.cast(new_label, labels.dtype)), labels)
