"""The mask branch of Mask R-CNN: the third stage of Faster R-CNN.

The second-stage box predictor's third-stage head (the mask head,
SecondStageBoxPredictor/Conv, Conv_1, ...) predicts mask logits per ROI:

- in training, on the box classifier features of the sampled proposals (the
  same features the box and class heads see), computed only for those the
  mask loss weighs when the head's logits are per ROI
  (predict_weighted_rows);
- at inference, on the post-processed detections: their features are
  cropped and run through the second-stage feature extractor again, and
  each detection keeps the sigmoid of its class's mask (or of the one
  class-agnostic mask): detection_masks [batch, max_detections, mask_height,
  mask_width], relative to the detection box.

Mask targets are the matched groundtruth masks (at the preprocessed image
size, box-normalized like the groundtruth boxes) cropped and resized to the
mask size over each proposal, with the model's crop-and-resize function; the
loss is the sigmoid cross-entropy of the target class's mask over positive
proposals, divided by their number times the mask area, as the original.
"""
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_predictor
from od_estimator.core import losses
from od_estimator.core import target_assigner as target_assigner_lib
from od_estimator.meta_architectures import box_classifier
from od_estimator.meta_architectures import region_proposal_network as rpn
from od_estimator.core import shape_utils


class MaskBranch:
  """Mask predictions, detection masks, mask targets and the mask loss."""

  def __init__(self, box_predictor_, target_assigner, crop_and_resize_fn,
               num_classes, loss_weight=1.0):
    """Creates the branch.

    Args:
      box_predictor_: the second-stage MaskRCNNBoxPredictor with a
        MASK_PREDICTIONS third-stage head.
      target_assigner: the second-stage (proposal) TargetAssigner.
      crop_and_resize_fn: the model's crop-and-resize (RoiCropParams'),
        used to crop the mask targets.
      num_classes: classes without background.
      loss_weight: second_stage_mask_prediction_loss_weight.

    Raises:
      ValueError: if the predictor has no mask head.
    """
    if box_predictor.MASK_PREDICTIONS not in (
        box_predictor_.get_third_stage_prediction_heads()):
      raise ValueError('Mask R-CNN needs a box predictor with a mask head '
                       '(predict_instance_masks).')
    self._box_predictor = box_predictor_
    self._target_assigner = target_assigner
    self._crop_and_resize_fn = crop_and_resize_fn
    self._num_classes = num_classes
    self._loss_weight = loss_weight
    self._loss = losses.WeightedSigmoidClassificationLoss()

  def predict(self, box_classifier_features):
    """[num_rois, num_masks, mask_height, mask_width] float32 mask logits."""
    predictions = self._box_predictor.predict(
        [box_classifier_features], num_predictions_per_location=[1],
        scope=box_classifier.BOX_PREDICTOR_SCOPE, prediction_stage=3)
    return tf.cast(tf.squeeze(predictions[box_predictor.MASK_PREDICTIONS],
                              axis=1), tf.float32)

  def rois_are_independent(self):
    """Whether each ROI's mask logits depend on that ROI alone.

    True when the mask head has no batch norm computing batch statistics
    (under the arg scopes in force where this is called); then the logits
    of a subset of the ROIs equal theirs among all ROIs.
    """
    head = getattr(self._box_predictor, 'third_stage_head', None)
    mask_head = head and head(box_predictor.MASK_PREDICTIONS)
    return hasattr(mask_head, 'mixes_rois') and not mask_head.mixes_rois()

  def predict_weighted_rows(self, box_classifier_features, row_weights):
    """predict() on the rows the mask loss weighs, zeros on the others.

    The mask loss multiplies each ROI's loss by its weight (zero for all
    but the positive proposals), so with ROI-independent logits
    (rois_are_independent) the loss and its gradients are those of
    predict() on every row, for the mask head's work on the weighted rows
    only (at most a quarter of the sampled proposals with the balanced
    sampler's default positive fraction).

    Args:
      box_classifier_features: [num_rois, h, w, depth] float32.
      row_weights: [..., ] float32 mask loss weights, num_rois in all
        (loss_weights()).

    Returns:
      [num_rois, num_masks, mask_height, mask_width] float32 logits.
    """
    rows = tf.where(tf.not_equal(tf.reshape(row_weights, [-1]), 0.0))
    num_rows = tf.shape(rows)[0]
    # Convolutions of an empty batch fail on CPU (oneDNN): without weighted
    # rows the head runs on row 0, whose logits are dropped.
    head_rows = tf.concat([rows, tf.zeros([1, 1], tf.int64)], 0)[
        :tf.maximum(num_rows, 1)]
    logits = self.predict(tf.gather_nd(box_classifier_features, head_rows))[
        :num_rows]
    num_rois = shape_utils.combined_static_and_dynamic_shape(
        box_classifier_features)[0]
    all_logits = tf.scatter_nd(
        rows, logits, tf.concat([[tf.cast(num_rois, tf.int64)],
                                 tf.shape(logits, out_type=tf.int64)[1:]], 0))
    all_logits.set_shape(box_classifier_features.shape[:1].concatenate(
        logits.shape[1:]))
    return all_logits

  def detection_masks(self, mask_logits, detection_classes):
    """Each detection's mask probabilities.

    Args:
      mask_logits: [batch * max_detections, num_masks, h, w] float32.
      detection_classes: [batch, max_detections] 0-based classes (float).

    Returns:
      [batch, max_detections, h, w] float32 sigmoid probabilities.
    """
    batch_size, max_detections = (
        shape_utils.combined_static_and_dynamic_shape(detection_classes))
    _, num_masks, height, width = mask_logits.shape.as_list()
    if num_masks > 1:
      classes = tf.cast(tf.reshape(detection_classes, [-1, 1]), tf.int32)
      mask_logits = tf.gather(mask_logits, classes, batch_dims=1)
    return tf.reshape(tf.sigmoid(mask_logits),
                      [batch_size, max_detections, height, width])

  def targets(self, proposal_boxes_normalized, matches,
              groundtruth_masks_list, mask_size):
    """Matched groundtruth masks cropped to every proposal.

    Args:
      proposal_boxes_normalized: [batch, num_proposals, 4] float32,
        normalized to the frame of the groundtruth masks.
      matches: [batch, num_proposals] int32 matched groundtruth index (< 0
        for unmatched or ignored proposals, which get zeros).
      groundtruth_masks_list: per image [num_boxes, height, width] masks.
      mask_size: [mask_height, mask_width].

    Returns:
      [batch, num_proposals, mask_height, mask_width] float32 targets.
    """
    targets = []
    for boxes, match, masks in zip(tf.unstack(proposal_boxes_normalized),
                                   tf.unstack(matches),
                                   groundtruth_masks_list):
      # Each proposal crops its own matched mask (an appended empty mask
      # when unmatched), one image per proposal, as the original.
      masks = tf.pad(tf.cast(masks, tf.float32), [[0, 1], [0, 0], [0, 0]])
      num_masks = tf.shape(masks)[0]
      matched = tf.gather(masks, tf.where(match >= 0, match, num_masks - 1))
      crops = self._crop_and_resize_fn(matched[..., tf.newaxis],
                                       boxes[:, tf.newaxis], mask_size)
      targets.append(crops[:, 0, :, :, 0])
    return tf.stop_gradient(tf.stack(targets))

  def loss_weights(self, proposal_boxes, num_proposals, groundtruth_boxlists,
                   groundtruth_classes_list, groundtruth_weights_list):
    """What the mask loss weighs: the matched, real proposals.

    Args:
      proposal_boxes: [batch, max_proposals, 4] float32 absolute boxes.
      num_proposals: [batch] int32 (or float) count of real boxes.
      groundtruth_boxlists, groundtruth_classes_list,
        groundtruth_weights_list: as BoxClassifier.loss takes them.

    Returns:
      cls_targets [batch, max_proposals, num_classes + 1], weights [batch,
      max_proposals] float32 (the groundtruth weight of a positive real
      proposal, else 0) and matches [batch, max_proposals] int32.
    """
    max_proposals = shape_utils.combined_static_and_dynamic_shape(
        proposal_boxes)[1]
    (cls_targets, _, _, positive_weights,
     matches) = target_assigner_lib.batch_assign_targets(
         self._target_assigner,
         [box_list.BoxList(boxes) for boxes in tf.unstack(proposal_boxes)],
         groundtruth_boxlists, groundtruth_classes_list,
         unmatched_class_label=box_classifier.background_class_label(
             self._num_classes),
         gt_weights_batch=groundtruth_weights_list)
    weights = positive_weights * tf.cast(
        box_classifier.padded_proposals_indicator(
            tf.cast(num_proposals, tf.int32), max_proposals), tf.float32)
    return cls_targets, weights, matches

  def loss(self, mask_logits, proposal_boxes, num_proposals, image_shapes,
           groundtruth_boxlists, groundtruth_classes_list,
           groundtruth_weights_list, groundtruth_masks_list,
           losses_mask=None):
    """{'Loss/BoxClassifierLoss/mask_loss': weighted scalar}.

    Args:
      mask_logits: [batch * max_proposals, num_masks, h, w] float32, for
        the proposals (training) or the detections (evaluation).
      proposal_boxes: [batch, max_proposals, 4] float32 absolute boxes of
        the preprocessed images the masks were predicted for.
      num_proposals: [batch] int32 (or float) count of real boxes.
      image_shapes: [batch, 3] int32 preprocessed image shapes.
      groundtruth_boxlists, groundtruth_classes_list,
        groundtruth_weights_list: as BoxClassifier.loss takes them.
      groundtruth_masks_list: per image [num_boxes, height, width] float32
        0/1 masks at the preprocessed image size (or None).
      losses_mask: optional [batch] bool.

    Raises:
      ValueError: without groundtruth masks.
    """
    if groundtruth_masks_list is None:
      raise ValueError(
          'Mask R-CNN needs groundtruth instance masks: set '
          'load_instance_masks: true in the input reader.')
    with tf.name_scope('BoxClassifierLoss'):
      batch_size, max_proposals = (
          shape_utils.combined_static_and_dynamic_shape(proposal_boxes)[:2])
      _, num_masks, height, width = mask_logits.shape.as_list()
      cls_targets, weights, matches = self.loss_weights(
          proposal_boxes, num_proposals, groundtruth_boxlists,
          groundtruth_classes_list, groundtruth_weights_list)
      targets = self.targets(
          rpn.normalize_boxes(proposal_boxes, image_shapes), matches,
          groundtruth_masks_list, [height, width])
      logits = tf.reshape(mask_logits, [batch_size, max_proposals, num_masks,
                                        height * width])
      if num_masks > 1:
        # The target class's mask (a multi-label box keeps one class, as
        # for the boxes); background rows have no weight.
        one_hot = tf.one_hot(tf.argmax(cls_targets, axis=2),
                             self._num_classes + 1)[:, :, 1:]
        logits = tf.reduce_sum(logits * one_hot[..., tf.newaxis], axis=2)
      else:
        logits = logits[:, :, 0]
      mask_losses = self._loss(
          logits, tf.reshape(targets, [batch_size, max_proposals, -1]),
          weights=weights[..., tf.newaxis], losses_mask=losses_mask)
      normalizer = tf.maximum(
          tf.reduce_sum(weights) * float(height * width), 1.0)
      return rpn.weighted_losses('Loss/BoxClassifierLoss', {
          'mask_loss': (self._loss_weight,
                        tf.reduce_sum(mask_losses) / normalizer)})
