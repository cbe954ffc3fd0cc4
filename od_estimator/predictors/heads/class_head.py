"""Heads predicting class scores (tf-slim).

Convolutional heads for single-stage predictors and the RPN, a fully
connected one for the second stage of Faster R-CNN. Layer scopes
('ClassPredictor', 'ClassPredictor_depthwise') are those of the TF1 Object
Detection API, so its model-zoo checkpoints restore.
"""
import tensorflow as tf

from od_estimator.predictors import heads
from od_estimator.core import shape_utils


class MaskRCNNClassHead(heads.FullyConnectedRoiHead):
  """Fully connected class head of the Faster R-CNN / Mask R-CNN second stage.

  Its layer (scope 'ClassPredictor') predicts class logits from each ROI's
  spatially averaged features.
  """

  def __init__(self,
               is_training,
               num_class_slots,
               fc_hyperparams_fn,
               use_dropout,
               dropout_keep_prob,
               scope='ClassPredictor'):
    """Constructor.

    Args:
      is_training: whether the head is built for training (dropout).
      num_class_slots: logits per ROI (num_classes + 1 with the implicit
        background class).
      fc_hyperparams_fn: callable returning the slim arg_scope for
        slim.fully_connected.
      use_dropout: apply dropout to the pooled features.
      dropout_keep_prob: keep probability when use_dropout is set.
      scope: scope name of the fully connected layer.
    """
    super().__init__(is_training, fc_hyperparams_fn, use_dropout,
                     dropout_keep_prob)
    self._num_class_slots = num_class_slots
    self._scope = scope

  def predict(self, features, num_predictions_per_location=1):
    """Predicts class logits for every ROI.

    Args:
      features: [num_rois, height, width, channels] float tensor.
      num_predictions_per_location: must be 1.

    Returns:
      [num_rois, 1, num_class_slots] float32 logits.

    Raises:
      ValueError: if num_predictions_per_location is not 1.
    """
    logits = self._fully_connected(features, num_predictions_per_location,
                                   self._num_class_slots, self._scope)
    return tf.reshape(logits, [-1, 1, self._num_class_slots])


class ConvolutionalClassHead:
  """Class head of the (per-feature-map) ConvolutionalBoxPredictor."""

  def __init__(self,
               is_training,
               num_class_slots,
               use_dropout,
               dropout_keep_prob,
               kernel_size,
               apply_sigmoid_to_scores=False,
               class_prediction_bias_init=0.0,
               use_depthwise=False,
               scope='ClassPredictor'):
    """Constructor.

    Args:
      is_training: whether the head is built for training.
      num_class_slots: scores per anchor (num_classes + 1 when an implicit
        background class is added).
      use_dropout: apply dropout to the features before this head (the box
        head never uses dropout). Dropout is active only under an arg_scope
        setting slim.dropout's is_training, as the box predictors do.
      dropout_keep_prob: keep probability when use_dropout is set.
      kernel_size: spatial size of the prediction convolution.
      apply_sigmoid_to_scores: return sigmoid(logits) instead of logits.
      class_prediction_bias_init: initial value of the logits' biases (e.g.
        -4.6 ~ log(0.01 / 0.99) for a focal loss prior). Like the original,
        it is not applied on the use_depthwise path.
      use_depthwise: predict with a kernel_size depthwise convolution
        followed by a 1x1 convolution (SSDLite) instead of one convolution.
      scope: scope name of the prediction layer.

    Raises:
      ValueError: if use_depthwise is set with kernel_size 1.
    """
    heads.check_depthwise_kernel(use_depthwise, kernel_size)
    self._is_training = is_training
    self._num_class_slots = num_class_slots
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._kernel_size = kernel_size
    self._apply_sigmoid_to_scores = apply_sigmoid_to_scores
    self._class_prediction_bias_init = class_prediction_bias_init
    self._use_depthwise = use_depthwise
    self._scope = scope

  def predict(self, features, num_predictions_per_location):
    """Predicts class scores for every anchor of a feature map.

    Args:
      features: [batch_size, height, width, channels] float tensor.
      num_predictions_per_location: int, anchors per spatial location.

    Returns:
      [batch_size, height * width * num_predictions_per_location,
      num_class_slots] float32 logits (or sigmoid scores).
    """
    net = heads.maybe_dropout(features, self._use_dropout,
                              self._dropout_keep_prob)
    predictions = heads.prediction_conv(
        net, num_predictions_per_location * self._num_class_slots,
        self._kernel_size, self._use_depthwise, self._scope,
        bias_init=self._class_prediction_bias_init)
    if self._apply_sigmoid_to_scores:
      predictions = tf.sigmoid(predictions)
    return tf.reshape(predictions, heads.flat_prediction_shape(
        features, num_predictions_per_location, self._num_class_slots))


class WeightSharedConvolutionalClassHead:
  """Class head whose single layer is reused across feature maps.

  Sharing comes from the caller's variable scope (AUTO_REUSE).
  """

  def __init__(self,
               num_class_slots,
               kernel_size=3,
               class_prediction_bias_init=0.0,
               use_dropout=False,
               dropout_keep_prob=0.8,
               use_depthwise=False,
               score_converter_fn=tf.identity,
               return_flat_predictions=True,
               scope='ClassPredictor'):
    """Constructor.

    Args:
      num_class_slots: scores per anchor (num_classes + 1 when an implicit
        background class is added).
      kernel_size: spatial size of the prediction convolution.
      class_prediction_bias_init: initial value of the logits' biases.
      use_dropout: apply dropout to the features before this head.
      dropout_keep_prob: keep probability when use_dropout is set.
      use_depthwise: use a depthwise separable convolution.
      score_converter_fn: elementwise function applied to the logits (e.g.
        tf.identity for training, tf.sigmoid for inference).
      return_flat_predictions: if True return [batch_size, num_anchors,
        num_class_slots]; otherwise [batch_size, height, width,
        num_predictions_per_location * num_class_slots].
      scope: scope name of the prediction layer.

    Raises:
      ValueError: if use_depthwise is set with kernel_size 1.
    """
    heads.check_depthwise_kernel(use_depthwise, kernel_size)
    self._num_class_slots = num_class_slots
    self._kernel_size = kernel_size
    self._class_prediction_bias_init = class_prediction_bias_init
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._use_depthwise = use_depthwise
    self._score_converter_fn = score_converter_fn
    self._return_flat_predictions = return_flat_predictions
    self._scope = scope

  def predict(self, features, num_predictions_per_location):
    """Predicts class scores for every anchor of a feature map.

    Args:
      features: [batch_size, height, width, channels] float tensor.
      num_predictions_per_location: int, anchors per spatial location.

    Returns:
      [batch_size, height * width * num_predictions_per_location,
      num_class_slots] float32 converted scores, or the [batch_size, height,
      width, num_predictions_per_location * num_class_slots] map when
      return_flat_predictions is False.
    """
    net = heads.maybe_dropout(features, self._use_dropout,
                              self._dropout_keep_prob)
    num_outputs = num_predictions_per_location * self._num_class_slots
    predictions = heads.shared_prediction_conv(
        net, num_outputs, self._kernel_size, self._use_depthwise, self._scope,
        bias_init=self._class_prediction_bias_init)
    batch_size, height, width = (
        shape_utils.combined_static_and_dynamic_shape(features)[:3])
    # Split anchors from classes so the converter sees one score per slot.
    predictions = tf.reshape(
        predictions, [batch_size, height, width, num_predictions_per_location,
                      self._num_class_slots])
    predictions = self._score_converter_fn(predictions)
    if self._return_flat_predictions:
      return tf.reshape(predictions, heads.flat_prediction_shape(
          features, num_predictions_per_location, self._num_class_slots))
    return tf.reshape(predictions,
                      [batch_size, height, width, num_outputs])
