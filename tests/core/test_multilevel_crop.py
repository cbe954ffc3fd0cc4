"""Pyramid level assignment and multi-level ROI crops, against numpy."""
import numpy as np
import pytest

from od_estimator.core import multilevel_crop
from od_estimator.core import spatial_transform_ops as ops
from tests.core import crop_and_resize_reference as reference


def _reference_levels(num_levels, unit_scale_index, image_ratio, boxes):
  """FPN section 4.2 as the original applies it, element by element."""
  levels = np.zeros(boxes.shape[:2], np.int32)
  for index in np.ndindex(*boxes.shape[:2]):
    ymin, xmin, ymax, xmax = boxes[index]
    side = np.sqrt((ymax - ymin) * (xmax - xmin)) * image_ratio
    level = (int(np.floor(np.log2(side))) + unit_scale_index if side > 0
             else 0)
    levels[index] = min(max(level, 0), num_levels - 1)
  return levels


def _boxes(seed, batch=2, num_boxes=9):
  rng = np.random.RandomState(seed)
  corners = rng.uniform(0.0, 1.0, [batch, num_boxes, 2, 2])
  boxes = np.concatenate([corners.min(axis=2), corners.max(axis=2)], axis=-1)
  boxes[:, 0] = [0.0, 0.0, 1.0, 1.0]     # The whole image.
  boxes[:, 1] = [0.5, 0.5, 0.5, 0.5]     # No area (padding): finest.
  boxes[:, 2] = [0.1, 0.1, 0.12, 0.13]   # Tiny: finest.
  return boxes.astype(np.float32)


@pytest.mark.parametrize('num_levels,unit_scale_index,image_ratio', [
    (5, 3, 640 / 224.0), (4, 2, 1.0), (3, 0, 4.0), (1, 0, 2.0)])
def test_levels_match_numpy(execute, num_levels, unit_scale_index,
                            image_ratio):
  boxes = _boxes(seed=num_levels)
  levels = execute(lambda b: multilevel_crop.fpn_feature_levels(
      num_levels, unit_scale_index, image_ratio, b), [boxes])
  np.testing.assert_array_equal(
      levels, _reference_levels(num_levels, unit_scale_index, image_ratio,
                                boxes))
  assert not levels[:, 1].any(), levels  # Padding goes to the finest.


def test_image_box_levels_use_the_image_size(execute):
  # A 448x448 image: a quarter-size box (112 pixels) sits one level below
  # the unit index 3 of 5 levels, the whole image one above (clipped at 4).
  boxes = np.array([[[0, 0, 0.25, 0.25], [0, 0, 1, 1], [0, 0, 0.5, 0.5]]],
                   np.float32)
  levels = execute(lambda b: multilevel_crop.image_box_levels(
      5, np.array([1, 448, 448, 3], np.int32), b), [boxes])
  np.testing.assert_array_equal(levels, [[2, 4, 3]])


def test_one_level_crops_every_box_from_it(execute):
  boxes = _boxes(seed=0)
  levels = execute(lambda b: multilevel_crop.image_box_levels(
      1, np.array([2, 64, 64, 3], np.int32), b), [boxes])
  np.testing.assert_array_equal(levels, np.zeros([2, 9]))


@pytest.mark.parametrize('crop_fn', [ops.native_crop_and_resize,
                                     ops.matmul_crop_and_resize])
def test_each_box_is_cropped_from_its_level(execute, crop_fn):
  rng = np.random.RandomState(4)
  maps = [rng.uniform(-1, 1, [2, size, size, 3]).astype(np.float32)
          for size in (16, 8, 4)]
  boxes = _boxes(seed=5)
  levels = rng.randint(0, 3, size=[2, 9]).astype(np.int32)
  crop_size = [3, 2]
  crops = execute(
      lambda m0, m1, m2, b, l: multilevel_crop.multilevel_crop_and_resize(
          crop_fn, [m0, m1, m2], b, l, crop_size),
      maps + [boxes, levels])
  per_level = [reference.crop_and_resize(m, boxes, crop_size) for m in maps]
  expected = np.stack(per_level)[levels, np.arange(2)[:, None],
                                 np.arange(9)[None, :]]
  np.testing.assert_allclose(crops, expected, atol=1e-5)


def test_one_map_is_cropped_directly(execute):
  rng = np.random.RandomState(6)
  image = rng.uniform(-1, 1, [2, 7, 9, 3]).astype(np.float32)
  boxes = _boxes(seed=7)
  crops = execute(lambda i, b: multilevel_crop.multilevel_crop_and_resize(
      ops.native_crop_and_resize, [i], b, None, [4, 4]), [image, boxes])
  np.testing.assert_allclose(
      crops, reference.crop_and_resize(image, boxes, [4, 4]), atol=1e-5)
