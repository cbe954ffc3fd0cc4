"""Tests for the padding / square crop-and-pad ops against known geometry."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_pad as ap
from tests.core.crop_pad_testing import BOXES
from tests.core.crop_pad_testing import check_consistent
from tests.core.crop_pad_testing import KEYPOINTS
from tests.core.crop_pad_testing import LABELS
from tests.core.crop_pad_testing import NAN
from tests.core.crop_pad_testing import np_crop
from tests.core.crop_pad_testing import position_image
from tests.core.crop_pad_testing import position_masks
from tests.core.crop_pad_testing import WEIGHTS


def test_center_pad_moves_boxes_to_known_coordinates(execute):
  image = position_image(4, 4)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]], np.float32)
  masks = np.ones([2, 4, 4], np.float32)
  keypoints = np.array([[[0.5, 0.5]], [[0.0, 1.0]]], np.float32)
  dp_coords = np.array([[[0.0, 0.0, 0.3, 0.4]], [[1.0, 1.0, 0.5, 0.6]]],
                       np.float32)

  def graph(image, boxes, masks, keypoints, dp_coords):
    return ap.random_pad_image(
        image, boxes, masks, keypoints, dp_coords, min_image_size=[8, 6],
        max_image_size=[8, 6], pad_color=[-1.0, -2.0, -3.0],
        center_pad=True)
  out_image, out_boxes, out_masks, out_kp, out_dp = execute(
      graph, [image, boxes, masks, keypoints, dp_coords])
  # 4 x 4 padded to 8 x 6 and centred: offset (8-4)/2 = 2 rows and
  # (6-4)/2 = 1 column. y' = (2 + 4 y) / 8, x' = (1 + 4 x) / 6.
  assert out_image.shape == (8, 6, 3)
  np.testing.assert_array_equal(out_image[2:6, 1:5], image)
  np.testing.assert_array_equal(out_image[0, 0], [-1.0, -2.0, -3.0])
  np.testing.assert_array_equal(out_image[7, 5], [-1.0, -2.0, -3.0])
  np.testing.assert_allclose(out_boxes, [[2 / 8, 1 / 6, 6 / 8, 5 / 6],
                                         [4 / 8, 3 / 6, 6 / 8, 5 / 6]],
                             atol=1e-6)
  want_masks = np.zeros([2, 8, 6], np.float32)
  want_masks[:, 2:6, 1:5] = 1.0
  np.testing.assert_array_equal(out_masks, want_masks)
  np.testing.assert_allclose(out_kp, [[[4 / 8, 3 / 6]], [[2 / 8, 5 / 6]]],
                             atol=1e-6)
  # DensePose y, x move like keypoints; v, u are untouched.
  np.testing.assert_allclose(out_dp, [[[2 / 8, 1 / 6, 0.3, 0.4]],
                                      [[6 / 8, 5 / 6, 0.5, 0.6]]], atol=1e-6)


def test_random_pads_keep_boxes_on_the_content(execute):
  height, width = 5, 7

  def graph(image, boxes):
    tf.compat.v1.set_random_seed(5)
    outputs = [ap.random_pad_image(image, boxes, pad_color=[-1.0] * 3)
               for _ in range(3)]
    outputs += [ap.random_absolute_pad_image(
        image, boxes, max_height_padding=3, max_width_padding=4,
        pad_color=[-1.0] * 3) for _ in range(3)]
    # Default colour: the image mean.
    outputs.append(ap.random_pad_image(image, boxes, min_image_size=[6, 7],
                                       max_image_size=[6, 7]))
    return outputs
  image = position_image(height, width)
  results = execute(graph, [image, BOXES])
  for i, (out_image, out_boxes) in enumerate(results[:-1]):
    # Top-left of the original content in the padded image.
    row0, col0 = np.argwhere(out_image[:, :, 2] == 1.0)[0]
    out_h, out_w = out_image.shape[:2]
    if i < 3:   # random_pad_image: size in [size, 2 size).
      assert height <= out_h < 2 * height and width <= out_w < 2 * width
    else:       # random_absolute_pad_image: padding in [0, max).
      assert height <= out_h < height + 3 and width <= out_w < width + 4
    np.testing.assert_array_equal(
        out_image[row0:row0 + height, col0:col0 + width], image)
    want = (BOXES * np.array([height, width] * 2) +
            np.array([row0, col0] * 2)) / np.array([out_h, out_w] * 2)
    np.testing.assert_allclose(out_boxes, want, atol=1e-5)
  out_image, _ = results[-1]
  # Mean of the channels: rows 0..4 -> 2, cols 0..6 -> 3, ones -> 1.
  assert out_image.shape == (6, 7, 3)
  np.testing.assert_allclose(out_image[5, 0], [2.0, 3.0, 1.0], atol=1e-5)


def test_pad_to_aspect_ratio_known_size(execute):
  image = position_image(4, 8)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)

  def graph(image, boxes, masks, keypoints):
    return ap.random_pad_to_aspect_ratio(
        image, boxes, masks, keypoints, aspect_ratio=1.0,
        min_padded_size_ratio=(1.0, 1.0), max_padded_size_ratio=(1.0, 1.0))
  out_image, out_boxes, out_masks, out_kp = execute(
      graph, [image, boxes, np.ones([1, 4, 8], np.float32),
              np.array([[[1.0, 1.0]]], np.float32)])
  # 4 x 8 needs 8 rows for aspect 1; the size ratios cannot shrink that, so
  # the scale is 1: 8 x 8 with the image at the top. y' = y * 4 / 8.
  assert out_image.shape == (8, 8, 3)
  np.testing.assert_array_equal(out_image[:4], image)
  np.testing.assert_array_equal(out_image[4:], 0.0)
  np.testing.assert_allclose(out_boxes, [[0.0, 0.0, 0.5, 1.0]])
  np.testing.assert_array_equal(out_masks[0, :4], 1.0)
  np.testing.assert_array_equal(out_masks[0, 4:], 0.0)
  np.testing.assert_allclose(out_kp, [[[0.5, 1.0]]])


@pytest.mark.parametrize('scale', [0.5, 1.0, 1.5])
def test_square_crop_by_scale_known_windows(execute, scale):
  image = position_image(16, 16)
  boxes = np.array([[0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 0.2, 0.2],
                    [0.5, 0.5, 0.9, 0.9]], np.float32)
  masks = position_masks(3, 16, 16)
  keypoints = np.array([[[0.5, 0.5]], [[0.1, 0.1]], [[0.8, 0.8]]],
                       np.float32)

  def graph(image, boxes, labels, weights, confidences, masks, keypoints):
    return ap.random_square_crop_by_scale(
        image, boxes, labels, weights, confidences, masks, keypoints,
        max_border=16, scale_min=scale, scale_max=scale)
  (out_image, out_boxes, out_labels, out_weights, out_conf, out_masks,
   out_kp) = execute(graph, [image, boxes, LABELS[:3], WEIGHTS[:3],
                             WEIGHTS[:3] + 1, masks, keypoints])
  # Border: 16 / 2^ceil(log2(2 * 16 / 16)) = 8, so the centre is pixel 8.
  # Side = 16 * scale; the crop spans [8 - side / 2, 8 + side / 2).
  side = int(16 * scale)
  start = 8 - side // 2
  assert out_image.shape == (side, side, 3)
  window = np.array([start, start, start + side, start + side]) / 16.0
  keep, want_boxes = np_crop(window, boxes.astype(np.float64), 0.0)
  np.testing.assert_allclose(out_boxes, want_boxes, atol=1e-6)
  np.testing.assert_array_equal(out_labels, LABELS[keep])
  np.testing.assert_allclose(out_weights, WEIGHTS[keep])
  np.testing.assert_allclose(out_conf, WEIGHTS[keep] + 1)
  # The image part lands at max(0, -start); the rest is zero.
  lo, hi = max(start, 0), min(start + side, 16)
  off = lo - start
  want_image = np.zeros([side, side, 3], np.float32)
  want_image[off:off + hi - lo, off:off + hi - lo] = image[lo:hi, lo:hi]
  np.testing.assert_array_equal(out_image, want_image)
  want_masks = np.zeros([len(keep), side, side], np.float32)
  want_masks[:, off:off + hi - lo, off:off + hi - lo] = (
      masks[keep][:, lo:hi, lo:hi])
  np.testing.assert_array_equal(out_masks, want_masks)
  want_kp = (keypoints[keep] - window[:2]) / (window[2:] - window[:2])
  want_kp[(want_kp < 0) | (want_kp > 1)] = NAN
  np.testing.assert_allclose(out_kp, want_kp, atol=1e-6)
  if scale == 0.5:
    # Window [0.25, 0.75]^2: box 1 (up to 0.2) is dropped, box 2 clipped.
    np.testing.assert_allclose(out_boxes, [[0, 0, 1, 1], [0.5, 0.5, 1, 1]],
                               atol=1e-6)


@pytest.mark.parametrize('scale, want_boxes', [
    # 8 x 4 image, output 8: scaled to 8 x 4, window [0, 0, 8/8, 8/4].
    (1.0, [[0.0, 0.0, 1.0, 0.5], [0.5, 0.25, 1.0, 0.5]]),
    # Scaled to 4 x 2: window [0, 0, 8/4, 8/2].
    (0.5, [[0.0, 0.0, 0.5, 0.25], [0.25, 0.125, 0.5, 0.25]]),
])
def test_scale_crop_and_pad_to_square_known(execute, scale, want_boxes):
  image = position_image(8, 4)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]], np.float32)

  def graph(image, boxes, labels, weights, masks, keypoints, confidences):
    return ap.random_scale_crop_and_pad_to_square(
        image, boxes, labels, weights, masks, keypoints, confidences,
        scale_min=scale, scale_max=scale, output_size=8)
  (out_image, out_boxes, out_labels, out_weights, out_masks, out_kp,
   out_conf) = execute(graph, [image, boxes, LABELS[:2], WEIGHTS[:2],
                               np.ones([2, 8, 4], np.float32),
                               np.array([[[1.0, 1.0]], [[0.5, 0.5]]],
                                        np.float32), WEIGHTS[:2] + 1])
  assert out_image.shape == (8, 8, 3)
  np.testing.assert_allclose(out_boxes, want_boxes, atol=1e-6)
  np.testing.assert_array_equal(out_labels, [1, 2])
  np.testing.assert_allclose(out_conf, [1.1, 1.2])
  # Keypoints follow the boxes' bottom-right / top-left corners.
  np.testing.assert_allclose(out_kp[:, 0], [want_boxes[0][2:],
                                            want_boxes[1][:2]], atol=1e-6)
  rows, cols = int(8 * scale), int(4 * scale)
  if scale == 1.0:   # No resampling at scale 1.
    np.testing.assert_allclose(out_image[:, :4], image)
  np.testing.assert_array_equal(out_image[rows:], 0.0)
  np.testing.assert_array_equal(out_image[:, cols:], 0.0)
  np.testing.assert_allclose(out_masks[:, :rows, :cols], 1.0)
  np.testing.assert_array_equal(out_masks[:, :, cols:], 0.0)


def test_scale_crop_and_pad_to_square_upscaled_invariants(execute):
  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(9)
    return [ap.random_scale_crop_and_pad_to_square(
        image, boxes, labels, weights, masks, keypoints, scale_min=1.5,
        scale_max=3.0, output_size=8) for _ in range(3)]
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      execute(graph, [position_image(12, 16), BOXES, LABELS, WEIGHTS,
                      position_masks(5, 12, 16), KEYPOINTS])):
    assert out_image.shape == (8, 8, 3)
    assert out_masks.shape[1:] == (8, 8)
    check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
    np.testing.assert_allclose(out_weights, WEIGHTS[out_labels - 1])
