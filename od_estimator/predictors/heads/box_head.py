"""Heads predicting box encodings (tf-slim).

Convolutional heads for single-stage predictors and the RPN, a fully
connected one for the second stage of Faster R-CNN. Layer scopes
('BoxEncodingPredictor', 'BoxEncodingPredictor_depthwise', 'BoxPredictor')
are those of the TF1 Object Detection API, so its model-zoo checkpoints
restore into these heads.
"""
import tensorflow as tf

from od_estimator.predictors import heads


def _clip(box_encodings, clip_range):
  """Clips to [clip_range.min, clip_range.max] if a range is given.

  Bounded encodings keep the box decoder's exp() finite, which TPU inference
  graphs rely on.
  """
  if clip_range is None:
    return box_encodings
  return tf.clip_by_value(box_encodings, clip_range.min, clip_range.max)


class MaskRCNNBoxHead(heads.FullyConnectedRoiHead):
  """Fully connected box head of the Faster R-CNN / Mask R-CNN second stage.

  Its layer 'BoxEncodingPredictor' predicts a box per class (or one shared
  box) from each ROI's spatially averaged features.
  """

  def __init__(self,
               is_training,
               num_classes,
               fc_hyperparams_fn,
               use_dropout,
               dropout_keep_prob,
               box_code_size,
               share_box_across_classes=False):
    """Constructor.

    Args:
      is_training: whether the head is built for training (dropout).
      num_classes: number of classes, background excluded.
      fc_hyperparams_fn: callable returning the slim arg_scope for
        slim.fully_connected.
      use_dropout: apply dropout to the pooled features.
      dropout_keep_prob: keep probability when use_dropout is set.
      box_code_size: size of one box encoding.
      share_box_across_classes: predict one box for all classes instead of
        one per class.
    """
    super().__init__(is_training, fc_hyperparams_fn, use_dropout,
                     dropout_keep_prob)
    self._num_classes = num_classes
    self._share_box_across_classes = share_box_across_classes
    self._num_boxes = 1 if share_box_across_classes else num_classes
    self._box_code_size = box_code_size

  def predict(self, features, num_predictions_per_location=1):
    """Predicts box encodings for every ROI.

    Args:
      features: [num_rois, height, width, channels] float tensor.
      num_predictions_per_location: must be 1.

    Returns:
      [num_rois, 1, num_boxes, box_code_size] float32 box encodings, with
      num_boxes = 1 when boxes are shared across classes, else num_classes.

    Raises:
      ValueError: if num_predictions_per_location is not 1.
    """
    box_encodings = self._fully_connected(
        features, num_predictions_per_location,
        self._num_boxes * self._box_code_size, 'BoxEncodingPredictor')
    return tf.reshape(box_encodings,
                      [-1, 1, self._num_boxes, self._box_code_size])


class ConvolutionalBoxHead:
  """Box head of the (per-feature-map) ConvolutionalBoxPredictor."""

  def __init__(self,
               is_training,
               box_code_size,
               kernel_size,
               use_depthwise=False,
               box_encodings_clip_range=None):
    """Constructor.

    Args:
      is_training: whether the head is built for training.
      box_code_size: size of one box encoding (4 for Faster R-CNN codes).
      kernel_size: spatial size of the prediction convolution.
      use_depthwise: predict with a kernel_size depthwise convolution
        followed by a 1x1 convolution (SSDLite) instead of one convolution.
      box_encodings_clip_range: optional object with `min` and `max`
        attributes; encodings are clipped to that range.

    Raises:
      ValueError: if use_depthwise is set with kernel_size 1.
    """
    heads.check_depthwise_kernel(use_depthwise, kernel_size)
    self._is_training = is_training
    self._box_code_size = box_code_size
    self._kernel_size = kernel_size
    self._use_depthwise = use_depthwise
    self._box_encodings_clip_range = box_encodings_clip_range

  def predict(self, features, num_predictions_per_location):
    """Predicts box encodings for every anchor of a feature map.

    Args:
      features: [batch_size, height, width, channels] float tensor.
      num_predictions_per_location: int, anchors per spatial location.

    Returns:
      [batch_size, height * width * num_predictions_per_location, 1,
      box_code_size] float32 box encodings (anchors ordered by row, column,
      then anchor index).
    """
    box_encodings = heads.prediction_conv(
        features, num_predictions_per_location * self._box_code_size,
        self._kernel_size, self._use_depthwise, 'BoxEncodingPredictor')
    box_encodings = _clip(box_encodings, self._box_encodings_clip_range)
    return tf.reshape(box_encodings, heads.flat_prediction_shape(
        features, num_predictions_per_location, 1, self._box_code_size))


class WeightSharedConvolutionalBoxHead:
  """Box head whose single layer is reused across feature maps.

  Sharing comes from the caller's variable scope (AUTO_REUSE): this head
  always uses the scope name 'BoxPredictor'.
  """

  def __init__(self,
               box_code_size,
               kernel_size=3,
               use_depthwise=False,
               box_encodings_clip_range=None,
               return_flat_predictions=True):
    """Constructor.

    Args:
      box_code_size: size of one box encoding.
      kernel_size: spatial size of the prediction convolution.
      use_depthwise: use a depthwise separable convolution.
      box_encodings_clip_range: optional object with `min` and `max`
        attributes; encodings are clipped to that range.
      return_flat_predictions: if True return [batch_size, num_anchors,
        box_code_size]; otherwise the unreshaped [batch_size, height, width,
        num_predictions_per_location * box_code_size] map.

    Raises:
      ValueError: if use_depthwise is set with kernel_size 1.
    """
    heads.check_depthwise_kernel(use_depthwise, kernel_size)
    self._box_code_size = box_code_size
    self._kernel_size = kernel_size
    self._use_depthwise = use_depthwise
    self._box_encodings_clip_range = box_encodings_clip_range
    self._return_flat_predictions = return_flat_predictions

  def predict(self, features, num_predictions_per_location):
    """Predicts box encodings for every anchor of a feature map.

    Args:
      features: [batch_size, height, width, channels] float tensor.
      num_predictions_per_location: int, anchors per spatial location.

    Returns:
      [batch_size, height * width * num_predictions_per_location,
      box_code_size] float32 box encodings, or the [batch_size, height,
      width, num_predictions_per_location * box_code_size] map when
      return_flat_predictions is False.
    """
    box_encodings = heads.shared_prediction_conv(
        features, num_predictions_per_location * self._box_code_size,
        self._kernel_size, self._use_depthwise, 'BoxPredictor')
    box_encodings = _clip(box_encodings, self._box_encodings_clip_range)
    if not self._return_flat_predictions:
      return box_encodings
    return tf.reshape(box_encodings, heads.flat_prediction_shape(
        features, num_predictions_per_location, self._box_code_size))
