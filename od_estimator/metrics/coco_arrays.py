"""COCO evaluation of numpy arrays through faster-coco-eval's C++ core.

The evaluators keep each image's groundtruth and detections as arrays.
Here they are grouped by (image, category) in numpy, their IoUs computed
as pycocotools computes them (box IoU in float64 with its operations, mask
IoU with pycocotools.mask.iou), and faster-coco-eval's C++ matching and
accumulation run on the groups: the numbers of COCO / loadRes / COCOeval
without one dict per detection, the COCO index or faster-coco-eval's
Python preparation (most of its time).

Columns (numpy arrays of one length, in the order the images were added):
  groundtruth: image_id, category_id, bbox [G, 4] COCO x, y, width, height,
    area, iscrowd; for 'segm' also segmentation (G RLE dicts).
  detections: image_id, category_id, score, area; bbox [D, 4] for 'bbox',
    segmentation (D RLE dicts) for 'segm'.
"""
import contextlib
import gc

import numpy as np

# pycocotools' largest maxDets: detections of an (image, category) past it
# are not evaluated.
_MAX_DETECTIONS = 100


def available():
  """Whether the installed faster-coco-eval has the C++ entry points."""
  try:
    from faster_coco_eval import faster_eval_api_cpp  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return all(hasattr(faster_eval_api_cpp, name) for name in
             ('COCOevalEvaluateAccumulate', 'Dataset'))


def box_iou(detections, groundtruth, iscrowd):
  """IoU of row pairs: pycocotools' bbIou, element by element.

  Args:
    detections: [N, 4] COCO boxes.
    groundtruth: [N, 4] COCO boxes.
    iscrowd: [N] bool: the union is the detection's area.

  Returns:
    [N] float64, bit for bit what pycocotools.mask.iou gives.
  """
  dx, dy, dw, dh = detections.T
  gx, gy, gw, gh = groundtruth.T
  width = np.minimum(dw + dx, gw + gx) - np.maximum(dx, gx)
  height = np.minimum(dh + dy, gh + gy) - np.maximum(dy, gy)
  intersection = width * height
  detection_area = dw * dh
  union = np.where(iscrowd, detection_area,
                   detection_area + gw * gh - intersection)
  with np.errstate(divide='ignore', invalid='ignore'):
    iou = intersection / union
  return np.where((width > 0) & (height > 0), iou, 0.0)


def _groups(keys):
  """(starts, counts) of the runs of equal rows in sorted [N, 2] keys."""
  if not len(keys):
    return np.zeros(0, np.int64), np.zeros(0, np.int64)
  change = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
  starts = np.concatenate([[0], change])
  return starts, np.diff(np.append(starts, len(keys)))


def _dataset(keys, starts, counts, dicts):
  """faster-coco-eval's C++ Dataset of the per-(image, category) dicts."""
  from faster_coco_eval import faster_eval_api_cpp  # pylint: disable=g-import-not-at-top
  dataset = faster_eval_api_cpp.Dataset()
  dataset.load_tuple((len(starts), [
      (float(image), float(category), dicts[start:start + count])
      for (image, category), start, count in zip(
          keys[starts].tolist(), starts.tolist(), counts.tolist())]))
  return dataset


def _pair_ious(iou_type, groundtruth, detections, gt_keys, gt_starts,
               gt_counts, dt_keys, dt_starts, dt_counts):
  """{(image, category): [detections, groundtruth] IoU lists}, for the pairs
  with both; detections in score order."""
  gt_index = {key: i for i, key in enumerate(map(tuple,
                                                 gt_keys[gt_starts].tolist()))}
  pairs = [(key, gt_index.get(key), start, count) for key, start, count in
           zip(map(tuple, dt_keys[dt_starts].tolist()), dt_starts.tolist(),
               dt_counts.tolist())]
  pairs = [pair for pair in pairs if pair[1] is not None]
  ious = {}
  if iou_type == 'bbox':
    # One flat IoU per (detection, groundtruth) pair of a group.
    if not pairs:
      return ious
    group = np.array([g for _, g, _, _ in pairs])
    dt_start = np.array([s for _, _, s, _ in pairs])
    dt_count = np.array([c for _, _, _, c in pairs])
    g_start, g_count = gt_starts[group], gt_counts[group]
    sizes = dt_count * g_count
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    flat = np.arange(offsets[-1]) - np.repeat(offsets[:-1], sizes)
    dt_rows = np.repeat(dt_start, sizes) + flat // np.repeat(g_count, sizes)
    gt_rows = np.repeat(g_start, sizes) + flat % np.repeat(g_count, sizes)
    values = box_iou(detections['bbox'][dt_rows], groundtruth['bbox'][gt_rows],
                     groundtruth['iscrowd'][gt_rows]).tolist()
    for (key, _, _, count), g, begin, end in zip(
        pairs, g_count.tolist(), offsets[:-1].tolist(), offsets[1:].tolist()):
      ious[key] = [values[row:row + g] for row in range(begin, end, g)]
    return ious
  from pycocotools import mask as mask_utils  # pylint: disable=g-import-not-at-top
  dt_rles, gt_rles = detections['segmentation'], groundtruth['segmentation']
  crowd = groundtruth['iscrowd'].astype(np.uint8).tolist()
  for key, g, start, count in pairs:
    g_start, g_count = int(gt_starts[g]), int(gt_counts[g])
    ious[key] = mask_utils.iou(
        dt_rles[start:start + count], gt_rles[g_start:g_start + g_count],
        crowd[g_start:g_start + g_count]).tolist()
  return ious


@contextlib.contextmanager
def _garbage_collection_paused():
  """Without the cyclic collector: the hundreds of thousands of small lists
  and dicts built here hold no cycles, yet trigger collections that scan
  them all (a third of the time)."""
  enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if enabled:
      gc.enable()


def evaluate(image_ids, category_ids, groundtruth, detections,
             iou_type='bbox'):
  """Matches and accumulates as COCOeval.evaluate() and accumulate().

  Args:
    image_ids: the evaluated COCO image ids (ints).
    category_ids: the label map's category ids.
    groundtruth: the groundtruth columns (module docstring).
    detections: the detection columns.
    iou_type: 'bbox' or 'segm'.

  Returns:
    A faster-coco-eval COCOeval_faster holding params and eval (precision,
    recall, scores); summarize() fills its stats.
  """
  with _garbage_collection_paused():
    return _evaluate(image_ids, category_ids, groundtruth, detections,
                     iou_type)


def _evaluate(image_ids, category_ids, groundtruth, detections, iou_type):
  from faster_coco_eval import COCOeval_faster  # pylint: disable=g-import-not-at-top
  from faster_coco_eval import faster_eval_api_cpp  # pylint: disable=g-import-not-at-top
  coco_eval = COCOeval_faster(None, None, iou_type,
                              print_function=lambda *args: None)
  params = coco_eval.params
  params.imgIds = sorted({int(i) for i in image_ids})
  params.catIds = sorted({int(c) for c in category_ids})
  groundtruth, detections = _sorted(groundtruth, detections)
  gt_keys = np.stack([groundtruth['image_id'], groundtruth['category_id']], 1)
  dt_keys = np.stack([detections['image_id'], detections['category_id']], 1)
  gt_starts, gt_counts = _groups(gt_keys)
  dt_starts, dt_counts = _groups(dt_keys)
  # The C++ side reads id, area, iscrowd, ignore and score of each; ignore
  # is iscrowd as in COCOeval._prepare.
  crowd = groundtruth['iscrowd'].astype(int).tolist()
  gt_dicts = [{'id': i, 'area': a, 'iscrowd': c, 'ignore': c}
              for i, a, c in zip(groundtruth['id'].tolist(),
                                 groundtruth['area'].tolist(), crowd)]
  dt_dicts = [{'id': i, 'score': s, 'area': a}
              for i, s, a in zip(detections['id'].tolist(),
                                 detections['score'].tolist(),
                                 detections['area'].tolist())]
  pair_ious = _pair_ious(iou_type, groundtruth, detections, gt_keys,
                         gt_starts, gt_counts, dt_keys, dt_starts, dt_counts)
  category_index = {c: k for k, c in enumerate(params.catIds)}
  image_index = {i: k for k, i in enumerate(params.imgIds)}
  empty = []
  ious = [[empty] * len(params.catIds) for _ in params.imgIds]
  for (image, category), values in pair_ious.items():
    ious[image_index[image]][category_index[category]] = values
  coco_eval._paramsEval = params  # pylint: disable=protected-access
  coco_eval.eval = faster_eval_api_cpp.COCOevalEvaluateAccumulate(
      params, ious, _dataset(gt_keys, gt_starts, gt_counts, gt_dicts),
      _dataset(dt_keys, dt_starts, dt_counts, dt_dicts), params.imgIds,
      params.catIds, True)
  return coco_eval


def _sorted(groundtruth, detections):
  """The columns ordered by (image, category), detections then by falling
  score (stable, as COCOeval's mergesort) and cut to the first 100 of each
  (image, category); 1-based ids in the order given (as loadRes numbers
  them) added."""
  groundtruth = dict(groundtruth, id=np.arange(
      1, len(groundtruth['image_id']) + 1))
  detections = dict(detections, id=np.arange(
      1, len(detections['image_id']) + 1))
  gt_order = np.lexsort((groundtruth['category_id'], groundtruth['image_id']))
  dt_order = np.lexsort((-np.asarray(detections['score'], np.float64),
                         detections['category_id'], detections['image_id']))
  keys = np.stack([detections['image_id'][dt_order],
                   detections['category_id'][dt_order]], 1)
  starts, counts = _groups(keys)
  rank = np.arange(len(keys)) - np.repeat(starts, counts)
  dt_order = dt_order[rank < _MAX_DETECTIONS]
  return (_take(groundtruth, gt_order), _take(detections, dt_order))


def _take(columns, order):
  taken = {}
  for name, values in columns.items():
    if isinstance(values, list):
      taken[name] = [values[i] for i in order.tolist()]
    else:
      taken[name] = np.asarray(values)[order]
  return taken
