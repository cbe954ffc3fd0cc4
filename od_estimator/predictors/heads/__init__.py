"""Prediction heads: the last layer(s) of a box predictor, one per output.

Also holds the few helpers the box and class heads share.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.core import shape_utils


def check_depthwise_kernel(use_depthwise, kernel_size):
  """Raises ValueError for a depthwise kernel_size of 1.

  A depthwise 1x1 convolution only rescales channels: almost surely a
  configuration mistake (the original rejects it too).
  """
  if use_depthwise and kernel_size == 1:
    raise errors.UserInputError('use_depthwise needs kernel_size > 1, got 1')


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


def _bias_args(bias_init):
  # None keeps slim's default initializer (passing None would drop biases).
  if bias_init is None:
    return {}
  return {'biases_initializer': tf.compat.v1.constant_initializer(bias_init)}


def prediction_conv(net, num_outputs, kernel_size, use_depthwise, scope,
                    bias_init=None):
  """Linear prediction layer of the per-feature-map convolutional heads.

  Args:
    net: [batch_size, height, width, channels] float tensor.
    num_outputs: output channels.
    kernel_size: spatial size of the prediction convolution.
    use_depthwise: run a kernel_size depthwise convolution (keeping the
      arg_scope's normalizer and activation), scope + '_depthwise', then a
      linear 1x1 convolution instead of one linear convolution.
    scope: scope name of the (last) prediction layer.
    bias_init: optional initial value of the single convolution's biases;
      like the original, the depthwise path keeps the default zero bias.

  Returns:
    [batch_size, height, width, num_outputs] float tensor.
  """
  linear = dict(activation_fn=None, normalizer_fn=None,
                normalizer_params=None, scope=scope)
  kernel = [kernel_size, kernel_size]
  if use_depthwise:
    net = slim.separable_conv2d(
        net, None, kernel, depth_multiplier=1, stride=1, rate=1,
        padding='SAME', scope=scope + '_depthwise')
    return slim.conv2d(net, num_outputs, [1, 1], **linear)
  return slim.conv2d(net, num_outputs, kernel, **linear,
                     **_bias_args(bias_init))


def shared_prediction_conv(net, num_outputs, kernel_size, use_depthwise,
                           scope, bias_init=None):
  """Like prediction_conv, for the weight shared heads.

  One linear layer (depthwise separable with use_depthwise) named scope,
  shared through the caller's AUTO_REUSE; bias_init applies on both paths.
  """
  conv_args = dict(stride=1, padding='SAME', activation_fn=None,
                   normalizer_fn=None, scope=scope, **_bias_args(bias_init))
  kernel = [kernel_size, kernel_size]
  if use_depthwise:
    return slim.separable_conv2d(net, num_outputs, kernel, depth_multiplier=1,
                                 **conv_args)
  return slim.conv2d(net, num_outputs, kernel, **conv_args)


def maybe_dropout(features, use_dropout, keep_prob):
  """slim.dropout(features) when use_dropout is set, else features."""
  if use_dropout:
    return slim.dropout(features, keep_prob=keep_prob)
  return features



class FullyConnectedRoiHead:
  """Base of the second-stage heads: one linear layer over pooled ROIs.

  Each ROI's features are averaged over space, optionally dropped out, then
  fed to one fully connected layer without activation, built under the
  fc_hyperparams arg_scope.
  """

  def __init__(self, is_training, fc_hyperparams_fn, use_dropout,
               dropout_keep_prob):
    """Constructor.

    Args:
      is_training: whether the head is built for training (dropout).
      fc_hyperparams_fn: callable returning the slim arg_scope for
        slim.fully_connected (hyperparams_builder.build of an `op: FC`
        Hyperparams).
      use_dropout: apply dropout to the pooled features.
      dropout_keep_prob: keep probability when use_dropout is set.
    """
    self._is_training = is_training
    self._fc_hyperparams_fn = fc_hyperparams_fn
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob

  def _fully_connected(self, features, num_predictions_per_location,
                       num_outputs, scope):
    """Returns [num_rois, num_outputs] from [num_rois, h, w, channels].

    Raises:
      ValueError: if num_predictions_per_location is not 1.
    """
    if num_predictions_per_location != 1:
      raise ValueError('%s predicts once per ROI '
                       '(num_predictions_per_location=1), got %d'
                       % (type(self).__name__, num_predictions_per_location))
    pooled = tf.reduce_mean(features, [1, 2], name='AvgPool')
    if self._use_dropout:
      pooled = slim.dropout(pooled, keep_prob=self._dropout_keep_prob,
                            is_training=self._is_training)
    with slim.arg_scope(self._fc_hyperparams_fn()):
      return slim.fully_connected(pooled, num_outputs, activation_fn=None,
                                  scope=scope)
