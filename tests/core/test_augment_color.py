"""Tests for od_estimator.core.augment_color."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_color as color
from od_estimator.core import augment_common

# One pixel, R=100, G=50, B=200.
PIXEL = np.array([[[100.0, 50.0, 200.0]]], np.float32)
# Gray value: 0.2989 * 100 + 0.5870 * 50 + 0.1140 * 200
#           = 29.89 + 29.35 + 22.8 = 82.04.
PIXEL_GRAY = 82.04


@pytest.fixture
def fixed_draw(monkeypatch):
  """Makes every scalar uniform draw return minval + 0.75 * (maxval - minval).

  Lets the tests compute the op's output by hand for a known draw.
  """
  def fake(minval=0.0, maxval=1.0, seed=None):
    del seed
    return tf.constant(minval + 0.75 * (maxval - minval), tf.float32)
  monkeypatch.setattr(augment_common, 'random_uniform_scalar', fake)


# ----------------------------------------------------------------------------
# Pixel value maps.
# ----------------------------------------------------------------------------


def test_normalize_image(execute):
  image = np.array([[[0.0], [51.0], [127.5], [255.0]]], np.float32)

  def graph_fn(image):
    return color.normalize_image(image, 0, 255, -1, 1)

  # [0, 255] -> [-1, 1]: out = -1 + x * 2 / 255; 51 -> -1 + 0.4 = -0.6.
  out = execute(graph_fn, [image])
  np.testing.assert_allclose(out[0, :, 0], [-1.0, -0.6, 0.0, 1.0], atol=1e-6)


def test_normalize_image_casts_uint8(execute):
  out = execute(lambda im: color.normalize_image(im, 0, 255, 0, 1),
                [np.array([[[255, 0, 51]]], np.uint8)])
  assert out.dtype == np.float32
  np.testing.assert_allclose(out, [[[1.0, 0.0, 0.2]]], atol=1e-6)


def test_image_to_float(execute):
  out = execute(color.image_to_float, [np.array([[[7]]], np.uint8)])
  assert out.dtype == np.float32 and out[0, 0, 0] == 7.0


def test_random_pixel_value_scale_range(execute):
  image = np.full([20, 20, 3], 100.0, np.float32)

  def graph_fn(image):
    return color.random_pixel_value_scale(image, minval=0.9, maxval=1.1,
                                          seed=1)

  out = execute(graph_fn, [image])
  # Each value is 100 * U[0.9, 1.1), i.e. in [90, 110), independently.
  assert out.min() >= 90.0 and out.max() < 110.0
  assert len(np.unique(out)) > 100


def test_random_pixel_value_scale_fixed_factor_and_clip(execute):
  image = np.array([[[100.0, 250.0, 0.0]]], np.float32)

  def graph_fn(image):
    # minval == maxval makes the factor exactly 1.1.
    return color.random_pixel_value_scale(image, minval=1.1, maxval=1.1)

  # 100 * 1.1 = 110; 250 * 1.1 = 275 clipped to 255; 0 stays 0.
  np.testing.assert_allclose(execute(graph_fn, [image]), [[[110, 255, 0]]],
                             rtol=1e-6)


def test_rgb_to_gray_weights(execute):
  out = execute(color.rgb_to_gray, [PIXEL])
  assert out.shape == (1, 1, 1)
  np.testing.assert_allclose(out[0, 0, 0], PIXEL_GRAY, rtol=1e-5)


def test_random_rgb_to_gray_always_and_never(execute):
  # A 4th (e.g. depth) channel must pass through untouched.
  image = np.concatenate([PIXEL, [[[7.0]]]], axis=2)

  def graph_fn(image):
    return (color.random_rgb_to_gray(image, probability=1.0),
            color.random_rgb_to_gray(image, probability=0.0))

  gray, same = execute(graph_fn, [image])
  np.testing.assert_allclose(gray[0, 0], [PIXEL_GRAY] * 3 + [7.0], rtol=1e-5)
  np.testing.assert_array_equal(same, image)


def test_adjust_gamma(execute):
  image = np.array([[[127.5, 255.0, 0.0]]], np.float32)
  # 255 * (x / 255) ** 2: 127.5 -> 255 * 0.25 = 63.75; 255 -> 255; 0 -> 0.
  out = execute(lambda im: color.adjust_gamma(im, gamma=2.0), [image])
  np.testing.assert_allclose(out, [[[63.75, 255.0, 0.0]]], rtol=1e-5)


# ----------------------------------------------------------------------------
# Random colour adjustments.
# ----------------------------------------------------------------------------


def test_random_adjust_brightness_fixed_delta(execute, fixed_draw):
  del fixed_draw
  image = np.array([[[0.0, 100.0, 240.0, 7.0]]], np.float32)

  def graph_fn(image):
    return color.random_adjust_brightness(image, max_delta=0.2)

  # delta = -0.2 + 0.75 * 0.4 = 0.1, i.e. +25.5 on the [0, 255] scale:
  # 0 -> 25.5, 100 -> 125.5, 240 -> 265.5 clipped to 255; the 4th channel
  # is not RGB and is left alone.
  np.testing.assert_allclose(execute(graph_fn, [image]),
                             [[[25.5, 125.5, 255.0, 7.0]]], rtol=1e-5)


def test_random_adjust_brightness_random_delta(execute):
  image = np.full([4, 4, 3], 100.0, np.float32)

  def graph_fn(image):
    return color.random_adjust_brightness(image, max_delta=0.2, seed=3)

  out = execute(graph_fn, [image])
  shift = out - 100.0
  # One delta for the whole image, |delta| <= 0.2 * 255 = 51.
  np.testing.assert_allclose(shift, np.full_like(shift, shift.flat[0]),
                             atol=1e-4)
  assert abs(shift.flat[0]) <= 51.0 + 1e-4


def test_random_adjust_contrast_known_factor(execute):
  # Channel 0 has mean 100, channel 1 mean 20, channel 2 constant.
  image = np.array([[[50, 10, 9], [100, 30, 9]],
                    [[150, 10, 9], [100, 30, 9]]], np.float32)

  def graph_fn(image):
    return color.random_adjust_contrast(image, min_delta=2.0, max_delta=2.0)

  # out = mean + 2 * (x - mean) per channel:
  # ch0: 50 -> 0, 100 -> 100, 150 -> 200; ch1: 10 -> 0, 30 -> 40;
  # ch2 has no deviation and stays 9.
  expected = np.array([[[0, 0, 9], [100, 40, 9]],
                       [[200, 0, 9], [100, 40, 9]]], np.float32)
  np.testing.assert_allclose(execute(graph_fn, [image]), expected, atol=1e-3)


def test_random_adjust_contrast_draw_and_clip(execute, fixed_draw):
  del fixed_draw
  image = np.array([[[0.0]], [[255.0]]], np.float32).repeat(3, axis=2)

  def graph_fn(image):
    return color.random_adjust_contrast(image, min_delta=0.8, max_delta=1.6)

  # factor = 0.8 + 0.75 * 0.8 = 1.4; mean 127.5 -> 127.5 -/+ 1.4 * 127.5
  # = -51 / 306, clipped to 0 / 255.
  out = execute(graph_fn, [image])
  np.testing.assert_allclose(out[:, 0, 0], [0.0, 255.0])


def test_random_adjust_saturation_to_zero(execute):
  def graph_fn(image):
    return color.random_adjust_saturation(image, min_delta=0.0, max_delta=0.0)

  # Saturation 0 keeps HSV value V = max(R, G, B) = 200 on every channel.
  np.testing.assert_allclose(execute(graph_fn, [PIXEL]), [[[200, 200, 200]]],
                             atol=1e-3)


def test_random_adjust_hue_third_turn(execute, fixed_draw):
  del fixed_draw
  red = np.array([[[200.0, 0.0, 0.0]]], np.float32)

  def graph_fn(image):
    return color.random_adjust_hue(image, max_delta=2.0 / 3.0)

  # delta = -2/3 + 0.75 * 4/3 = 1/3 of a turn: red (hue 0) becomes green.
  np.testing.assert_allclose(execute(graph_fn, [red]), [[[0, 200, 0]]],
                             atol=1e-3)


@pytest.mark.parametrize('ordering', [0, 1])
@pytest.mark.parametrize('dynamic', [False, True])
def test_random_distort_color_range(execute, ordering, dynamic):
  image = np.random.RandomState(0).uniform(0, 255, [6, 5, 3]).astype(
      np.float32)

  def graph_fn(image):
    out = color.random_distort_color(image, color_ordering=ordering)
    # Static shapes survive when the input has them.
    assert out.shape.as_list() == image.shape.as_list()
    return out

  out = execute(graph_fn, [image], dynamic=dynamic)
  assert out.shape == (6, 5, 3)
  assert out.min() >= 0.0 and out.max() <= 255.0


def test_random_distort_color_bad_ordering():
  with pytest.raises(ValueError, match='color_ordering'):
    color.random_distort_color(tf.zeros([2, 2, 3]), color_ordering=2)


def test_random_jpeg_quality(execute):
  image = np.full([16, 16, 3], 128.0, np.float32)

  def graph_fn(image):
    return (color.random_jpeg_quality(image, 50, 51, random_coef=0.0),
            color.random_jpeg_quality(image + 0.5, random_coef=1.0))

  encoded, unchanged = execute(graph_fn, [image])
  assert encoded.shape == (16, 16, 3)
  # A flat gray image survives JPEG almost exactly, as integers.
  np.testing.assert_array_equal(encoded, np.round(encoded))
  np.testing.assert_allclose(encoded, 128.0, atol=2.0)
  np.testing.assert_array_equal(unchanged, image + 0.5)


def test_square_patch_mask(execute):
  def graph_fn():
    return (color._square_patch_mask(1, 1, 2, 4, 4),
            color._square_patch_mask(0, 3, 3, 4, 4))

  even, clipped = execute(graph_fn)
  # Size 2 at (1, 1): rows/cols 1 - 1 .. 1 + 1 - 1 = 0..1.
  expected_even = np.zeros([4, 4], bool)
  expected_even[0:2, 0:2] = True
  # Size 3 at (0, 3): rows -1..1 and cols 2..4, clipped to rows 0..1, 2..3.
  expected_clipped = np.zeros([4, 4], bool)
  expected_clipped[0:2, 2:4] = True
  np.testing.assert_array_equal(even, expected_even)
  np.testing.assert_array_equal(clipped, expected_clipped)


def test_random_patch_gaussian(execute):
  image = np.full([10, 10, 3], 128.0, np.float32)

  def graph_fn(image):
    return (color.random_patch_gaussian(image, 3, 4, 0.5, 0.6, seed=2),
            color.random_patch_gaussian(image, 3, 4, 0.0, 0.0),
            color.random_patch_gaussian(image, random_coef=1.0))

  noisy, zero_noise, skipped = execute(graph_fn, [image])
  changed = np.any(noisy != 128.0, axis=2)
  # A 3x3 patch changes at most 9 pixels; noise of stddev >= 0.5 changes
  # at least one, and stays in [0, 255].
  assert 1 <= changed.sum() <= 9
  assert noisy.min() >= 0.0 and noisy.max() <= 255.0
  np.testing.assert_allclose(zero_noise, image, rtol=1e-6)
  np.testing.assert_array_equal(skipped, image)


def test_random_patch_gaussian_bad_size():
  with pytest.raises(ValueError, match='min_patch_size'):
    color.random_patch_gaussian(tf.zeros([2, 2, 3]), min_patch_size=0)


# ----------------------------------------------------------------------------
# Channel means, one-hot, softmax.
# ----------------------------------------------------------------------------


def test_subtract_channel_mean(execute):
  out = execute(lambda im: color.subtract_channel_mean(im, [1.0, 2.0, 3.0]),
                [PIXEL])
  np.testing.assert_allclose(out, [[[99.0, 48.0, 197.0]]])


def test_subtract_channel_mean_errors():
  with pytest.raises(ValueError, match='len\\(means\\)'):
    color.subtract_channel_mean(tf.zeros([2, 2, 3]), [1.0, 2.0])
  with pytest.raises(ValueError, match='len\\(means\\)'):
    color.subtract_channel_mean(tf.zeros([2, 2, 3]))
  with pytest.raises(ValueError, match='height, width, channels'):
    color.subtract_channel_mean(tf.zeros([1, 2, 2, 3]), [1.0, 2.0, 3.0])


def test_one_hot_encoding(execute):
  def graph_fn(labels, repeated, empty):
    return (color.one_hot_encoding(labels, num_classes=5),
            color.one_hot_encoding(repeated, num_classes=3),
            color.one_hot_encoding(empty, num_classes=3))

  multi, repeated, empty = execute(
      graph_fn, [np.array([1, 4], np.int32), np.array([1, 1], np.int32),
                 np.zeros([0], np.int32)])
  np.testing.assert_array_equal(multi, [0, 1, 0, 0, 1])
  np.testing.assert_array_equal(repeated, [0, 1, 0])
  np.testing.assert_array_equal(empty, [0, 0, 0])


def test_one_hot_encoding_needs_num_classes():
  with pytest.raises(ValueError, match='num_classes'):
    color.one_hot_encoding(tf.constant([1]))


def test_convert_class_logits_to_softmax(execute):
  logits = np.array([[0.0, 2.0 * math.log(3.0)], [1.0, 1.0]], np.float32)

  def graph_fn(logits):
    return color.convert_class_logits_to_softmax(logits, temperature=2.0)

  # Row 0: logits / 2 = [0, ln 3] -> [1, 3] / 4; row 1: equal logits.
  np.testing.assert_allclose(execute(graph_fn, [logits]),
                             [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)


# ----------------------------------------------------------------------------
# Label ops.
# ----------------------------------------------------------------------------


def test_remap_labels(execute):
  def graph_fn(labels, empty):
    return (color.remap_labels(labels, [1, 3], 7),
            color.remap_labels(labels, [], 7),
            color.remap_labels(empty, [1], 7))

  remapped, unchanged, empty = execute(
      graph_fn, [np.array([1, 2, 3, 4, 1], np.int32), np.zeros([0], np.int32)])
  np.testing.assert_array_equal(remapped, [7, 2, 7, 4, 7])
  np.testing.assert_array_equal(unchanged, [1, 2, 3, 4, 1])
  assert empty.shape == (0,)


def _per_box_inputs(num_boxes):
  """Per-box tensors whose row i all encode i, to check they stay aligned."""
  index = np.arange(num_boxes, dtype=np.float32)
  boxes = np.stack([index / 100.0] * 4, axis=1)
  weights = index + 0.5
  scores = np.stack([index, -index], axis=1)
  masks = np.ones([num_boxes, 2, 2], np.float32) * index[:, None, None]
  keypoints = np.ones([num_boxes, 3, 2], np.float32) * index[:, None, None]
  return boxes, weights, scores, masks, keypoints


def test_drop_label_probabilistically_always(execute):
  boxes, weights, scores, masks, keypoints = _per_box_inputs(4)
  labels = np.array([1, 2, 3, 2], np.int32)

  def graph_fn(boxes, labels, weights, confidences, scores, masks, keypoints):
    return color.drop_label_probabilistically(
        boxes, labels, weights, confidences, scores, masks, keypoints,
        dropped_label=2, drop_probability=1.0)

  out = execute(graph_fn, [boxes, labels, weights, weights, scores, masks,
                           keypoints])
  assert len(out) == 7
  kept = [0, 2]  # Rows 1 and 3 carry label 2.
  np.testing.assert_array_equal(out[0], boxes[kept])
  np.testing.assert_array_equal(out[1], [1, 3])
  np.testing.assert_array_equal(out[2], weights[kept])
  np.testing.assert_array_equal(out[3], weights[kept])
  np.testing.assert_array_equal(out[4], scores[kept])
  np.testing.assert_array_equal(out[5], masks[kept])
  np.testing.assert_array_equal(out[6], keypoints[kept])


def test_drop_label_probabilistically_rate_and_alignment(execute):
  num_boxes = 1000
  boxes, weights, _, _, _ = _per_box_inputs(num_boxes)
  labels = np.ones([num_boxes], np.int32)

  def graph_fn(boxes, labels, weights):
    return color.drop_label_probabilistically(
        boxes, labels, weights, dropped_label=1, drop_probability=0.3, seed=4)

  out_boxes, out_labels, out_weights = execute(graph_fn,
                                               [boxes, labels, weights])
  # About 70% of 1000 survive; 5 binomial sigmas (sqrt(1000 * .3 * .7) ~ 14.5).
  assert abs(len(out_labels) - 700) < 73
  kept = (out_weights - 0.5).astype(int)
  np.testing.assert_allclose(out_boxes, boxes[kept])


def test_drop_label_probabilistically_never_and_empty(execute):
  boxes, weights, _, _, _ = _per_box_inputs(3)

  def graph_fn(boxes, labels, weights, empty_boxes, empty_labels,
               empty_weights):
    return (color.drop_label_probabilistically(
        boxes, labels, weights, dropped_label=1, drop_probability=0.0),
            color.drop_label_probabilistically(
                empty_boxes, empty_labels, empty_weights, dropped_label=1,
                drop_probability=1.0))

  kept, empty = execute(graph_fn, [
      boxes, np.array([1, 1, 1], np.int32), weights,
      np.zeros([0, 4], np.float32), np.zeros([0], np.int32),
      np.zeros([0], np.float32)], dynamic=True)
  np.testing.assert_array_equal(kept[0], boxes)
  assert [t.shape[0] for t in empty] == [0, 0, 0]


def test_retain_boxes_above_threshold(execute):
  boxes, _, _, masks, _ = _per_box_inputs(4)
  weights = np.array([0.5, 0.1, np.nan, 0.3], np.float32)

  def graph_fn(boxes, labels, weights, masks):
    return color.retain_boxes_above_threshold(
        boxes, labels, weights, masks=masks, threshold=0.2)

  out_boxes, out_labels, out_weights, out_masks = execute(
      graph_fn, [boxes, np.array([1, 2, 3, 4], np.int32), weights, masks])
  # 0.1 <= 0.2 is dropped; NaN means "unknown" and is kept.
  np.testing.assert_array_equal(out_labels, [1, 3, 4])
  np.testing.assert_array_equal(out_boxes, boxes[[0, 2, 3]])
  np.testing.assert_array_equal(out_weights, weights[[0, 2, 3]])
  np.testing.assert_array_equal(out_masks, masks[[0, 2, 3]])
