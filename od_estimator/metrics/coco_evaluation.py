"""COCO box and mask metrics as evaluators and Estimator eval_metric_ops.

The evaluators collect groundtruth and detections image by image (boxes in
absolute pixel coordinates, 1-based class ids; masks binary at the original
image size), then `evaluate()` returns the original's metric names, e.g.
'DetectionBoxes_Precision/mAP' or 'DetectionMasks_Precision/mAP'.
"""
import collections
import json

from absl import logging
import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_tools
from od_estimator.metrics import evaluator_base
from od_estimator.metrics import overlaps
from od_estimator.utils import config_util

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
PREFIX = 'DetectionBoxes_'
MASK_PREFIX = 'DetectionMasks_'


class CocoDetectionEvaluator(evaluator_base.DetectionEvaluator):
  """Accumulates images and computes COCO box metrics."""

  optional_groundtruth_box_fields = (_IN.groundtruth_is_crowd,)
  optional_groundtruth_image_fields = (_IN.groundtruth_labeled_classes,)
  prefix = PREFIX

  def __init__(self, categories, include_metrics_per_category=False,
               all_metrics_per_category=False, backend='faster',
               skip_predictions_for_unlabeled_class=False,
               super_categories=None):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      include_metrics_per_category: also report per-category mAP.
      all_metrics_per_category: report all 12 metrics per category.
      backend: 'faster' (faster-coco-eval) or 'pycocotools'.
      skip_predictions_for_unlabeled_class: drop an image's detections of
        classes its groundtruth_labeled_classes does not list.
      super_categories: optional {super-category: [category names]}: also
        report 'DetectionBoxes_PerformanceBySuperCategory/<name>', the mean
        mAP of its categories.

    Raises:
      config_util.ConfigError: when a super-category names a category that
        is not in `categories`.
    """
    self._categories = list(categories)
    self._category_ids = {c['id'] for c in self._categories}
    self._include_per_category = include_metrics_per_category
    self._all_per_category = all_metrics_per_category
    self._backend = backend
    self._skip_unlabeled = skip_predictions_for_unlabeled_class
    self._super_categories = _checked_super_categories(
        super_categories, [c['name'] for c in self._categories])
    self.clear()

  def clear(self):
    self._images = collections.OrderedDict()
    self._annotations = []
    self._detections = []
    self._with_detections = set()
    self._labeled_classes = {}

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth; a repeated image_id is ignored.

    Args:
      image_id: hashable image id.
      groundtruth_dict: groundtruth_boxes [N, 4] absolute ymin, xmin, ymax,
        xmax; groundtruth_classes [N] 1-based; optional groundtruth_is_crowd
        [N], groundtruth_area [N], and groundtruth_labeled_classes
        [num_classes + 1] k-hot indexed by class id (read with
        skip_predictions_for_unlabeled_class).
    """
    if image_id in self._images:
      logging.warning('Ignoring groundtruth for image %s: already added.',
                      image_id)
      return
    boxes = np.asarray(groundtruth_dict[_IN.groundtruth_boxes], np.float64)
    classes = np.asarray(groundtruth_dict[_IN.groundtruth_classes]).astype(int)
    is_crowd = groundtruth_dict.get(_IN.groundtruth_is_crowd)
    is_crowd = (np.zeros(len(classes), bool) if is_crowd is None or
                len(is_crowd) == 0 else np.asarray(is_crowd).astype(bool))
    areas = groundtruth_dict.get(_IN.groundtruth_area)
    labeled = groundtruth_dict.get(_IN.groundtruth_labeled_classes)
    if self._skip_unlabeled and labeled is not None:
      self._labeled_classes[image_id] = np.flatnonzero(
          np.asarray(labeled) == 1)
    self._images[image_id] = len(self._images) + 1
    coco_boxes = coco_tools.boxes_to_coco(boxes)
    for index, (box, label) in enumerate(zip(boxes, classes)):
      if label not in self._category_ids:
        continue
      area = (float(areas[index]) if areas is not None and len(areas) and
              areas[index] > 0 else
              float((box[2] - box[0]) * (box[3] - box[1])))
      self._annotations.append({
          'id': len(self._annotations) + 1,
          'image_id': self._images[image_id],
          'category_id': int(label),
          'bbox': coco_boxes[index],
          'area': area,
          'iscrowd': int(is_crowd[index]),
      })

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (after its groundtruth).

    Args:
      image_id: an id given to add_single_ground_truth_image_info.
      detections_dict: detection_boxes [M, 4] absolute, detection_scores
        [M], detection_classes [M] 1-based.

    Raises:
      ValueError: if the image has no groundtruth yet.
    """
    if not self._first_detections_of(image_id):
      return
    self._with_detections.add(image_id)
    if image_id in self._labeled_classes:
      keep = np.isin(np.asarray(detections_dict[_DET.detection_classes]),
                     self._labeled_classes[image_id])
      detections_dict = {name: np.asarray(detections_dict[name])[keep]
                         for name in (_DET.detection_boxes,
                                      _DET.detection_scores,
                                      _DET.detection_classes)}
    boxes = coco_tools.boxes_to_coco(detections_dict[_DET.detection_boxes])
    scores = np.asarray(detections_dict[_DET.detection_scores],
                        np.float64).tolist()
    classes = np.asarray(detections_dict[_DET.detection_classes]).astype(
        int).tolist()
    coco_id = self._images[image_id]
    self._detections.extend(
        {'image_id': coco_id, 'category_id': label, 'bbox': box,
         'score': score}
        for box, score, label in zip(boxes, scores, classes)
        if label in self._category_ids)

  def _first_detections_of(self, image_id):
    """False (with a warning) when the image's detections were added.

    Raises:
      ValueError: if the image has no groundtruth yet.
    """
    if image_id not in self._images:
      raise ValueError('Missing groundtruth for image id %r' % (image_id,))
    if image_id in self._with_detections:
      logging.warning('Ignoring detections for image %s: already added.',
                      image_id)
      return False
    return True

  def groundtruth_dict(self):
    """The accumulated groundtruth as a COCO-format dict."""
    return {
        'images': [{'id': i} for i in self._images.values()],
        'annotations': self._annotations,
        'categories': self._categories,
    }

  def dump_detections_to_json_file(self, json_output_path):
    """Writes the accumulated detections as COCO results JSON."""
    with tf.io.gfile.GFile(json_output_path, 'w') as f:
      json.dump(self._detections, f)

  def evaluate(self):
    """Returns {'DetectionBoxes_<metric>': float} for the images so far."""
    logging.info('Evaluating %d images with COCO box metrics (%s).',
                 len(self._images), self._backend)
    if not self._images:
      logging.warning('No images were evaluated; metrics are -1.')
    summary, per_category = coco_tools.compute_metrics(
        self.groundtruth_dict(), self._detections,
        include_metrics_per_category=self._include_per_category,
        all_metrics_per_category=self._all_per_category,
        backend=self._backend, super_categories=self._super_categories)
    summary.update(per_category)
    return {PREFIX + name: value for name, value in summary.items()}

  def metric_names(self):
    """Names evaluate() returns, known before any data (for metric ops)."""
    prefix = self.prefix
    names = [prefix + name for name, _ in
             coco_tools.COCO_METRIC_NAMES_AND_INDEX]
    if self._include_per_category or self._all_per_category:
      for category in self._categories:
        names.append(prefix + 'PerformanceByCategory/mAP/%s' %
                     category['name'])
        if self._all_per_category:
          names.extend(prefix + '%s ByCategory/%s' % (metric,
                                                      category['name'])
                       for metric, _ in coco_tools.COCO_METRIC_NAMES_AND_INDEX)
    names.extend(prefix + 'PerformanceBySuperCategory/%s' % key
                 for key in self._super_categories or {})
    return names


class CocoMaskEvaluator(CocoDetectionEvaluator):
  """COCO mask metrics ('segm' IoU of RLE-encoded masks).

  Groundtruth needs groundtruth_instance_masks [N, H, W] and detections
  detection_masks [M, H, W], binary at the image's original size (see
  eval_util.result_dict_for_batched_example); groundtruth_is_crowd is
  honoured. As the original, a groundtruth area (small / medium / large)
  is its box's area.
  """

  optional_groundtruth_box_fields = (_IN.groundtruth_is_crowd,
                                     _IN.groundtruth_instance_masks)
  optional_groundtruth_image_fields = ()
  optional_detection_fields = (_DET.detection_masks,)
  mask_metrics_set = 'coco_mask_metrics'
  prefix = MASK_PREFIX

  def __init__(self, categories, include_metrics_per_category=False,
               all_metrics_per_category=False, backend='faster'):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      include_metrics_per_category: also report
        'DetectionMasks_PerformanceByCategory/mAP/<name>'.
      all_metrics_per_category: report all 12 metrics per category.
      backend: 'faster' (faster-coco-eval) or 'pycocotools'.
    """
    super().__init__(categories, include_metrics_per_category,
                     all_metrics_per_category, backend)

  def clear(self):
    super().clear()
    self._mask_shapes = {}

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth; a repeated image_id is ignored.

    Args:
      image_id: hashable image id.
      groundtruth_dict: groundtruth_boxes [N, 4] absolute,
        groundtruth_classes [N] 1-based, groundtruth_instance_masks
        [N, H, W] uint8 0/1 at the original image size, optional
        groundtruth_is_crowd [N].

    Raises:
      ValueError: without masks, or for masks not of 0 and 1.
    """
    if image_id in self._images:
      logging.warning('Ignoring groundtruth for image %s: already added.',
                      image_id)
      return
    name = _IN.groundtruth_instance_masks
    masks = overlaps.binary_masks(name, groundtruth_dict.get(name),
                                  'CocoMaskEvaluator', check_values=False)
    classes = np.asarray(groundtruth_dict[_IN.groundtruth_classes]).astype(
        int)
    kept = [i for i, label in enumerate(classes)
            if label in self._category_ids]
    # Encoded (and checked) before the image is added.
    rles = coco_tools.encode_masks(
        masks[kept] if len(kept) < len(masks) else masks, name)
    first = len(self._annotations)
    super().add_single_ground_truth_image_info(image_id, {
        name: groundtruth_dict[name] for name in (
            _IN.groundtruth_boxes, _IN.groundtruth_classes,
            _IN.groundtruth_is_crowd) if name in groundtruth_dict})
    self._mask_shapes[image_id] = masks.shape[1:3]
    for annotation, rle in zip(self._annotations[first:], rles):
      annotation['segmentation'] = rle

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (after its groundtruth).

    Args:
      image_id: an id given to add_single_ground_truth_image_info.
      detections_dict: detection_scores [M], detection_classes [M] 1-based,
        detection_masks [M, H, W] uint8 0/1, the groundtruth masks' size.

    Raises:
      ValueError: if the image has no groundtruth yet, or for masks of
        another size or not of 0 and 1.
    """
    if not self._first_detections_of(image_id):
      return
    masks = overlaps.binary_masks(
        _DET.detection_masks, detections_dict.get(_DET.detection_masks),
        'CocoMaskEvaluator', check_values=False)
    if masks.shape[1:3] != self._mask_shapes[image_id]:
      raise ValueError(
          'Spatial shape of groundtruth masks and detection masks are '
          'incompatible: %s vs %s' % (self._mask_shapes[image_id],
                                      masks.shape[1:3]))
    classes = np.asarray(detections_dict[_DET.detection_classes]).astype(int)
    scores = np.asarray(detections_dict[_DET.detection_scores], np.float64)
    kept = np.flatnonzero(np.isin(classes, list(self._category_ids)))
    rles = coco_tools.encode_masks(
        masks[kept] if len(kept) < len(masks) else masks,
        _DET.detection_masks)
    self._with_detections.add(image_id)
    coco_id = self._images[image_id]
    self._detections.extend(
        {'image_id': coco_id, 'category_id': int(classes[i]),
         'segmentation': rle, 'score': float(scores[i])}
        for i, rle in zip(kept, rles))

  def groundtruth_dict(self):
    """The accumulated groundtruth as a COCO-format dict (with sizes)."""
    groundtruth = super().groundtruth_dict()
    groundtruth['images'] = [
        {'id': coco_id, 'height': int(self._mask_shapes[image_id][0]),
         'width': int(self._mask_shapes[image_id][1])}
        for image_id, coco_id in self._images.items()]
    return groundtruth

  def evaluate(self):
    """Returns {'DetectionMasks_<metric>': float} for the images so far."""
    logging.info('Evaluating %d images with COCO mask metrics (%s).',
                 len(self._images), self._backend)
    summary, per_category = coco_tools.compute_metrics(
        self.groundtruth_dict(), self._detections, iou_type='segm',
        include_metrics_per_category=self._include_per_category,
        all_metrics_per_category=self._all_per_category,
        backend=self._backend)
    summary.update(per_category)
    return {MASK_PREFIX + name: value for name, value in summary.items()}


def _checked_super_categories(super_categories, category_names):
  """super_categories, each name checked against the label map's names."""
  for key, members in (super_categories or {}).items():
    unknown = [name for name in members if name not in category_names]
    if unknown:
      raise config_util.ConfigError(
          'super-category %r lists %s, not in the label map' % (
              key, ', '.join(repr(name) for name in unknown)),
          field='eval_config.super_categories',
          hint='use the label map names: %s' % ', '.join(category_names))
  return super_categories
