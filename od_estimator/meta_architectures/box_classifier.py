"""The second stage of Faster R-CNN: ROI features and the box classifier.

Each proposal's region of the first-stage feature map is cropped and
resized (bilinear, `initial_crop_size` square) and max-pooled (on a
feature pyramid, from the level its size assigns it: core/multilevel_crop);
the second stage of the feature extractor turns the crops into box
classifier features and a fully connected predictor
(`SecondStageBoxPredictor`) gives, per proposal, refined box codes per
class and class logits with background.
Context R-CNN (ContextParams) adds to each crop, before the max pool, its
attention into the image's context features (context_rcnn_lib), given as
side inputs. R-FCN (no RoiCropParams) crops nothing: the second stage of
the feature extractor runs once on the whole first-stage feature maps and
its predictor reads every proposal out of them (position-sensitive score
maps); losses, sampling and detections are the same.
In training a balanced sample of the proposals, matched against the
groundtruth, is classified; the losses are averaged per image.

Proposal boxes here are absolute pixel coordinates of the preprocessed
image unless named `_normalized`. All images' proposals are stacked along
one dimension of batch_size * max_num_proposals rows, padded per image.
"""
import dataclasses
from typing import Any, Callable

import tensorflow as tf
import tf_slim as slim

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import box_predictor
from od_estimator.core import losses
from od_estimator.core import multilevel_crop
from od_estimator.core import standard_fields as fields
from od_estimator.core import target_assigner as target_assigner_lib
from od_estimator.meta_architectures import context_rcnn_lib
from od_estimator.meta_architectures import region_proposal_network as rpn
from od_estimator.core import shape_utils

BOX_PREDICTOR_SCOPE = 'SecondStageBoxPredictor'
# The side inputs of Context R-CNN, as the input pipeline names them.
CONTEXT_SIDE_INPUTS = (fields.InputDataFields.context_features,
                       fields.InputDataFields.valid_context_size)


@dataclasses.dataclass(frozen=True)
class RoiCropParams:
  """How proposal features are cut from the first-stage feature map.

  Attributes:
    crop_and_resize_fn: fn(features [B, h, w, d], boxes [B, n, 4]
      normalized, [crop_h, crop_w]) -> [B, n, crop_h, crop_w, d].
    initial_crop_size: side of the bilinear crops.
    maxpool_kernel_size: side of the max pool applied to the crops (0: no
      pooling).
    maxpool_stride: stride of that max pool.
  """
  crop_and_resize_fn: Callable
  initial_crop_size: int
  maxpool_kernel_size: int = 0
  maxpool_stride: int = 1


@dataclasses.dataclass(frozen=True)
class SecondStageParams:
  """Settings of the box classifier (faster_rcnn.proto second_stage_*).

  Attributes:
    box_predictor: a MaskRCNNBoxPredictor-like BoxPredictor whose predict()
      takes prediction_stage=2.
    target_assigner: the proposal TargetAssigner (IoU, argmax matcher).
    sampler: object with subsample(indicator, batch_size, labels).
    nms_fn: batch_multiclass_non_max_suppression with the second-stage
      thresholds bound.
    score_conversion_fn: logits -> scores (softmax, sigmoid, ...).
    classification_loss: a losses.Loss over [batch, proposals, classes + 1].
    batch_size: second_stage_batch_size (proposals per image in training).
    localization_loss_weight: second_stage_localization_loss_weight.
    classification_loss_weight: second_stage_classification_loss_weight.
    hard_example_miner: optional losses.HardExampleMiner; with it every
      proposal is classified in training and the miner picks the losses.
    mask_loss_weight: second_stage_mask_prediction_loss_weight (Mask R-CNN,
      number_of_stages 3).
  """
  box_predictor: Any
  target_assigner: Any
  sampler: Any
  nms_fn: Callable
  score_conversion_fn: Callable
  classification_loss: Any
  batch_size: int = 64
  localization_loss_weight: float = 1.0
  classification_loss_weight: float = 1.0
  hard_example_miner: Any = None
  mask_loss_weight: float = 1.0


def _single_map(prediction):
  """A predictor output for one feature map: the tensor itself."""
  if isinstance(prediction, (list, tuple)):
    return tf.concat(prediction, axis=1)
  return prediction


def padded_proposals_indicator(num_proposals, max_num_proposals):
  """[batch, max_num_proposals] bool, True for the real (unpadded) rows."""
  return tf.less(tf.range(max_num_proposals)[tf.newaxis, :],
                 num_proposals[:, tf.newaxis])


def background_class_label(num_classes):
  """[num_classes + 1] float32 one-hot target of background."""
  return tf.constant([1.0] + [0.0] * num_classes, tf.float32)


class BoxClassifier:
  """Crops proposal features, classifies them, and samples, scores, decodes."""

  def __init__(self, params, roi_crop, num_classes, box_coder, is_training,
               use_static_shapes=False, context=None):
    """Creates the box classifier.

    Args:
      params: SecondStageParams.
      roi_crop: RoiCropParams; None when the box predictor reads the
        proposals out of whole-image features itself (R-FCN: its predict
        takes proposal_boxes).
      num_classes: number of classes without background.
      box_coder: the BoxCoder of refined box codes (relative to proposals).
      is_training: whether the training graph is built.
      use_static_shapes: keep every shape static (TPU).
      context: context_rcnn_lib.ContextParams of Context R-CNN's attention
        (needs roi_crop), or None.

    Raises:
      ValueError: for context without roi_crop.
    """
    if context is not None and roi_crop is None:
      raise ValueError('Context attention needs the ROI crop (RoiCropParams).')
    self._context = context
    self._params = params
    self._roi_crop = roi_crop
    self._num_classes = num_classes
    self._box_coder = box_coder
    self._is_training = is_training
    self._use_static_shapes = use_static_shapes
    self._localization_loss = losses.WeightedSmoothL1LocalizationLoss()

  @property
  def params(self):
    return self._params

  @property
  def crops(self):
    """Whether proposals are cropped (RoiCropParams; not R-FCN)."""
    return self._roi_crop is not None

  @property
  def side_input_names(self):
    """Names of the side inputs classify() needs (Context R-CNN's)."""
    return CONTEXT_SIDE_INPUTS if self._context is not None else ()

  def _checked_side_inputs(self, side_inputs):
    """side_inputs ({} for None); ValueError unless side_input_names."""
    side_inputs = side_inputs or {}
    if sorted(side_inputs) != sorted(self.side_input_names):
      raise ValueError(
          'The box classifier takes side inputs %s, got %s.%s' % (
              list(self.side_input_names) or 'none', sorted(side_inputs),
              ' Context R-CNN reads them from TF_SEQUENCE_EXAMPLE input with '
              'load_context_features: true.' if self._context else ''))
    return side_inputs

  def crop(self, features_to_crop, proposal_boxes_normalized,
           side_inputs=None, image_shape=None):
    """Cuts and pools every proposal's features.

    Args:
      features_to_crop: [batch, height, width, depth] float32, or a list of
        such maps (a feature pyramid, finest first).
      proposal_boxes_normalized: [batch, num_proposals, 4] float32.
      side_inputs: {name: tensor} with exactly side_input_names: for
        Context R-CNN context_features [batch, max_num_context_features,
        context_feature_length] float32 and valid_context_size [batch]
        int32.
      image_shape: [4] int32 shape of the image batch the boxes are
        normalized to; needed with several maps (it sets each box's level).

    Returns:
      [batch * num_proposals, crop, crop, depth] float32 (after pooling).

    Raises:
      ValueError: side inputs other than side_input_names, or several maps
        without image_shape.
    """
    side_inputs = self._checked_side_inputs(side_inputs)
    roi_crop = self._roi_crop
    size = roi_crop.initial_crop_size
    feature_maps = rpn.as_feature_map_list(features_to_crop)
    box_levels = None
    if len(feature_maps) > 1:
      if image_shape is None:
        raise ValueError('Cropping from %d feature maps needs the image '
                         'shape (it sets each box\'s level).' %
                         len(feature_maps))
      box_levels = multilevel_crop.image_box_levels(
          len(feature_maps), image_shape, proposal_boxes_normalized)
    cropped = multilevel_crop.multilevel_crop_and_resize(
        roi_crop.crop_and_resize_fn, feature_maps, proposal_boxes_normalized,
        box_levels, [size, size])
    if self._context is not None:
      cropped += context_rcnn_lib.box_context_attention(
          cropped, side_inputs[fields.InputDataFields.context_features],
          side_inputs[fields.InputDataFields.valid_context_size],
          self._context, self._is_training)
    shape = shape_utils.combined_static_and_dynamic_shape(cropped)
    flattened = tf.reshape(cropped, [shape[0] * shape[1]] + shape[2:])
    if not roi_crop.maxpool_kernel_size:
      return flattened
    return slim.max_pool2d(
        flattened, [roi_crop.maxpool_kernel_size] * 2,
        stride=roi_crop.maxpool_stride)

  def classify(self, features_to_crop, proposal_boxes_normalized,
               extract_fn, side_inputs=None, image_shape=None):
    """Box classifier features and predictions of every proposal.

    Args:
      features_to_crop: [batch, height, width, depth] float32 first-stage
        feature maps (a list of them for a feature pyramid).
      proposal_boxes_normalized: [batch, num_proposals, 4] float32.
      extract_fn: the second stage of the feature extractor, features ->
        box classifier features.
      side_inputs: as crop() takes them.
      image_shape: as crop() takes it.

    Returns:
      box_classifier_features: [batch * num_proposals, h, w, d'] float32
        (from the ROI crops), or [batch, height', width', d'] (whole
        images, without RoiCropParams).
      refined_box_encodings, class_predictions_with_background: as
        predict() returns them.
    """
    if self._roi_crop is None:
      self._checked_side_inputs(side_inputs)
      features = extract_fn(features_to_crop)
      return (features,) + self.predict(
          features, proposal_boxes=proposal_boxes_normalized)
    features = extract_fn(self.crop(features_to_crop,
                                    proposal_boxes_normalized, side_inputs,
                                    image_shape))
    return (features,) + self.predict(features, prediction_stage=2)

  def predict(self, box_classifier_features, **predictor_inputs):
    """Runs the second-stage box predictor.

    Args:
      box_classifier_features: [total_proposals, h, w, depth] float32, or
        [batch, height, width, depth] for a predictor that reads the
        proposals itself.
      **predictor_inputs: the predictor's own arguments: prediction_stage=2
        (MaskRCNNBoxPredictor) or proposal_boxes [batch, num_proposals, 4]
        normalized (RfcnBoxPredictor).

    Returns:
      refined_box_encodings: [total_proposals, q, code_size] float32 with
        q = num_classes, or 1 for class-agnostic boxes.
      class_predictions_with_background: [total_proposals, num_classes + 1]
        float32 logits.
    """
    predictions = self._params.box_predictor.predict(
        [box_classifier_features], num_predictions_per_location=[1],
        scope=BOX_PREDICTOR_SCOPE, **predictor_inputs)
    refined_box_encodings = tf.squeeze(
        _single_map(predictions[box_predictor.BOX_ENCODINGS]), axis=1,
        name='all_refined_box_encodings')
    class_predictions = tf.squeeze(
        _single_map(predictions[
            box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]), axis=1,
        name='all_class_predictions_with_background')
    return (tf.cast(refined_box_encodings, tf.float32),
            tf.cast(class_predictions, tf.float32))

  def sample_proposals(self, proposal_boxes, proposal_scores, num_proposals,
                       groundtruth_boxlists, groundtruth_classes_list,
                       groundtruth_weights_list):
    """Keeps a balanced sample of each image's proposals for training.

    Args:
      proposal_boxes: [batch, max_proposals, 4] float32 absolute, padded.
      proposal_scores: [batch, max_proposals] float32.
      num_proposals: [batch] int32 number of real proposals.
      groundtruth_boxlists: per image, BoxList of absolute boxes.
      groundtruth_classes_list: per image, [num_boxes, num_classes + 1]
        float32 targets with background in column 0.
      groundtruth_weights_list: per image, [num_boxes] float32.

    Returns:
      (boxes [batch, batch_size, 4], scores [batch, batch_size],
      num_sampled [batch] int32), zero padded.
    """
    params = self._params
    sampled_boxes, sampled_scores, num_sampled = [], [], []
    for boxes, scores, count, gt_boxlist, gt_classes, gt_weights in zip(
        tf.unstack(proposal_boxes), tf.unstack(proposal_scores),
        tf.unstack(num_proposals), groundtruth_boxlists,
        groundtruth_classes_list, groundtruth_weights_list):
      proposals = box_list.BoxList(boxes)
      proposals.add_field(fields.BoxListFields.scores, scores)
      cls_targets, cls_weights, _, _, _ = params.target_assigner.assign(
          proposals, gt_boxlist, gt_classes,
          unmatched_class_label=background_class_label(self._num_classes),
          groundtruth_weights=gt_weights)
      positive = tf.greater(tf.argmax(cls_targets, axis=1), 0)
      # Proposals whose overlap falls in the matcher's ignored band have no
      # weight and are never sampled.
      valid = tf.logical_and(
          tf.range(proposals.num_boxes()) < count,
          tf.reduce_mean(cls_weights, axis=-1) > 0)
      selected = params.sampler.subsample(valid, params.batch_size, positive)
      kept = box_list_ops.boolean_mask(
          proposals, selected, use_static_shapes=self._use_static_shapes,
          indicator_sum=(params.batch_size if self._use_static_shapes
                         else None))
      kept = box_list_ops.pad_or_clip_box_list(kept, params.batch_size)
      sampled_boxes.append(kept.get())
      sampled_scores.append(kept.get_field(fields.BoxListFields.scores))
      num_sampled.append(tf.minimum(
          tf.reduce_sum(tf.cast(selected, tf.int32)), params.batch_size))
    return (tf.stack(sampled_boxes), tf.stack(sampled_scores),
            tf.stack(num_sampled))

  def _encodings_of_target_class(self, refined_box_encodings,
                                 one_hot_targets, batch_size,
                                 max_num_proposals):
    """[batch, proposals, code_size] codes of each proposal's target class.

    A proposal matched to a box of several classes regresses one of them
    (the argmax), so it is not counted twice; background rows get zeros.
    """
    code_size = self._box_coder.code_size
    if refined_box_encodings.shape[1] == 1:
      return tf.reshape(refined_box_encodings,
                        [batch_size, max_num_proposals, code_size])
    with_background = tf.pad(refined_box_encodings, [[0, 0], [1, 0], [0, 0]])
    # A product with the one-hot targets selects with static shapes.
    selected = tf.reduce_sum(
        with_background * one_hot_targets[:, :, tf.newaxis], axis=1)
    return tf.reshape(selected, [batch_size, max_num_proposals, code_size])

  def loss(self, refined_box_encodings, class_predictions_with_background,
           proposal_boxes, num_proposals, groundtruth_boxlists,
           groundtruth_classes_list, groundtruth_weights_list,
           losses_mask=None):
    """The box classifier losses.

    Args:
      refined_box_encodings: [batch * max_proposals, q, code_size].
      class_predictions_with_background: [batch * max_proposals,
        num_classes + 1] logits.
      proposal_boxes: [batch, max_proposals, 4] float32 absolute.
      num_proposals: [batch] int32.
      groundtruth_boxlists, groundtruth_classes_list,
        groundtruth_weights_list: as in sample_proposals.
      losses_mask: optional [batch] bool.

    Returns:
      {'Loss/BoxClassifierLoss/localization_loss': scalar,
       'Loss/BoxClassifierLoss/classification_loss': scalar}: per image the
      sum over its real proposals divided by their number, averaged over
      images (or the hard example miner's selection).
    """
    params = self._params
    with tf.name_scope('BoxClassifierLoss'):
      batch_size, max_num_proposals = (
          shape_utils.combined_static_and_dynamic_shape(proposal_boxes)[:2])
      paddings = tf.cast(
          padded_proposals_indicator(num_proposals, max_num_proposals),
          tf.float32)
      proposal_boxlists = [box_list.BoxList(boxes)
                           for boxes in tf.unstack(proposal_boxes)]
      normalizer = tf.cast(tf.maximum(num_proposals, 1), tf.float32)[
          :, tf.newaxis] * tf.cast(batch_size, tf.float32)

      (cls_targets, cls_weights, reg_targets, reg_weights,
       _) = target_assigner_lib.batch_assign_targets(
           params.target_assigner, proposal_boxlists, groundtruth_boxlists,
           groundtruth_classes_list,
           unmatched_class_label=background_class_label(self._num_classes),
           gt_weights_batch=groundtruth_weights_list)
      class_predictions = tf.reshape(
          class_predictions_with_background,
          [batch_size, max_num_proposals, self._num_classes + 1])
      one_hot_targets = tf.one_hot(
          tf.argmax(tf.reshape(cls_targets, [-1, self._num_classes + 1]),
                    axis=1), self._num_classes + 1)
      box_encodings = self._encodings_of_target_class(
          refined_box_encodings, one_hot_targets, batch_size,
          max_num_proposals)

      localization_losses = self._localization_loss(
          box_encodings, reg_targets, weights=reg_weights,
          losses_mask=losses_mask) / normalizer
      classification_losses = self._params.classification_loss(
          class_predictions, cls_targets, weights=cls_weights,
          losses_mask=losses_mask)
      if classification_losses.shape.ndims == 3:
        classification_losses = tf.reduce_sum(classification_losses, axis=2)
      classification_losses /= normalizer

      if params.hard_example_miner:
        localization_loss, classification_loss = params.hard_example_miner(
            location_losses=localization_losses * paddings,
            cls_losses=classification_losses * paddings,
            decoded_boxlist_list=proposal_boxlists)
      else:
        localization_loss = tf.reduce_sum(localization_losses * paddings)
        classification_loss = tf.reduce_sum(classification_losses * paddings)
      return rpn.weighted_losses('Loss/BoxClassifierLoss', {
          'localization_loss': (params.localization_loss_weight,
                                localization_loss),
          'classification_loss': (params.classification_loss_weight,
                                  classification_loss),
      })

  def detections(self, refined_box_encodings,
                 class_predictions_with_background, proposal_boxes,
                 num_proposals, image_shapes):
    """Decodes, scores and suppresses the classified proposals.

    Args:
      refined_box_encodings, class_predictions_with_background,
        proposal_boxes, num_proposals: as in loss().
      image_shapes: [batch, 3] int32 true image shapes: detections are
        clipped to each image and normalized by its size.

    Returns:
      The DetectionModel detections dict: detection_boxes, _scores,
      _classes (0-based), _multiclass_scores, detection_anchor_indices
      [batch, max_detections] int32 (the index, among the image's
      proposals, of the proposal each detection refines), num_detections,
      raw_detection_boxes [batch, max_proposals, 4] normalized and clipped,
      raw_detection_scores [batch, max_proposals, num_classes + 1]. (Mask
      R-CNN predicts masks on these detections: mask_branch.)
    """
    batch_size, max_num_proposals = (
        shape_utils.combined_static_and_dynamic_shape(proposal_boxes)[:2])
    num_box_codes = refined_box_encodings.shape[1]
    box_encodings = tf.reshape(
        refined_box_encodings,
        [batch_size, max_num_proposals, num_box_codes,
         self._box_coder.code_size])
    class_logits = tf.reshape(
        class_predictions_with_background,
        [batch_size, max_num_proposals, self._num_classes + 1])
    decoded_boxes = rpn.batch_decode(self._box_coder, box_encodings,
                                     proposal_boxes)
    scores_with_background = self._params.score_conversion_fn(class_logits)
    # Additional fields go through NMS as float32.
    proposal_indices = tf.cast(tf.tile(
        tf.range(max_num_proposals)[tf.newaxis], [batch_size, 1]), tf.float32)
    (boxes, scores, classes, _, nmsed_fields,
     num_detections) = self._params.nms_fn(
         decoded_boxes, scores_with_background[:, :, 1:],
         clip_window=rpn.absolute_windows(image_shapes),
         change_coordinate_frame=True, num_valid_boxes=num_proposals,
         additional_fields={'multiclass_scores': scores_with_background,
                            'anchor_indices': proposal_indices})
    if num_box_codes > 1:
      best_class = tf.argmax(class_logits[:, :, 1:], axis=2,
                             output_type=tf.int32)
      raw_boxes = tf.gather(decoded_boxes, best_class[:, :, tf.newaxis],
                            batch_dims=2)[:, :, 0]
    else:
      raw_boxes = decoded_boxes[:, :, 0]
    raw_boxes = tf.clip_by_value(rpn.normalize_boxes(raw_boxes, image_shapes),
                                 0.0, 1.0)
    result = fields.DetectionResultFields
    return {
        result.detection_boxes: boxes,
        result.detection_scores: scores,
        result.detection_classes: classes,
        result.detection_multiclass_scores: nmsed_fields['multiclass_scores'],
        result.detection_anchor_indices: tf.cast(
            nmsed_fields['anchor_indices'], tf.int32),
        result.num_detections: tf.cast(num_detections, tf.float32),
        result.raw_detection_boxes: raw_boxes,
        result.raw_detection_scores: scores_with_background,
    }
