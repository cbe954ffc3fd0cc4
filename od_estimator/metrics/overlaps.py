"""How much detections overlap groundtruth, for the PASCAL-style evaluators.

Two measures with one interface: BOXES ([N, 4] absolute ymin, xmin, ymax,
xmax, float64) and MASKS ([N, H, W] uint8 0/1 masks of one image, float32
with the original's epsilon, as its np_mask_ops). Each gives
  iou(detections, groundtruth)       [N, M] intersection over union, and
  coverage(detections, groundtruth)  [N, M] intersection over the
                                     detection's area (group-of boxes).
"""
import collections

import numpy as np

Measure = collections.namedtuple('Measure', ['iou', 'coverage'])

# Keeps mask ratios finite for empty masks (the original's value).
_MASK_EPSILON = 1e-7
# Detections per float32 block of the mask intersection (bounds memory at
# 800 x 1365 images: 16 masks are 70 MB).
_MASK_CHUNK = 16


def _box_intersection(boxes1, boxes2):
  """[N, M] intersection areas of [N, 4] and [M, 4] boxes."""
  ymin1, xmin1, ymax1, xmax1 = np.split(boxes1, 4, axis=1)
  ymin2, xmin2, ymax2, xmax2 = np.split(boxes2, 4, axis=1)
  heights = np.minimum(ymax1, ymax2.T) - np.maximum(ymin1, ymin2.T)
  widths = np.minimum(xmax1, xmax2.T) - np.maximum(xmin1, xmin2.T)
  return np.maximum(heights, 0.) * np.maximum(widths, 0.)


def _box_area(boxes):
  return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _box_iou(boxes1, boxes2):
  intersection = _box_intersection(boxes1, boxes2)
  union = _box_area(boxes1)[:, None] + _box_area(boxes2)[None, :] - (
      intersection)
  return intersection / union


def _box_coverage(boxes, gt_boxes):
  return _box_intersection(boxes, gt_boxes) / _box_area(boxes)[:, None]


def _mask_area(masks):
  return masks.reshape(len(masks), -1).sum(axis=1, dtype=np.float32)


def _mask_intersection(masks1, masks2):
  """[N, M] float32 pixel counts both masks cover (exact below 2**24)."""
  flat2 = masks2.reshape(len(masks2), -1).astype(np.float32).T
  result = np.zeros([len(masks1), len(masks2)], np.float32)
  for start in range(0, len(masks1), _MASK_CHUNK):
    block = masks1[start:start + _MASK_CHUNK]
    result[start:start + len(block)] = block.reshape(
        len(block), -1).astype(np.float32) @ flat2
  return result


def _mask_iou(masks1, masks2):
  intersection = _mask_intersection(masks1, masks2)
  union = _mask_area(masks1)[:, None] + _mask_area(masks2)[None, :] - (
      intersection)
  return intersection / np.maximum(union, np.float32(_MASK_EPSILON))


def _mask_coverage(masks, gt_masks):
  return _mask_intersection(masks, gt_masks) / (
      _mask_area(masks)[:, None] + np.float32(_MASK_EPSILON))


BOXES = Measure(_box_iou, _box_coverage)
MASKS = Measure(_mask_iou, _mask_coverage)


def nms_order(regions, scores, iou_threshold, max_output_size,
              measure=BOXES):
  """Indices kept by greedy NMS, best score first (1.0 disables NMS)."""
  order = np.argsort(scores)[::-1]
  if iou_threshold >= 1.0:
    return order[:max_output_size]
  keep = []
  while order.size and len(keep) < max_output_size:
    keep.append(order[0])
    overlaps = measure.iou(regions[order[:1]], regions[order[1:]])[0]
    order = order[1:][overlaps <= iou_threshold]
  return np.array(keep, dtype=int)


def binary_masks(name, masks, evaluator='the evaluator', check_values=True):
  """`masks` as uint8, checked to hold only 0 and 1 (as the original).

  check_values=False leaves the values to a caller that reads them anyway
  (coco_masks.MaskCrops, coco_masks.encode_masks).

  Raises:
    ValueError: when masks is None, or not uint8 / bool of 0 and 1.
  """
  if masks is None:
    raise ValueError('%s needs %s.' % (evaluator, name))
  masks = np.asarray(masks)
  if masks.dtype not in (np.uint8, np.bool_) or (
      check_values and masks.size and masks.max() > 1):
    raise not_binary(name, masks)
  # A view, not a copy, of bool masks (the same bytes).
  return masks.view(np.uint8) if masks.dtype == np.bool_ else masks


def nonzero_masks(name, masks, evaluator='the evaluator', check_values=True):
  """`masks` as uint8 0/1, any positive value counting as the mask.

  As the original's COCO mask evaluator, which binarizes masks of any
  dtype (masks > 0) before encoding them. Masks already of 0 and 1 are
  returned without a copy. check_values=False returns uint8 masks as they
  are, for a caller that reads their values anyway and binarizes them
  itself (coco_masks.MaskCrops).

  Raises:
    ValueError: when masks is None.
  """
  if masks is None:
    raise ValueError('%s needs %s.' % (evaluator, name))
  masks = np.asarray(masks)
  if masks.dtype == np.bool_:
    return masks.view(np.uint8)
  if masks.dtype == np.uint8 and (
      not check_values or not masks.size or masks.max() <= 1):
    return masks
  return (masks > 0).view(np.uint8)


def not_binary(name, masks):
  """The ValueError for masks that are not uint8 / bool of 0 and 1."""
  return ValueError('%s must be uint8 (or bool) masks of 0 and 1; got %s '
                    'with values up to %s' % (
                        name, masks.dtype, masks.max() if masks.size else '-'))
