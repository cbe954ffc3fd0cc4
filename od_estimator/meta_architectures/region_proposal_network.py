"""The first stage of two-stage detectors: the region proposal network.

On the first-stage feature map a convolution (named `Conv` at the root
scope, as in the original's TF1 checkpoints; `RPNConv` with the TF2 names
of predictors/two_stage_keras_names.py) feeds a 1x1 convolutional box
predictor (`FirstStageBoxPredictor`) that gives, for every grid anchor, a
box code and two objectness logits (background, object). On a feature
pyramid (a list of maps, finest first, with one anchor grid per map, as a
multiscale anchor generator places them) the same convolution runs on
every level and the predictor has a head per level; the levels' anchors
and predictions are concatenated, finest first. Proposals are the decoded
boxes that survive non-max suppression. Training samples a balanced
minibatch of anchors for the objectness and localization losses (Ren et al.,
"Faster R-CNN", 2015).

Anchors and proposals are in absolute pixel coordinates of the
preprocessed (padded) image; the meta-architecture normalizes them.
"""
import dataclasses
from typing import Any, Callable

import tensorflow as tf
import tf_slim as slim

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import box_predictor
from od_estimator.core import losses
from od_estimator.core import target_assigner as target_assigner_lib
from od_estimator.core import shape_utils
from od_estimator.predictors import two_stage_keras_names

BOX_PREDICTOR_SCOPE = 'FirstStageBoxPredictor'
_OBJECTNESS_CLASSES = 2  # Background, object.


@dataclasses.dataclass(frozen=True)
class FirstStageParams:
  """Settings of the region proposal network (faster_rcnn.proto fields).

  Attributes:
    anchor_generator: an AnchorGenerator of absolute coordinates with one
      grid per first-stage feature map (GridAnchorGenerator for one map,
      MultiscaleGridAnchorGenerator for a pyramid).
    conv_hyperparams_fn: callable returning the slim arg_scope of the RPN
      convolution and predictor.
    box_predictor: a BoxPredictor with num_classes=1 (objectness).
    target_assigner: the anchor TargetAssigner (its box coder encodes both
      stages' boxes).
    sampler: object with subsample(indicator, batch_size, labels) -> [N]
      bool choosing the anchors of the RPN losses.
    nms_fn: batch_multiclass_non_max_suppression with the first-stage
      thresholds and max_proposals bound.
    kernel_size: first_stage_box_predictor_kernel_size.
    depth: first_stage_box_predictor_depth.
    atrous_rate: first_stage_atrous_rate (dilation of the RPN convolution).
    minibatch_size: first_stage_minibatch_size (anchors per image in the
      losses).
    max_proposals: first_stage_max_proposals.
    localization_loss_weight: first_stage_localization_loss_weight.
    objectness_loss_weight: first_stage_objectness_loss_weight.
    clip_anchors_to_image: in training, clip anchors to the image instead of
      dropping those that cross its border (keeps the anchor count static).
    layer_names: two_stage_keras_names.LayerNames of the RPN convolution
      (the box predictor is built with the same choice).
  """
  anchor_generator: Any
  conv_hyperparams_fn: Callable
  box_predictor: Any
  target_assigner: Any
  sampler: Any
  nms_fn: Callable
  kernel_size: int = 3
  depth: int = 512
  atrous_rate: int = 1
  minibatch_size: int = 256
  max_proposals: int = 300
  localization_loss_weight: float = 1.0
  objectness_loss_weight: float = 1.0
  clip_anchors_to_image: bool = False
  layer_names: two_stage_keras_names.LayerNames = two_stage_keras_names.SLIM


def image_window(image_shape):
  """[4] float32 window 0, 0, height, width of a [4] image batch shape."""
  return tf.cast(tf.stack([0, 0, image_shape[1], image_shape[2]]),
                 tf.float32)


def absolute_windows(image_shapes):
  """[batch, 4] float32 windows 0, 0, height, width of [batch, 3] shapes."""
  heights = tf.cast(image_shapes[:, 0], tf.float32)
  widths = tf.cast(image_shapes[:, 1], tf.float32)
  zeros = tf.zeros_like(heights)
  return tf.stack([zeros, zeros, heights, widths], axis=1)


def normalize_boxes(boxes, image_shapes):
  """Divides [batch, N, 4] absolute boxes by each image's height and width."""
  sizes = tf.cast(image_shapes[:, :2], tf.float32)
  scale = tf.tile(sizes, [1, 2])  # height, width, height, width.
  return boxes / scale[:, tf.newaxis, :]


def weighted_losses(prefix, weighted):
  """{prefix/name: weight * loss} from {name: (weight, loss)}.

  Each product is an op named after its loss, as the original names them.
  """
  return {'%s/%s' % (prefix, name): tf.multiply(weight, loss, name=name)
          for name, (weight, loss) in weighted.items()}


def as_feature_map_list(features):
  """features if a list (a pyramid), else [features] (one map)."""
  return features if isinstance(features, list) else [features]


def batch_decode(box_coder, box_encodings, reference_boxes):
  """Decodes codes against per-image reference boxes.

  Args:
    box_coder: a BoxCoder.
    box_encodings: [batch, N, q, code_size] float32 (q codes per box).
    reference_boxes: [batch, N, 4] float32 anchors or proposals.

  Returns:
    [batch, N, q, 4] float32 decoded boxes.
  """
  shape = shape_utils.combined_static_and_dynamic_shape(box_encodings)
  tiled = tf.tile(reference_boxes[:, :, tf.newaxis, :], [1, 1, shape[2], 1])
  decoded = box_coder.decode(
      tf.reshape(box_encodings, [-1, box_coder.code_size]),
      box_list.BoxList(tf.reshape(tiled, [-1, 4])))
  return tf.reshape(decoded.get(), [shape[0], shape[1], shape[2], 4])


class RegionProposalNetwork:
  """Objectness and box predictions on grid anchors, proposals, RPN losses."""

  def __init__(self, params, is_training, use_static_shapes=False,
               parallel_iterations=16):
    """Creates the network.

    Args:
      params: FirstStageParams.
      is_training: whether the training graph is built (anchor pruning,
        no gradient through proposals).
      use_static_shapes: keep every shape static (TPU).
      parallel_iterations: tf.map_fn parallelism for dynamic batch sizes.
    """
    self._params = params
    self._is_training = is_training
    self._use_static_shapes = use_static_shapes
    self._parallel_iterations = parallel_iterations
    self._localization_loss = losses.WeightedSmoothL1LocalizationLoss()
    self._objectness_loss = losses.WeightedSoftmaxClassificationLoss()

  @property
  def params(self):
    return self._params

  @property
  def box_coder(self):
    return self._params.target_assigner.box_coder

  def predict(self, rpn_features_to_crop, image_shape):
    """Builds the RPN layers and the anchors.

    Anchors crossing the image border are dropped in training (with their
    predictions), as the Faster R-CNN paper recommends, or clipped to the
    image with clip_anchors_to_image; at inference they are clipped.

    Args:
      rpn_features_to_crop: [batch, height, width, depth] first-stage
        features, or a list of such maps (a pyramid, finest first).
      image_shape: [4] int32 shape of the preprocessed image batch.

    Returns:
      rpn_box_predictor_features: [batch, height, width, rpn depth] (a list
        of them for a list of maps).
      rpn_box_encodings: [batch, num_anchors, code_size] float32.
      rpn_objectness_predictions_with_background: [batch, num_anchors, 2]
        float32 logits.
      anchors: [num_anchors, 4] float32 absolute anchors.

    Raises:
      ValueError: if the anchor generator has not one grid per map.
    """
    params = self._params
    feature_maps = as_feature_map_list(rpn_features_to_crop)
    num_grids = len(params.anchor_generator.num_anchors_per_location())
    if num_grids != len(feature_maps):
      raise ValueError(
          'The first stage anchor generator places anchors on %d feature '
          'maps; the feature extractor gives %d.' % (num_grids,
                                                     len(feature_maps)))
    anchors = box_list_ops.concatenate(params.anchor_generator.generate(
        [tuple(shape_utils.combined_static_and_dynamic_shape(features)[1:3])
         for features in feature_maps]))
    with params.layer_names.rpn_features(), \
        slim.arg_scope(params.conv_hyperparams_fn()):
      # One convolution shared by every level.
      box_predictor_features = [
          slim.conv2d(
              features, params.depth,
              kernel_size=[params.kernel_size, params.kernel_size],
              rate=params.atrous_rate, activation_fn=tf.nn.relu6,
              scope=params.layer_names.rpn_features_scope,
              reuse=True if level else None)
          for level, features in enumerate(feature_maps)]
    predictions = params.box_predictor.predict(
        box_predictor_features,
        params.anchor_generator.num_anchors_per_location(),
        scope=BOX_PREDICTOR_SCOPE)
    # float32 even when the network runs in bfloat16 (TPU): decoding, NMS
    # and the losses need it.
    box_encodings = tf.cast(tf.squeeze(tf.concat(
        predictions[box_predictor.BOX_ENCODINGS], axis=1), axis=2),
                            tf.float32)
    objectness = tf.cast(tf.concat(
        predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND], axis=1),
                         tf.float32)

    window = image_window(image_shape)
    if self._is_training and not params.clip_anchors_to_image:
      anchors, keep = box_list_ops.prune_outside_window(anchors, window)
      box_encodings = tf.gather(box_encodings, keep, axis=1)
      objectness = tf.gather(objectness, keep, axis=1)
    else:
      # Grid anchors are centred inside the image, so none is left without
      # area and the predictions stay aligned with the anchors.
      anchors = box_list_ops.clip_to_window(anchors, window,
                                            filter_nonoverlapping=False)
    return {
        'rpn_box_predictor_features': (
            box_predictor_features if isinstance(rpn_features_to_crop, list)
            else box_predictor_features[0]),
        'rpn_box_encodings': box_encodings,
        'rpn_objectness_predictions_with_background': objectness,
        'anchors': anchors.get(),
    }

  def proposals(self, box_encodings, objectness, anchors, image_shapes):
    """Decodes the predictions and keeps the boxes non-max suppression keeps.

    Args:
      box_encodings: [batch, num_anchors, code_size] float32.
      objectness: [batch, num_anchors, 2] float32 logits.
      anchors: [num_anchors, 4] float32 absolute anchors.
      image_shapes: [batch, 3] int32; proposals are clipped to each window.

    Returns:
      A dict: proposal_boxes [batch, max_proposals, 4] absolute (zero
      padded), proposal_scores [batch, max_proposals],
      proposal_multiclass_scores [batch, max_proposals, 2], num_proposals
      [batch] int32, raw_boxes [batch, num_anchors, 4] absolute decoded
      boxes before NMS and raw_scores [batch, num_anchors, 2] softmax.
    """
    batch_size = shape_utils.combined_static_and_dynamic_shape(
        box_encodings)[0]
    tiled_anchors = tf.tile(anchors[tf.newaxis], [batch_size, 1, 1])
    raw_boxes = tf.squeeze(batch_decode(
        self.box_coder, box_encodings[:, :, tf.newaxis, :], tiled_anchors),
                           axis=2)
    objectness_softmax = tf.nn.softmax(objectness)
    (boxes, scores, _, _, nmsed_fields, num_proposals) = self._params.nms_fn(
        raw_boxes[:, :, tf.newaxis, :],
        objectness_softmax[:, :, 1:],
        clip_window=absolute_windows(image_shapes),
        additional_fields={'multiclass_scores': objectness_softmax})
    if self._is_training:
      boxes = tf.stop_gradient(boxes)
    return {
        'proposal_boxes': boxes,
        'proposal_scores': scores,
        'proposal_multiclass_scores': nmsed_fields['multiclass_scores'],
        'num_proposals': num_proposals,
        'raw_boxes': raw_boxes,
        'raw_scores': objectness_softmax,
    }

  def loss(self, box_encodings, objectness, anchors, groundtruth_boxlists,
           groundtruth_weights_list, losses_mask=None):
    """The RPN losses over a sampled minibatch of anchors per image.

    Args:
      box_encodings: [batch, num_anchors, code_size] float32.
      objectness: [batch, num_anchors, 2] float32 logits.
      anchors: [num_anchors, 4] float32 absolute anchors.
      groundtruth_boxlists: per image, a BoxList of absolute boxes.
      groundtruth_weights_list: per image, [num_boxes] float32.
      losses_mask: optional [batch] bool; False images add no loss.

    Returns:
      {'Loss/RPNLoss/localization_loss': scalar,
       'Loss/RPNLoss/objectness_loss': scalar}, each averaged over images
      and normalized by the image's number of sampled anchors.
    """
    params = self._params
    with tf.name_scope('RPNLoss'):
      (cls_targets, cls_weights, reg_targets, reg_weights,
       _) = target_assigner_lib.batch_assign_targets(
           params.target_assigner, box_list.BoxList(anchors),
           groundtruth_boxlists, [None] * len(groundtruth_boxlists),
           gt_weights_batch=groundtruth_weights_list)
      cls_weights = tf.reduce_mean(cls_weights, axis=2)
      cls_targets = tf.squeeze(cls_targets, axis=2)

      def subsample(inputs):
        targets, weights = inputs
        return params.sampler.subsample(
            tf.cast(weights, tf.bool), params.minibatch_size,
            tf.cast(targets, tf.bool))

      sampled = tf.cast(shape_utils.static_or_dynamic_map_fn(
          subsample, [cls_targets, cls_weights], dtype=tf.bool,
          parallel_iterations=self._parallel_iterations, back_prop=True),
                        tf.float32)
      normalizer = tf.maximum(tf.reduce_sum(sampled, axis=1), 1.0)
      one_hot_targets = tf.one_hot(tf.cast(cls_targets, tf.int32),
                                   depth=_OBJECTNESS_CLASSES)
      localization_losses = self._localization_loss(
          box_encodings, reg_targets, weights=sampled * reg_weights,
          losses_mask=losses_mask)
      objectness_losses = self._objectness_loss(
          objectness, one_hot_targets, weights=sampled[:, :, tf.newaxis],
          losses_mask=losses_mask)
      localization_loss = tf.reduce_mean(
          tf.reduce_sum(localization_losses, axis=1) / normalizer)
      objectness_loss = tf.reduce_mean(
          tf.reduce_sum(objectness_losses, axis=1) / normalizer)
      return weighted_losses('Loss/RPNLoss', {
          'localization_loss': (params.localization_loss_weight,
                                localization_loss),
          'objectness_loss': (params.objectness_loss_weight,
                              objectness_loss),
      })
