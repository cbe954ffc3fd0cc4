"""PASCAL VOC style box metrics: per-class AP at one IoU threshold.

Each image's detections are sorted by score and greedily matched, class by
class, to the groundtruth box they overlap most; a detection is a true
positive when that IoU reaches the threshold and the box is not yet taken.
Detections whose best box is `difficult` are dropped (neither true nor
false positive) and difficult boxes do not count as groundtruth. AP is the
VOCdevkit area under the interpolated precision/recall curve.

Evaluators take absolute ymin, xmin, ymax, xmax boxes and 1-based classes
and report the original's metric names, e.g.
'PascalBoxes_Precision/mAP@0.5IOU' and
'PascalBoxes_PerformanceByCategory/AP@0.5IOU/<category name>'.
"""
import unicodedata
import warnings

from absl import logging
import numpy as np

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluator_base
from od_estimator.metrics import overlaps
from od_estimator.metrics import per_class_ap

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

def optional_box_flags(groundtruth_dict, field):
  """An image's optional per-box flags, or None when they were not given.

  An empty array for an image that has boxes means "not given" (a batch
  whose records lack the key), as opposed to an image without boxes.
  """
  flags = groundtruth_dict.get(field)
  if flags is None:
    return None
  if not np.size(flags) and np.size(
      groundtruth_dict[_IN.groundtruth_classes]):
    return None
  return flags


def _keep_detections(detections_dict, keep):
  """A copy of one image's detections (boxes, scores, classes, optional
  masks: [M, ...] each) with only the entries the [M] bool `keep` selects."""
  return dict(detections_dict, **{
      name: np.asarray(detections_dict[name])[keep] for name in (
          _DET.detection_boxes, _DET.detection_scores,
          _DET.detection_classes, _DET.detection_masks)
      if name in detections_dict})


class ObjectDetectionEvaluator(evaluator_base.DetectionEvaluator):
  """Box evaluator on top of ObjectDetectionEvaluation (1-based classes).

  Reads groundtruth_difficult; like the original, it ignores
  groundtruth_group_of (those boxes count as ordinary boxes). Subclasses
  pick other per-box flags by overriding _box_flags (the Open Images
  evaluators read group_of instead, see oid_evaluation).
  """

  optional_groundtruth_box_fields = (_IN.groundtruth_difficult,)
  # Classes evaluated in an image without groundtruth (None: all).
  _classes_of_images_without_groundtruth = None

  def __init__(self, categories, matching_iou_threshold=0.5,
               recall_lower_bound=0.0, recall_upper_bound=1.0,
               metric_prefix=None, use_weighted_mean_ap=False,
               group_of_weight=0.0, nms_iou_threshold=1.0,
               nms_max_output_boxes=10000):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      matching_iou_threshold: IoU a true positive needs.
      recall_lower_bound: lower end of the recall range used for AP.
      recall_upper_bound: upper end of the recall range used for AP.
      metric_prefix: prefix of every metric name, joined with '_'.
      use_weighted_mean_ap: pool all classes' detections for the mAP.
      group_of_weight: see ObjectDetectionEvaluation.
      nms_iou_threshold: per-class NMS on detections; 1.0 disables it.
      nms_max_output_boxes: detections kept per class and image.

    Raises:
      ValueError: if categories is empty or an id is below 1.
    """
    if not categories:
      raise ValueError('categories must not be empty.')
    if min(category['id'] for category in categories) < 1:
      raise ValueError('Classes should be 1-indexed.')
    self._categories = list(categories)
    self._num_classes = max(category['id'] for category in categories)
    self._evaluation_kwargs = dict(
        num_groundtruth_classes=self._num_classes,
        matching_iou_threshold=matching_iou_threshold,
        nms_iou_threshold=nms_iou_threshold,
        nms_max_output_boxes=nms_max_output_boxes,
        recall_lower_bound=recall_lower_bound,
        recall_upper_bound=recall_upper_bound,
        use_weighted_mean_ap=use_weighted_mean_ap,
        label_id_offset=fields.LABEL_ID_OFFSET,
        group_of_weight=group_of_weight)
    prefix = metric_prefix + '_' if metric_prefix else ''
    if recall_lower_bound > 0.0 or recall_upper_bound < 1.0:
      self._summary_name = (
          prefix + 'Precision/mAP@{}IOU@[{:.1f},{:.1f}]Recall'.format(
              matching_iou_threshold, recall_lower_bound,
              recall_upper_bound))
    else:
      self._summary_name = prefix + 'Precision/mAP@{}IOU'.format(
          matching_iou_threshold)
    # Category index (0-based class) -> metric name, in class id order.
    self._category_names = {}
    for category in sorted(self._categories, key=lambda c: c['id']):
      name = category['name']
      if isinstance(name, bytes):
        name = name.decode('utf-8')
      self._category_names[category['id'] - fields.LABEL_ID_OFFSET] = (
          prefix + 'PerformanceByCategory/AP@{}IOU/{}'.format(
              matching_iou_threshold, unicodedata.normalize('NFKD', name)))
    self.clear()

  def clear(self):
    self._evaluation = per_class_ap.ObjectDetectionEvaluation(
        **self._evaluation_kwargs)
    self._image_ids = set()
    # image id -> 1-based ids of the classes whose detections count there,
    # or None for every class (see _classes_evaluated_in).
    self._evaluated_classes = {}

  def metric_names(self):
    return [self._summary_name] + list(self._category_names.values())

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth.

    Args:
      image_id: hashable image id.
      groundtruth_dict: groundtruth_boxes [N, 4] absolute ymin, xmin, ymax,
        xmax; groundtruth_classes [N] 1-based; optional
        groundtruth_difficult [N] bool (an empty array means "not given").
    """
    if image_id in self._image_ids:
      logging.warning('Image with id %s already added.', image_id)
    classes = np.asarray(groundtruth_dict[_IN.groundtruth_classes])
    difficult, group_of = self._box_flags(groundtruth_dict)
    self._evaluation.add_single_ground_truth_image_info(
        image_key=image_id,
        groundtruth_boxes=groundtruth_dict[_IN.groundtruth_boxes],
        groundtruth_class_labels=(classes.astype(int) -
                                  fields.LABEL_ID_OFFSET),
        groundtruth_is_difficult_list=difficult,
        groundtruth_is_group_of_list=group_of,
        groundtruth_masks=self._masks(groundtruth_dict,
                                      _IN.groundtruth_instance_masks))
    self._image_ids.add(image_id)
    self._evaluated_classes[image_id] = self._classes_evaluated_in(
        groundtruth_dict)

  def _classes_evaluated_in(self, groundtruth_dict):
    """Ids of the classes whose detections count in an image; None: all.

    Detections of other classes are dropped, neither true nor false
    positives. Images whose groundtruth was never added use
    _classes_of_images_without_groundtruth.
    """
    del groundtruth_dict
    return None

  def _labeled_class_ids(self, k_hot):
    """Class ids set in a [num_classes + 1] k-hot indexed by class id.

    Raises:
      ValueError: for another shape.
    """
    k_hot = np.asarray(k_hot)
    if k_hot.shape != (self._num_classes + 1,):
      raise ValueError(
          'Invalid shape for groundtruth labeled classes: %s, '
          'num_categories_including_background: %d' % (
              k_hot.shape, self._num_classes + 1))
    return np.flatnonzero(k_hot == 1)

  def _box_flags(self, groundtruth_dict):
    """(difficult, group_of) flags of an image's boxes; None: not given."""
    difficult = optional_box_flags(groundtruth_dict,
                                   _IN.groundtruth_difficult)
    return difficult, None

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections.

    Args:
      image_id: hashable image id (an image without groundtruth has none,
        so all its detections are false positives).
      detections_dict: detection_boxes [M, 4] absolute, detection_scores
        [M], detection_classes [M] 1-based.
    """
    evaluated = self._evaluated_classes.get(
        image_id, self._classes_of_images_without_groundtruth)
    if evaluated is not None:
      detections_dict = _keep_detections(detections_dict, np.isin(
          np.asarray(detections_dict[_DET.detection_classes]).astype(int),
          evaluated))
    classes = np.asarray(detections_dict[_DET.detection_classes])
    self._evaluation.add_single_detected_image_info(
        image_key=image_id,
        detected_boxes=detections_dict[_DET.detection_boxes],
        detected_scores=detections_dict[_DET.detection_scores],
        detected_class_labels=classes.astype(int) - fields.LABEL_ID_OFFSET,
        detected_masks=self._masks(detections_dict, _DET.detection_masks))

  def _masks(self, values, name):
    """Checked binary values[name] for mask evaluators (see overlaps)."""
    return overlaps.binary_masks(name, values.get(name), type(self).__name__
                                 ) if self.evaluates_masks else None

  def _evaluated(self):
    """per_class_ap's ObjectDetectionEvalMetrics of the images so far
    (classes without data are NaN, silently)."""
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', RuntimeWarning)
      return self._evaluation.evaluate()

  def precision_recall_curves(self):
    """{1-based class id: (precision [K], recall [K])} of the images so far,
    for each class with groundtruth and detections (detections by
    decreasing score)."""
    result = self._evaluated()
    return {index + fields.LABEL_ID_OFFSET: (precision, recall)
            for index, (precision, recall) in enumerate(
                zip(result.precisions, result.recalls))
            if isinstance(precision, np.ndarray) and len(precision)}

  def evaluate(self):
    """Returns {summary name: mAP, per-category name: AP} (NaN: no data)."""
    result = self._evaluated()
    metrics = {self._summary_name: float(result.mean_ap)}
    for index, name in self._category_names.items():
      metrics[name] = float(result.average_precisions[index])
    return metrics


class PascalDetectionEvaluator(ObjectDetectionEvaluator):
  """PASCAL VOC metrics: mAP is the mean of the per-class APs."""

  def __init__(self, categories, matching_iou_threshold=0.5,
               nms_iou_threshold=1.0, nms_max_output_boxes=10000):
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     metric_prefix='PascalBoxes',
                     nms_iou_threshold=nms_iou_threshold,
                     nms_max_output_boxes=nms_max_output_boxes)


class WeightedPascalDetectionEvaluator(ObjectDetectionEvaluator):
  """PASCAL metrics with mAP taken over all classes' detections pooled.

  Close to weighting class APs by class frequency, but not equal: AP is
  not linear in the detections.
  """

  def __init__(self, categories, matching_iou_threshold=0.5):
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     metric_prefix='WeightedPascalBoxes',
                     use_weighted_mean_ap=True)


class PrecisionAtRecallDetectionEvaluator(ObjectDetectionEvaluator):
  """PASCAL metrics using only precision/recall points in a recall range.

  With skip_predictions_for_unlabeled_class, an image's
  groundtruth_labeled_classes ([num_classes + 1] one-hot, index = class
  id) drops its detections of classes that were not labeled.
  """

  optional_groundtruth_image_fields = (_IN.groundtruth_labeled_classes,)

  def __init__(self, categories, matching_iou_threshold=0.5,
               recall_lower_bound=0.0, recall_upper_bound=1.0,
               skip_predictions_for_unlabeled_class=False):
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     recall_lower_bound=recall_lower_bound,
                     recall_upper_bound=recall_upper_bound,
                     metric_prefix='PrecisionAtRecallBoxes')
    self._skip_predictions_for_unlabeled_class = (
        skip_predictions_for_unlabeled_class)

  def _classes_evaluated_in(self, groundtruth_dict):
    """The labeled classes, when asked to skip the others.

    Raises:
      ValueError: if groundtruth_labeled_classes is not [num_classes + 1].
    """
    labeled = groundtruth_dict.get(_IN.groundtruth_labeled_classes)
    if self._skip_predictions_for_unlabeled_class and labeled is not None:
      return self._labeled_class_ids(labeled)
    return None
