"""Tests for the crop / pad augmentations against hand-computed geometry."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_crop as ac

NAN = np.nan


def _position_image(height, width):
  """[H, W, 3] image whose channels hold the row, the column and 1.

  A cropped / padded output then tells where each pixel came from.
  """
  rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  return np.stack([rows, cols, np.ones_like(rows)], -1).astype(np.float32)


def _position_masks(num, height, width):
  """masks[i, r, c] = 1000 i + 100 r + c."""
  rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  return np.stack([1000.0 * i + 100.0 * rows + cols
                   for i in range(num)]).reshape(
                       num, height, width).astype(np.float32)


def _check_consistent(boxes, *per_box, clipped=True):
  """Same number of rows everywhere; boxes ordered (and in [0, 1])."""
  for tensor in per_box:
    assert tensor.shape[0] == boxes.shape[0]
  assert boxes.shape[1:] == (4,)
  assert np.all(boxes[:, 0] <= boxes[:, 2])
  assert np.all(boxes[:, 1] <= boxes[:, 3])
  if clipped:
    assert np.all(boxes >= 0.0) and np.all(boxes <= 1.0)


def _np_crop(window, boxes, overlap_thresh):
  """Reference crop: kept indices and clipped boxes in the window frame."""
  wy0, wx0, wy1, wx1 = window
  keep = []
  for i, (y0, x0, y1, x1) in enumerate(boxes):
    if y0 >= wy1 or x0 >= wx1 or y1 <= wy0 or x1 <= wx0:
      continue
    inter = ((min(y1, wy1) - max(y0, wy0)) * (min(x1, wx1) - max(x0, wx0)))
    if inter / ((y1 - y0) * (x1 - x0)) >= overlap_thresh:
      keep.append(i)
  keep = np.array(keep, np.int64)
  scale = np.array([wy1 - wy0, wx1 - wx0] * 2)
  new = (boxes[keep] - np.array([wy0, wx0] * 2)) / scale
  return keep, np.clip(new, 0.0, 1.0)


# Boxes with coordinates off the pixel grid of 12 x 16 images, so no crop
# border ever coincides with a box side.
BOXES = np.array([[0.03, 0.05, 0.41, 0.33],
                  [0.22, 0.47, 0.88, 0.91],
                  [0.55, 0.02, 0.97, 0.29],
                  [0.61, 0.63, 0.73, 0.77],
                  [0.13, 0.71, 0.29, 0.97]], np.float32)
LABELS = np.array([1, 2, 3, 4, 5], np.int32)
WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4, 0.5], np.float32)
KEYPOINTS = np.array([[[0.1, 0.1], [0.4, 0.3]],
                      [[0.3, 0.5], [0.8, 0.9]],
                      [[0.6, 0.1], [0.9, 0.2]],
                      [[0.65, 0.7], [0.7, 0.75]],
                      [[0.2, 0.8], [0.25, 0.9]]], np.float32)


def test_crop_with_full_area_keeps_whole_image(execute):
  image = _position_image(6, 6)
  # Box 0 sticks out of the image: kept (2/3 of it inside) and clipped.
  boxes = np.array([[-0.1, 0.2, 0.5, 1.2], [0.5, 0.5, 1.0, 1.0]], np.float32)
  masks = _position_masks(2, 6, 6)
  keypoints = np.array([[[0.5, 0.5], [1.5, 0.5]],
                        [[0.6, 0.7], [0.8, 0.9]]], np.float32)
  visibilities = np.array([[True, True], [False, True]])
  # Instance 0 has one DensePose point inside and one below the image.
  dp_num = np.array([2, 1], np.int32)
  dp_ids = np.array([[3, 4], [5, 0]], np.int32)
  dp_coords = np.array([[[0.5, 0.5, 0.1, 0.2], [1.5, 0.5, 0.3, 0.4]],
                        [[0.7, 0.7, 0.5, 0.6], [0.0, 0.0, 0.0, 0.0]]],
                       np.float32)

  def graph(*t):
    # Square image, aspect ratio 1 and area 1: the only valid crop is the
    # image itself (also the fallback if sampling failed).
    return ac.random_crop_image(
        *t, min_object_covered=0.0, aspect_ratio_range=(1.0, 1.0),
        area_range=(1.0, 1.0))
  (out_image, out_boxes, out_labels, out_weights, out_conf, out_scores,
   out_masks, out_mask_weights, out_kp, out_vis, out_dp_num, out_dp_ids,
   out_dp_coords) = execute(graph, [
       image, boxes, LABELS[:2], WEIGHTS[:2], WEIGHTS[:2] + 1,
       np.eye(2, dtype=np.float32), masks, WEIGHTS[:2] + 2, keypoints,
       visibilities, dp_num, dp_ids, dp_coords])
  np.testing.assert_array_equal(out_image, image)
  np.testing.assert_allclose(out_boxes, [[0.0, 0.2, 0.5, 1.0],
                                         [0.5, 0.5, 1.0, 1.0]], atol=1e-6)
  np.testing.assert_array_equal(out_labels, [1, 2])
  np.testing.assert_allclose(out_weights, [0.1, 0.2])
  np.testing.assert_allclose(out_conf, [1.1, 1.2])
  np.testing.assert_array_equal(out_scores, np.eye(2))
  np.testing.assert_array_equal(out_masks, masks)
  np.testing.assert_allclose(out_mask_weights, [2.1, 2.2])
  # The keypoint at y = 1.5 leaves the image: NaN and no longer visible.
  np.testing.assert_allclose(out_kp, [[[0.5, 0.5], [NAN, NAN]],
                                      [[0.6, 0.7], [0.8, 0.9]]], atol=1e-6)
  np.testing.assert_array_equal(out_vis, [[True, False], [False, True]])
  # DensePose: instance 0 keeps only its first point; the widest instance
  # has one point left, so the point axis shrinks to 1.
  np.testing.assert_array_equal(out_dp_num, [1, 1])
  np.testing.assert_array_equal(out_dp_ids, [[3], [5]])
  np.testing.assert_allclose(out_dp_coords, [[[0.5, 0.5, 0.1, 0.2]],
                                             [[0.7, 0.7, 0.5, 0.6]]],
                             atol=1e-6)


def test_random_coef_one_returns_inputs_unchanged(execute):
  image = _position_image(5, 7)
  boxes = np.array([[-0.2, 0.1, 0.5, 1.3]], np.float32)
  keypoints = np.array([[[2.0, 0.5]]], np.float32)

  def graph(image, boxes, labels, weights, keypoints):
    return ac.random_crop_image(image, boxes, labels, weights,
                                keypoints=keypoints, area_range=(0.1, 0.2),
                                random_coef=1.0)
  out = execute(graph, [image, boxes, LABELS[:1], WEIGHTS[:1], keypoints])
  # uniform[0, 1) > 1.0 never holds, so nothing is cropped or clipped.
  for got, want in zip(out, [image, boxes, LABELS[:1], WEIGHTS[:1],
                             keypoints]):
    np.testing.assert_array_equal(got, want)


def test_unclipped_crop_keeps_keypoints_and_visibilities(execute):
  keypoints = np.array([[[0.5, 0.5], [1.5, 0.5]]], np.float32)
  visibilities = np.array([[True, True]])

  def graph(image, boxes, labels, keypoints, visibilities):
    return ac.random_crop_image(
        image, boxes, labels, None, keypoints=keypoints,
        keypoint_visibilities=visibilities, aspect_ratio_range=(1.0, 1.0),
        area_range=(1.0, 1.0), clip_boxes=False)
  _, out_boxes, _, out_kp, out_vis = execute(
      graph, [_position_image(4, 4), np.array([[-0.5, 0.0, 0.5, 1.0]],
                                              np.float32), LABELS[:1],
              keypoints, visibilities])
  # Whole-image crop without clipping: everything passes through (the
  # original drops the visibilities here; we return them unchanged).
  np.testing.assert_allclose(out_boxes, [[-0.5, 0.0, 0.5, 1.0]])
  np.testing.assert_allclose(out_kp, keypoints)
  np.testing.assert_array_equal(out_vis, visibilities)


def test_graph_seed_makes_crops_reproducible(execute):
  def graph(image, boxes, labels):
    tf.compat.v1.set_random_seed(11)
    return ac.random_crop_image(image, boxes, labels, None,
                                min_object_covered=0.0, area_range=(0.1, 0.5))
  inputs = [_position_image(12, 16), BOXES, LABELS]
  first, second = execute(graph, inputs), execute(graph, inputs)
  for a, b in zip(first, second):
    np.testing.assert_array_equal(a, b)


def test_random_crops_match_numpy_reference(execute):
  height, width, overlap_thresh = 12, 16, 0.5
  masks = _position_masks(5, height, width)

  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(3)
    return [ac.random_crop_image(
        image, boxes, labels, weights, masks=masks, keypoints=keypoints,
        min_object_covered=0.1, area_range=(0.2, 0.6),
        aspect_ratio_range=(0.5, 2.0), overlap_thresh=overlap_thresh)
            for _ in range(4)]
  results = execute(graph, [_position_image(height, width), BOXES, LABELS,
                            WEIGHTS, masks, KEYPOINTS])
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      results):
    _check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
    # Where the crop is, read from the position-encoded pixels.
    row0, col0 = int(out_image[0, 0, 0]), int(out_image[0, 0, 1])
    crop_h, crop_w = out_image.shape[:2]
    window = np.array([row0 / height, col0 / width,
                       (row0 + crop_h) / height, (col0 + crop_w) / width])
    keep, want_boxes = _np_crop(window, BOXES.astype(np.float64),
                                overlap_thresh)
    np.testing.assert_allclose(out_boxes, want_boxes, atol=1e-5)
    np.testing.assert_array_equal(out_labels, LABELS[keep])
    np.testing.assert_allclose(out_weights, WEIGHTS[keep])
    np.testing.assert_array_equal(
        out_masks, masks[keep][:, row0:row0 + crop_h, col0:col0 + crop_w])
    want_kp = (KEYPOINTS[keep] - window[:2]) / (window[2:] - window[:2])
    outside = np.any((want_kp < 0) | (want_kp > 1), axis=2, keepdims=True)
    want_kp = np.where(outside, NAN, want_kp)
    np.testing.assert_allclose(out_kp, want_kp, atol=1e-5)


def test_center_pad_moves_boxes_to_known_coordinates(execute):
  image = _position_image(4, 4)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]], np.float32)
  masks = np.ones([2, 4, 4], np.float32)
  keypoints = np.array([[[0.5, 0.5]], [[0.0, 1.0]]], np.float32)
  dp_coords = np.array([[[0.0, 0.0, 0.3, 0.4]], [[1.0, 1.0, 0.5, 0.6]]],
                       np.float32)

  def graph(image, boxes, masks, keypoints, dp_coords):
    return ac.random_pad_image(
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
    outputs = [ac.random_pad_image(image, boxes, pad_color=[-1.0] * 3)
               for _ in range(3)]
    outputs += [ac.random_absolute_pad_image(
        image, boxes, max_height_padding=3, max_width_padding=4,
        pad_color=[-1.0] * 3) for _ in range(3)]
    # Default colour: the image mean.
    outputs.append(ac.random_pad_image(image, boxes, min_image_size=[6, 7],
                                       max_image_size=[6, 7]))
    return outputs
  image = _position_image(height, width)
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


def test_center_crop_to_aspect_ratio_drops_outside_boxes(execute):
  image = _position_image(4, 8)
  # Aspect 1 on a 4 x 8 image keeps columns 2..5: window x in [0.25, 0.75].
  boxes = np.array([[0.0, 0.0, 0.5, 0.2],     # completely left of the crop
                    [0.25, 0.3, 0.75, 0.7],   # inside
                    [0.0, 0.1, 1.0, 0.5],     # 0.25 / 0.4 = 62% inside
                    [0.0, 0.1, 1.0, 0.3]],    # 0.05 / 0.2 = 25% < 30%
                   np.float32)
  masks = _position_masks(4, 4, 8)
  keypoints = np.array([[[0.1, 0.1]], [[0.5, 0.5]], [[0.5, 0.1]],
                        [[0.5, 0.2]]], np.float32)

  def graph(image, boxes, labels, weights, masks, keypoints):
    clipped = ac.random_crop_to_aspect_ratio(
        image, boxes, labels, weights, masks=masks, keypoints=keypoints,
        aspect_ratio=1.0, center_crop=True)
    unclipped = ac.random_crop_to_aspect_ratio(
        image, boxes, labels, weights, keypoints=keypoints, aspect_ratio=1.0,
        clip_boxes=False, center_crop=True)
    return clipped, unclipped
  ((out_image, out_boxes, out_labels, out_weights, out_masks, out_kp),
   (_, raw_boxes, _, _, raw_kp)) = execute(
       graph, [image, boxes, LABELS[:4], WEIGHTS[:4], masks, keypoints])
  np.testing.assert_array_equal(out_image, image[:, 2:6])
  # x' = (x - 0.25) / 0.5.
  np.testing.assert_allclose(out_boxes, [[0.25, 0.1, 0.75, 0.9],
                                         [0.0, 0.0, 1.0, 0.5]], atol=1e-6)
  np.testing.assert_array_equal(out_labels, [2, 3])
  np.testing.assert_allclose(out_weights, [0.2, 0.3])
  np.testing.assert_array_equal(out_masks, masks[1:3, :, 2:6])
  # Box 2's keypoint maps to x = (0.1 - 0.25) / 0.5 = -0.3: outside.
  np.testing.assert_allclose(out_kp, [[[0.5, 0.5]], [[NAN, NAN]]], atol=1e-6)
  np.testing.assert_allclose(raw_boxes, [[0.25, 0.1, 0.75, 0.9],
                                         [0.0, -0.3, 1.0, 0.5]], atol=1e-6)
  np.testing.assert_allclose(raw_kp, [[[0.5, 0.5]], [[0.5, -0.3]]], atol=1e-6)


def test_random_crop_to_aspect_ratio_shape(execute):
  def graph(image, boxes, labels):
    tf.compat.v1.set_random_seed(1)
    return [ac.random_crop_to_aspect_ratio(image, boxes, labels, None,
                                           aspect_ratio=0.5)
            for _ in range(3)]
  for out_image, out_boxes, out_labels in execute(
      graph, [_position_image(10, 20), BOXES, LABELS]):
    # Wider than 0.5: all 10 rows kept, round(10 * 0.5) = 5 columns.
    assert out_image.shape == (10, 5, 3)
    _check_consistent(out_boxes, out_labels)


def test_pad_to_aspect_ratio_known_size(execute):
  image = _position_image(4, 8)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)

  def graph(image, boxes, masks, keypoints):
    return ac.random_pad_to_aspect_ratio(
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


def test_random_crop_pad_image(execute):
  height, width = 12, 16

  def graph(image, boxes, labels, weights, confidences):
    tf.compat.v1.set_random_seed(2)
    return [ac.random_crop_pad_image(
        image, boxes, labels, weights, confidences,
        min_object_covered=0.1, min_padded_size_ratio=(2.0, 2.0),
        max_padded_size_ratio=(2.0, 2.0), pad_color=[-1.0] * 3)
            for _ in range(3)]
  for out_image, out_boxes, out_labels, out_weights, out_conf in execute(
      graph, [_position_image(height, width), BOXES, LABELS, WEIGHTS,
              WEIGHTS]):
    # Padded to exactly twice the ORIGINAL size (min = max ratio).
    assert out_image.shape == (24, 32, 3)
    _check_consistent(out_boxes, out_labels, out_weights, out_conf)
    np.testing.assert_allclose(out_weights, out_conf)
    # The kept boxes cover (mostly) content, never only padding.
    content = out_image[:, :, 2] == 1.0
    for ymin, xmin, ymax, xmax in out_boxes:
      rows = slice(int(ymin * 24), max(int(np.ceil(ymax * 24)), 1))
      cols = slice(int(xmin * 32), max(int(np.ceil(xmax * 32)), 1))
      assert content[rows, cols].any()


def test_ssd_random_crop_invariants(execute):
  masks = _position_masks(5, 12, 16)

  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(4)
    # Default (SSD paper) settings: seven cases.
    crops = [ac.ssd_random_crop(image, boxes, labels, weights, masks=masks,
                                keypoints=keypoints) for _ in range(2)]
    # Per-case random_coef values that are both >= 1: never a crop.
    never = ac.ssd_random_crop(image, boxes, labels, weights,
                               min_object_covered=(0.0, 0.5),
                               aspect_ratio_range=((0.5, 2.0),) * 2,
                               area_range=((0.1, 0.2),) * 2,
                               overlap_thresh=(0.0, 0.5),
                               clip_boxes=(True, True), random_coef=(1.0, 1.5))
    return crops, never
  image = _position_image(12, 16)
  crops, never = execute(graph, [image, BOXES, LABELS, WEIGHTS, masks,
                                 KEYPOINTS])
  for got, want in zip(never, [image, BOXES, LABELS, WEIGHTS]):
    np.testing.assert_array_equal(got, want)
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      crops):
    _check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
    assert out_masks.shape[1:] == out_image.shape[:2]
    # Each kept label still carries its own weight.
    np.testing.assert_allclose(out_weights, WEIGHTS[out_labels - 1])


def test_ssd_random_crop_pad_invariants(execute):
  def graph(image, boxes, labels, weights):
    tf.compat.v1.set_random_seed(6)
    # Different area ranges per case: one tf.switch_case branch each.
    return [ac.ssd_random_crop_pad(
        image, boxes, labels, weights, min_object_covered=(0.1, 0.5),
        aspect_ratio_range=((0.5, 2.0),) * 2,
        area_range=((0.1, 1.0), (0.3, 1.0)),
        overlap_thresh=(0.1, 0.5), clip_boxes=(True, True),
        random_coef=(0.15, 0.15), min_padded_size_ratio=((1.0, 1.0),) * 2,
        max_padded_size_ratio=((2.0, 2.0),) * 2, pad_color=(None, None))]
  for out_image, out_boxes, out_labels, out_weights in execute(
      graph, [_position_image(12, 16), BOXES, LABELS, WEIGHTS]):
    # Padded size between 1x and 2x the input size.
    assert 12 <= out_image.shape[0] < 24 and 16 <= out_image.shape[1] < 32
    _check_consistent(out_boxes, out_labels, out_weights)
    np.testing.assert_allclose(out_weights, WEIGHTS[out_labels - 1])


# Two SSD cases keep graph construction fast.
_SSD_CASES = dict(min_object_covered=(0.0, 0.5),
                  area_range=((0.1, 1.0),) * 2, overlap_thresh=(0.0, 0.5),
                  clip_boxes=(True,) * 2, random_coef=(0.15,) * 2)


def test_ssd_crop_fixed_aspect_ratio_produces_ratio(execute):
  ratios = [1.0, 2.0, 0.7]

  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(7)
    return [ac.ssd_random_crop_fixed_aspect_ratio(
        image, boxes, labels, weights, masks=masks, keypoints=keypoints,
        aspect_ratio=ratio, **_SSD_CASES) for ratio in ratios]
  for aspect_ratio, (out_image, out_boxes, out_labels, out_weights, out_masks,
                     out_kp) in zip(ratios, execute(
                         graph, [_position_image(12, 16), BOXES, LABELS,
                                 WEIGHTS, _position_masks(5, 12, 16),
                                 KEYPOINTS])):
    crop_h, crop_w = out_image.shape[:2]
    # The final crop keeps one side and rounds the other to the ratio.
    assert (crop_w == round(crop_h * aspect_ratio) or
            crop_h == round(crop_w / aspect_ratio))
    assert out_masks.shape[1:] == (crop_h, crop_w)
    _check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)


def test_ssd_crop_pad_fixed_aspect_ratio_is_square(execute):
  def graph(image, boxes, labels, weights, masks):
    tf.compat.v1.set_random_seed(8)
    return [ac.ssd_random_crop_pad_fixed_aspect_ratio(
        image, boxes, labels, weights, masks=masks, aspect_ratio=1.0,
        aspect_ratio_range=((0.5, 2.0),) * 2, **_SSD_CASES)
            for _ in range(2)]
  for out_image, out_boxes, out_labels, out_weights, out_masks in execute(
      graph, [_position_image(12, 16), BOXES, LABELS, WEIGHTS,
              _position_masks(5, 12, 16)]):
    # Padding to aspect 1 makes both sides round(scale * longer side).
    assert out_image.shape[0] == out_image.shape[1]
    assert out_masks.shape[1:] == out_image.shape[:2]
    _check_consistent(out_boxes, out_labels, out_weights, out_masks)


@pytest.mark.parametrize('scale', [0.5, 1.0, 1.5])
def test_square_crop_by_scale_known_windows(execute, scale):
  image = _position_image(16, 16)
  boxes = np.array([[0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 0.2, 0.2],
                    [0.5, 0.5, 0.9, 0.9]], np.float32)
  masks = _position_masks(3, 16, 16)
  keypoints = np.array([[[0.5, 0.5]], [[0.1, 0.1]], [[0.8, 0.8]]],
                       np.float32)

  def graph(image, boxes, labels, weights, confidences, masks, keypoints):
    return ac.random_square_crop_by_scale(
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
  keep, want_boxes = _np_crop(window, boxes.astype(np.float64), 0.0)
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
  image = _position_image(8, 4)
  boxes = np.array([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]], np.float32)

  def graph(image, boxes, labels, weights, masks, keypoints, confidences):
    return ac.random_scale_crop_and_pad_to_square(
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
    return [ac.random_scale_crop_and_pad_to_square(
        image, boxes, labels, weights, masks, keypoints, scale_min=1.5,
        scale_max=3.0, output_size=8) for _ in range(3)]
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      execute(graph, [_position_image(12, 16), BOXES, LABELS, WEIGHTS,
                      _position_masks(5, 12, 16), KEYPOINTS])):
    assert out_image.shape == (8, 8, 3)
    assert out_masks.shape[1:] == (8, 8)
    _check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
    np.testing.assert_allclose(out_weights, WEIGHTS[out_labels - 1])


def test_empty_boxes_everywhere(execute):
  boxes = np.zeros([0, 4], np.float32)
  labels = np.zeros([0], np.int32)
  weights = np.zeros([0], np.float32)
  masks = np.zeros([0, 12, 16], np.float32)
  keypoints = np.zeros([0, 3, 2], np.float32)
  one_case = dict(min_object_covered=(0.5,), area_range=((0.1, 1.0),),
                  overlap_thresh=(0.5,), clip_boxes=(True,),
                  random_coef=(0.0,))

  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(10)
    per_box = (boxes, labels, weights)
    return [
        ac.random_crop_image(image, *per_box, masks=masks,
                             keypoints=keypoints, random_coef=0.5),
        ac.random_pad_image(image, boxes, masks, keypoints),
        ac.random_absolute_pad_image(image, boxes, masks, keypoints,
                                     max_height_padding=2,
                                     max_width_padding=2),
        ac.random_crop_pad_image(image, *per_box),
        ac.random_crop_to_aspect_ratio(image, *per_box, masks=masks,
                                       keypoints=keypoints),
        ac.random_pad_to_aspect_ratio(image, boxes, masks, keypoints),
        ac.ssd_random_crop(image, *per_box, masks=masks, keypoints=keypoints,
                           aspect_ratio_range=((0.5, 2.0),), **one_case),
        ac.ssd_random_crop_fixed_aspect_ratio(image, *per_box, **one_case),
        ac.ssd_random_crop_pad_fixed_aspect_ratio(
            image, *per_box, aspect_ratio_range=((0.5, 2.0),), **one_case),
        ac.random_square_crop_by_scale(image, *per_box, masks=masks,
                                       keypoints=keypoints),
        # scale_min keeps the scaled 12 x 16 image at least one pixel high
        # (below 1 / 6 the resize target would be 0 rows, as in the original).
        ac.random_scale_crop_and_pad_to_square(image, *per_box, masks,
                                               keypoints, scale_min=0.5,
                                               output_size=8),
    ]
  for result in execute(graph, [_position_image(12, 16), boxes, labels,
                                weights, masks, keypoints]):
    out_image = result[0]
    assert out_image.ndim == 3 and out_image.shape[2] == 3
    assert result[1].shape == (0, 4)
    for tensor in result[2:]:
      assert tensor.shape[0] == 0
      if tensor.ndim == 3 and tensor.shape[2] != 2:   # masks follow image.
        assert tensor.shape[1:] == out_image.shape[:2]


def test_dynamic_shapes(execute):
  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(10)
    return (ac.random_crop_image(image, boxes, labels, weights, masks=masks,
                                 keypoints=keypoints, random_coef=0.3),
            ac.random_pad_image(image, boxes, masks, keypoints),
            ac.random_crop_to_aspect_ratio(image, boxes, labels, weights,
                                           masks=masks, keypoints=keypoints))
  crop, pad, aspect = execute(
      graph, [_position_image(12, 16), BOXES, LABELS, WEIGHTS,
              _position_masks(5, 12, 16), KEYPOINTS], dynamic=True)
  _check_consistent(*crop[1:])
  assert crop[4].shape[1:] == crop[0].shape[:2]
  _check_consistent(pad[1], pad[2], pad[3], clipped=False)
  assert pad[2].shape[1:] == pad[0].shape[:2]
  _check_consistent(*aspect[1:])
  assert aspect[0].shape == (12, 12, 3)


def test_bad_inputs():
  with tf.Graph().as_default():
    image2d = tf.zeros([4, 4])
    boxes = tf.zeros([1, 4])
    labels = tf.zeros([1], tf.int32)
    with pytest.raises(ValueError, match='3D'):
      ac.random_crop_to_aspect_ratio(image2d, boxes, labels, None)
    with pytest.raises(ValueError, match='3D'):
      ac.random_pad_to_aspect_ratio(image2d, boxes)
    with pytest.raises(ValueError, match='DensePose'):
      ac.random_crop_image(tf.zeros([4, 4, 3]), boxes, labels, None,
                           densepose_num_points=tf.ones([1], tf.int32))
