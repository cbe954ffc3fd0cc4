"""Assigns classification and regression targets to anchors.

For one image: compare groundtruth boxes with anchors (similarity), match
each anchor to at most one groundtruth box (matcher), then

* matched anchors get their box's class as target and the box, encoded
  relative to the anchor, as regression target;
* unmatched anchors get `unmatched_class_label` (background) and a zero
  regression target with zero regression weight;
* ignored anchors get zero weight for both losses.

`batch_assign_targets` does this for every image of a batch.
"""
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import standard_fields as fields
from od_estimator.core import shape_utils


class TargetAssigner:
  """Builds targets from a similarity calculator, a matcher and a box coder."""

  def __init__(self, similarity_calc, matcher, box_coder_instance,
               negative_class_weight=1.0):
    """Creates a TargetAssigner.

    Args:
      similarity_calc: a RegionSimilarityCalculator.
      matcher: a Matcher.
      box_coder_instance: a BoxCoder.
      negative_class_weight: classification weight of unmatched anchors.
    """
    self._similarity_calc = similarity_calc
    self._matcher = matcher
    self._box_coder = box_coder_instance
    self._negative_class_weight = negative_class_weight

  @property
  def box_coder(self):
    return self._box_coder

  @property
  def similarity_calc(self):
    return self._similarity_calc

  @property
  def matcher(self):
    return self._matcher

  def assign(self, anchors, groundtruth_boxes, groundtruth_labels=None,
             unmatched_class_label=None, groundtruth_weights=None):
    """Assigns targets to one image's anchors.

    Args:
      anchors: BoxList of num_anchors anchors.
      groundtruth_boxes: BoxList of num_gt boxes (may be empty).
      groundtruth_labels: [num_gt, d_1, ..., d_k] float32 class targets
        (typically one-hot [num_gt, num_classes + 1]); default ones [num_gt, 1].
        For rank-2 labels, 1 - labels[:, 0] is the groundtruth score that
        ThresholdedIouSimilarity reads.
      unmatched_class_label: [d_1, ..., d_k] target of unmatched anchors;
        default zeros.
      groundtruth_weights: [num_gt] float32; boxes of weight 0 are never
        matched. Default ones.

    Returns:
      cls_targets: [num_anchors, d_1, ..., d_k] float32.
      cls_weights: [num_anchors, d_1, ..., d_k] float32.
      reg_targets: [num_anchors, code_size] float32.
      reg_weights: [num_anchors] float32.
      match: the Match.

    Raises:
      ValueError: when anchors or groundtruth_boxes are not BoxLists, or
        static shapes show labels and boxes of different lengths or an
        unmatched_class_label unlike one label. When those shapes are known
        only at run time, running the targets checks them instead.
    """
    groundtruth_labels, unmatched_class_label, groundtruth_weights = (
        _checked_inputs(anchors, groundtruth_boxes, groundtruth_labels,
                        unmatched_class_label, groundtruth_weights))
    similarity = self._similarity_calc.compare(
        _with_foreground_scores(groundtruth_boxes, groundtruth_labels),
        anchors)
    match = self._matcher.match(similarity,
                                valid_rows=tf.greater(groundtruth_weights, 0))
    reg_targets = self._create_regression_targets(anchors, groundtruth_boxes,
                                                  match)
    cls_targets = match.gather_based_on_match(
        groundtruth_labels, unmatched_value=unmatched_class_label,
        ignored_value=unmatched_class_label)
    reg_weights = match.gather_based_on_match(
        groundtruth_weights, unmatched_value=0., ignored_value=0.)
    cls_weights = match.gather_based_on_match(
        groundtruth_weights, unmatched_value=self._negative_class_weight,
        ignored_value=0.)
    cls_weights = _per_entry_weights(cls_weights, cls_targets)
    num_anchors = anchors.num_boxes_static()
    if num_anchors is not None:
      for tensor in (cls_targets, cls_weights, reg_targets, reg_weights):
        tensor.set_shape([num_anchors] + tensor.shape.as_list()[1:])
    return cls_targets, cls_weights, reg_targets, reg_weights, match

  def _create_regression_targets(self, anchors, groundtruth_boxes, match):
    """Encodes each anchor's matched box; zeros for the others."""
    zeros = tf.zeros([4], tf.float32)
    matched_boxes = box_list.BoxList(match.gather_based_on_match(
        groundtruth_boxes.get(), unmatched_value=zeros, ignored_value=zeros))
    if groundtruth_boxes.has_field('keypoints'):
      keypoints = groundtruth_boxes.get_field('keypoints')
      no_keypoints = tf.zeros(keypoints.shape[1:], tf.float32)
      matched_boxes.add_field('keypoints', match.gather_based_on_match(
          keypoints, unmatched_value=no_keypoints, ignored_value=no_keypoints))
    encoded = self._box_coder.encode(matched_boxes, anchors)
    default = tf.zeros_like(encoded)
    return tf.where(
        tf.broadcast_to(tf.expand_dims(match.matched_column_indicator(), 1),
                        tf.shape(encoded)), encoded, default)


def _checked_inputs(anchors, groundtruth_boxes, groundtruth_labels,
                    unmatched_class_label, groundtruth_weights):
  """Fills in TargetAssigner.assign's defaults and checks label shapes.

  Returns:
    (groundtruth_labels, unmatched_class_label, groundtruth_weights); the
    labels carry the run-time shape checks as control dependencies.

  Raises:
    ValueError: as TargetAssigner.assign.
  """
  if not isinstance(anchors, box_list.BoxList):
    raise ValueError('anchors must be a BoxList')
  if not isinstance(groundtruth_boxes, box_list.BoxList):
    raise ValueError('groundtruth_boxes must be a BoxList')
  num_gt = groundtruth_boxes.num_boxes()
  if groundtruth_labels is None:
    groundtruth_labels = tf.ones(tf.expand_dims(num_gt, 0), tf.float32)
    groundtruth_labels = tf.expand_dims(groundtruth_labels, -1)
  labels_shape = shape_utils.combined_static_and_dynamic_shape(
      groundtruth_labels)
  if unmatched_class_label is None:
    unmatched_class_label = tf.zeros(labels_shape[1:], tf.float32)
  checks = [
      shape_utils.assert_shape_equal(
          labels_shape[1:], shape_utils.combined_static_and_dynamic_shape(
              tf.convert_to_tensor(unmatched_class_label))),
      shape_utils.assert_shape_equal(
          labels_shape[:1], shape_utils.combined_static_and_dynamic_shape(
              groundtruth_boxes.get())[:1])]
  with tf.control_dependencies(checks):
    groundtruth_labels = tf.identity(groundtruth_labels)
  if groundtruth_weights is None:
    static_num_gt = groundtruth_boxes.num_boxes_static()
    groundtruth_weights = tf.ones(
        [static_num_gt] if static_num_gt is not None else
        tf.expand_dims(num_gt, 0), tf.float32)
  return groundtruth_labels, unmatched_class_label, groundtruth_weights


def _per_entry_weights(cls_weights, cls_targets):
  """Tiles [num_anchors] weights to one per target entry, as losses expect."""
  class_shape = tf.shape(cls_targets)[1:]
  cls_weights = tf.reshape(cls_weights, [-1] + [1] * (
      cls_targets.shape.ndims - 1))
  return tf.tile(cls_weights, tf.concat([[1], class_shape], 0))


def _with_foreground_scores(boxes, labels):
  """Returns a copy of `boxes` scored 1 - labels[:, 0].

  Score-aware similarity calculators (ThresholdedIouSimilarity) read this
  foreground probability, as in the original; column 0 is background. Only
  rank-2 labels have such a column, so other labels leave `boxes` as it is.
  """
  if labels.shape.ndims != 2:
    return boxes
  scored = box_list.BoxList(boxes.get())
  for field in boxes.get_extra_fields():
    scored.add_field(field, boxes.get_field(field))
  scored.add_field(fields.BoxListFields.scores, 1.0 - labels[:, 0])
  return scored


def _checked_batch(anchors_batch, gt_box_batch, gt_class_batch,
                   gt_weights_batch):
  """Returns (anchors, weights) lists of one entry per image.

  Raises:
    ValueError: when the lists differ in length or an anchor set is not a
      BoxList.
  """
  batch_size = len(gt_box_batch)
  if isinstance(anchors_batch, box_list.BoxList):
    anchors_batch = [anchors_batch] * batch_size
  anchors_list = list(anchors_batch)
  if not all(isinstance(a, box_list.BoxList) for a in anchors_list):
    raise ValueError('anchors_batch must be a BoxList or list of BoxLists.')
  if gt_weights_batch is None:
    gt_weights_batch = [None] * batch_size
  if not (len(anchors_list) == batch_size == len(gt_class_batch) ==
          len(gt_weights_batch)):
    raise ValueError('anchors, boxes, class targets and weights must have '
                     'one entry per image')
  return anchors_list, list(gt_weights_batch)


def batch_assign_targets(target_assigner, anchors_batch, gt_box_batch,
                         gt_class_targets_batch, unmatched_class_label=None,
                         gt_weights_batch=None):
  """Assigns targets to every image of a batch.

  Args:
    target_assigner: a TargetAssigner.
    anchors_batch: a BoxList shared by all images, or a list of BoxLists.
    gt_box_batch: list of `batch_size` groundtruth BoxLists.
    gt_class_targets_batch: list of [num_gt_i, d_1, ..., d_k] class targets.
    unmatched_class_label: [d_1, ..., d_k] target of unmatched anchors.
    gt_weights_batch: optional list of [num_gt_i] weights.

  Returns:
    batch_cls_targets: [batch, num_anchors, d_1, ..., d_k].
    batch_cls_weights: [batch, num_anchors, d_1, ..., d_k].
    batch_reg_targets: [batch, num_anchors, code_size].
    batch_reg_weights: [batch, num_anchors].
    batch_match: [batch, num_anchors] int32 match results (>= 0 matched
      groundtruth index, -1 unmatched, -2 ignored).

  Raises:
    ValueError: when the batch lists differ in length.
  """
  anchors_list, gt_weights_batch = _checked_batch(
      anchors_batch, gt_box_batch, gt_class_targets_batch, gt_weights_batch)
  outputs = [target_assigner.assign(anchors, boxes, labels,
                                    unmatched_class_label, weights)
             for anchors, boxes, labels, weights in zip(
                 anchors_list, gt_box_batch, gt_class_targets_batch,
                 gt_weights_batch)]
  cls_targets, cls_weights, reg_targets, reg_weights, matches = zip(*outputs)
  return (tf.stack(cls_targets), tf.stack(cls_weights), tf.stack(reg_targets),
          tf.stack(reg_weights), tf.stack([m.match_results for m in matches]))


def batch_assign_confidences(target_assigner, anchors_batch, gt_box_batch,
                             gt_class_confidences_batch, gt_weights_batch=None,
                             unmatched_class_label=None,
                             include_background_class=True,
                             implicit_class_weight=1.0):
  """Assigns targets from per-class confidences (`use_confidences_as_targets`).

  Confidences are > 0 for positive classes, < 0 for explicit negatives and 0
  for classes with no label. Anchors matched to a box with a positive class
  regress to it; explicit (positive or negative) entries get classification
  weight 1, unlabelled ("implicit") entries `implicit_class_weight`.

  Args:
    target_assigner: a TargetAssigner.
    anchors_batch: a BoxList or a list of BoxLists.
    gt_box_batch: list of groundtruth BoxLists.
    gt_class_confidences_batch: list of [num_gt_i, num_classes(+1)] float32,
      or of None: class-agnostic, every box is a positive of one class
      (then use include_background_class=False).
    gt_weights_batch: optional list of [num_gt_i] weights.
    unmatched_class_label: target of unmatched anchors.
    include_background_class: whether column 0 is background.
    implicit_class_weight: weight of unlabelled entries.

  Returns:
    As batch_assign_targets; regression weights are 1 only for anchors with
    a positive class.

  Raises:
    ValueError: when a confidences tensor is not rank 2.
  """
  anchors_list, gt_weights_batch = _checked_batch(
      anchors_batch, gt_box_batch, gt_class_confidences_batch,
      gt_weights_batch)
  results = []
  for anchors, boxes, confidences, weights in zip(
      anchors_list, gt_box_batch, gt_class_confidences_batch,
      gt_weights_batch):
    if confidences is not None and confidences.shape.ndims != 2:
      raise ValueError('class confidences must be [num_gt, num_classes], got '
                       '%s' % confidences.shape)
    cls_targets, _, reg_targets, _, match = target_assigner.assign(
        anchors, boxes, confidences, unmatched_class_label, weights)
    foreground = cls_targets[:, 1:] if include_background_class else cls_targets
    positive = tf.greater(foreground, 0.0)
    negative = tf.less(foreground, 0.0)
    explicit = tf.cast(tf.logical_or(positive, negative), tf.float32)
    reg_weights = tf.cast(tf.reduce_any(positive, axis=-1), tf.float32)
    reg_targets *= tf.expand_dims(reg_weights, -1)
    foreground *= 1.0 - tf.cast(negative, tf.float32)
    fg_weights = (1.0 - implicit_class_weight) * explicit + implicit_class_weight
    if include_background_class:
      has_positive = tf.expand_dims(reg_weights, -1)
      bg_weights = ((1.0 - implicit_class_weight) * has_positive +
                    implicit_class_weight)
      cls_targets = tf.concat([1.0 - has_positive, foreground], -1)
      cls_weights = tf.concat([bg_weights, fg_weights], -1)
    else:
      cls_targets, cls_weights = foreground, fg_weights
    results.append((cls_targets, cls_weights, reg_targets, reg_weights,
                    match.match_results))
  return tuple(tf.stack(parts) for parts in zip(*results))
