"""Prediction heads: the last layer(s) of a box predictor, one per output.

Also holds the few helpers the box and class heads share.
"""
from od_estimator.utils import shape_utils


def check_depthwise_kernel(use_depthwise, kernel_size):
  """Raises ValueError for a depthwise kernel_size of 1.

  A depthwise 1x1 convolution only rescales channels: almost surely a
  configuration mistake (the original rejects it too).
  """
  if use_depthwise and kernel_size == 1:
    raise ValueError('use_depthwise needs kernel_size > 1, got 1')


def flat_prediction_shape(features, num_predictions_per_location, *inner):
  """Returns [batch_size, num_anchors, *inner] for reshaping a head's output.

  Dimensions are static wherever features' shape is: num_anchors = height *
  width * num_predictions_per_location when height and width are static (-1
  otherwise), so an unknown batch size alone does not hide the anchor count.

  Args:
    features: [batch_size, height, width, channels] tensor the head ran on.
    num_predictions_per_location: int, anchors per spatial location.
    *inner: trailing dimensions (ints).
  """
  batch_size, height, width = (
      shape_utils.combined_static_and_dynamic_shape(features)[:3])
  num_anchors = -1
  if isinstance(height, int) and isinstance(width, int):
    num_anchors = height * width * num_predictions_per_location
  return [batch_size, num_anchors] + list(inner)
