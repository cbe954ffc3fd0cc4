"""Per-class average precision of detections matched to groundtruth boxes
(or masks) at one IoU threshold, on numpy arrays: the computation behind
the PASCAL, Open Images and precision-at-recall evaluators
(pascal_evaluation, oid_evaluation), with the original's AP definition.
"""
import collections

from absl import logging
import numpy as np

from od_estimator.metrics import overlaps

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
