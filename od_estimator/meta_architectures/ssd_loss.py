"""The training half of SSDMetaArch: target assignment and the losses.

SSDLoss is a mixin of SSDMetaArch (ssd_meta_arch.py builds the network and
decodes detections); it reads the model's components and settings set by
SSDMetaArch.__init__ and its groundtruth from provide_groundtruth. Anchors
are matched to groundtruth with the TargetAssigner, then the per-anchor
losses are optionally subsampled, hard-mined or mixed by expected-loss
weights, summed and normalized.
"""
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import matcher
from od_estimator.core import standard_fields as fields
from od_estimator.core import target_assigner
from od_estimator.core import shape_utils

# Keys of the box predictor's outputs in predict()'s dictionary.
BOX_ENCODINGS = 'box_encodings'
CLASS_PREDICTIONS = 'class_predictions_with_background'


def _reduce_sum_trailing_dimensions(tensor, ndims):
  """Sums every dimension after the first `ndims` (per-class losses)."""
  axes = tuple(range(ndims, tensor.shape.ndims))
  return tf.reduce_sum(tensor, axis=axes) if axes else tensor


class SSDLoss:
  """Target assignment and losses of SSDMetaArch (a mixin).

  Uses the model's anchors and _batch_decode (predict-side) besides the
  settings SSDMetaArch.__init__ stores.
  """

  def _unmatched_class_label(self):
    return tf.constant(self._unmatched_class_label_values, tf.float32)

  def loss(self, prediction_dict, true_image_shapes, scope=None):
    """Weighted, normalized losses; needs provide_groundtruth and predict.

    Args:
      prediction_dict: predict()'s outputs.
      true_image_shapes: [batch, 3] int32 (unused; part of the interface).
      scope: optional name scope; 'Loss' by default.

    Returns:
      {'Loss/localization_loss': scalar, 'Loss/classification_loss': scalar}.
    """
    del true_image_shapes
    with tf.compat.v1.name_scope(scope, 'Loss'):
      boxes_list = self.groundtruth_lists(fields.BoxListFields.boxes)
      (batch_cls_targets, batch_cls_weights, batch_reg_targets,
       batch_reg_weights, batch_match) = self._assign_targets(
           boxes_list,
           self.groundtruth_lists(fields.BoxListFields.classes),
           self._optional_groundtruth(fields.BoxListFields.keypoints),
           self._optional_groundtruth(fields.BoxListFields.weights),
           self._optional_groundtruth(fields.BoxListFields.confidences))
      match_list = [matcher.Match(match) for match in tf.unstack(batch_match)]
      if self._add_summaries:
        self._summarize_target_assignment(boxes_list, match_list)
      if self._random_example_sampler:
        batch_cls_weights, batch_reg_weights = self._sample_examples(
            batch_cls_targets, batch_cls_weights, batch_reg_weights)

      losses_mask = None
      if self.groundtruth_has_field(fields.InputDataFields.is_annotated):
        losses_mask = tf.stack(self.groundtruth_lists(
            fields.InputDataFields.is_annotated))
      location_losses = self._localization_loss(
          prediction_dict[BOX_ENCODINGS], batch_reg_targets,
          ignore_nan_targets=True, weights=batch_reg_weights,
          losses_mask=losses_mask)
      cls_losses = self._classification_loss(
          prediction_dict[CLASS_PREDICTIONS], batch_cls_targets,
          weights=batch_cls_weights, losses_mask=losses_mask)

      if self._expected_loss_weights_fn:
        localization_loss, classification_loss = self._expected_losses(
            prediction_dict, batch_cls_targets, batch_cls_weights,
            location_losses, cls_losses, losses_mask)
      elif self._hard_example_miner:
        localization_loss, classification_loss = self._apply_hard_mining(
            location_losses, _reduce_sum_trailing_dimensions(cls_losses, 2),
            prediction_dict, match_list)
        if self._add_summaries:
          self._hard_example_miner.summarize()
      else:
        localization_loss = tf.reduce_sum(location_losses)
        classification_loss = tf.reduce_sum(cls_losses)
      return self._normalize_losses(localization_loss, classification_loss,
                                    batch_reg_weights)

  def _optional_groundtruth(self, field):
    if self.groundtruth_has_field(field):
      return self.groundtruth_lists(field)
    return None

  def _normalize_losses(self, localization_loss, classification_loss,
                        batch_reg_weights):
    """Applies the loss weights and the optional normalizers."""
    normalizer = tf.constant(1.0, dtype=tf.float32)
    if self._normalize_loss_by_num_matches:
      normalizer = tf.maximum(
          tf.cast(tf.reduce_sum(batch_reg_weights), tf.float32), 1.0)
    localization_normalizer = normalizer
    if self._normalize_loc_loss_by_codesize:
      localization_normalizer *= self._box_coder.code_size
    localization_loss = tf.multiply(
        self._localization_loss_weight / localization_normalizer,
        localization_loss, name='localization_loss')
    classification_loss = tf.multiply(
        self._classification_loss_weight / normalizer, classification_loss,
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
    return self._random_example_sampler.subsample(
        tf.cast(cls_weights, tf.bool), batch_size=None,
        labels=tf.cast(positives, tf.bool))

  def _expected_losses(self, prediction_dict, batch_cls_targets,
                       batch_cls_weights, location_losses, cls_losses,
                       losses_mask):
    """(loc, cls) sums mixing losses against targets and against background."""
    batch_size, num_anchors, _ = batch_cls_targets.shape.as_list()
    unmatched_targets = tf.ones([batch_size, num_anchors, 1]) * (
        self._unmatched_class_label())
    unmatched_cls_losses = self._classification_loss(
        prediction_dict[CLASS_PREDICTIONS], unmatched_targets,
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
    foreground_weights, background_weights = self._expected_loss_weights_fn(
        batch_cls_targets)
    cls_losses = (foreground_weights * cls_losses +
                  background_weights * unmatched_cls_losses)
    location_losses *= foreground_weights
    return tf.reduce_sum(location_losses), tf.reduce_sum(cls_losses)

  def _assign_targets(self, groundtruth_boxes_list, groundtruth_classes_list,
                      groundtruth_keypoints_list=None,
                      groundtruth_weights_list=None,
                      groundtruth_confidences_list=None):
    """Assigns class and box targets to the anchors of every image.

    Groundtruth lists hold one tensor per image (see provide_groundtruth);
    padding rows are fine when their weight is 0, as they never match.

    Returns:
      batch_cls_targets, batch_cls_weights: [batch, num_anchors,
        num_classes + 1]; batch_reg_targets: [batch, num_anchors,
        code_size]; batch_reg_weights: [batch, num_anchors]; batch_match:
        [batch, num_anchors] int32 (>= 0 box index, -1 unmatched, -2
        ignored).
    """
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

    if self._is_training and self._use_confidences_as_targets:
      return target_assigner.batch_assign_confidences(
          self._target_assigner, self.anchors, groundtruth_boxlists,
          with_background(groundtruth_confidences_list),
          groundtruth_weights_list, self._unmatched_class_label(),
          self._add_background_class, self._implicit_example_weight)
    return target_assigner.batch_assign_targets(
        self._target_assigner, self.anchors, groundtruth_boxlists,
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

  def _apply_hard_mining(self, location_losses, cls_losses, prediction_dict,
                         match_list):
    """Sums the [batch, num_anchors] losses of the mined anchors.

    Returns:
      (mined_location_loss, mined_cls_loss) float32 scalars.
    """
    class_predictions = prediction_dict[CLASS_PREDICTIONS]
    if self._add_background_class:
      class_predictions = class_predictions[:, :, 1:]
    if 'anchors' not in prediction_dict:
      prediction_dict['anchors'] = self.anchors.get()
    decoded_boxes, _ = self._batch_decode(prediction_dict[BOX_ENCODINGS],
                                          prediction_dict['anchors'])
    decoded_boxlist_list = []
    for boxes, scores in zip(tf.unstack(decoded_boxes),
                             tf.unstack(class_predictions)):
      decoded_boxlist = box_list.BoxList(boxes)
      decoded_boxlist.add_field(fields.BoxListFields.scores, scores)
      decoded_boxlist_list.append(decoded_boxlist)
    return self._hard_example_miner(
        location_losses=location_losses, cls_losses=cls_losses,
        decoded_boxlist_list=decoded_boxlist_list, match_list=match_list)

