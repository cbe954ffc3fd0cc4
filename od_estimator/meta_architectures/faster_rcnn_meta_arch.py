"""Faster R-CNN meta-architecture (Ren et al., "Faster R-CNN", NIPS 2015).

Composed of parts, each built by faster_rcnn_model_builder, handed in and
usable alone:

  feature extractor, first stage  (FirstStageFeatureExtractor/...)
  RegionProposalNetwork           (Conv/..., FirstStageBoxPredictor/...)
  BoxClassifier: ROI crop, second-stage features (SecondStageFeatureExtractor/
                 ...) and the box predictor (SecondStageBoxPredictor/...);
                 Context R-CNN's adds to each crop its attention into the
                 image's context features (AttentionBlock/..., side inputs
                 of predict: get_side_inputs);
                 R-FCN's crops nothing: second-stage features of the whole
                 images, read per proposal by its position-sensitive
                 predictor
  MaskBranch                      (the second-stage predictor's mask head)

With number_of_stages 1 the model is the RPN alone and its proposals are the
detections (one class). With 2, proposals are cropped, classified and
refined. In training the second stage sees a balanced sample of
second_stage_batch_size proposals per image (every proposal when a hard
example miner picks the losses instead); at inference it sees
first_stage_max_proposals. With 3 (Mask R-CNN) a mask head follows
(MaskBranch): in training on the sampled proposals' features, at inference
on the post-processed detections, whose features are cropped and extracted
again, so predict() already returns the detections and detection_masks, as
in the original. (The original crops with the detection boxes normalized to
the true image; here they are rescaled to the padded image the features
cover, which only differs when the resizer pads.)

Images are resized in preprocess; anchors and proposals are absolute pixel
coordinates of the preprocessed (padded) image, groundtruth is normalized to
that image (as the input pipeline gives it), and detections are normalized
to each true image (true_image_shapes), as in the original. Variable names
match the original's TF1 checkpoints.
"""
import dataclasses
import functools

import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import model
from od_estimator.core import standard_fields as fields
from od_estimator.meta_architectures import batch_norm_mode
from od_estimator.meta_architectures import box_classifier as box_classifier_lib
from od_estimator.meta_architectures import region_proposal_network
from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.core import shape_utils

# Re-exported for code written against the original's module layout.
FasterRCNNFeatureExtractor = (
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor)
FirstStageParams = region_proposal_network.FirstStageParams
RoiCropParams = box_classifier_lib.RoiCropParams
SecondStageParams = box_classifier_lib.SecondStageParams

FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE = (
    faster_rcnn_feature_extractor.FIRST_STAGE_SCOPE)
SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE = (
    faster_rcnn_feature_extractor.SECOND_STAGE_SCOPE)
# Keys of postprocess()'s results, which a 3-stage predict() holds too.
_DETECTION_RESULT_KEYS = frozenset(
    value for name, value in vars(fields.DetectionResultFields).items()
    if not name.startswith('_'))


@dataclasses.dataclass(frozen=True)
class ModelParams:
  """Model-wide settings.

  Attributes:
    num_classes: classes without background.
    image_resizer_fn: fn(image) -> (resized_image, true_image_shape, ...).
    number_of_stages: 1 (RPN only), 2, or 3 (with the mask branch).
    use_static_shapes: keep every shape static (TPU): static NMS, static
      sampling and gathers.
    inplace_batchnorm_update: update batch norm statistics with the forward
      pass instead of through UPDATE_OPS.
    parallel_iterations: tf.map_fn parallelism for dynamic batch sizes.
    output_final_box_features: postprocess() also returns
      detection_features, the box classifier features of the detections
      (two stages with the ROI crop and no side inputs).
  """
  num_classes: int
  image_resizer_fn: object
  number_of_stages: int = 2
  use_static_shapes: bool = False
  inplace_batchnorm_update: bool = False
  parallel_iterations: int = 16
  output_final_box_features: bool = False


def _image_batch_shape_2d(image_shape, batched_tensor):
  """[batch, 3] int32: the [4] image batch shape once per image.

  The batch size comes from batched_tensor (static when known).
  """
  batch_size = shape_utils.combined_static_and_dynamic_shape(
      batched_tensor)[0]
  return tf.tile(image_shape[tf.newaxis, 1:], [batch_size, 1])


class FasterRCNNMetaArch(model.DetectionModel):
  """Two-stage detector: region proposals, then a box classifier."""

  def __init__(self, is_training, feature_extractor, model_params, rpn,
               box_classifier=None, mask_branch=None, add_summaries=True):
    """Creates the model from its built parts.

    Args:
      is_training: whether the training graph is built (the parts are built
        for the same mode).
      feature_extractor: a FasterRCNNFeatureExtractor.
      model_params: ModelParams.
      rpn: a RegionProposalNetwork.
      box_classifier: a BoxClassifier (needed with 2 or 3 stages).
      mask_branch: a MaskBranch (needed with 3 stages).
      add_summaries: kept for the builders' signature; like the original,
        this model adds no summaries of its own.

    Raises:
      ValueError: for a number_of_stages other than 1, 2 and 3, parts that
        do not match it, or (training) second_stage_batch_size above
        first_stage_max_proposals.
    """
    super().__init__(num_classes=model_params.num_classes)
    del add_summaries
    stages = model_params.number_of_stages
    if stages not in (1, 2, 3):
      raise ValueError('number_of_stages must be 1, 2 or 3, got %d.' % stages)
    if (box_classifier is not None) != (stages > 1) or (
        mask_branch is not None) != (stages == 3):
      raise ValueError('number_of_stages %d needs the RPN%s.' % (
          stages, ['', ' and a box classifier',
                   ', a box classifier and a mask branch'][stages - 1]))
    if model_params.output_final_box_features and (
        stages != 2 or box_classifier.side_input_names or
        not box_classifier.crops):
      raise ValueError('output_final_box_features needs two stages and a box '
                       'classifier that crops without side inputs.')
    if mask_branch is not None and box_classifier.side_input_names:
      raise ValueError('The mask branch crops without side inputs: a box '
                       'classifier with side inputs has no mask branch.')
    if (is_training and box_classifier is not None and
        box_classifier.params.batch_size > rpn.params.max_proposals):
      raise ValueError('second_stage_batch_size (%d) must not exceed '
                       'first_stage_max_proposals (%d).' %
                       (box_classifier.params.batch_size,
                        rpn.params.max_proposals))
    self._is_training = is_training
    self._feature_extractor = feature_extractor
    self._params = model_params
    self._rpn = rpn
    self._box_classifier = box_classifier
    self._mask_branch = mask_branch
    self._anchors = None

  @property
  def params(self):
    return self._params

  @property
  def rpn(self):
    """The RegionProposalNetwork."""
    return self._rpn

  @property
  def box_classifier(self):
    """The BoxClassifier, or None with one stage."""
    return self._box_classifier

  @property
  def mask_branch(self):
    """The MaskBranch, or None without a third stage."""
    return self._mask_branch

  @property
  def feature_extractor(self):
    return self._feature_extractor

  @property
  def first_stage_feature_extractor_scope(self):
    return FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE

  @property
  def second_stage_feature_extractor_scope(self):
    return SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE

  @property
  def max_num_proposals(self):
    """Proposals per image that reach the second stage.

    second_stage_batch_size in training (sampled), unless a hard example
    miner chooses the losses; first_stage_max_proposals otherwise.
    """
    if (self._is_training and self._box_classifier is not None and
        not self._box_classifier.params.hard_example_miner):
      return self._box_classifier.params.batch_size
    return self._rpn.params.max_proposals

  @property
  def anchors(self):
    """The first-stage anchors BoxList of the last predict() call."""
    if self._anchors is None:
      raise RuntimeError('anchors have not been constructed yet!')
    return self._anchors

  def preprocess(self, inputs):
    """Resizes every image, then normalizes it for the feature extractor.

    The reverse of SSD's order, as in the original; see
    DetectionModel.preprocess for the arguments and results.

    Raises:
      ValueError: if inputs is not float32.
    """
    if inputs.dtype != tf.float32:
      raise ValueError('preprocess expects float32 images, got %s' %
                       inputs.dtype.name)
    with tf.name_scope('Preprocessor'):
      resized_inputs, true_image_shapes = (
          shape_utils.static_or_dynamic_map_fn(
              self._params.image_resizer_fn, elems=inputs,
              dtype=[tf.float32, tf.int32],
              parallel_iterations=self._params.parallel_iterations))
      return (self._feature_extractor.preprocess(resized_inputs),
              true_image_shapes)

  def _in_batch_norm_mode(self, build_fn):
    return batch_norm_mode.build_in_batch_norm_mode(
        build_fn, self._is_training, self._params.inplace_batchnorm_update)

  @property
  def side_input_names(self):
    """Names of the features predict() takes as side inputs."""
    if self._box_classifier is None:
      return ()
    return self._box_classifier.side_input_names

  def get_side_inputs(self, features):
    """predict()'s side inputs, out of the input function's features.

    Context R-CNN's are context_features and valid_context_size; other
    models take none.

    Args:
      features: the input function's features dict.

    Returns:
      {name: tensor} of side_input_names.

    Raises:
      ValueError: if a side input is not among the features.
    """
    missing = [name for name in self.side_input_names if name not in features]
    if missing:
      raise ValueError(
          'Context R-CNN (model.faster_rcnn.context_config) needs the '
          'features %s, which the input has not: read TF_SEQUENCE_EXAMPLE '
          'input with load_context_features: true.' % ', '.join(missing))
    return {name: features[name] for name in self.side_input_names}

  def predict(self, preprocessed_inputs, true_image_shapes, **side_inputs):
    """Runs the first stage, and the second with number_of_stages 2.

    Args:
      preprocessed_inputs: [batch, height, width, channels] float32.
      true_image_shapes: [batch, 3] int32 (the second stage clips proposals
        to the preprocessed image, as the original).
      **side_inputs: exactly side_input_names (get_side_inputs): for Context
        R-CNN context_features [batch, max_num_context_features,
        context_feature_length] float32 and valid_context_size [batch]
        int32.

    Returns:
      A dict: rpn_box_predictor_features, rpn_features_to_crop [batch, h,
      w, d] (lists of them, finest first, when the feature extractor gives
      a feature pyramid); image_shape [4] int32; rpn_box_encodings
      [batch, num_anchors, 4]; rpn_objectness_predictions_with_background
      [batch, num_anchors, 2]; anchors [num_anchors, 4] absolute. With 2
      stages also refined_box_encodings [batch * max_num_proposals, q, 4],
      class_predictions_with_background [batch * max_num_proposals,
      num_classes + 1], num_proposals [batch], proposal_boxes [batch,
      max_num_proposals, 4] absolute, proposal_boxes_normalized (same,
      normalized) and box_classifier_features. With 3 stages also
      mask_predictions [num_rois, num_masks, mask_h, mask_w] logits (rois:
      the proposals in training, zeros for those without mask loss when
      the mask head's ROIs are independent; the detections at inference)
      and, at inference, postprocess()'s detections with detection_masks.

    Raises:
      ValueError: side inputs other than side_input_names.
    """
    if sorted(side_inputs) != sorted(self.side_input_names):
      raise ValueError('predict takes the side inputs %s, got %s.' % (
          list(self.side_input_names) or 'none', sorted(side_inputs)))
    image_shape = tf.shape(preprocessed_inputs)

    def first_stage():
      features_to_crop, _ = self._feature_extractor.extract_proposal_features(
          preprocessed_inputs, scope=FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE)
      rpn_predictions = self._rpn.predict(features_to_crop, image_shape)
      rpn_predictions['rpn_features_to_crop'] = features_to_crop
      return rpn_predictions

    prediction_dict = self._in_batch_norm_mode(first_stage)
    prediction_dict['image_shape'] = image_shape
    self._anchors = box_list.BoxList(prediction_dict['anchors'])
    if self._box_classifier is not None:
      prediction_dict.update(self._predict_second_stage(
          prediction_dict, _image_batch_shape_2d(
              image_shape, prediction_dict['rpn_box_encodings']),
          side_inputs))
    if self._mask_branch is not None:
      prediction_dict.update(self._predict_third_stage(prediction_dict,
                                                       true_image_shapes))
    return prediction_dict

  def _predict_third_stage(self, prediction_dict, true_image_shapes):
    """Mask logits; at inference first the detections they belong to."""
    if self._is_training:
      return {'mask_predictions': self._in_batch_norm_mode(
          lambda: self._training_mask_logits(prediction_dict))}
    detections = self.postprocess(prediction_dict, true_image_shapes)
    features = self._detection_box_classifier_features(
        detections[fields.DetectionResultFields.detection_boxes],
        prediction_dict, true_image_shapes)
    mask_logits = self._in_batch_norm_mode(
        lambda: self._mask_branch.predict(features))
    detections['mask_predictions'] = mask_logits
    detections[fields.DetectionResultFields.detection_masks] = (
        self._mask_branch.detection_masks(
            mask_logits,
            detections[fields.DetectionResultFields.detection_classes]))
    return detections

  def _detection_box_classifier_features(self, detection_boxes,
                                         prediction_dict, true_image_shapes):
    """Box classifier features of the detections, cropped and extracted.

    Args:
      detection_boxes: [batch, max_detections, 4] float32 normalized to
        each true image.
      prediction_dict: predict()'s outputs.
      true_image_shapes: [batch, 3] int32.

    Returns:
      [batch * max_detections, h, w, depth] float32.
    """
    # Detections are normalized to the true image; features are cropped
    # from the whole preprocessed (possibly padded) image.
    image_shapes = _image_batch_shape_2d(prediction_dict['image_shape'],
                                         true_image_shapes)
    true_sizes = tf.cast(true_image_shapes[:, :2], tf.float32)
    scale = tf.tile(true_sizes / tf.cast(image_shapes[:, :2], tf.float32),
                    [1, 2])
    boxes = tf.stop_gradient(detection_boxes * scale[:, tf.newaxis, :])

    def extract():
      cropped = self._box_classifier.crop(
          prediction_dict['rpn_features_to_crop'], boxes,
          image_shape=prediction_dict['image_shape'])
      return self._feature_extractor.extract_box_classifier_features(
          cropped, scope=SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)

    return self._in_batch_norm_mode(extract)

  def _detection_features(self, detections, prediction_dict,
                          true_image_shapes):
    """detection_features [batch, max_detections, h, w, depth] float32.

    The box classifier features of each detection (output_final_box_
    features), under the original's name scope, with its
    pooled_detection_features node [batch, max_detections, depth] (their
    spatial mean) for graphs that fetch it by name.
    """
    boxes = detections[fields.DetectionResultFields.detection_boxes]
    with tf.name_scope('SecondStageDetectionFeaturesExtract'):
      features = self._detection_box_classifier_features(
          boxes, prediction_dict, true_image_shapes)
      batch_shape = shape_utils.combined_static_and_dynamic_shape(boxes)[:2]
      feature_shape = shape_utils.combined_static_and_dynamic_shape(features)
      tf.identity(tf.reshape(tf.reduce_mean(features, axis=[1, 2]),
                             batch_shape + feature_shape[-1:]),
                  name='pooled_detection_features')
      return tf.reshape(features, batch_shape + feature_shape[1:])

  def _training_mask_logits(self, prediction_dict):
    """Mask logits of the sampled proposals (built in batch norm mode).

    With ROI-independent mask logits and dynamic shapes, the mask head runs
    on the proposals the mask loss weighs only (the positives) and the
    others get zeros: the same loss and gradients for a fraction of the
    head's work (MaskBranch.predict_weighted_rows).
    """
    features = prediction_dict['box_classifier_features']
    branch = self._mask_branch
    if self._params.use_static_shapes or not branch.rois_are_independent():
      return branch.predict(features)
    image_shapes = _image_batch_shape_2d(prediction_dict['image_shape'],
                                         prediction_dict['rpn_box_encodings'])
    groundtruth = self._format_groundtruth(image_shapes)
    _, weights, _ = branch.loss_weights(
        prediction_dict['proposal_boxes'], prediction_dict['num_proposals'],
        groundtruth['boxlists'], groundtruth['classes'],
        groundtruth['weights'])
    return branch.predict_weighted_rows(features, weights)

  def _predict_second_stage(self, prediction_dict, image_shapes,
                            side_inputs):
    """Proposals (sampled in training), ROI features and box predictions."""
    proposals = self._rpn.proposals(
        prediction_dict['rpn_box_encodings'],
        prediction_dict['rpn_objectness_predictions_with_background'],
        prediction_dict['anchors'], image_shapes)
    proposal_boxes = proposals['proposal_boxes']
    num_proposals = proposals['num_proposals']
    if self._is_training and not (
        self._box_classifier.params.hard_example_miner):
      groundtruth = self._format_groundtruth(image_shapes)
      proposal_boxes, _, num_proposals = (
          self._box_classifier.sample_proposals(
              proposal_boxes, proposals['proposal_scores'], num_proposals,
              groundtruth['boxlists'], groundtruth['classes'],
              groundtruth['weights']))
    proposal_boxes_normalized = region_proposal_network.normalize_boxes(
        proposal_boxes, image_shapes)

    def second_stage():
      return self._box_classifier.classify(
          prediction_dict['rpn_features_to_crop'], proposal_boxes_normalized,
          functools.partial(
              self._feature_extractor.extract_box_classifier_features,
              scope=SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE), side_inputs,
          prediction_dict['image_shape'])

    (box_classifier_features, refined_box_encodings,
     class_predictions) = self._in_batch_norm_mode(second_stage)
    return {
        'refined_box_encodings': refined_box_encodings,
        'class_predictions_with_background': class_predictions,
        'num_proposals': num_proposals,
        'proposal_boxes': proposal_boxes,
        'proposal_boxes_normalized': proposal_boxes_normalized,
        'box_classifier_features': box_classifier_features,
    }

  def postprocess(self, prediction_dict, true_image_shapes):
    """Detections normalized to each true image (DetectionModel contract).

    With number_of_stages 1 the detections are the proposals: class 0 for
    every one, objectness as score, detection_multiclass_scores [batch,
    max_proposals, 2]. With 2 they are the box classifier's suppressed,
    0-based multi-class detections. With 3 (at inference) predict() has
    made them, with detection_masks [batch, max_detections, mask_h, mask_w]
    (probabilities, box-relative); they are returned as they are.

    Args:
      prediction_dict: predict()'s outputs.
      true_image_shapes: [batch, 3] int32.

    Returns:
      detection_boxes, detection_scores, detection_classes,
      detection_multiclass_scores, num_detections, raw_detection_boxes,
      raw_detection_scores (see BoxClassifier.detections); with
      output_final_box_features also detection_features [batch,
      max_detections, h, w, depth], the box classifier features of each
      detection.
    """
    result = fields.DetectionResultFields
    if result.detection_masks in prediction_dict:
      return {key: value for key, value in prediction_dict.items()
              if key in _DETECTION_RESULT_KEYS}
    if self._box_classifier is None:
      with tf.name_scope('FirstStagePostprocessor'):
        proposals = self._rpn.proposals(
            prediction_dict['rpn_box_encodings'],
            prediction_dict['rpn_objectness_predictions_with_background'],
            prediction_dict['anchors'], true_image_shapes)
        scores = proposals['proposal_scores']
        return {
            result.detection_boxes: region_proposal_network.normalize_boxes(
                proposals['proposal_boxes'], true_image_shapes),
            result.detection_scores: scores,
            result.detection_classes: tf.zeros_like(scores),
            result.detection_multiclass_scores:
                proposals['proposal_multiclass_scores'],
            result.num_detections: tf.cast(proposals['num_proposals'],
                                           tf.float32),
            result.raw_detection_boxes:
                region_proposal_network.normalize_boxes(
                    proposals['raw_boxes'], true_image_shapes),
            result.raw_detection_scores: proposals['raw_scores'],
        }
    with tf.name_scope('SecondStagePostprocessor'):
      detections = self._box_classifier.detections(
          prediction_dict['refined_box_encodings'],
          prediction_dict['class_predictions_with_background'],
          prediction_dict['proposal_boxes'],
          prediction_dict['num_proposals'], true_image_shapes)
    if self._params.output_final_box_features:
      detections[result.detection_features] = self._detection_features(
          detections, prediction_dict, true_image_shapes)
    return detections

  def _format_groundtruth(self, image_shapes):
    """Groundtruth as the stages' target assigners take it.

    Args:
      image_shapes: [batch, 3] int32 preprocessed image shapes (groundtruth
        boxes are normalized to the preprocessed image).

    Returns:
      {'boxlists': per image BoxList of absolute boxes, 'classes': per
      image [num_boxes, num_classes + 1] with background column 0,
      'weights': per image [num_boxes] float32 (ones when not given)}.
    """
    sizes = tf.cast(image_shapes[:, :2], tf.float32)
    boxlists = [
        box_list.BoxList(boxes * tf.tile(sizes[index], [2]))
        for index, boxes in enumerate(
            self.groundtruth_lists(fields.BoxListFields.boxes))]
    classes = [
        tf.pad(tf.cast(one_hot, tf.float32), [[0, 0], [1, 0]])
        for one_hot in self.groundtruth_lists(fields.BoxListFields.classes)]
    if self.groundtruth_has_field(fields.BoxListFields.weights):
      weights = self.groundtruth_lists(fields.BoxListFields.weights)
    else:
      weights = [tf.ones(tf.shape(one_hot)[:1], tf.float32)
                 for one_hot in classes]
    return {'boxlists': boxlists, 'classes': classes, 'weights': weights}

  def loss(self, prediction_dict, true_image_shapes, scope=None):
    """The RPN losses, and with 2 stages the box classifier losses.

    Needs provide_groundtruth and predict first.

    Args:
      prediction_dict: predict()'s outputs.
      true_image_shapes: [batch, 3] int32 (groundtruth is normalized to the
        preprocessed image; only evaluation's mask loss, on the detections,
        reads them).
      scope: optional name scope; 'Loss' by default.

    Returns:
      {'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss'},
      with 2 stages {'Loss/BoxClassifierLoss/localization_loss',
      'Loss/BoxClassifierLoss/classification_loss'} and with 3
      'Loss/BoxClassifierLoss/mask_loss': scalars.

    Raises:
      ValueError: with 3 stages and no groundtruth masks.
    """
    with tf.compat.v1.name_scope(scope, 'Loss'):
      image_shapes = _image_batch_shape_2d(
          prediction_dict['image_shape'],
          prediction_dict['rpn_box_encodings'])
      groundtruth = self._format_groundtruth(image_shapes)
      losses_mask = None
      if self.groundtruth_has_field(fields.InputDataFields.is_annotated):
        losses_mask = tf.stack(self.groundtruth_lists(
            fields.InputDataFields.is_annotated))
      loss_dict = self._rpn.loss(
          prediction_dict['rpn_box_encodings'],
          prediction_dict['rpn_objectness_predictions_with_background'],
          prediction_dict['anchors'], groundtruth['boxlists'],
          groundtruth['weights'], losses_mask)
      if self._box_classifier is not None:
        loss_dict.update(self._box_classifier.loss(
            prediction_dict['refined_box_encodings'],
            prediction_dict['class_predictions_with_background'],
            prediction_dict['proposal_boxes'],
            prediction_dict['num_proposals'], groundtruth['boxlists'],
            groundtruth['classes'], groundtruth['weights'], losses_mask))
      if self._mask_branch is not None:
        loss_dict.update(self._mask_loss(prediction_dict, true_image_shapes,
                                         image_shapes, groundtruth,
                                         losses_mask))
      return loss_dict

  def _mask_loss(self, prediction_dict, true_image_shapes, image_shapes,
                 groundtruth, losses_mask):
    """The mask loss on the proposals (training) or detections."""
    result = fields.DetectionResultFields
    if self._is_training:
      boxes = prediction_dict['proposal_boxes']
      num_boxes = prediction_dict['num_proposals']
    else:
      sizes = tf.tile(tf.cast(true_image_shapes[:, :2], tf.float32), [1, 2])
      boxes = prediction_dict[result.detection_boxes] * sizes[:, tf.newaxis]
      num_boxes = prediction_dict[result.num_detections]
    masks = None
    if self.groundtruth_has_field(fields.BoxListFields.masks):
      masks = self.groundtruth_lists(fields.BoxListFields.masks)
    return self._mask_branch.loss(
        prediction_dict['mask_predictions'], boxes, num_boxes, image_shapes,
        groundtruth['boxlists'], groundtruth['classes'],
        groundtruth['weights'], masks, losses_mask)

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """Returns {name in the checkpoint: variable} to initialize from.

    Args:
      fine_tune_checkpoint_type: 'classification' (the backbone's names
        without the two stage scopes, as the extractor maps them) or
        'detection' (names as in this graph).
      load_all_detection_checkpoint_vars: with 'detection', every global
        variable instead of the feature extractor's (those of its two
        scopes, or of its Keras names).

    Raises:
      ValueError: for another fine_tune_checkpoint_type.
    """
    if fine_tune_checkpoint_type == 'classification':
      return self._feature_extractor.restore_from_classification_checkpoint_fn(
          FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE,
          SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)
    if fine_tune_checkpoint_type == 'detection':
      return {variable.op.name: variable
              for variable in tf.compat.v1.global_variables()
              if load_all_detection_checkpoint_vars or
              self._feature_extractor.owns_variable(variable)}
    raise ValueError('Not supported fine_tune_checkpoint_type: {}'.format(
        fine_tune_checkpoint_type))
