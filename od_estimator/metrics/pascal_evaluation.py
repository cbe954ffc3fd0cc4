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
import collections
import unicodedata
import warnings

from absl import logging
import numpy as np

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluator_base
from od_estimator.metrics import overlaps

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

ObjectDetectionEvalMetrics = collections.namedtuple(
    'ObjectDetectionEvalMetrics',
    ['average_precisions', 'mean_ap', 'precisions', 'recalls'])


def compute_precision_recall(scores, labels, num_gt):
  """Precision and recall after each detection, best score first.

  Args:
    scores: [K] float detection scores.
    labels: [K] bool or float; > 0 is a (possibly weighted) true positive.
    num_gt: number of groundtruth instances (may be fractional).

  Returns:
    (precision, recall), each [K] float64, or (None, None) if num_gt is 0.

  Raises:
    ValueError: for non-1-D inputs, different lengths, a bad labels dtype or
      more true positives than groundtruth.
  """
  if not isinstance(labels, np.ndarray) or labels.ndim != 1:
    raise ValueError('labels must be a 1-D numpy array')
  if labels.dtype not in (np.float64, np.float32, np.bool_):
    raise ValueError('labels type must be either bool or float')
  if not isinstance(scores, np.ndarray) or scores.ndim != 1:
    raise ValueError('scores must be a 1-D numpy array')
  if len(scores) != len(labels):
    raise ValueError('scores and labels must be of the same size.')
  if num_gt < np.sum(labels):
    raise ValueError('Number of true positives must be smaller than num_gt.')
  if num_gt == 0:
    return None, None
  order = np.argsort(scores)[::-1]
  true_positives = np.cumsum(labels[order].astype(np.float64))
  false_positives = np.cumsum(labels[order] <= 0)
  precision = true_positives / (true_positives + false_positives)
  return precision, true_positives / num_gt


def compute_average_precision(precision, recall):
  """VOCdevkit AP: area under the precision/recall curve made monotone.

  The curve is extended to recall 0 and 1 with precision 0, precision at
  each point becomes the best precision at any higher recall, and the area
  sums (recall step) x (precision) wherever recall changes.

  Args:
    precision: [K] float precisions, or None.
    recall: [K] float non-decreasing recalls, or None.

  Returns:
    The AP as a float: NaN when both are None, 0.0 when both are empty.

  Raises:
    ValueError: for mismatched or out-of-range inputs.
  """
  if precision is None:
    if recall is not None:
      raise ValueError('If precision is None, recall must also be None')
    return np.nan
  if not isinstance(precision, np.ndarray) or not isinstance(
      recall, np.ndarray):
    raise ValueError('precision and recall must be numpy arrays')
  if precision.dtype.kind != 'f' or recall.dtype.kind != 'f':
    raise ValueError('input must be float numpy arrays.')
  if len(precision) != len(recall):
    raise ValueError('precision and recall must be of the same size.')
  if not precision.size:
    return 0.0
  if precision.min() < 0 or precision.max() > 1:
    raise ValueError('Precision must be in the range of [0, 1].')
  if recall.min() < 0 or recall.max() > 1:
    raise ValueError('recall must be in the range of [0, 1].')
  if np.any(np.diff(recall) < 0):
    raise ValueError('recall must be a non-decreasing array')
  recall = np.concatenate([[0.], recall, [1.]])
  precision = np.concatenate([[0.], precision, [0.]])
  precision = np.maximum.accumulate(precision[::-1])[::-1]
  steps = np.where(recall[1:] != recall[:-1])[0] + 1
  return float(np.sum((recall[steps] - recall[steps - 1]) *
                      precision[steps]))


def _tp_fp_single_class(boxes, scores, gt_boxes, gt_difficult, gt_group_of,
                        iou_threshold, group_of_weight, nms_iou_threshold,
                        nms_max_output_boxes, measure=overlaps.BOXES):
  """Scores and TP/FP labels of one class's detections in one image.

  Group-of boxes (Open Images) take the detections left unmatched whose
  intersection covers >= iou_threshold of the detection's area; those
  detections are dropped and each hit group-of box adds one entry with the
  best covering score and label group_of_weight (nothing if that is 0).
  `boxes` and `gt_boxes` are the regions `measure` compares: boxes, or
  masks (overlaps.MASKS).

  Returns:
    (scores [K] float, labels [K] float), labels 1.0 for true positives.
  """
  if not len(boxes):
    return np.zeros(0), np.zeros(0)
  order = overlaps.nms_order(boxes, scores, nms_iou_threshold,
                             nms_max_output_boxes, measure)
  boxes, scores = boxes[order], scores[order]
  is_tp = np.zeros(len(scores), bool)
  dropped = np.zeros(len(scores), bool)
  single = ~gt_group_of
  if single.any():
    iou = measure.iou(boxes, gt_boxes[single])
    difficult = gt_difficult[single]
    best = np.argmax(iou, axis=1)
    taken = np.zeros(len(difficult), bool)
    # Greedy in score order; a detection only tries its best-overlap box,
    # so a duplicate of a taken box is a false positive.
    for i, g in enumerate(best):
      if iou[i, g] < iou_threshold:
        continue
      if difficult[g]:
        dropped[i] = True
      elif not taken[g]:
        is_tp[i] = taken[g] = True
  group_scores = np.zeros(0)
  if gt_group_of.any():
    coverage = measure.coverage(boxes, gt_boxes[gt_group_of])
    best = np.argmax(coverage, axis=1)
    best_score = np.zeros(int(gt_group_of.sum()))
    for i, g in enumerate(best):
      if is_tp[i] or dropped[i] or coverage[i, g] < iou_threshold:
        continue
      dropped[i] = True
      best_score[g] = max(best_score[g], scores[i])
    if group_of_weight > 0:
      group_scores = best_score[best_score > 0]
  kept = ~dropped
  return (np.concatenate([scores[kept], group_scores]),
          np.concatenate([is_tp[kept].astype(np.float64),
                          np.full(len(group_scores), group_of_weight)]))


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


class ObjectDetectionEvaluation:
  """Accumulates per-class TP/FP labels; 0-based classes, numpy inputs."""

  def __init__(self, num_groundtruth_classes, matching_iou_threshold=0.5,
               nms_iou_threshold=1.0, nms_max_output_boxes=10000,
               recall_lower_bound=0.0, recall_upper_bound=1.0,
               use_weighted_mean_ap=False, label_id_offset=0,
               group_of_weight=0.0):
    """Creates an empty evaluation.

    Args:
      num_groundtruth_classes: number of classes C (labels 0..C-1).
      matching_iou_threshold: IoU a true positive needs.
      nms_iou_threshold: per-class NMS on detections; 1.0 disables it.
      nms_max_output_boxes: detections kept per class and image.
      recall_lower_bound: only precision/recall points with recall in
        [lower, upper] enter the AP.
      recall_upper_bound: see recall_lower_bound.
      use_weighted_mean_ap: mean_ap is the AP of all classes' detections
        pooled, instead of the mean of per-class APs.
      label_id_offset: added to class indices in log messages.
      group_of_weight: weight of a group-of box as groundtruth and as a true
        positive; 0 ignores detections inside group-of boxes.

    Raises:
      ValueError: if num_groundtruth_classes < 1.
    """
    if num_groundtruth_classes < 1:
      raise ValueError('Need at least 1 groundtruth class for evaluation.')
    self.num_class = num_groundtruth_classes
    self.matching_iou_threshold = matching_iou_threshold
    self.nms_iou_threshold = nms_iou_threshold
    self.nms_max_output_boxes = nms_max_output_boxes
    self.recall_lower_bound = recall_lower_bound
    self.recall_upper_bound = recall_upper_bound
    self.use_weighted_mean_ap = use_weighted_mean_ap
    self.label_id_offset = label_id_offset
    self.group_of_weight = group_of_weight
    self._groundtruth = {}
    self._detection_keys = set()
    self.num_gt_instances_per_class = np.zeros(self.num_class)
    self.scores_per_class = [[] for _ in range(self.num_class)]
    self.tp_fp_labels_per_class = [[] for _ in range(self.num_class)]

  def add_single_ground_truth_image_info(self, image_key, groundtruth_boxes,
                                         groundtruth_class_labels,
                                         groundtruth_is_difficult_list=None,
                                         groundtruth_is_group_of_list=None,
                                         groundtruth_masks=None):
    """Adds one image's groundtruth; a repeated image_key is ignored.

    Args:
      image_key: hashable image id.
      groundtruth_boxes: [M, 4] absolute ymin, xmin, ymax, xmax.
      groundtruth_class_labels: [M] int 0-based.
      groundtruth_is_difficult_list: optional [M] bool.
      groundtruth_is_group_of_list: optional [M] bool.
      groundtruth_masks: optional [M, H, W] uint8 0/1: with detected masks,
        detections match by mask IoU (as the original's mask mode).
    """
    if image_key in self._groundtruth:
      logging.warning('Image %s is already in the groundtruth; ignored.',
                      image_key)
      return
    boxes = np.asarray(groundtruth_boxes, np.float64).reshape([-1, 4])
    labels = np.asarray(groundtruth_class_labels).astype(int).reshape([-1])
    flags = []
    for flag in (groundtruth_is_difficult_list, groundtruth_is_group_of_list):
      flags.append(np.zeros(len(labels), bool) if flag is None else
                   np.asarray(flag).astype(bool).reshape([-1]))
    difficult, group_of = flags
    self._groundtruth[image_key] = (boxes, labels, difficult, group_of,
                                    groundtruth_masks)
    # Difficult boxes are not groundtruth; group-of boxes count with weight.
    counted = ~difficult & (labels >= 0) & (labels < self.num_class)
    np.add.at(self.num_gt_instances_per_class, labels[counted],
              np.where(group_of[counted], self.group_of_weight, 1.0))

  def add_single_detected_image_info(self, image_key, detected_boxes,
                                     detected_scores, detected_class_labels,
                                     detected_masks=None):
    """Labels one image's detections; images without groundtruth have none.

    Args:
      image_key: hashable image id.
      detected_boxes: [K, 4] absolute ymin, xmin, ymax, xmax.
      detected_scores: [K] float.
      detected_class_labels: [K] int 0-based.
      detected_masks: optional [K, H, W] uint8 0/1, compared by mask IoU
        with the groundtruth masks.

    Raises:
      ValueError: if the three arrays differ in length.
    """
    boxes = np.asarray(detected_boxes, np.float64).reshape([-1, 4])
    scores = np.asarray(detected_scores, np.float64).reshape([-1])
    labels = np.asarray(detected_class_labels).astype(int).reshape([-1])
    if not len(boxes) == len(scores) == len(labels):
      raise ValueError(
          'detected_boxes, detected_scores and detected_class_labels should '
          'all have the same length; got [%d, %d, %d]' % (
              len(boxes), len(scores), len(labels)))
    if image_key in self._detection_keys:
      logging.warning('Detections of image %s were already added; ignored.',
                      image_key)
      return
    self._detection_keys.add(image_key)
    empty = np.zeros(0, bool)
    gt_boxes, gt_labels, difficult, group_of, gt_masks = (
        self._groundtruth.get(image_key, (np.zeros([0, 4]), np.zeros(0, int),
                                          empty, empty, None)))
    # Empty or inverted boxes cannot match anything; drop them entirely.
    valid = (boxes[:, 0] < boxes[:, 2]) & (boxes[:, 1] < boxes[:, 3])
    measure = overlaps.BOXES
    if detected_masks is not None:
      measure, boxes = overlaps.MASKS, np.asarray(detected_masks)
      gt_boxes = (np.zeros((0,) + boxes.shape[1:], np.uint8)
                  if gt_masks is None else np.asarray(gt_masks))
    for c in range(self.num_class):
      det = valid & (labels == c)
      gt = gt_labels == c
      class_scores, tp_fp = _tp_fp_single_class(
          boxes[det], scores[det], gt_boxes[gt], difficult[gt], group_of[gt],
          self.matching_iou_threshold, self.group_of_weight,
          self.nms_iou_threshold, self.nms_max_output_boxes, measure)
      if len(class_scores):
        self.scores_per_class[c].append(class_scores)
        self.tp_fp_labels_per_class[c].append(tp_fp)

  def _bounded_ap(self, scores, labels, num_gt):
    precision, recall = compute_precision_recall(scores, labels, num_gt)
    if precision is None:
      return np.nan, None, None
    inside = ((recall >= self.recall_lower_bound) &
              (recall <= self.recall_upper_bound))
    precision, recall = precision[inside], recall[inside]
    return compute_average_precision(precision, recall), precision, recall

  def evaluate(self):
    """Returns ObjectDetectionEvalMetrics.

    average_precisions is [C] with NaN for classes without groundtruth;
    mean_ap ignores those NaNs (NaN if every class has none).
    """
    missing = np.flatnonzero(self.num_gt_instances_per_class == 0)
    if missing.size:
      logging.warning('Classes without groundtruth examples: %s',
                      missing + self.label_id_offset)
    average_precisions = np.full(self.num_class, np.nan)
    precisions = [np.nan] * self.num_class
    recalls = [np.nan] * self.num_class
    pooled_scores, pooled_labels = [np.zeros(0)], [np.zeros(0)]
    for c in range(self.num_class):
      if self.num_gt_instances_per_class[c] == 0:
        continue
      scores = np.concatenate([np.zeros(0)] + self.scores_per_class[c])
      labels = np.concatenate([np.zeros(0)] + self.tp_fp_labels_per_class[c])
      pooled_scores.append(scores)
      pooled_labels.append(labels)
      average_precisions[c], precisions[c], recalls[c] = self._bounded_ap(
          scores, labels, self.num_gt_instances_per_class[c])
      logging.info('class %d average_precision: %f',
                   c + self.label_id_offset, average_precisions[c])
    if self.use_weighted_mean_ap:
      mean_ap = self._bounded_ap(
          np.concatenate(pooled_scores), np.concatenate(pooled_labels),
          self.num_gt_instances_per_class.sum())[0]
    elif np.all(np.isnan(average_precisions)):
      mean_ap = np.nan
    else:
      mean_ap = np.nanmean(average_precisions)
    return ObjectDetectionEvalMetrics(average_precisions, mean_ap,
                                      precisions, recalls)


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
    self._evaluation = ObjectDetectionEvaluation(**self._evaluation_kwargs)
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

  def precision_recall_curves(self):
    """{1-based class id: (precision [K], recall [K])} of the images so far,
    for each class with groundtruth and detections (detections by
    decreasing score)."""
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', RuntimeWarning)
      result = self._evaluation.evaluate()
    return {index + fields.LABEL_ID_OFFSET: (precision, recall)
            for index, (precision, recall) in enumerate(
                zip(result.precisions, result.recalls))
            if isinstance(precision, np.ndarray) and len(precision)}

  def evaluate(self):
    """Returns {summary name: mAP, per-category name: AP} (NaN: no data)."""
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', RuntimeWarning)
      result = self._evaluation.evaluate()
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
