"""Tests for od_estimator.core.augment_geometry and augment_common."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import augment_geometry as geo

# A 2x3 single-channel image whose pixels are all different, so any
# reordering of rows or columns is visible.
IMAGE_2X3 = np.array([[1, 2, 3], [4, 5, 6]], np.float32)[:, :, None]
BOX = np.array([[0.1, 0.2, 0.5, 0.6]], np.float32)
# One instance, two keypoints (y, x).
KEYPOINTS = np.array([[[0.1, 0.2], [0.3, 0.4]]], np.float32)


def _mask_and_box(height, width, rows, cols):
  """Returns a [1, H, W] mask covering rows x cols and its normalized box."""
  mask = np.zeros([1, height, width], np.float32)
  mask[0, rows[0]:rows[1], cols[0]:cols[1]] = 1.0
  box = np.array([[rows[0] / height, cols[0] / width,
                   rows[1] / height, cols[1] / width]], np.float32)
  return mask, box


def _mask_extent(mask, height, width):
  """Normalized [ymin, xmin, ymax, xmax] of a mask's nonzero pixels."""
  rows = np.nonzero(mask.any(axis=1))[0]
  cols = np.nonzero(mask.any(axis=0))[0]
  return np.array([rows[0] / height, cols[0] / width,
                   (rows[-1] + 1) / height, (cols[-1] + 1) / width])


# ----------------------------------------------------------------------------
# random_horizontal_flip
# ----------------------------------------------------------------------------


def test_horizontal_flip_always(execute):
  masks = IMAGE_2X3[None, :, :, 0]
  visibilities = np.array([[True, False]])
  depths = np.array([[1.0, 2.0]], np.float32)
  depth_weights = np.array([[0.5, 0.25]], np.float32)

  def graph_fn(image, boxes, masks, keypoints, vis, depths, weights):
    outputs = geo.random_horizontal_flip(
        image, boxes, masks, keypoints, vis, None, None, depths, weights,
        keypoint_flip_permutation=[1, 0], probability=1.0)
    assert outputs[0].shape.as_list() == [2, 3, 1]
    return outputs

  (image, boxes, masks_out, keypoints, vis, depths_out,
   weights_out) = execute(graph_fn, [IMAGE_2X3, BOX, masks, KEYPOINTS,
                                     visibilities, depths, depth_weights])
  np.testing.assert_array_equal(image[:, :, 0], [[3, 2, 1], [6, 5, 4]])
  # xmin' = 1 - xmax = 0.4, xmax' = 1 - xmin = 0.8.
  np.testing.assert_allclose(boxes, [[0.1, 0.4, 0.5, 0.8]], atol=1e-6)
  np.testing.assert_array_equal(masks_out[0], [[3, 2, 1], [6, 5, 4]])
  # Keypoint 0 is the old keypoint 1 mirrored: (0.3, 1 - 0.4); keypoint 1 is
  # the old keypoint 0 mirrored: (0.1, 1 - 0.2).
  np.testing.assert_allclose(keypoints, [[[0.3, 0.6], [0.1, 0.8]]],
                             atol=1e-6)
  np.testing.assert_array_equal(vis, [[False, True]])
  np.testing.assert_array_equal(depths_out, [[2.0, 1.0]])
  np.testing.assert_array_equal(weights_out, [[0.25, 0.5]])


def test_horizontal_flip_never(execute):
  image, boxes, keypoints = execute(
      lambda i, b, k: geo.random_horizontal_flip(
          i, b, keypoints=k, keypoint_flip_permutation=[1, 0],
          probability=0.0),
      [IMAGE_2X3, BOX, KEYPOINTS])
  np.testing.assert_array_equal(image, IMAGE_2X3)
  np.testing.assert_array_equal(boxes, BOX)
  np.testing.assert_array_equal(keypoints, KEYPOINTS)


def test_horizontal_flip_dynamic_shapes_and_tensor_permutation(execute):
  def graph_fn(image, boxes, keypoints, permutation):
    return geo.random_horizontal_flip(
        image, boxes, keypoints=keypoints,
        keypoint_flip_permutation=permutation, probability=1.0)

  image, boxes, keypoints = execute(
      graph_fn, [IMAGE_2X3, BOX, KEYPOINTS, np.array([1, 0], np.int32)],
      dynamic=True)
  np.testing.assert_array_equal(image[:, :, 0], [[3, 2, 1], [6, 5, 4]])
  np.testing.assert_allclose(boxes, [[0.1, 0.4, 0.5, 0.8]], atol=1e-6)
  np.testing.assert_allclose(keypoints, [[[0.3, 0.6], [0.1, 0.8]]],
                             atol=1e-6)


def test_horizontal_flip_mask_stays_inside_box(execute):
  # Mask on rows 1..2, cols 0..1 of a 4x6 image; after the flip it must
  # occupy cols 4..5, exactly the flipped box [0.25, 4/6, 0.75, 1].
  mask, box = _mask_and_box(4, 6, (1, 3), (0, 2))
  image = np.zeros([4, 6, 3], np.float32)
  _, boxes, masks = execute(
      lambda i, b, m: geo.random_horizontal_flip(i, b, m, probability=1.0),
      [image, box, mask])
  np.testing.assert_allclose(boxes, [[0.25, 4 / 6, 0.75, 1.0]], atol=1e-6)
  np.testing.assert_allclose(_mask_extent(masks[0], 4, 6), boxes[0],
                             atol=1e-6)


def test_horizontal_flip_random_is_all_or_nothing(execute):
  masks = IMAGE_2X3[None, :, :, 0]

  def graph_fn(image, boxes, masks):
    return [geo.random_horizontal_flip(image, boxes, masks, seed=seed)
            for seed in range(16)]

  flipped_count = 0
  for image, boxes, masks_out in execute(graph_fn, [IMAGE_2X3, BOX, masks]):
    flipped = not np.array_equal(image, IMAGE_2X3)
    flipped_count += flipped
    expected_boxes = [[0.1, 0.4, 0.5, 0.8]] if flipped else BOX
    np.testing.assert_allclose(boxes, expected_boxes, atol=1e-6)
    np.testing.assert_array_equal(masks_out[0], image[:, :, 0])
  # 16 fair coins: both outcomes appear (all equal has chance 2 / 2**16).
  assert 0 < flipped_count < 16


def test_horizontal_flip_empty_boxes(execute):
  def graph_fn(image, boxes, masks, keypoints):
    return geo.random_horizontal_flip(
        image, boxes, masks, keypoints, keypoint_flip_permutation=[1, 0],
        probability=1.0)

  _, boxes, masks, keypoints = execute(
      graph_fn, [IMAGE_2X3, np.zeros([0, 4], np.float32),
                 np.zeros([0, 2, 3], np.float32),
                 np.zeros([0, 2, 2], np.float32)])
  assert boxes.shape == (0, 4)
  assert masks.shape == (0, 2, 3)
  assert keypoints.shape == (0, 2, 2)


def test_horizontal_flip_bad_arguments():
  with tf.Graph().as_default():
    image = tf.zeros([2, 3, 1])
    with pytest.raises(ValueError, match='keypoint_flip_permutation'):
      geo.random_horizontal_flip(image, keypoints=tf.zeros([1, 2, 2]))
    with pytest.raises(ValueError, match='DensePose'):
      geo.random_horizontal_flip(
          image, densepose_part_ids=tf.zeros([1, 3], tf.int32),
          densepose_surface_coords=tf.zeros([1, 3, 4]))


# ----------------------------------------------------------------------------
# random_vertical_flip
# ----------------------------------------------------------------------------


def test_vertical_flip_always(execute):
  masks = IMAGE_2X3[None, :, :, 0]

  def graph_fn(image, boxes, masks, keypoints):
    outputs = geo.random_vertical_flip(
        image, boxes, masks, keypoints, keypoint_flip_permutation=[],
        probability=1.0)
    assert outputs[0].shape.as_list() == [2, 3, 1]
    return outputs

  image, boxes, masks_out, keypoints = execute(
      graph_fn, [IMAGE_2X3, BOX, masks, KEYPOINTS])
  np.testing.assert_array_equal(image[:, :, 0], [[4, 5, 6], [1, 2, 3]])
  # ymin' = 1 - ymax = 0.5, ymax' = 1 - ymin = 0.9.
  np.testing.assert_allclose(boxes, [[0.5, 0.2, 0.9, 0.6]], atol=1e-6)
  np.testing.assert_array_equal(masks_out[0], [[4, 5, 6], [1, 2, 3]])
  # Empty permutation keeps the order: y' = 1 - y.
  np.testing.assert_allclose(keypoints, [[[0.9, 0.2], [0.7, 0.4]]],
                             atol=1e-6)


def test_vertical_flip_never_and_missing_permutation(execute):
  image, boxes = execute(
      lambda i, b: geo.random_vertical_flip(i, b, probability=0.0),
      [IMAGE_2X3, BOX])
  np.testing.assert_array_equal(image, IMAGE_2X3)
  np.testing.assert_array_equal(boxes, BOX)
  with tf.Graph().as_default():
    with pytest.raises(ValueError):
      geo.random_vertical_flip(tf.zeros([2, 3, 1]),
                               keypoints=tf.zeros([1, 2, 2]))


# ----------------------------------------------------------------------------
# random_rotation90
# ----------------------------------------------------------------------------


def test_rotation90_always(execute):
  masks = IMAGE_2X3[None, :, :, 0]
  image, boxes, masks_out, keypoints = execute(
      lambda i, b, m, k: geo.random_rotation90(
          i, b, m, k, keypoint_rot_permutation=[1, 0], probability=1.0),
      [IMAGE_2X3, BOX, masks, KEYPOINTS])
  # Counter-clockwise: the right column becomes the top row.
  np.testing.assert_array_equal(image[:, :, 0], [[3, 6], [2, 5], [1, 4]])
  np.testing.assert_array_equal(masks_out[0], np.rot90(masks[0]))
  # (y, x) -> (1 - x, y): ymin' = 1 - 0.6, xmin' = 0.1, ymax' = 1 - 0.2,
  # xmax' = 0.5.
  np.testing.assert_allclose(boxes, [[0.4, 0.1, 0.8, 0.5]], atol=1e-6)
  # Permuted then rotated: (0.3, 0.4) -> (0.6, 0.3), (0.1, 0.2) -> (0.8, 0.1).
  np.testing.assert_allclose(keypoints, [[[0.6, 0.3], [0.8, 0.1]]],
                             atol=1e-6)


def test_rotation90_mask_stays_inside_box(execute):
  mask, box = _mask_and_box(4, 6, (1, 3), (0, 3))
  image = np.zeros([4, 6, 3], np.float32)
  image_out, boxes, masks = execute(
      lambda i, b, m: geo.random_rotation90(i, b, m, probability=1.0),
      [image, box, mask])
  assert image_out.shape == (6, 4, 3)
  np.testing.assert_allclose(_mask_extent(masks[0], 6, 4), boxes[0],
                             atol=1e-6)


def test_rotation90_never_keeps_square_shape_static(execute):
  image = np.arange(9, dtype=np.float32).reshape([3, 3, 1])

  def graph_fn(image, boxes):
    outputs = geo.random_rotation90(image, boxes, probability=0.0)
    assert outputs[0].shape.as_list() == [3, 3, 1]
    return outputs

  image_out, boxes = execute(graph_fn, [image, BOX])
  np.testing.assert_array_equal(image_out, image)
  np.testing.assert_array_equal(boxes, BOX)


def test_rotation90_empty_boxes(execute):
  _, boxes, masks, keypoints = execute(
      lambda i, b, m, k: geo.random_rotation90(i, b, m, k, probability=1.0),
      [IMAGE_2X3, np.zeros([0, 4], np.float32),
       np.zeros([0, 2, 3], np.float32), np.zeros([0, 2, 2], np.float32)])
  assert boxes.shape == (0, 4)
  assert masks.shape == (0, 3, 2)
  assert keypoints.shape == (0, 2, 2)


# ----------------------------------------------------------------------------
# random_image_scale, random_resize_method, resize_image
# ----------------------------------------------------------------------------


def test_image_scale_fixed_ratio(execute):
  image = np.array([[[0.0], [3.0]]], np.float32)  # 1x2
  masks = np.array([[[0.0, 1.0]]], np.float32)  # 1 instance, 1x2
  image_out, masks_out = execute(
      lambda i, m: geo.random_image_scale(i, m, min_scale_ratio=2.0,
                                          max_scale_ratio=2.0),
      [image, masks])
  # 1x2 -> 2x4 with aligned corners: output column j samples input x = j/3,
  # so bilinear gives 3 * j / 3 = j.
  np.testing.assert_allclose(image_out[:, :, 0], [[0, 1, 2, 3]] * 2,
                             atol=1e-5)
  # Nearest with aligned corners rounds j/3: 0, 0, 1, 1.
  np.testing.assert_array_equal(masks_out, [[[0, 0, 1, 1]] * 2])


def test_image_scale_random_ratio_consistent(execute):
  image = np.ones([10, 20, 3], np.float32)
  masks = np.ones([2, 10, 20], np.float32)
  image_out, masks_out = execute(
      lambda i, m: geo.random_image_scale(i, m, 0.5, 2.0, seed=3),
      [image, masks])
  height, width = image_out.shape[:2]
  assert 5 <= height < 20 and 10 <= width < 40
  assert masks_out.shape == (2, height, width)
  # Both sides use the same factor (up to the floor).
  assert abs(width / 20.0 - height / 10.0) < 0.11


def test_image_scale_empty_masks(execute):
  _, masks = execute(
      lambda i, m: geo.random_image_scale(i, m, 2.0, 2.0),
      [np.ones([3, 4, 3], np.float32), np.zeros([0, 3, 4], np.float32)])
  assert masks.shape == (0, 6, 8)


def test_random_resize_method(execute):
  def graph_fn(image):
    resized = [geo.random_resize_method(image, [4, 6]) for _ in range(4)]
    for tensor in resized:
      assert tensor.shape.as_list() == [4, 6, 3]
    return resized

  # Every method maps a constant image to the same constant.
  for resized in execute(graph_fn, [np.full([2, 3, 3], 7.0, np.float32)]):
    np.testing.assert_allclose(resized, np.full([4, 6, 3], 7.0), atol=1e-4)


def test_resize_image_bilinear_and_masks(execute):
  image = np.array([[[0.0], [2.0]]], np.float32)  # 1x2
  masks = np.array([[[0.0, 1.0]]], np.float32)

  def graph_fn(image, masks):
    outputs = geo.resize_image(image, masks, new_height=1, new_width=4)
    assert outputs[0].shape.as_list() == [1, 4, 1]
    return outputs

  image_out, masks_out, shape = execute(graph_fn, [image, masks])
  # Without aligned corners output column j samples x = j * 2 / 4:
  # 0, 0.5, 1, 1.5 (clamped to 1) -> 0, 1, 2, 2.
  np.testing.assert_allclose(image_out[0, :, 0], [0, 1, 2, 2], atol=1e-6)
  # Nearest samples floor(j / 2): 0, 0, 1, 1.
  np.testing.assert_array_equal(masks_out, [[[0, 0, 1, 1]]])
  np.testing.assert_array_equal(shape, [1, 4, 1])


def test_resize_image_align_corners_without_masks(execute):
  image = np.array([[[0.0], [2.0]]], np.float32)
  outputs = execute(
      lambda i: geo.resize_image(i, new_height=1, new_width=3,
                                 align_corners=True),
      [image])
  assert len(outputs) == 2
  # Aligned corners: column j samples x = j / 2 -> 0, 1, 2.
  np.testing.assert_allclose(outputs[0][0, :, 0], [0, 1, 2], atol=1e-6)
  np.testing.assert_array_equal(outputs[1], [1, 3, 1])


def test_resize_image_methods_and_empty_masks(execute):
  image = np.array([[[0.0], [2.0]]], np.float32)
  image_out, masks, shape = execute(
      lambda i, m: geo.resize_image(i, m, 2, 4, method='nearest'),
      [image, np.zeros([0, 1, 2], np.float32)])
  np.testing.assert_array_equal(image_out[:, :, 0], [[0, 0, 2, 2]] * 2)
  assert masks.shape == (0, 2, 4)
  np.testing.assert_array_equal(shape, [2, 4, 1])
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='resize method'):
      geo.resize_image(tf.zeros([2, 2, 3]), method='lanczos3')


# ----------------------------------------------------------------------------
# random_jitter_boxes
# ----------------------------------------------------------------------------

JITTER_BOXES = np.array([[0.2, 0.2, 0.6, 0.4],
                         [0.0, 0.5, 0.1, 1.0],
                         [0.3, 0.3, 0.3, 0.3]], np.float32)


def test_jitter_zero_ratio_is_identity(execute):
  modes = list(geo._JITTER_RATIO_RANGES)
  outputs = execute(
      lambda b: [geo.random_jitter_boxes(b, 0.0, mode) for mode in modes],
      [JITTER_BOXES])
  for boxes in outputs:
    np.testing.assert_allclose(boxes, JITTER_BOXES, atol=1e-6)


def test_jitter_default_moves_edges_by_at_most_half_ratio(execute):
  boxes = execute(lambda b: geo.random_jitter_boxes(b, 0.1, seed=1),
                  [JITTER_BOXES])
  height = JITTER_BOXES[:, 2] - JITTER_BOXES[:, 0]
  width = JITTER_BOXES[:, 3] - JITTER_BOXES[:, 1]
  # Each edge sits at centre +- size * (1 +- 0.1) / 2, so it moves by at
  # most 0.05 * size (degenerate sizes count as 1e-6).
  limit = 0.05 * np.stack([height, width, height, width], 1) + 1e-6
  assert np.all(np.abs(boxes - JITTER_BOXES) <= limit)
  assert np.all((boxes >= 0.0) & (boxes <= 1.0))


def test_jitter_shrink_and_expand(execute):
  shrunk, expanded = execute(
      lambda b: [geo.random_jitter_boxes(b, 0.2, 'shrink', seed=2),
                 geo.random_jitter_boxes(b, 0.2, 'expand', seed=2)],
      [JITTER_BOXES])
  tol = 1e-6
  # Shrunk boxes lie inside the originals, expanded ones contain them.
  assert np.all(shrunk[:, :2] >= JITTER_BOXES[:, :2] - tol)
  assert np.all(shrunk[:, 2:] <= JITTER_BOXES[:, 2:] + tol)
  assert np.all(expanded[:, :2] <= JITTER_BOXES[:, :2] + tol)
  assert np.all(expanded[:, 2:] >= JITTER_BOXES[:, 2:] - tol)


@pytest.mark.parametrize('mode', ['expand_symmetric', 'shrink_symmetric',
                                  'expand_symmetric_xy',
                                  'shrink_symmetric_xy'])
def test_jitter_symmetric_keeps_centre(execute, mode):
  boxes = execute(lambda b: geo.random_jitter_boxes(b, 0.3, mode, seed=4),
                  [JITTER_BOXES])
  centre = lambda b: np.stack([b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]], 1) / 2
  # Box 1 touches the top and right borders; expanding it is limited so its
  # centre still does not move.
  np.testing.assert_allclose(centre(boxes), centre(JITTER_BOXES), atol=1e-6)
  if mode.endswith('_xy'):
    # Same factor on both axes for the first box (away from the borders).
    height_ratio = (boxes[0, 2] - boxes[0, 0]) / 0.4
    width_ratio = (boxes[0, 3] - boxes[0, 1]) / 0.2
    assert height_ratio == pytest.approx(width_ratio, abs=1e-5)


def test_jitter_empty_dynamic_and_bad_mode(execute):
  boxes = execute(lambda b: geo.random_jitter_boxes(b, 0.1),
                  [np.zeros([0, 4], np.float32)], dynamic=True)
  assert boxes.shape == (0, 4)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='jitter mode'):
      geo.random_jitter_boxes(tf.zeros([1, 4]), jitter_mode='wobble')


# ----------------------------------------------------------------------------
# random_black_patches
# ----------------------------------------------------------------------------


def test_black_patches_probability_zero_and_no_tries(execute):
  image = np.ones([10, 10, 3], np.float32)
  unchanged, no_tries = execute(
      lambda i: [geo.random_black_patches(i, probability=0.0),
                 geo.random_black_patches(i, max_black_patches=0)],
      [image])
  np.testing.assert_array_equal(unchanged, image)
  np.testing.assert_array_equal(no_tries, image)


def test_black_patches_single_patch(execute):
  image = np.full([10, 10, 3], 5.0, np.float32)

  def graph_fn(image):
    outputs = [geo.random_black_patches(image, 1, 1.0, 0.5, random_seed=s)
               for s in range(5)]
    assert outputs[0].shape.as_list() == [10, 10, 3]
    return outputs

  for patched in execute(graph_fn, [image]):
    black = patched[:, :, 0] == 0
    # Side floor(0.5 * 10) = 5 -> 25 black pixels in every channel, forming
    # one 5x5 square; everything else keeps its value.
    assert black.sum() == 25
    rows, cols = np.nonzero(black)
    assert rows.max() - rows.min() == 4 and cols.max() - cols.min() == 4
    assert np.all(patched[black] == 0)
    assert np.all(patched[~black] == 5.0)


def test_black_patches_many_patches_only_darken(execute):
  image = np.full([12, 8, 3], 2.0, np.float32)
  patched = execute(lambda i: geo.random_black_patches(i, 10, 1.0, 0.25),
                    [image], dynamic=True)
  # Side floor(0.25 * 8) = 2: at least one 2x2 patch, values are 0 or 2.
  assert (patched == 0).sum() >= 4 * 3
  assert set(np.unique(patched)) <= {0.0, 2.0}


# ----------------------------------------------------------------------------
# scale_boxes_to_pixel_coordinates
# ----------------------------------------------------------------------------


def test_scale_boxes_to_pixel_coordinates(execute):
  image = np.zeros([100, 200, 3], np.float32)
  image_out, boxes, keypoints = execute(
      geo.scale_boxes_to_pixel_coordinates, [image, BOX, KEYPOINTS],
      dynamic=True)
  np.testing.assert_array_equal(image_out, image)
  # y * 100, x * 200.
  np.testing.assert_allclose(boxes, [[10, 40, 50, 120]], rtol=1e-6)
  np.testing.assert_allclose(keypoints, [[[10, 40], [30, 80]]], rtol=1e-6)


def test_scale_boxes_to_pixel_coordinates_empty(execute):
  outputs = execute(geo.scale_boxes_to_pixel_coordinates,
                    [np.zeros([4, 5, 3], np.float32),
                     np.zeros([0, 4], np.float32)])
  assert len(outputs) == 2
  assert outputs[1].shape == (0, 4)


# ----------------------------------------------------------------------------
# augment_common helpers
# ----------------------------------------------------------------------------


def test_per_box_selection_keeps_tensors_aligned(execute):
  boxes = np.arange(12, dtype=np.float32).reshape([3, 4])
  labels = np.array([1, 2, 3], np.int32)
  masks = np.arange(3, dtype=np.float32).reshape([3, 1, 1])

  def graph_fn(boxes, labels, masks):
    keep = tf.constant([True, False, True])
    b, l, none, m = augment_common.boolean_mask_per_box(
        keep, [boxes, labels, None, masks])
    assert none is None  # None entries keep their slot.
    return b, l, m, augment_common.gather_per_box([2, 0], [labels])[0]

  b, l, m, gathered = execute(graph_fn, [boxes, labels, masks])
  np.testing.assert_array_equal(b, boxes[[0, 2]])
  np.testing.assert_array_equal(l, [1, 3])
  np.testing.assert_array_equal(m, masks[[0, 2]])
  np.testing.assert_array_equal(gathered, [3, 1])


def test_keypoint_window_helpers(execute):
  keypoints = np.array([[[0.2, 0.3], [0.9, 0.1]]], np.float32)
  window = np.array([0.0, 0.2, 0.5, 0.6], np.float32)
  framed, clipped, pruned = execute(
      lambda k, w: (augment_common.change_keypoint_coordinate_frame(k, w),
                    augment_common.clip_keypoints_to_window(k, w),
                    augment_common.prune_keypoints_outside_window(k, w)),
      [keypoints, window])
  # ((0.2 - 0) / 0.5, (0.3 - 0.2) / 0.4) = (0.4, 0.25);
  # ((0.9 - 0) / 0.5, (0.1 - 0.2) / 0.4) = (1.8, -0.25).
  np.testing.assert_allclose(framed, [[[0.4, 0.25], [1.8, -0.25]]],
                             atol=1e-6)
  np.testing.assert_allclose(clipped, [[[0.2, 0.3], [0.5, 0.2]]], atol=1e-6)
  np.testing.assert_allclose(pruned[0, 0], [0.2, 0.3], atol=1e-6)
  assert np.all(np.isnan(pruned[0, 1]))


def test_apply_with_random_selector_runs_one_case(execute):
  def graph_fn(x):
    return [augment_common.apply_with_random_selector(
        x, lambda t, case: t + float(case), num_cases=3, seed=s)
            for s in range(12)]

  values = {float(v) for v in execute(graph_fn, [np.float32(10.0)])}
  assert values <= {10.0, 11.0, 12.0}
  assert len(values) > 1
