"""Tests for augment_self_concat and augment_downscale (values by hand)."""
import numpy as np
import pytest

from od_estimator.core import augment_downscale
from od_estimator.core import augment_self_concat
from od_estimator.core import preprocessor
from od_estimator.core import preprocessor_cache
from od_estimator.core import standard_fields as fields

IMAGE_2X3 = np.arange(1, 7, dtype=np.float32).reshape([2, 3, 1])
BOXES = np.array([[0.0, 0.0, 0.5, 1.0], [0.5, 0.2, 1.0, 0.6]], np.float32)
LABELS = np.array([1, 2], np.int32)
WEIGHTS = np.array([1.0, 0.5], np.float32)
KEYPOINTS = np.array([[[0.2, 0.4]], [[0.6, 0.8]]], np.float32)


def _self_concat(execute, vertical, horizontal, masks=None, boxes=BOXES,
                 **extra):
  inputs = [IMAGE_2X3, boxes, LABELS, WEIGHTS, KEYPOINTS]
  if masks is not None:
    inputs.append(masks)

  def graph_fn(image, boxes, labels, weights, keypoints, *masks):
    return augment_self_concat.random_self_concat_image(
        image, boxes, labels, weights, masks=masks[0] if masks else None,
        keypoints=keypoints, concat_vertical_probability=vertical,
        concat_horizontal_probability=horizontal, **extra)
  return execute(graph_fn, inputs)


def test_self_concat_vertical_doubles_height_halves_box_y(execute):
  image, boxes, labels, weights, keypoints = _self_concat(execute, 1.0, 0.0)
  np.testing.assert_array_equal(
      image[:, :, 0], [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]])
  np.testing.assert_allclose(boxes, [[0.0, 0.0, 0.25, 1.0],
                                     [0.25, 0.2, 0.5, 0.6],
                                     [0.5, 0.0, 0.75, 1.0],
                                     [0.75, 0.2, 1.0, 0.6]])
  np.testing.assert_array_equal(labels, [1, 2, 1, 2])
  np.testing.assert_allclose(weights, [1.0, 0.5, 1.0, 0.5])
  np.testing.assert_allclose(keypoints[:, 0], [[0.1, 0.4], [0.3, 0.8],
                                               [0.6, 0.4], [0.8, 0.8]])


def test_self_concat_horizontal_doubles_width_halves_box_x(execute):
  image, boxes, labels, _, keypoints = _self_concat(execute, 0.0, 1.0)
  np.testing.assert_array_equal(image[:, :, 0], [[1, 2, 3, 1, 2, 3],
                                                 [4, 5, 6, 4, 5, 6]])
  np.testing.assert_allclose(boxes, [[0.0, 0.0, 0.5, 0.5],
                                     [0.5, 0.1, 1.0, 0.3],
                                     [0.0, 0.5, 0.5, 1.0],
                                     [0.5, 0.6, 1.0, 0.8]])
  np.testing.assert_array_equal(labels, [1, 2, 1, 2])
  np.testing.assert_allclose(keypoints[:, 0], [[0.2, 0.2], [0.6, 0.4],
                                               [0.2, 0.7], [0.6, 0.9]])


def test_self_concat_both_quadruples_instances_masks_follow(execute):
  masks = np.zeros([2, 2, 3], np.float32)
  masks[0, 0, :] = 1.0
  masks[1, 1, 1] = 1.0
  # The boxes are the masks' extents.
  boxes = np.array([[0.0, 0.0, 0.5, 1.0], [0.5, 1 / 3, 1.0, 2 / 3]],
                   np.float32)
  image, out_boxes, labels, _, out_masks, _ = _self_concat(
      execute, 1.0, 1.0, masks=masks, boxes=boxes)
  assert image.shape == (4, 6, 1)
  assert out_boxes.shape == (8, 4) and labels.tolist() == [1, 2] * 4
  assert out_masks.shape == (8, 4, 6)
  # Each mask's extent still equals its box: masks and boxes stay in step.
  for mask, box in zip(out_masks, out_boxes):
    rows = np.nonzero(mask.any(axis=1))[0]
    cols = np.nonzero(mask.any(axis=0))[0]
    np.testing.assert_allclose(
        [rows[0] / 4, cols[0] / 6, (rows[-1] + 1) / 4, (cols[-1] + 1) / 6],
        box, atol=1e-6)
  # Vertical first, then horizontal: the last copy is in the bottom right.
  np.testing.assert_allclose(out_boxes[7], [0.75, 4 / 6, 1.0, 5 / 6],
                             atol=1e-6)


def test_self_concat_never(execute):
  image, boxes, labels, weights, keypoints = _self_concat(execute, 0.0, 0.0)
  np.testing.assert_array_equal(image, IMAGE_2X3)
  np.testing.assert_allclose(boxes, BOXES)
  np.testing.assert_array_equal(labels, LABELS)
  np.testing.assert_allclose(keypoints, KEYPOINTS)


def test_self_concat_through_preprocess_with_confidences(execute):
  def graph_fn(image, boxes, labels, weights, confidences):
    return preprocessor.preprocess(
        {fields.InputDataFields.image: image[None],
         fields.InputDataFields.groundtruth_boxes: boxes,
         fields.InputDataFields.groundtruth_classes: labels,
         fields.InputDataFields.groundtruth_weights: weights,
         fields.InputDataFields.groundtruth_confidences: confidences},
        [(preprocessor.random_self_concat_image,
          {'concat_vertical_probability': 1.0,
           'concat_horizontal_probability': 0.0})],
        preprocessor.get_default_func_arg_map(include_label_confidences=True))
  out = execute(graph_fn, [IMAGE_2X3, BOXES, LABELS, WEIGHTS,
                           np.array([0.9, 0.8], np.float32)])
  assert out[fields.InputDataFields.image].shape == (1, 4, 3, 1)
  np.testing.assert_allclose(
      out[fields.InputDataFields.groundtruth_confidences],
      [0.9, 0.8, 0.9, 0.8])
  assert out[fields.InputDataFields.groundtruth_boxes].shape == (4, 4)


def test_downscale_to_target_pixels(execute):
  image = np.random.RandomState(0).rand(40, 20, 3).astype(np.float32)
  masks = np.zeros([2, 40, 20], np.float32)
  masks[0, :20] = 1.0

  def graph_fn(image, masks):
    # min = max - 1: the target is exactly 200 pixels (40x20 = 800 > 200).
    return augment_downscale.random_downscale_to_target_pixels(
        image, masks, min_target_pixels=200, max_target_pixels=201)
  out_image, out_masks = execute(graph_fn, [image, masks])
  # sqrt(200 / 800) = 0.5 -> 20 x 10, aspect ratio kept.
  assert out_image.shape == (20, 10, 3)
  # Bilinear by exactly 2 without aligned corners samples the top-left
  # pixel of each 2x2 block.
  np.testing.assert_allclose(out_image, image[::2, ::2], atol=1e-5)
  assert out_masks.shape == (2, 20, 10)
  np.testing.assert_array_equal(out_masks[0, :10], 1.0)
  np.testing.assert_array_equal(out_masks[0, 10:], 0.0)


@pytest.mark.parametrize('kwargs', [
    {'min_target_pixels': 1000, 'max_target_pixels': 2000},  # image smaller
    {'min_target_pixels': 200, 'max_target_pixels': 201, 'random_coef': 1.0},
])
def test_downscale_keeps_image(execute, kwargs):
  image = np.ones([40, 20, 3], np.float32)

  def graph_fn(image):
    return augment_downscale.random_downscale_to_target_pixels(image,
                                                               **kwargs)
  out, = execute(graph_fn, [image])
  np.testing.assert_array_equal(out, image)


@pytest.mark.parametrize('name', ['min_target_pixels', 'max_target_pixels'])
def test_downscale_rejects_non_positive_targets(name):
  with pytest.raises(ValueError, match='must be positive'):
    augment_downscale.random_downscale_to_target_pixels(
        np.ones([4, 4, 3], np.float32), **{name: 0})


def test_downscale_through_preprocess_with_masks(execute):
  def graph_fn(image, masks):
    return preprocessor.preprocess(
        {fields.InputDataFields.image: image,
         fields.InputDataFields.groundtruth_instance_masks: masks},
        [(preprocessor.random_downscale_to_target_pixels,
          {'min_target_pixels': 200, 'max_target_pixels': 201})],
        preprocessor.get_default_func_arg_map(include_instance_masks=True))
  out = execute(graph_fn, [np.ones([1, 40, 20, 3], np.float32),
                           np.ones([0, 40, 20], np.float32)])
  assert out[fields.InputDataFields.image].shape == (1, 20, 10, 3)
  assert out[fields.InputDataFields.groundtruth_instance_masks].shape == (
      0, 20, 10)


def test_both_ops_with_unknown_shapes(execute):
  def graph_fn(image, boxes, labels, masks):
    image, boxes, labels, masks = preprocessor.random_self_concat_image(
        image, boxes, labels, masks=masks, concat_vertical_probability=1.0,
        concat_horizontal_probability=1.0)
    return preprocessor.random_downscale_to_target_pixels(
        image, masks, min_target_pixels=6, max_target_pixels=7) + (boxes,)
  image, masks, boxes = execute(
      graph_fn, [IMAGE_2X3, BOXES, LABELS, np.ones([2, 2, 3], np.float32)],
      dynamic=True)
  # 4x6 = 24 pixels -> 6 pixels: scale 0.5 -> 2x3.
  assert image.shape == (2, 3, 1) and masks.shape == (8, 2, 3)
  assert boxes.shape == (8, 4)
