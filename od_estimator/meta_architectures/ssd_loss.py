"""The training part of SSD: target assignment and the losses.

SSDLoss is built by ssd_model_builder from SSDLossParams and handed to
SSDMetaArch, which calls loss() with its predictions, the anchors of its
last predict() and the groundtruth given to provide_groundtruth. Anchors are
matched to groundtruth with the TargetAssigner, then the per-anchor losses
are optionally subsampled, hard-mined or mixed by expected-loss weights,
summed and normalized.
"""
import dataclasses
from typing import Any, Callable, Optional

import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import matcher
from od_estimator.core import region_similarity_calculator
from od_estimator.core import shape_utils
from od_estimator.core import standard_fields as fields
from od_estimator.core import target_assigner as target_assigner_lib
from od_estimator.matchers import argmax_matcher


@dataclasses.dataclass(frozen=True)
class SSDLossParams:
  """Settings of the SSD losses (ssd.proto's loss and target fields).

  Attributes:
    target_assigner: the anchor TargetAssigner; its box coder encodes the
      regression targets and decodes the boxes hard example mining ranks.
    classification_loss: a losses.Loss over [batch, anchors, classes + 1].
    localization_loss: a losses.Loss over [batch, anchors, code_size].
    classification_loss_weight: loss.classification_weight.
    localization_loss_weight: loss.localization_weight.
    normalize_loss_by_num_matches: divide both losses by the number of
      matched anchors (at least 1).
    normalize_loc_loss_by_codesize: also divide the localization loss by
      the box code size.
    encode_background_as_zeros: unmatched anchors get an all-zero class
      target instead of a one-hot background.
    hard_example_miner: optional losses.HardExampleMiner.
    random_example_sampler: optional object with subsample(indicator,
      batch_size, labels) choosing the anchors that enter the losses
      (before hard example mining).
    expected_loss_weights_fn: optional fn(batch_cls_targets) ->
      (foreground_weights, background_weights).
    use_confidences_as_targets: in training, class targets come from the
      groundtruth confidences.
    implicit_example_weight: weight of unlabelled classes with confidences.
    add_summaries: add target-assignment and mining summaries.
  """
  target_assigner: Any
  classification_loss: Any
  localization_loss: Any
  classification_loss_weight: float = 1.0
  localization_loss_weight: float = 1.0
  normalize_loss_by_num_matches: bool = True
  normalize_loc_loss_by_codesize: bool = False
  encode_background_as_zeros: bool = False
  hard_example_miner: Any = None
  random_example_sampler: Any = None
  expected_loss_weights_fn: Optional[Callable] = None
  use_confidences_as_targets: bool = False
  implicit_example_weight: float = 0.5
  add_summaries: bool = True


def batch_decode(box_coder, box_encodings, anchors):
  """Decodes [batch, num_anchors, code_size] codes against [num_anchors, 4].

  Returns:
    decoded_boxes: [batch, num_anchors, 4] float32.
    decoded_keypoints: [batch, num_anchors, num_keypoints, 2] float32 for
      keypoint box coders, else None.
  """
  batch_size, num_anchors = shape_utils.combined_static_and_dynamic_shape(
      box_encodings)[:2]
  tiled_anchors = box_list.BoxList(tf.reshape(
      tf.tile(tf.expand_dims(anchors, 0), [batch_size, 1, 1]), [-1, 4]))
  decoded = box_coder.decode(
      tf.reshape(box_encodings, [-1, box_coder.code_size]), tiled_anchors)
  decoded_keypoints = None
  if decoded.has_field(fields.BoxListFields.keypoints):
    keypoints = decoded.get_field(fields.BoxListFields.keypoints)
    num_keypoints = keypoints.shape[1]
    decoded_keypoints = tf.reshape(
        keypoints, [batch_size, num_anchors, num_keypoints, 2])
  decoded_boxes = tf.reshape(decoded.get(), [batch_size, num_anchors, 4])
  return decoded_boxes, decoded_keypoints


def _reduce_sum_trailing_dimensions(tensor, ndims):
  """Sums every dimension after the first `ndims` (per-class losses)."""
  axes = tuple(range(ndims, tensor.shape.ndims))
  return tf.reduce_sum(tensor, axis=axes) if axes else tensor


class SSDLoss:
  """Assigns targets to the anchors and computes the weighted SSD losses."""

  def __init__(self, params, num_classes, is_training,
               add_background_class=True, parallel_iterations=16):
    """Creates the loss.

    Args:
      params: SSDLossParams.
      num_classes: the model's num_classes (the box predictor's).
      is_training: whether the training graph is built (confidences are
        targets in training only).
      add_background_class: groundtruth classes get a background column 0
        prepended, and it is not a positive class.
      parallel_iterations: tf.map_fn parallelism of the example sampler.
    """
    self._params = params
    self._is_training = is_training
    self._add_background_class = add_background_class
    self._parallel_iterations = parallel_iterations
    # A Python list: the loss may be built before the graph that computes it.
    num_foreground_classes = (num_classes if add_background_class else
                              num_classes - 1)
    self._unmatched_class_label_values = (
        [0.0 if params.encode_background_as_zeros else 1.0] +
        [0.0] * num_foreground_classes)

  @property
  def params(self):
    return self._params

  def ignores_groundtruth_padding(self):
    """Whether padding rows (zero box, weight 0, after the real ones) of
    the groundtruth lists leave the losses and their gradients bit for bit
    unchanged.

    True when target assignment is IoU (0 for a zero box, >= 0 otherwise)
    with an argmax matcher that ignores such rows
    (ArgMaxMatcher.ignores_appended_zero_rows) and the targets are the
    classes (not confidences): no anchor then matches a padding row, and
    what is gathered for the anchors is the same.
    """
    assigner = self._params.target_assigner
    return (not self._params.use_confidences_as_targets and
            type(assigner.similarity_calc) is  # pylint: disable=unidiomatic-typecheck
            region_similarity_calculator.IouSimilarity and
            isinstance(assigner.matcher, argmax_matcher.ArgMaxMatcher) and
            assigner.matcher.ignores_appended_zero_rows())

  def _unmatched_class_label(self):
    return tf.constant(self._unmatched_class_label_values, tf.float32)

  def loss(self, box_encodings, class_predictions_with_background, anchors,
           groundtruth_boxes_list, groundtruth_classes_list,
           groundtruth_keypoints_list=None, groundtruth_weights_list=None,
           groundtruth_confidences_list=None, losses_mask=None):
    """Weighted, normalized losses of one batch.

    Groundtruth lists hold one tensor per image; padding rows are fine when
    their weight is 0, as they never match.

    Args:
      box_encodings: [batch, num_anchors, code_size] float32.
      class_predictions_with_background: [batch, num_anchors, num_classes +
        1] float32 logits.
      anchors: BoxList of the [num_anchors, 4] normalized anchors.
      groundtruth_boxes_list: per image, [num_boxes, 4] normalized boxes.
      groundtruth_classes_list: per image, [num_boxes, num_classes] float32
        targets without a background column (unless explicit).
      groundtruth_keypoints_list: optional, per image [num_boxes,
        num_keypoints, 2].
      groundtruth_weights_list: optional, per image [num_boxes] float32.
      groundtruth_confidences_list: optional, per image [num_boxes,
        num_classes] (use_confidences_as_targets).
      losses_mask: optional [batch] bool; False images add no loss.

    Returns:
      {'Loss/localization_loss': scalar, 'Loss/classification_loss': scalar}.
    """
    params = self._params
    (batch_cls_targets, batch_cls_weights, batch_reg_targets,
     batch_reg_weights, batch_match) = self._assign_targets(
         anchors, groundtruth_boxes_list, groundtruth_classes_list,
         groundtruth_keypoints_list, groundtruth_weights_list,
         groundtruth_confidences_list)
    match_list = [matcher.Match(match) for match in tf.unstack(batch_match)]
    if params.add_summaries:
      self._summarize_target_assignment(groundtruth_boxes_list, match_list)
    if params.random_example_sampler:
      batch_cls_weights, batch_reg_weights = self._sample_examples(
          batch_cls_targets, batch_cls_weights, batch_reg_weights)

    location_losses = params.localization_loss(
        box_encodings, batch_reg_targets, ignore_nan_targets=True,
        weights=batch_reg_weights, losses_mask=losses_mask)
    cls_losses = params.classification_loss(
        class_predictions_with_background, batch_cls_targets,
        weights=batch_cls_weights, losses_mask=losses_mask)

    if params.expected_loss_weights_fn:
      localization_loss, classification_loss = self._expected_losses(
          class_predictions_with_background, batch_cls_targets,
          batch_cls_weights, location_losses, cls_losses, losses_mask)
    elif params.hard_example_miner:
      localization_loss, classification_loss = self._apply_hard_mining(
          location_losses, _reduce_sum_trailing_dimensions(cls_losses, 2),
          box_encodings, class_predictions_with_background, anchors,
          match_list)
      if params.add_summaries:
        params.hard_example_miner.summarize()
    else:
      localization_loss = tf.reduce_sum(location_losses)
      classification_loss = tf.reduce_sum(cls_losses)
    return self._normalize_losses(localization_loss, classification_loss,
                                  batch_reg_weights)

  def _normalize_losses(self, localization_loss, classification_loss,
                        batch_reg_weights):
    """Applies the loss weights and the optional normalizers."""
    params = self._params
    normalizer = tf.constant(1.0, dtype=tf.float32)
    if params.normalize_loss_by_num_matches:
      normalizer = tf.maximum(
          tf.cast(tf.reduce_sum(batch_reg_weights), tf.float32), 1.0)
    localization_normalizer = normalizer
    if params.normalize_loc_loss_by_codesize:
      localization_normalizer *= params.target_assigner.box_coder.code_size
    localization_loss = tf.multiply(
        params.localization_loss_weight / localization_normalizer,
        localization_loss, name='localization_loss')
    classification_loss = tf.multiply(
        params.classification_loss_weight / normalizer, classification_loss,
        name='classification_loss')
    return {'Loss/localization_loss': localization_loss,
            'Loss/classification_loss': classification_loss}

  def _sample_examples(self, batch_cls_targets, batch_cls_weights,
                       batch_reg_weights):
    """Zeroes the weights of anchors the random sampler leaves out."""
    batch_cls_per_anchor_weights = tf.reduce_mean(batch_cls_weights, axis=-1)
    sampled = shape_utils.static_or_dynamic_map_fn(
        self._minibatch_subsample_fn,
        [batch_cls_targets, batch_cls_per_anchor_weights], dtype=tf.bool,
        parallel_iterations=self._parallel_iterations, back_prop=True)
    sampled = tf.cast(sampled, tf.float32)
    return (tf.expand_dims(sampled, -1) * batch_cls_weights,
            sampled * batch_reg_weights)

  def _minibatch_subsample_fn(self, inputs):
    """Samples one image's anchors: [num_anchors] bool."""
    cls_targets, cls_weights = inputs
    if self._add_background_class:
      # A background target must not count as a positive.
      cls_targets = tf.concat([tf.zeros_like(cls_targets[:, :1]),
                               cls_targets[:, 1:]], axis=1)
    positives = tf.reduce_sum(cls_targets, axis=1)
    return self._params.random_example_sampler.subsample(
        tf.cast(cls_weights, tf.bool), batch_size=None,
        labels=tf.cast(positives, tf.bool))

  def _expected_losses(self, class_predictions_with_background,
                       batch_cls_targets, batch_cls_weights, location_losses,
                       cls_losses, losses_mask):
    """(loc, cls) sums mixing losses against targets and against background."""
    batch_size, num_anchors, _ = batch_cls_targets.shape.as_list()
    unmatched_targets = tf.ones([batch_size, num_anchors, 1]) * (
        self._unmatched_class_label())
    unmatched_cls_losses = self._params.classification_loss(
        class_predictions_with_background, unmatched_targets,
        weights=batch_cls_weights, losses_mask=losses_mask)
    if cls_losses.shape.ndims == 3:
      # Per-class losses: every (anchor, class) pair becomes a binary case.
      num_classes = cls_losses.shape.as_list()[2]
      cls_losses = tf.reshape(cls_losses, [batch_size, -1])
      unmatched_cls_losses = tf.reshape(unmatched_cls_losses,
                                        [batch_size, -1])
      batch_cls_targets = tf.reshape(
          batch_cls_targets, [batch_size, num_anchors * num_classes, -1])
      batch_cls_targets = tf.concat([1 - batch_cls_targets,
                                     batch_cls_targets], axis=-1)
      location_losses = tf.tile(location_losses, [1, num_classes])
    foreground_weights, background_weights = (
        self._params.expected_loss_weights_fn(batch_cls_targets))
    cls_losses = (foreground_weights * cls_losses +
                  background_weights * unmatched_cls_losses)
    location_losses *= foreground_weights
    return tf.reduce_sum(location_losses), tf.reduce_sum(cls_losses)

  def _assign_targets(self, anchors, groundtruth_boxes_list,
                      groundtruth_classes_list, groundtruth_keypoints_list,
                      groundtruth_weights_list, groundtruth_confidences_list):
    """Assigns class and box targets to the anchors of every image.

    Returns:
      batch_cls_targets, batch_cls_weights: [batch, num_anchors,
        num_classes + 1]; batch_reg_targets: [batch, num_anchors,
        code_size]; batch_reg_weights: [batch, num_anchors]; batch_match:
        [batch, num_anchors] int32 (>= 0 box index, -1 unmatched, -2
        ignored).
    """
    params = self._params
    groundtruth_boxlists = [box_list.BoxList(boxes)
                            for boxes in groundtruth_boxes_list]
    if groundtruth_keypoints_list is not None:
      for boxlist, keypoints in zip(groundtruth_boxlists,
                                    groundtruth_keypoints_list):
        boxlist.add_field(fields.BoxListFields.keypoints, keypoints)

    def with_background(one_hot_list):
      if not self._add_background_class:
        return one_hot_list
      return [tf.pad(one_hot, [[0, 0], [1, 0]]) for one_hot in one_hot_list]

    if self._is_training and params.use_confidences_as_targets:
      return target_assigner_lib.batch_assign_confidences(
          params.target_assigner, anchors, groundtruth_boxlists,
          with_background(groundtruth_confidences_list),
          groundtruth_weights_list, self._unmatched_class_label(),
          self._add_background_class, params.implicit_example_weight)
    return target_assigner_lib.batch_assign_targets(
        params.target_assigner, anchors, groundtruth_boxlists,
        with_background(groundtruth_classes_list),
        self._unmatched_class_label(), groundtruth_weights_list)

  def _summarize_target_assignment(self, groundtruth_boxes_list, match_list):
    """Adds batch-averaged counts of boxes and anchor states as summaries."""

    def batch_mean(values):
      return tf.reduce_mean(tf.cast(tf.stack(values), tf.float32))

    summaries = [
        ('AvgNumGroundtruthBoxesPerImage',
         [tf.shape(boxes)[0] for boxes in groundtruth_boxes_list]),
        ('AvgNumGroundtruthBoxesMatchedPerImage',
         [match.num_matched_rows() for match in match_list]),
        ('AvgNumPositiveAnchorsPerImage',
         [match.num_matched_columns() for match in match_list]),
        ('AvgNumNegativeAnchorsPerImage',
         [match.num_unmatched_columns() for match in match_list]),
        ('AvgNumIgnoredAnchorsPerImage',
         [match.num_ignored_columns() for match in match_list]),
    ]
    for name, values in summaries:
      tf.compat.v1.summary.scalar(name, batch_mean(values),
                                  family='TargetAssignment')

  def _apply_hard_mining(self, location_losses, cls_losses, box_encodings,
                         class_predictions_with_background, anchors,
                         match_list):
    """Sums the [batch, num_anchors] losses of the mined anchors.

    Returns:
      (mined_location_loss, mined_cls_loss) float32 scalars.
    """
    class_predictions = class_predictions_with_background
    if self._add_background_class:
      class_predictions = class_predictions[:, :, 1:]
    decoded_boxes, _ = batch_decode(self._params.target_assigner.box_coder,
                                    box_encodings, anchors.get())
    decoded_boxlist_list = []
    for boxes, scores in zip(tf.unstack(decoded_boxes),
                             tf.unstack(class_predictions)):
      decoded_boxlist = box_list.BoxList(boxes)
      decoded_boxlist.add_field(fields.BoxListFields.scores, scores)
      decoded_boxlist_list.append(decoded_boxlist)
    return self._params.hard_example_miner(
        location_losses=location_losses, cls_losses=cls_losses,
        decoded_boxlist_list=decoded_boxlist_list, match_list=match_list)
