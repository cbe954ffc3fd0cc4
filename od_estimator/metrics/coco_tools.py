"""COCO metrics from numpy groundtruth and detections.

Two interchangeable backends compute the same numbers: `faster` (the
faster-coco-eval package, C++, the default) and `pycocotools` (the
reference implementation). Metric names are the original's.

The original's coco_tools API (COCOWrapper, COCOEvalWrapper, the
Export*ToCOCO functions) is od_estimator.compat.coco_tools.
"""
import collections
import contextlib
import io

import numpy as np

BACKENDS = ('faster', 'pycocotools')

# (name, index into COCOeval.stats), in the original's order.
COCO_METRIC_NAMES_AND_INDEX = (
    ('Precision/mAP', 0),
    ('Precision/mAP@.50IOU', 1),
    ('Precision/mAP@.75IOU', 2),
    ('Precision/mAP (small)', 3),
    ('Precision/mAP (medium)', 4),
    ('Precision/mAP (large)', 5),
    ('Recall/AR@1', 6),
    ('Recall/AR@10', 7),
    ('Recall/AR@100', 8),
    ('Recall/AR@100 (small)', 9),
    ('Recall/AR@100 (medium)', 10),
    ('Recall/AR@100 (large)', 11),
)


def boxes_to_coco_array(boxes, dtype=np.float64):
  """[N, 4] ymin, xmin, ymax, xmax → [N, 4] COCO x, y, width, height.

  The one conversion to COCO boxes. Widths and heights are computed in
  `dtype`: float64 by default (the numbers pycocotools would compute), the
  boxes' own dtype for None (as the original's COCO export functions).
  """
  boxes = np.asarray(boxes, dtype).reshape([-1, 4])
  ymin, xmin, ymax, xmax = boxes.T
  return np.stack([xmin, ymin, xmax - xmin, ymax - ymin], axis=1)


def boxes_to_coco(boxes, dtype=np.float64):
  """boxes_to_coco_array(boxes, dtype) as N [x, y, width, height] lists of
  Python floats."""
  return boxes_to_coco_array(boxes, dtype).astype(np.float64).tolist()


def _coco_and_eval(backend):
  if backend == 'faster':
    from faster_coco_eval import COCO, COCOeval_faster  # pylint: disable=g-import-not-at-top

    def make_eval(gt, dt, iou_type):
      return COCOeval_faster(gt, dt, iou_type, print_function=lambda *a: None)
    return COCO, make_eval
  if backend == 'pycocotools':
    from pycocotools.coco import COCO  # pylint: disable=g-import-not-at-top
    from pycocotools.cocoeval import COCOeval  # pylint: disable=g-import-not-at-top
    return COCO, COCOeval
  raise ValueError('Unknown COCO backend %r; choose one of %s' %
                   (backend, ', '.join(BACKENDS)))


def _per_category_stats(coco_eval, category_index):
  """The 12 summary numbers restricted to one category (-1 when undefined)."""
  precision = coco_eval.eval['precision'][:, :, category_index]  # [T, R, A, M]
  recall = coco_eval.eval['recall'][:, category_index]  # [T, A, M]
  iou_thresholds = np.asarray(coco_eval.params.iouThrs)

  def mean_valid(values):
    values = values[values > -1]
    return float(np.mean(values)) if values.size else -1.0

  def at_iou(threshold):
    return np.where(np.isclose(iou_thresholds, threshold))[0]

  # Area ranges: all, small, medium, large; max detections 1, 10, 100.
  return [
      mean_valid(precision[:, :, 0, 2]),
      mean_valid(precision[at_iou(0.5), :, 0, 2]),
      mean_valid(precision[at_iou(0.75), :, 0, 2]),
      mean_valid(precision[:, :, 1, 2]),
      mean_valid(precision[:, :, 2, 2]),
      mean_valid(precision[:, :, 3, 2]),
      mean_valid(recall[:, 0, 0]),
      mean_valid(recall[:, 0, 1]),
      mean_valid(recall[:, 0, 2]),
      mean_valid(recall[:, 1, 2]),
      mean_valid(recall[:, 2, 2]),
      mean_valid(recall[:, 3, 2]),
  ]


def compute_metrics(groundtruth, detections, iou_type='bbox',
                    include_metrics_per_category=False,
                    all_metrics_per_category=False, backend='faster',
                    super_categories=None):
  """Runs COCO evaluation.

  Args:
    groundtruth: COCO-format dict with 'images', 'annotations',
      'categories'.
    detections: list of COCO-format detection dicts (image_id, category_id,
      bbox or segmentation, score).
    iou_type: 'bbox' or 'segm'.
    include_metrics_per_category: add 'PerformanceByCategory/mAP/<name>'.
    all_metrics_per_category: add '<metric> ByCategory/<name>' for all 12.
    backend: 'faster' or 'pycocotools'.
    super_categories: optional {super-category: [category names]}: add
      'PerformanceBySuperCategory/<super-category>', the mean of its
      categories' mAP (-1 for a category without groundtruth counts as
      -1, as in the original).

  Returns:
    (summary metrics OrderedDict, per-category OrderedDict), names without
    the 'DetectionBoxes_' prefix.
  """
  coco_class, eval_class = _coco_and_eval(backend)
  with contextlib.redirect_stdout(io.StringIO()):
    coco_gt = coco_class()
    # The COCO tools add keys to the annotation and detection dicts (ignore,
    # area, id, segmentation) but change no nested value: copying the dicts
    # keeps the caller's intact at a fraction of a deep copy's cost.
    coco_gt.dataset = dict(groundtruth, annotations=[
        dict(a) for a in groundtruth['annotations']])
    coco_gt.createIndex()
    if detections:
      coco_dt = coco_gt.loadRes([dict(d) for d in detections])
    else:
      coco_dt = coco_class()
      coco_dt.dataset = {'images': groundtruth['images'], 'annotations': [],
                         'categories': groundtruth['categories']}
      coco_dt.createIndex()
    coco_eval = eval_class(coco_gt, coco_dt, iou_type)
    coco_eval.params.imgIds = sorted(img['id'] for img in
                                     groundtruth['images'])
    coco_eval.evaluate()
    coco_eval.accumulate()
  return summarize(coco_eval, groundtruth['categories'],
                   include_metrics_per_category, all_metrics_per_category,
                   super_categories)


def summarize(coco_eval, categories, include_metrics_per_category=False,
              all_metrics_per_category=False, super_categories=None):
  """compute_metrics' (summary, per-category) of an accumulated COCOeval
  (pycocotools' or faster-coco-eval's; see compute_metrics)."""
  with contextlib.redirect_stdout(io.StringIO()):
    coco_eval.summarize()
  summary = collections.OrderedDict(
      (name, float(coco_eval.stats[index]))
      for name, index in COCO_METRIC_NAMES_AND_INDEX)
  per_category = collections.OrderedDict()
  if not (include_metrics_per_category or all_metrics_per_category or
          super_categories):
    return summary, per_category
  names = {c['id']: c['name'] for c in categories}
  map_by_name = {}
  for index, category_id in enumerate(coco_eval.params.catIds):
    stats = _per_category_stats(coco_eval, index)
    name = names[category_id]
    map_by_name[name] = stats[0]
    if include_metrics_per_category or all_metrics_per_category:
      per_category['PerformanceByCategory/mAP/%s' % name] = stats[0]
    if all_metrics_per_category:
      for metric_name, stat_index in COCO_METRIC_NAMES_AND_INDEX:
        per_category['%s ByCategory/%s' % (metric_name, name)] = (
            stats[stat_index])
  for key, members in (super_categories or {}).items():
    per_category['PerformanceBySuperCategory/%s' % key] = float(np.mean(
        [map_by_name[name] for name in members]))
  return summary, per_category

