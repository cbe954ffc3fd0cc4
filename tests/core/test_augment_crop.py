"""Tests for the random crop augmentations against hand-computed geometry."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_crop as ac
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


def test_crop_with_full_area_keeps_whole_image(execute):
  image = position_image(6, 6)
  # Box 0 sticks out of the image: kept (2/3 of it inside) and clipped.
  boxes = np.array([[-0.1, 0.2, 0.5, 1.2], [0.5, 0.5, 1.0, 1.0]], np.float32)
  masks = position_masks(2, 6, 6)
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
  image = position_image(5, 7)
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
      graph, [position_image(4, 4), np.array([[-0.5, 0.0, 0.5, 1.0]],
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
  inputs = [position_image(12, 16), BOXES, LABELS]
  first, second = execute(graph, inputs), execute(graph, inputs)
  for a, b in zip(first, second):
    np.testing.assert_array_equal(a, b)


def test_random_crops_match_numpy_reference(execute):
  height, width, overlap_thresh = 12, 16, 0.5
  masks = position_masks(5, height, width)

  def graph(image, boxes, labels, weights, masks, keypoints):
    tf.compat.v1.set_random_seed(3)
    return [ac.random_crop_image(
        image, boxes, labels, weights, masks=masks, keypoints=keypoints,
        min_object_covered=0.1, area_range=(0.2, 0.6),
        aspect_ratio_range=(0.5, 2.0), overlap_thresh=overlap_thresh)
            for _ in range(4)]
  results = execute(graph, [position_image(height, width), BOXES, LABELS,
                            WEIGHTS, masks, KEYPOINTS])
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      results):
    check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
    # Where the crop is, read from the position-encoded pixels.
    row0, col0 = int(out_image[0, 0, 0]), int(out_image[0, 0, 1])
    crop_h, crop_w = out_image.shape[:2]
    window = np.array([row0 / height, col0 / width,
                       (row0 + crop_h) / height, (col0 + crop_w) / width])
    keep, want_boxes = np_crop(window, BOXES.astype(np.float64),
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


def test_center_crop_to_aspect_ratio_drops_outside_boxes(execute):
  image = position_image(4, 8)
  # Aspect 1 on a 4 x 8 image keeps columns 2..5: window x in [0.25, 0.75].
  boxes = np.array([[0.0, 0.0, 0.5, 0.2],     # completely left of the crop
                    [0.25, 0.3, 0.75, 0.7],   # inside
                    [0.0, 0.1, 1.0, 0.5],     # 0.25 / 0.4 = 62% inside
                    [0.0, 0.1, 1.0, 0.3]],    # 0.05 / 0.2 = 25% < 30%
                   np.float32)
  masks = position_masks(4, 4, 8)
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
      graph, [position_image(10, 20), BOXES, LABELS]):
    # Wider than 0.5: all 10 rows kept, round(10 * 0.5) = 5 columns.
    assert out_image.shape == (10, 5, 3)
    check_consistent(out_boxes, out_labels)


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
      graph, [position_image(height, width), BOXES, LABELS, WEIGHTS,
              WEIGHTS]):
    # Padded to exactly twice the ORIGINAL size (min = max ratio).
    assert out_image.shape == (24, 32, 3)
    check_consistent(out_boxes, out_labels, out_weights, out_conf)
    np.testing.assert_allclose(out_weights, out_conf)
    # The kept boxes cover (mostly) content, never only padding.
    content = out_image[:, :, 2] == 1.0
    for ymin, xmin, ymax, xmax in out_boxes:
      rows = slice(int(ymin * 24), max(int(np.ceil(ymax * 24)), 1))
      cols = slice(int(xmin * 32), max(int(np.ceil(xmax * 32)), 1))
      assert content[rows, cols].any()


def test_ssd_random_crop_invariants(execute):
  masks = position_masks(5, 12, 16)

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
  image = position_image(12, 16)
  crops, never = execute(graph, [image, BOXES, LABELS, WEIGHTS, masks,
                                 KEYPOINTS])
  for got, want in zip(never, [image, BOXES, LABELS, WEIGHTS]):
    np.testing.assert_array_equal(got, want)
  for out_image, out_boxes, out_labels, out_weights, out_masks, out_kp in (
      crops):
    check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)
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
      graph, [position_image(12, 16), BOXES, LABELS, WEIGHTS]):
    # Padded size between 1x and 2x the input size.
    assert 12 <= out_image.shape[0] < 24 and 16 <= out_image.shape[1] < 32
    check_consistent(out_boxes, out_labels, out_weights)
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
                         graph, [position_image(12, 16), BOXES, LABELS,
                                 WEIGHTS, position_masks(5, 12, 16),
                                 KEYPOINTS])):
    crop_h, crop_w = out_image.shape[:2]
    # The final crop keeps one side and rounds the other to the ratio.
    assert (crop_w == round(crop_h * aspect_ratio) or
            crop_h == round(crop_w / aspect_ratio))
    assert out_masks.shape[1:] == (crop_h, crop_w)
    check_consistent(out_boxes, out_labels, out_weights, out_masks, out_kp)


def test_ssd_crop_pad_fixed_aspect_ratio_is_square(execute):
  def graph(image, boxes, labels, weights, masks):
    tf.compat.v1.set_random_seed(8)
    return [ac.ssd_random_crop_pad_fixed_aspect_ratio(
        image, boxes, labels, weights, masks=masks, aspect_ratio=1.0,
        aspect_ratio_range=((0.5, 2.0),) * 2, **_SSD_CASES)
            for _ in range(2)]
  for out_image, out_boxes, out_labels, out_weights, out_masks in execute(
      graph, [position_image(12, 16), BOXES, LABELS, WEIGHTS,
              position_masks(5, 12, 16)]):
    # Padding to aspect 1 makes both sides round(scale * longer side).
    assert out_image.shape[0] == out_image.shape[1]
    assert out_masks.shape[1:] == out_image.shape[:2]
    check_consistent(out_boxes, out_labels, out_weights, out_masks)


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
        ap.random_pad_image(image, boxes, masks, keypoints),
        ap.random_absolute_pad_image(image, boxes, masks, keypoints,
                                     max_height_padding=2,
                                     max_width_padding=2),
        ac.random_crop_pad_image(image, *per_box),
        ac.random_crop_to_aspect_ratio(image, *per_box, masks=masks,
                                       keypoints=keypoints),
        ap.random_pad_to_aspect_ratio(image, boxes, masks, keypoints),
        ac.ssd_random_crop(image, *per_box, masks=masks, keypoints=keypoints,
                           aspect_ratio_range=((0.5, 2.0),), **one_case),
        ac.ssd_random_crop_fixed_aspect_ratio(image, *per_box, **one_case),
        ac.ssd_random_crop_pad_fixed_aspect_ratio(
            image, *per_box, aspect_ratio_range=((0.5, 2.0),), **one_case),
        ap.random_square_crop_by_scale(image, *per_box, masks=masks,
                                       keypoints=keypoints),
        # scale_min keeps the scaled 12 x 16 image at least one pixel high
        # (below 1 / 6 the resize target would be 0 rows, as in the original).
        ap.random_scale_crop_and_pad_to_square(image, *per_box, masks,
                                               keypoints, scale_min=0.5,
                                               output_size=8),
    ]
  for result in execute(graph, [position_image(12, 16), boxes, labels,
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
            ap.random_pad_image(image, boxes, masks, keypoints),
            ac.random_crop_to_aspect_ratio(image, boxes, labels, weights,
                                           masks=masks, keypoints=keypoints))
  crop, pad, aspect = execute(
      graph, [position_image(12, 16), BOXES, LABELS, WEIGHTS,
              position_masks(5, 12, 16), KEYPOINTS], dynamic=True)
  check_consistent(*crop[1:])
  assert crop[4].shape[1:] == crop[0].shape[:2]
  check_consistent(pad[1], pad[2], pad[3], clipped=False)
  assert pad[2].shape[1:] == pad[0].shape[:2]
  check_consistent(*aspect[1:])
  assert aspect[0].shape == (12, 12, 3)


def test_bad_inputs():
  with tf.Graph().as_default():
    image2d = tf.zeros([4, 4])
    boxes = tf.zeros([1, 4])
    labels = tf.zeros([1], tf.int32)
    with pytest.raises(ValueError, match='3D'):
      ac.random_crop_to_aspect_ratio(image2d, boxes, labels, None)
    with pytest.raises(ValueError, match='3D'):
      ap.random_pad_to_aspect_ratio(image2d, boxes)
    with pytest.raises(ValueError, match='DensePose'):
      ac.random_crop_image(tf.zeros([4, 4, 3]), boxes, labels, None,
                           densepose_num_points=tf.ones([1], tf.int32))
