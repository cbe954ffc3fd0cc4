"""Images, boxes and reference checks shared by the crop / pad op tests."""
import numpy as np

NAN = np.nan


def position_image(height, width):
  """[H, W, 3] image whose channels hold the row, the column and 1.

  A cropped / padded output then tells where each pixel came from.
  """
  rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  return np.stack([rows, cols, np.ones_like(rows)], -1).astype(np.float32)


def position_masks(num, height, width):
  """masks[i, r, c] = 1000 i + 100 r + c."""
  rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  return np.stack([1000.0 * i + 100.0 * rows + cols
                   for i in range(num)]).reshape(
                       num, height, width).astype(np.float32)


def check_consistent(boxes, *per_box, clipped=True):
  """Same number of rows everywhere; boxes ordered (and in [0, 1])."""
  for tensor in per_box:
    assert tensor.shape[0] == boxes.shape[0]
  assert boxes.shape[1:] == (4,)
  assert np.all(boxes[:, 0] <= boxes[:, 2])
  assert np.all(boxes[:, 1] <= boxes[:, 3])
  if clipped:
    assert np.all(boxes >= 0.0) and np.all(boxes <= 1.0)


def np_crop(window, boxes, overlap_thresh):
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
