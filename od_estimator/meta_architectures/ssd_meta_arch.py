"""SSD meta-architecture: single-shot convolutional detectors (SSD, RetinaNet).

Composed of parts the builder (ssd_model_builder) builds and hands in:

  feature extractor   (FeatureExtractor/...)
  HeadParams          anchor generator, box predictor (BoxPredictor/... or
                      WeightSharedConvolutionalBoxPredictor/...), box
                      coder, non-max suppression and score conversion
  SSDLoss             target assignment and the losses (ssd_loss.py)

A feature extractor turns the preprocessed images into feature maps, the
anchor generator places anchors on every map cell and the box predictor
regresses, per anchor, a box code and class logits (background first).
Training matches anchors to groundtruth (SSDLoss); inference decodes the
codes against the anchors and runs batched NMS.

Only tf-slim feature extractors and box predictors are supported (TF1 graph
mode); their variables live under the 'FeatureExtractor' and the predictor's
scopes so detection checkpoints of the original restore unchanged.
"""
import dataclasses
from typing import Any, Callable

import tensorflow as tf

from od_estimator import errors
from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import box_predictor
from od_estimator.core import model
from od_estimator.core import shape_utils
from od_estimator.core import standard_fields as fields
from od_estimator.meta_architectures import batch_norm_mode
from od_estimator.meta_architectures import ssd_loss
from od_estimator.models import ssd_feature_extractor

# Re-exported: code written for the original imports the extractor base class
# from this module.
SSDFeatureExtractor = ssd_feature_extractor.SSDFeatureExtractor

# Variable scope of slim feature extractors; classification checkpoints hold
# the same variables without this prefix.
FEATURE_EXTRACTOR_SCOPE = 'FeatureExtractor'

_BOX_ENCODINGS = box_predictor.BOX_ENCODINGS
_CLASS_PREDICTIONS = box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND
_MASK_PREDICTIONS = box_predictor.MASK_PREDICTIONS


@dataclasses.dataclass(frozen=True)
class ModelParams:
  """Model-wide settings (ssd.proto fields).

  Attributes:
    image_resizer_fn: fn(image) -> [resized_image, true_image_shape].
    add_background_class: prepend a background column to groundtruth
      classes (the predictor's logits have it).
    explicit_background_class: groundtruth classes already have a
      background column 0.
    freeze_batchnorm: batch norm in inference mode even when training.
    inplace_batchnorm_update: update batch norm statistics with the
      forward pass instead of through the UPDATE_OPS collection.
    return_raw_detections_during_predict: predict() also returns decoded
      boxes and each anchor's feature map index.
  """
  image_resizer_fn: Callable
  add_background_class: bool = True
  explicit_background_class: bool = False
  freeze_batchnorm: bool = False
  inplace_batchnorm_update: bool = False
  return_raw_detections_during_predict: bool = False


@dataclasses.dataclass(frozen=True)
class HeadParams:
  """From feature maps to detections: anchors, predictions, decoding, NMS.

  Attributes:
    anchor_generator: an AnchorGenerator; generate() gets im_height and
      im_width so anchors come out normalized.
    box_predictor: a tf-slim BoxPredictor (its num_classes is the model's).
    box_coder: the BoxCoder of the predicted codes.
    non_max_suppression_fn: batch_multiclass_non_max_suppression with its
      thresholds bound.
    score_conversion_fn: logits -> scores (e.g. tf.sigmoid).
  """
  anchor_generator: Any
  box_predictor: Any
  box_coder: Any
  non_max_suppression_fn: Callable
  score_conversion_fn: Callable


def _compute_clip_window(preprocessed_images, true_image_shapes):
  """Returns the normalized window of each real image inside the padding.

  Args:
    preprocessed_images: [batch, height, width, channels] padded images.
    true_image_shapes: [batch, 3] int32 or None.

  Returns:
    [batch, 4] float32 ymin, xmin, ymax, xmax windows, or the constant
    [0, 0, 1, 1] when true_image_shapes is None.
  """
  if true_image_shapes is None:
    return tf.constant([0, 0, 1, 1], dtype=tf.float32)
  padded_shape = shape_utils.combined_static_and_dynamic_shape(
      preprocessed_images)
  true_heights, true_widths, _ = tf.unstack(
      tf.cast(true_image_shapes, tf.float32), axis=1)
  padded_height = tf.cast(padded_shape[1], tf.float32)
  padded_width = tf.cast(padded_shape[2], tf.float32)
  return tf.stack([tf.zeros_like(true_heights), tf.zeros_like(true_widths),
                   true_heights / padded_height, true_widths / padded_width],
                  axis=1)


class SSDMetaArch(model.DetectionModel):
  """Single-shot detector composed of built parts."""

  def __init__(self, is_training, feature_extractor, model_params, head,
               loss):
    """Creates the model.

    Args:
      is_training: whether to build the training graph.
      feature_extractor: an SSDFeatureExtractor.
      model_params: ModelParams.
      head: HeadParams.
      loss: an ssd_loss.SSDLoss built for the same classes and background
        setting.

    Raises:
      UserInputError: if both background flags are set, or a component is
        a Keras model.
    """
    super().__init__(num_classes=head.box_predictor.num_classes)
    if (model_params.add_background_class and
        model_params.explicit_background_class):
      raise errors.UserInputError("Cannot have both 'add_background_class' and "
                                  "'explicit_background_class' true.")
    if feature_extractor.is_keras_model or head.box_predictor.is_keras_model:
      raise errors.UserInputError(
          'Keras feature extractors and box predictors are not '
          'supported; od_estimator builds tf-slim models.')
    self._is_training = is_training
    self._feature_extractor = feature_extractor
    self._params = model_params
    self._head = head
    self._loss = loss
    self._extract_features_scope = FEATURE_EXTRACTOR_SCOPE
    self._anchors = None
    self._batched_prediction_tensor_names = []

  @property
  def params(self):
    return self._params

  @property
  def head(self):
    return self._head

  @property
  def loss_part(self):
    """The SSDLoss part."""
    return self._loss

  def ignores_groundtruth_padding(self):
    """See SSDLoss.ignores_groundtruth_padding."""
    return self._loss.ignores_groundtruth_padding()

  @property
  def feature_extractor(self):
    return self._feature_extractor

  @property
  def anchors(self):
    """The anchors BoxList of the last predict() call."""
    if not self._anchors:
      raise RuntimeError('anchors have not been constructed yet!')
    if not isinstance(self._anchors, box_list.BoxList):
      raise RuntimeError('anchors should be a BoxList object, but is not.')
    return self._anchors

  @property
  def batched_prediction_tensor_names(self):
    """Keys of predict()'s outputs that have a leading batch dimension."""
    if not self._batched_prediction_tensor_names:
      raise RuntimeError('Must call predict() method to get batched prediction '
                         'tensor names.')
    return self._batched_prediction_tensor_names

  def preprocess(self, inputs):
    """Normalizes with the feature extractor, then resizes every image.

    Args:
      inputs: [batch, height, width, channels] float32 pixels in [0, 255].

    Returns:
      preprocessed_inputs: [batch, new_height, new_width, channels] float32.
      true_image_shapes: [batch, 3] int32, each image's size inside the
        (possibly padded) result.

    Raises:
      ValueError: if inputs is not float32.
    """
    # Checked before the extractor's preprocessing, which may fail
    # less clearly on other dtypes.
    if inputs.dtype != tf.float32:
      raise ValueError('preprocess expects float32 images, got %s' %
                       inputs.dtype.name)
    with tf.name_scope('Preprocessor'):
      normalized_inputs = self._feature_extractor.preprocess(inputs)
      # Unrolled per image when the batch size is static (static shapes).
      resized_inputs, true_image_shapes = (
          shape_utils.static_or_dynamic_map_fn(
              self._params.image_resizer_fn, elems=normalized_inputs,
              dtype=[tf.float32, tf.int32]))
      return resized_inputs, true_image_shapes

  def _run_in_batch_norm_scope(self, build_fn):
    return batch_norm_mode.build_in_batch_norm_mode(
        build_fn, self._is_training and not self._params.freeze_batchnorm,
        self._params.inplace_batchnorm_update)

  def predict(self, preprocessed_inputs, true_image_shapes):
    """Runs the network and builds the anchors (stored on the model).

    Args:
      preprocessed_inputs: [batch, height, width, channels] float32.
      true_image_shapes: [batch, 3] int32 (unused; part of the interface).

    Returns:
      A dict: preprocessed_inputs; box_encodings [batch, num_anchors,
      code_size]; class_predictions_with_background [batch, num_anchors,
      num_classes + 1] logits; feature_maps (list of [batch, h_i, w_i,
      d_i]); anchors [num_anchors, 4] normalized; final_anchors [batch,
      num_anchors, 4]; other predictor outputs; and optionally
      raw_detection_boxes [batch, num_anchors, 4] and
      raw_detection_feature_map_indices [batch, num_anchors] int32.
    """
    del true_image_shapes

    def extract_features():
      with tf.compat.v1.variable_scope(None, self._extract_features_scope,
                                       [preprocessed_inputs]):
        return self._feature_extractor.extract_features(preprocessed_inputs)

    feature_maps = self._run_in_batch_norm_scope(extract_features)

    image_shape = shape_utils.combined_static_and_dynamic_shape(
        preprocessed_inputs)
    feature_map_spatial_dims = [
        tuple(shape_utils.combined_static_and_dynamic_shape(feature_map)[1:3])
        for feature_map in feature_maps]
    boxlist_list = self._head.anchor_generator.generate(
        feature_map_spatial_dims, im_height=image_shape[1],
        im_width=image_shape[2])
    self._anchors = box_list_ops.concatenate(boxlist_list)

    head = self._head
    predictor_results = self._run_in_batch_norm_scope(
        lambda: head.box_predictor.predict(
            feature_maps, head.anchor_generator.num_anchors_per_location()))

    anchors = self._anchors.get()
    predictions_dict = {
        'preprocessed_inputs': preprocessed_inputs,
        'feature_maps': feature_maps,
        'anchors': anchors,
        'final_anchors': tf.tile(tf.expand_dims(anchors, 0),
                                 [image_shape[0], 1, 1]),
    }
    for key, per_map_predictions in predictor_results.items():
      prediction = tf.concat(per_map_predictions, axis=1)
      # Class-shared box codes come as [batch, anchors, 1, code_size].
      if (key == _BOX_ENCODINGS and prediction.shape.ndims == 4 and
          prediction.shape[2] == 1):
        prediction = tf.squeeze(prediction, axis=2)
      predictions_dict[key] = prediction
    if self._params.return_raw_detections_during_predict:
      predictions_dict.update(self._raw_detections_and_feature_map_inds(
          predictions_dict[_BOX_ENCODINGS], boxlist_list))
    self._batched_prediction_tensor_names = [
        key for key in predictions_dict if key != 'anchors']
    return predictions_dict

  def _raw_detections_and_feature_map_inds(self, box_encodings, boxlist_list):
    """Decoded boxes and the feature map each anchor comes from."""
    raw_detection_boxes, _ = ssd_loss.batch_decode(
        self._head.box_coder, box_encodings, self._anchors.get())
    batch_size = shape_utils.combined_static_and_dynamic_shape(
        raw_detection_boxes)[0]
    feature_map_indices = (
        self._head.anchor_generator.anchor_index_to_feature_map_index(
            boxlist_list))
    return {
        fields.PredictionFields.raw_detection_boxes: raw_detection_boxes,
        fields.PredictionFields.raw_detection_feature_map_indices: tf.tile(
            tf.expand_dims(feature_map_indices, 0), [batch_size, 1]),
    }

  def postprocess(self, prediction_dict, true_image_shapes):
    """Decodes the box codes and runs NMS, clipping to the true image.

    Args:
      prediction_dict: predict()'s outputs (at least preprocessed_inputs,
        box_encodings and class_predictions_with_background; anchors default
        to those of the last predict() call).
      true_image_shapes: [batch, 3] int32, or None to clip to the whole
        preprocessed image.

    Returns:
      A dict with detection_boxes [batch, max_detections, 4] normalized,
      detection_scores [batch, max_detections], detection_classes [batch,
      max_detections] float32 0-based, num_detections [batch] float32,
      detection_multiclass_scores [batch, max_detections, num_classes + 1],
      detection_anchor_indices [batch, max_detections] int32,
      raw_detection_boxes [batch, num_anchors, 4], raw_detection_scores
      [batch, num_anchors, num_classes + 1], and detection_keypoints /
      detection_masks when the model predicts them.

    Raises:
      ValueError: if box_encodings or class_predictions_with_background is
        missing.
    """
    if (_BOX_ENCODINGS not in prediction_dict or
        _CLASS_PREDICTIONS not in prediction_dict):
      raise ValueError('prediction_dict does not contain expected entries.')
    if 'anchors' not in prediction_dict:
      prediction_dict['anchors'] = self.anchors.get()
    with tf.name_scope('Postprocessor'):
      preprocessed_images = prediction_dict['preprocessed_inputs']
      batch_size = shape_utils.combined_static_and_dynamic_shape(
          preprocessed_images)[0]
      # The named identities are the raw outputs exporters look up.
      box_encodings = tf.identity(prediction_dict[_BOX_ENCODINGS],
                                  'raw_box_encodings')
      detection_boxes, detection_keypoints = ssd_loss.batch_decode(
          self._head.box_coder, box_encodings, prediction_dict['anchors'])
      detection_boxes = tf.identity(detection_boxes, 'raw_box_locations')
      scores_with_background = self._head.score_conversion_fn(
          prediction_dict[_CLASS_PREDICTIONS])
      detection_scores = tf.identity(scores_with_background, 'raw_box_scores')
      if (self._params.add_background_class or
          self._params.explicit_background_class):
        detection_scores = detection_scores[:, :, 1:]
      if 'feature_maps' in prediction_dict:
        box_features = tf.concat(
            [tf.reshape(feature_map, [batch_size, -1])
             for feature_map in prediction_dict['feature_maps']], axis=1)
        tf.identity(box_features, 'raw_box_features')

      additional_fields = {
          fields.InputDataFields.multiclass_scores: scores_with_background}
      if self._anchors is not None:
        num_anchors = (self._anchors.num_boxes_static() or
                       self._anchors.num_boxes())
        anchor_indices = tf.tile(tf.expand_dims(tf.range(num_anchors), 0),
                                 [batch_size, 1])
        # Additional fields go through NMS as float32.
        additional_fields['anchor_indices'] = tf.cast(anchor_indices,
                                                      tf.float32)
      if detection_keypoints is not None:
        additional_fields[fields.BoxListFields.keypoints] = tf.identity(
            detection_keypoints, 'raw_keypoint_locations')

      (nmsed_boxes, nmsed_scores, nmsed_classes, nmsed_masks,
       nmsed_additional_fields,
       num_detections) = self._head.non_max_suppression_fn(
           tf.expand_dims(detection_boxes, axis=2),
           detection_scores,
           clip_window=_compute_clip_window(preprocessed_images,
                                            true_image_shapes),
           additional_fields=additional_fields,
           masks=prediction_dict.get(_MASK_PREDICTIONS))
      return self._detection_dict(
          nmsed_boxes, nmsed_scores, nmsed_classes, nmsed_masks,
          nmsed_additional_fields or {}, num_detections, detection_boxes,
          scores_with_background)

  def _detection_dict(self, boxes, scores, classes, masks, nmsed_fields,
                      num_detections, raw_boxes, raw_scores):
    """Assembles postprocess()'s output dictionary."""
    result_fields = fields.DetectionResultFields
    detections = {
        result_fields.detection_boxes: boxes,
        result_fields.detection_scores: scores,
        result_fields.detection_classes: classes,
        result_fields.num_detections: tf.cast(num_detections, tf.float32),
        result_fields.raw_detection_boxes: raw_boxes,
        result_fields.raw_detection_scores: raw_scores,
    }
    if fields.InputDataFields.multiclass_scores in nmsed_fields:
      detections[result_fields.detection_multiclass_scores] = nmsed_fields[
          fields.InputDataFields.multiclass_scores]
    if 'anchor_indices' in nmsed_fields:
      detections[result_fields.detection_anchor_indices] = tf.cast(
          nmsed_fields['anchor_indices'], tf.int32)
    if fields.BoxListFields.keypoints in nmsed_fields:
      detections[result_fields.detection_keypoints] = nmsed_fields[
          fields.BoxListFields.keypoints]
    if masks is not None:
      detections[result_fields.detection_masks] = masks
    return detections

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
      classes_list = self.groundtruth_lists(fields.BoxListFields.classes)
      losses_mask = None
      if self.groundtruth_has_field(fields.InputDataFields.is_annotated):
        losses_mask = tf.stack(self.groundtruth_lists(
            fields.InputDataFields.is_annotated))
      return self._loss.loss(
          prediction_dict[_BOX_ENCODINGS], prediction_dict[_CLASS_PREDICTIONS],
          self.anchors, boxes_list, classes_list,
          groundtruth_keypoints_list=self._optional_groundtruth(
              fields.BoxListFields.keypoints),
          groundtruth_weights_list=self._optional_groundtruth(
              fields.BoxListFields.weights),
          groundtruth_confidences_list=self._optional_groundtruth(
              fields.BoxListFields.confidences),
          losses_mask=losses_mask)

  def _optional_groundtruth(self, field):
    if self.groundtruth_has_field(field):
      return self.groundtruth_lists(field)
    return None

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """Returns {name in the checkpoint: variable} to initialize from.

    Args:
      fine_tune_checkpoint_type: 'classification' (backbone names without
        the 'FeatureExtractor/' prefix, as the extractor maps them) or
        'detection' (names as in this graph).
      load_all_detection_checkpoint_vars: with 'detection', every global
        variable instead of those under 'FeatureExtractor' only.

    Raises:
      ValueError: for another fine_tune_checkpoint_type.
    """
    if fine_tune_checkpoint_type == 'classification':
      return self._feature_extractor.restore_from_classification_checkpoint_fn(
          self._extract_features_scope)
    if fine_tune_checkpoint_type == 'detection':
      variables_to_restore = {}
      for variable in tf.compat.v1.global_variables():
        if (load_all_detection_checkpoint_vars or
            self._feature_extractor.owns_variable(
                variable, self._extract_features_scope)):
          variables_to_restore[variable.op.name] = variable
      return variables_to_restore
    raise errors.UserInputError(
        'Not supported fine_tune_checkpoint_type: {}'.format(
        fine_tune_checkpoint_type))
