"""utils/ops: pasting box-relative masks into the image, as the original."""
import numpy as np

from od_estimator.compat import ops


def _bilinear_paste(mask, box, height, width):
  """Plain numpy: sample `mask` (spanning `box`, normalized) at each image
  pixel the way crop_and_resize does (corner-aligned, 0 outside)."""
  mask_h, mask_w = mask.shape
  ymin, xmin, ymax, xmax = box
  box_h, box_w = max(ymax - ymin, 1e-4), max(xmax - xmin, 1e-4)
  top, left = -ymin / box_h, -xmin / box_w
  bottom, right = (1 - ymin) / box_h, (1 - xmin) / box_w
  out = np.zeros([height, width], np.float64)
  for i in range(height):
    y = top * (mask_h - 1) + i * (bottom - top) * (mask_h - 1) / (height - 1)
    for j in range(width):
      x = left * (mask_w - 1) + j * (right - left) * (mask_w - 1) / (
          width - 1)
      if not (0 <= y <= mask_h - 1 and 0 <= x <= mask_w - 1):
        continue
      y0, x0 = int(np.floor(y)), int(np.floor(x))
      y1, x1 = min(y0 + 1, mask_h - 1), min(x0 + 1, mask_w - 1)
      dy, dx = y - y0, x - x0
      top_row = mask[y0, x0] * (1 - dx) + mask[y0, x1] * dx
      bottom_row = mask[y1, x0] * (1 - dx) + mask[y1, x1] * dx
      out[i, j] = top_row * (1 - dy) + bottom_row * dy
  return out


def test_a_centered_box_holds_its_mask_pixel_for_pixel(execute):
  mask = np.random.RandomState(0).uniform(size=(1, 3, 3)).astype(np.float32)
  boxes = np.array([[0.25, 0.25, 0.75, 0.75]], np.float32)
  image = execute(lambda m, b: ops.reframe_box_masks_to_image_masks(
      m, b, 5, 5), [mask, boxes])
  np.testing.assert_allclose(image[0, 1:4, 1:4], mask[0], rtol=1e-6)
  image[0, 1:4, 1:4] = 0
  assert not image.any()


def test_random_boxes_equal_a_numpy_bilinear_paste(execute):
  rng = np.random.RandomState(1)
  masks = rng.uniform(size=(4, 6, 5)).astype(np.float32)
  corners = np.sort(rng.uniform(-0.1, 1.1, size=(4, 2, 2)), axis=1)
  boxes = np.stack([corners[:, 0, 0], corners[:, 0, 1], corners[:, 1, 0],
                    corners[:, 1, 1]], axis=1).astype(np.float32)
  image = execute(lambda m, b: ops.reframe_box_masks_to_image_masks(
      m, b, 11, 13), [masks, boxes], dynamic=True)
  assert image.shape == (4, 11, 13) and image.dtype == np.float32
  for mask, box, pasted in zip(masks, boxes, image):
    np.testing.assert_allclose(pasted, _bilinear_paste(mask, box, 11, 13),
                               atol=1e-5)


def test_no_masks_give_an_empty_stack(execute):
  image = execute(lambda m, b: ops.reframe_box_masks_to_image_masks(
      m, b, 7, 9), [np.zeros([0, 3, 3], np.float32),
                    np.zeros([0, 4], np.float32)], dynamic=True)
  assert image.shape == (0, 7, 9)


def test_uint8_masks_use_nearest_and_stay_uint8(execute):
  mask = np.array([[[0, 1], [1, 1]]], np.uint8)
  image = execute(lambda m, b: ops.reframe_box_masks_to_image_masks(
      m, b, 4, 4), [mask, np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)])
  assert image.dtype == np.uint8
  assert set(np.unique(image)) <= {0, 1} and image[0, -1, -1] == 1
  assert image[0, 0, 0] == 0
