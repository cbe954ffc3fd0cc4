"""The original's COCOWrapper and COCOEvalWrapper: pycocotools' COCO and
COCOeval built from dicts, with metrics under the original's names.

Usage, as in the original's coco_tools:
  groundtruth = coco_tools.COCOWrapper(groundtruth_dict)
  detections = groundtruth.LoadAnnotations(detections_list)
  evaluator = coco_tools.COCOEvalWrapper(groundtruth, detections)
  summary_metrics, per_category_ap = evaluator.ComputeMetrics()
"""
import collections
import copy
import time

from pycocotools import coco
from pycocotools import cocoeval
from pycocotools import mask as mask_utils
import tensorflow as tf

from od_estimator.metrics import coco_tools

COCO_KEYPOINT_METRIC_NAMES_AND_INDEX = (
    ('Precision/mAP', 0),
    ('Precision/mAP@.50IOU', 1),
    ('Precision/mAP@.75IOU', 2),
    ('Precision/mAP (medium)', 3),
    ('Precision/mAP (large)', 4),
    ('Recall/AR@1', 5),
    ('Recall/AR@10', 6),
    ('Recall/AR@100', 7),
    ('Recall/AR@100 (medium)', 8),
    ('Recall/AR@100 (large)', 9),
)

_DETECTION_TYPES = ('bbox', 'segmentation')


class COCOWrapper(coco.COCO):
  """A pycocotools COCO dataset read from a dict instead of a file."""

  def __init__(self, dataset, detection_type='bbox'):
    """Indexes `dataset`.

    Args:
      dataset: COCO-format dict ('images', 'annotations', 'categories').
      detection_type: 'bbox' or 'segmentation', what LoadAnnotations reads.

    Raises:
      ValueError: for another detection_type.
    """
    if detection_type not in _DETECTION_TYPES:
      raise ValueError('Unsupported detection type: {}. Supported values '
                       'are: {}'.format(detection_type,
                                        list(_DETECTION_TYPES)))
    self._detection_type = detection_type
    coco.COCO.__init__(self)
    self.dataset = dataset
    self.createIndex()

  def LoadAnnotations(self, annotations):  # pylint: disable=invalid-name
    """Detection results (a list of dicts) as a COCO object over our images.

    Each result gets 'id' (from 1), 'iscrowd' 0 and 'area' (the box area,
    or the mask area and its 'bbox' for segmentation), in place.

    Raises:
      ValueError: if annotations is not a list or names an image the
        groundtruth lacks.
    """
    if not isinstance(annotations, list):
      raise ValueError('annotations is not a list of objects')
    results = coco.COCO()
    results.dataset['images'] = list(self.dataset['images'])
    tf.compat.v1.logging.info('Loading and preparing annotation results...')
    start = time.time()
    if not {a['image_id'] for a in annotations} <= set(self.getImgIds()):
      raise ValueError('Results do not correspond to current coco set')
    results.dataset['categories'] = copy.deepcopy(self.dataset['categories'])
    for index, annotation in enumerate(annotations):
      if self._detection_type == 'bbox':
        box = annotation['bbox']
        annotation['area'] = box[2] * box[3]
      else:
        annotation['area'] = mask_utils.area(annotation['segmentation'])
        annotation['bbox'] = mask_utils.toBbox(annotation['segmentation'])
      annotation['id'] = index + 1
      annotation['iscrowd'] = 0
    tf.compat.v1.logging.info('DONE (t=%0.2fs)', time.time() - start)
    results.dataset['annotations'] = annotations
    results.createIndex()
    return results


class COCOEvalWrapper(cocoeval.COCOeval):
  """pycocotools COCOeval returning the original's metric dicts."""

  def __init__(self, groundtruth=None, detections=None, agnostic_mode=False,
               iou_type='bbox', oks_sigmas=None):
    """Sets up the evaluation.

    Args:
      groundtruth: COCOWrapper (or pycocotools COCO) of groundtruth, in
        pixels for the area ranges to mean something.
      detections: COCO object of detections (COCOWrapper.LoadAnnotations).
      agnostic_mode: ignore classes (params.useCats = 0).
      iou_type: 'bbox', 'segm' or 'keypoints'.
      oks_sigmas: optional numpy array of keypoint OKS sigmas.
    """
    cocoeval.COCOeval.__init__(self, groundtruth, detections,
                               iouType=iou_type)
    if oks_sigmas is not None:
      self.params.kpt_oks_sigmas = oks_sigmas
    if agnostic_mode:
      self.params.useCats = 0
    self._iou_type = iou_type

  def GetCategory(self, category_id):  # pylint: disable=invalid-name
    """The groundtruth's category dict ('id', 'name') of category_id."""
    return self.cocoGt.cats[category_id]

  def GetAgnosticMode(self):  # pylint: disable=invalid-name
    """Whether classes are ignored."""
    return self.params.useCats == 0

  def GetCategoryIdList(self):  # pylint: disable=invalid-name
    """The evaluated category ids."""
    return self.params.catIds

  def ComputeMetrics(self, include_metrics_per_category=False,  # pylint: disable=invalid-name
                     all_metrics_per_category=False, super_categories=None):
    """Runs evaluate, accumulate and summarize (which prints the table).

    Args:
      include_metrics_per_category: also return per-category metrics.
      all_metrics_per_category: per category, all 12 metrics
        ('<metric> ByCategory/<name>'), not just the mAP.
      super_categories: optional {name: [category names]}: adds
        'PerformanceBySuperCategory/<name>' (and '<metric>
        BySuperCategory/<name>' with all_metrics_per_category), the sum over
        the listed categories divided by the list's length.

    Returns:
      (summary_metrics, per_category_ap): OrderedDicts; summary names as
      COCO_METRIC_NAMES_AND_INDEX ('<metric> ByCategory/<first category>'
      for keypoints); per_category_ap holds
      'PerformanceByCategory/mAP/<name>' and is empty unless asked, or in
      agnostic mode.

    Raises:
      ValueError: per-category metrics of keypoints (computed for bbox and
        segm only).
    """
    self.evaluate()
    self.accumulate()
    self.summarize()
    if self._iou_type == 'keypoints':
      category = self.GetCategory(self.GetCategoryIdList()[0])['name']
      summary = collections.OrderedDict(
          ('{} ByCategory/{}'.format(name, category), self.stats[index])
          for name, index in COCO_KEYPOINT_METRIC_NAMES_AND_INDEX)
    else:
      summary = collections.OrderedDict(
          (name, self.stats[index])
          for name, index in coco_tools.COCO_METRIC_NAMES_AND_INDEX)
    if not include_metrics_per_category:
      return summary, {}
    if self._iou_type == 'keypoints':
      raise ValueError('Per-category metrics are computed for iou_type bbox '
                       'and segm, not keypoints.')
    per_category = collections.OrderedDict()
    if self.GetAgnosticMode():
      return summary, per_category
    return summary, self._per_category(all_metrics_per_category,
                                       super_categories or {})

  def _per_category(self, all_metrics, super_categories):
    names = coco_tools.COCO_METRIC_NAMES_AND_INDEX
    per_category = collections.OrderedDict()
    super_sums = collections.OrderedDict()
    for key in super_categories:
      super_sums['PerformanceBySuperCategory/%s' % key] = 0.0
      if all_metrics:
        for name, _ in names:
          super_sums['%s BySuperCategory/%s' % (name, key)] = 0.0
    for index, category_id in enumerate(self.GetCategoryIdList()):
      category = self.GetCategory(category_id)['name']
      stats = coco_tools._per_category_stats(self, index)  # pylint: disable=protected-access
      per_category['PerformanceByCategory/mAP/%s' % category] = stats[0]
      if all_metrics:
        for name, stat_index in names:
          per_category['%s ByCategory/%s' % (name, category)] = (
              stats[stat_index])
      for key, members in super_categories.items():
        if category in members:
          super_sums['PerformanceBySuperCategory/%s' % key] += stats[0]
          if all_metrics:
            for name, stat_index in names:
              super_sums['%s BySuperCategory/%s' % (name, key)] += (
                  stats[stat_index])
    for key, members in super_categories.items():
      super_sums['PerformanceBySuperCategory/%s' % key] /= len(members)
      if all_metrics:
        for name, _ in names:
          super_sums['%s BySuperCategory/%s' % (name, key)] /= len(members)
    per_category.update(super_sums)
    return per_category
