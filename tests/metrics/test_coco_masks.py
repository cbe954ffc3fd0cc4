"""coco_masks: RLEs, areas and mask IoUs equal to pycocotools', from the
rectangles the masks occupy (8-byte rows and other widths, empty masks,
crowds)."""
import numpy as np
import pytest
from pycocotools import mask as mask_utils

from od_estimator.metrics import coco_masks

# Widths that are a multiple of 8 are read 8 bytes at a time; others not.
SHAPES = ((1, 1), (5, 1), (1, 7), (13, 9), (32, 17), (4, 8), (9, 16),
          (24, 40))


def _masks(rng, height, width, count=10):
  """Random masks with the corners cases: empty, full, empty leading or
  trailing rows and columns, a corner pixel, one pixel."""
  masks = (rng.uniform(size=(count, height, width)) < 0.4).astype(np.uint8)
  masks[0] = 0
  masks[1] = 1
  masks[2, :, :width // 2] = 0
  masks[3, :, (width + 1) // 2:] = 0
  masks[4, :height // 2] = 0
  masks[5, (height + 1) // 2:, :width // 3] = 0
  masks[6, 0, 0] = masks[6, -1, -1] = 1
  masks[7] = 0
  masks[7, height // 2, width // 2] = 1
  return masks


def _pycocotools_rles(masks):
  return mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0)))


def _text(rles):
  return [{'size': list(rle['size']), 'counts': rle['counts'].decode()}
          for rle in rles]


@pytest.mark.parametrize('height,width', SHAPES)
def test_encoding_and_areas_equal_pycocotools(height, width):
  masks = _masks(np.random.RandomState(height * 100 + width), height, width)
  expected = _pycocotools_rles(masks)
  assert coco_masks.encode_masks(masks) == _text(expected)
  crops = coco_masks.MaskCrops(masks)
  np.testing.assert_array_equal(crops.areas, mask_utils.area(expected))
  # Packed to bits, the crops still give the same RLEs (all or some rows).
  assert crops.pack().rles() == _text(expected)
  assert crops.rles([6, 0, 3]) == [_text(expected)[i] for i in (6, 0, 3)]
  x, y, w, h = mask_utils.toBbox(expected).T
  occupied = w > 0
  np.testing.assert_array_equal(crops.extents[occupied],
                                np.stack([y, y + h - 1, x, x + w - 1],
                                         1)[occupied])
  assert (crops.extents[~occupied] == -1).all()


@pytest.mark.parametrize('width', [5, 16])
def test_rows_on_either_side_of_block_edges(width):
  """Rows are first read in blocks: tops and bottoms just before, on and
  after a block's edge, and in a last, partial block."""
  block = coco_masks._BLOCK_ROWS  # pylint: disable=protected-access
  height = 2 * block + 5
  rows = (0, block - 1, block, block + 1, 2 * block - 1, 2 * block,
          height - 1)
  pairs = [(top, bottom) for top in rows for bottom in rows if top <= bottom]
  masks = np.zeros([len(pairs), height, width], np.uint8)
  for mask, (top, bottom) in zip(masks, pairs):
    mask[top, 1] = mask[bottom, width - 1] = 1
  crops = coco_masks.MaskCrops(masks)
  np.testing.assert_array_equal(crops.extents[:, :2], pairs)
  np.testing.assert_array_equal(crops.extents[:, 2:],
                                [[1, width - 1]] * len(pairs))
  assert crops.rles() == _text(_pycocotools_rles(masks))


@pytest.mark.parametrize('width', [16, 17])
def test_areas_of_masks_taller_than_255_rows(width):
  """Columns are counted a byte each (8 at a time) for up to 255 rows."""
  masks = _masks(np.random.RandomState(width), 600, width, count=8)
  masks[1, :, 3] = 0
  crops = coco_masks.MaskCrops(masks)
  expected = _pycocotools_rles(masks)
  np.testing.assert_array_equal(crops.areas, mask_utils.area(expected))
  assert crops.rles() == _text(expected)


@pytest.mark.parametrize('width', [9, 16])
def test_an_image_of_empty_masks_only(width):
  masks = np.zeros([3, 17, width], np.uint8)
  crops = coco_masks.MaskCrops(masks)
  assert (crops.extents == -1).all() and not crops.areas.any()
  assert crops.pack().rles() == _text(_pycocotools_rles(masks))
  full = coco_masks.MaskCrops(np.ones([1, 17, width], np.uint8))
  for pairs in coco_masks.intersections(crops, full, np.ones([3, 1], bool)):
    assert pairs.dtype == np.int64 and not len(pairs)


def test_bool_and_strided_masks_equal_uint8():
  masks = _masks(np.random.RandomState(0), 24, 40)
  expected = coco_masks.encode_masks(masks)
  assert coco_masks.encode_masks(masks.astype(bool)) == expected
  # A non-contiguous view is read a byte at a time.
  wide = np.zeros([10, 24, 48], np.uint8)
  wide[:, :, 4:44] = masks
  assert coco_masks.encode_masks(wide[:, :, 4:44]) == expected
  assert coco_masks.encode_masks(np.zeros([0, 4, 4], np.uint8)) == []


@pytest.mark.parametrize('width', [16, 17])
def test_values_other_than_0_and_1_are_refused(width):
  masks = np.zeros([3, 6, width], np.uint8)
  masks[2, 5, width - 1] = 2
  with pytest.raises(ValueError, match='detection_masks must be uint8'):
    coco_masks.MaskCrops(masks, 'detection_masks')
  with pytest.raises(ValueError, match='masks must be uint8'):
    coco_masks.encode_masks(masks.astype(np.float32))


@pytest.mark.parametrize('width', [16, 17])
def test_nonzero_reads_any_positive_value_as_the_mask(width):
  """nonzero=True (the mask evaluator's reading): values above 1, found in
  the first read, and other dtypes are the masks above 0."""
  binary = _masks(np.random.RandomState(width), 21, width)
  expected = coco_masks.MaskCrops(binary)
  for masks in (binary * np.uint8(200), binary * np.arange(
      1, 11, dtype=np.uint8)[:, None, None], binary.astype(np.float32) * 0.3):
    crops = coco_masks.MaskCrops(masks, nonzero=True)
    np.testing.assert_array_equal(crops.extents, expected.extents)
    np.testing.assert_array_equal(crops.areas, expected.areas)
    assert crops.pack().rles() == expected.rles()


@pytest.mark.parametrize('height,width', [(30, 40), (31, 37)])
def test_intersections_give_pycocotools_mask_iou(height, width):
  rng = np.random.RandomState(width)
  groundtruth = _masks(rng, height, width, count=8)
  detections = np.concatenate([
      np.roll(groundtruth, 2, axis=2), _masks(rng, height, width, count=8),
      groundtruth[:3] * (rng.uniform(size=(3, height, width)) < 0.7)
  ]).astype(np.uint8)
  crowd = (np.arange(8) % 3 == 1).astype(np.uint8)
  dt, gt = coco_masks.MaskCrops(detections), coco_masks.MaskCrops(
      groundtruth).pack()  # Groundtruth is kept packed by the evaluator.
  same_class = rng.uniform(size=(len(dt), len(gt))) < 0.8
  d, g, shared = coco_masks.intersections(dt, gt, same_class)
  assert (shared > 0).all() and same_class[d, g].all()
  expected = np.asarray(mask_utils.iou(
      _pycocotools_rles(detections), _pycocotools_rles(groundtruth),
      crowd), np.float64)
  ours = np.zeros_like(expected)
  union = np.where(crowd[g] == 1, dt.areas[d],
                   dt.areas[d] + gt.areas[g] - shared)
  ours[d, g] = shared / union.astype(np.float64)
  np.testing.assert_array_equal(np.where(same_class, ours, 0.0),
                                np.where(same_class, expected, 0.0))
