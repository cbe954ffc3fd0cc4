"""The DetectionModel interface every meta-architecture implements.

One training step calls, in order:

    preprocessed, true_image_shapes = model.preprocess(images)
    model.provide_groundtruth(boxes_list, classes_list, ...)
    prediction_dict = model.predict(preprocessed, true_image_shapes)
    losses = model.loss(prediction_dict, true_image_shapes)

and inference calls `postprocess(prediction_dict, true_image_shapes)`;
`model(images)` runs preprocess, predict and postprocess, as the original's.
Classes are 0-based inside the model (no background column in groundtruth
or detections); the input pipeline and exporters convert from and to the
1-based ids of label maps.
"""
import abc

import tensorflow as tf

from od_estimator.core import standard_fields as fields


class DetectionModel(abc.ABC):
  """Abstract detector: preprocessing, prediction, losses, post-processing."""

  def __init__(self, num_classes):
    """Args: num_classes: number of classes, not counting background."""
    self._num_classes = num_classes
    self._groundtruth_lists = {}

  @property
  def num_classes(self):
    return self._num_classes

  def groundtruth_lists(self, field):
    """Returns the per-image list of a groundtruth field.

    Args:
      field: a BoxListFields name (boxes, classes, masks, keypoints, weights,
        is_crowd, ...).

    Raises:
      RuntimeError: when provide_groundtruth did not receive that field.
    """
    if field not in self._groundtruth_lists:
      raise RuntimeError('Groundtruth %r was not provided to the model' %
                         field)
    return self._groundtruth_lists[field]

  def groundtruth_has_field(self, field):
    """Whether provide_groundtruth received this field."""
    return field in self._groundtruth_lists

  def provide_groundtruth(self, groundtruth_boxes_list,
                          groundtruth_classes_list,
                          groundtruth_masks_list=None,
                          groundtruth_keypoints_list=None,
                          groundtruth_weights_list=None,
                          groundtruth_confidences_list=None,
                          groundtruth_is_crowd_list=None,
                          groundtruth_keypoint_visibilities_list=None,
                          groundtruth_labeled_classes=None):
    """Stores groundtruth for the next loss() call.

    Args:
      groundtruth_boxes_list: per image, [num_boxes, 4] float32 normalized
        ymin, xmin, ymax, xmax.
      groundtruth_classes_list: per image, [num_boxes, num_classes] float32
        one-hot (or multi-hot) targets without a background column.
      groundtruth_masks_list: per image, [num_boxes, height, width] float32.
      groundtruth_keypoints_list: per image, [num_boxes, num_keypoints, 2].
      groundtruth_weights_list: per image, [num_boxes] float32.
      groundtruth_confidences_list: per image, [num_boxes, num_classes].
      groundtruth_is_crowd_list: per image, [num_boxes] bool.
      groundtruth_keypoint_visibilities_list: per image,
        [num_boxes, num_keypoints] bool.
      groundtruth_labeled_classes: per image, [num_classes] float32 k-hot of
        the classes that were annotated.
    """
    given = {
        fields.BoxListFields.boxes: groundtruth_boxes_list,
        fields.BoxListFields.classes: groundtruth_classes_list,
        fields.BoxListFields.masks: groundtruth_masks_list,
        fields.BoxListFields.keypoints: groundtruth_keypoints_list,
        fields.BoxListFields.weights: groundtruth_weights_list,
        fields.BoxListFields.confidences: groundtruth_confidences_list,
        fields.BoxListFields.is_crowd: groundtruth_is_crowd_list,
        fields.BoxListFields.keypoint_visibilities:
            groundtruth_keypoint_visibilities_list,
        fields.InputDataFields.groundtruth_labeled_classes:
            groundtruth_labeled_classes,
    }
    self._groundtruth_lists = {k: v for k, v in given.items() if v}

  @abc.abstractmethod
  def preprocess(self, inputs):
    """Resizes and normalizes images.

    Args:
      inputs: [batch, height, width, channels] float32 images.

    Returns:
      preprocessed_inputs: [batch, new_height, new_width, channels] float32.
      true_image_shapes: [batch, 3] int32, the size of each image inside the
        (possibly padded) preprocessed tensor.
    """

  @property
  def side_input_names(self):
    """Names of the side inputs predict() takes (get_side_inputs); none."""
    return ()

  def ignores_groundtruth_padding(self):
    """Whether loss() is bit for bit the same when each image's
    groundtruth lists end with padding rows (zero boxes, weight 0); by
    default not known, so False."""
    return False

  def get_side_inputs(self, features):
    """Tensors of the input features predict() takes besides the images.

    Models that use context (Context R-CNN) take them by name; by default
    a model takes none.

    Args:
      features: the input function's features dict.

    Returns:
      {name: tensor}, passed to predict() as keyword arguments.
    """
    del features
    return {}

  @abc.abstractmethod
  def predict(self, preprocessed_inputs, true_image_shapes, **side_inputs):
    """Runs the network; returns a dict of raw prediction tensors.

    side_inputs are those get_side_inputs() returns.
    """

  @abc.abstractmethod
  def postprocess(self, prediction_dict, true_image_shapes):
    """Turns predictions into detections.

    Returns:
      A dict with detection_boxes [batch, max_detections, 4] normalized,
      detection_scores [batch, max_detections], detection_classes
      [batch, max_detections] 0-based, num_detections [batch], and when the
      model has them detection_masks, detection_keypoints,
      detection_multiclass_scores, raw_detection_boxes,
      raw_detection_scores.
    """

  @abc.abstractmethod
  def loss(self, prediction_dict, true_image_shapes):
    """Returns a dict of scalar loss tensors named 'Loss/...'."""

  @abc.abstractmethod
  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """Returns {name in the checkpoint: variable} to initialize from.

    Args:
      fine_tune_checkpoint_type: 'detection' (a checkpoint of the whole
        detector) or 'classification' (a backbone trained for
        classification, whose names lack the detector's scope prefix).
      load_all_detection_checkpoint_vars: with 'detection', map every model
        variable rather than the feature extractor's only.
    """

  def call(self, images):
    """Returns detections for a batch of images, as the original's call.

    Runs preprocess, predict and postprocess in turn.

    Args:
      images: [batch, height, width, channels] float32 images, values 0-255.

    Returns:
      The dict of detection tensors postprocess returns.
    """
    preprocessed_inputs, true_image_shapes = self.preprocess(images)
    prediction_dict = self.predict(preprocessed_inputs, true_image_shapes)
    return self.postprocess(prediction_dict, true_image_shapes)

  def __call__(self, images):
    """`model(images)` returns detections, as the original's Keras layer."""
    return self.call(images)

  def regularization_losses(self):
    """Returns a copy of the graph's REGULARIZATION_LOSSES collection.

    tf-slim layers add their weight decay terms there, whatever the family.
    """
    return list(tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES))

  def updates(self):
    """Returns a copy of the graph's UPDATE_OPS (batch norm statistics)."""
    return list(tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.UPDATE_OPS))
