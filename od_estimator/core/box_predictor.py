"""Box predictor interface: feature maps -> per-anchor box codes and scores.

A box predictor sits between a detector's feature extractor and its losses.
For every feature map it predicts, at each spatial location and for each
anchor placed there, a box encoding (relative to that anchor) and a score per
class including background. Several detectors share the same predictor
architectures, hence this separate interface.
"""
import abc

import tensorflow as tf

# Keys of the dictionary returned by BoxPredictor.predict.
BOX_ENCODINGS = 'box_encodings'
CLASS_PREDICTIONS_WITH_BACKGROUND = 'class_predictions_with_background'
MASK_PREDICTIONS = 'mask_predictions'


class BoxPredictor(abc.ABC):
  """Abstract base class for tf-slim box predictors."""

  def __init__(self, is_training, num_classes):
    """Constructor.

    Args:
      is_training: whether the predictor is built for training (dropout,
        batch norm updates).
      num_classes: number of object classes, background excluded: labels in
        {0, ..., K-1} give num_classes=K, although targets range over
        {0, ..., K} once background is added.
    """
    self._is_training = is_training
    self._num_classes = num_classes

  @property
  def is_keras_model(self):
    """False: these predictors build tf-slim layers (meta-architectures ask)."""
    return False

  @property
  def num_classes(self):
    return self._num_classes

  def predict(self, image_features, num_predictions_per_location,
              scope=None, **params):
    """Predicts box encodings and class scores for every feature map.

    Args:
      image_features: list of float tensors, [batch_size, height_i, width_i,
        channels_i] each.
      num_predictions_per_location: list of ints, the number of anchors per
        spatial location of each feature map.
      scope: optional variable scope wrapping all of the predictor's layers.
      **params: extra keyword arguments of specific predictors.

    Returns:
      A dict with at least:
        box_encodings: list (one entry per feature map) of float tensors,
          either [batch_size, num_anchors_i, q, code_size] with q = 1 or
          num_classes, or [batch_size, num_anchors_i, code_size].
        class_predictions_with_background: list of float tensors
          [batch_size, num_anchors_i, num_classes + 1].
      where num_anchors_i = height_i * width_i *
      num_predictions_per_location[i].

    Raises:
      ValueError: if the two lists differ in length.
    """
    if len(image_features) != len(num_predictions_per_location):
      raise ValueError(
          'image_features and num_predictions_per_location must have the '
          'same length, got %d vs %d' % (len(image_features),
                                         len(num_predictions_per_location)))
    if scope is None:
      return self._predict(image_features, num_predictions_per_location,
                           **params)
    with tf.compat.v1.variable_scope(scope):
      return self._predict(image_features, num_predictions_per_location,
                           **params)

  @abc.abstractmethod
  def _predict(self, image_features, num_predictions_per_location, **params):
    """Builds the predictor's layers; see `predict` for arguments and result."""
