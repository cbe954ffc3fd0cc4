"""Builds tf-slim arg_scopes from `Hyperparams` protos.

`build(config, is_training)` returns a callable; calling it returns the
arg_scope to enter around layer construction, as in the original:

    scope_fn = hyperparams_builder.build(config.conv_hyperparams, True)
    with slim.arg_scope(scope_fn()):
      net = slim.conv2d(net, 32, [3, 3])
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.protos import hyperparams_pb2
from od_estimator.utils import conv_bias

_HP = hyperparams_pb2.Hyperparams


def _swish(features):
  return features * tf.sigmoid(features)


ACTIVATIONS = {
    _HP.NONE: None,
    _HP.RELU: tf.nn.relu,
    _HP.RELU_6: tf.nn.relu6,
    _HP.SWISH: _swish,
}


def _regularizer(config):
  """Returns a slim weights regularizer for a Regularizer proto, or None."""
  kind = config.WhichOneof('regularizer_oneof')
  if kind == 'l1_regularizer':
    return slim.l1_regularizer(scale=float(config.l1_regularizer.weight))
  if kind == 'l2_regularizer':
    # slim's l2 is weight * sum(w^2) / 2, the original's convention.
    return slim.l2_regularizer(scale=float(config.l2_regularizer.weight))
  return None


def _initializer(config):
  """Returns a weights initializer for an Initializer proto, or None."""
  kind = config.WhichOneof('initializer_oneof')
  if kind == 'truncated_normal_initializer':
    params = config.truncated_normal_initializer
    return tf.compat.v1.truncated_normal_initializer(mean=params.mean,
                                                     stddev=params.stddev)
  if kind == 'random_normal_initializer':
    params = config.random_normal_initializer
    return tf.compat.v1.random_normal_initializer(mean=params.mean,
                                                  stddev=params.stddev)
  if kind == 'variance_scaling_initializer':
    params = config.variance_scaling_initializer
    mode = hyperparams_pb2.VarianceScalingInitializer.Mode.Name(params.mode)
    return slim.variance_scaling_initializer(factor=params.factor, mode=mode,
                                             uniform=params.uniform)
  if kind == 'keras_initializer_by_name':
    raise errors.UserInputError(
        'hyperparams.initializer.keras_initializer_by_name (%r) applies to '
        'Keras models only; od_estimator builds tf-slim (TF1) models. Use '
        'truncated_normal_initializer, variance_scaling_initializer or '
        'random_normal_initializer.' % config.keras_initializer_by_name)
  return None


def batch_norm_params(batch_norm, is_training):
  """Returns slim.batch_norm keyword arguments for a BatchNorm proto.

  Statistics are updated only when training and `batch_norm.train` is set;
  otherwise the moving averages are used.
  """
  return {
      'decay': batch_norm.decay,
      'center': batch_norm.center,
      'scale': batch_norm.scale,
      'epsilon': batch_norm.epsilon,
      'is_training': is_training and batch_norm.train,
  }


class SlimHyperparams:
  """Callable returning the arg_scope a Hyperparams proto describes.

  Attributes:
    regularize_depthwise: the proto's flag, for feature extractors whose
      base network takes it (e.g. MobileNet's depthwise weights).
    activation_fn: the activation, or None.
    force_use_bias: convolutions keep their biases before the normalizer.
  """

  def __init__(self, config, is_training):
    self._ops = ([slim.fully_connected] if config.op == _HP.FC else
                 [slim.conv2d, slim.separable_conv2d, slim.conv2d_transpose])
    self._regularizer = _regularizer(config.regularizer)
    self._initializer = _initializer(config.initializer)
    self.activation_fn = ACTIVATIONS[config.activation]
    self.regularize_depthwise = config.regularize_depthwise
    normalizer = config.WhichOneof('normalizer_oneof')
    self._normalizer_fn, self._batch_norm_params = None, None
    if normalizer == 'batch_norm':
      self._normalizer_fn = slim.batch_norm
      self._batch_norm_params = batch_norm_params(config.batch_norm,
                                                  is_training)
    elif normalizer == 'group_norm':
      self._normalizer_fn = slim.group_norm
    self.force_use_bias = config.force_use_bias
    if self.force_use_bias and self._normalizer_fn is not None:
      self._normalizer_fn = conv_bias.biased(self._normalizer_fn)

  def __call__(self):
    # As the original: the scope holds the affected ops (conv2d,
    # separable_conv2d, conv2d_transpose, or fully_connected), plus a
    # slim.batch_norm entry only when batch_norm is configured.
    with (slim.arg_scope([slim.batch_norm], **self._batch_norm_params)
          if self._batch_norm_params is not None else
          contextlib.nullcontext()):
      with slim.arg_scope(self._ops,
                          weights_regularizer=self._regularizer,
                          weights_initializer=self._initializer,
                          activation_fn=self.activation_fn,
                          normalizer_fn=self._normalizer_fn) as scope:
        return scope


def build(hyperparams_config, is_training, allow_force_use_bias=False):
  """Returns a SlimHyperparams for a Hyperparams proto.

  Args:
    hyperparams_config: hyperparams_pb2.Hyperparams.
    is_training: whether the model is being trained (batch norm updates).
    allow_force_use_bias: the caller's layers honour force_use_bias (those
      built as the original's Keras layers); others refuse it.

  Raises:
    ValueError: for a config of another type, or options that apply only to
      Keras models (force_use_bias, sync_batch_norm,
      keras_initializer_by_name), naming the field.
  """
  if not isinstance(hyperparams_config, hyperparams_pb2.Hyperparams):
    raise ValueError('hyperparams_config must be a Hyperparams proto, got %s'
                     % type(hyperparams_config).__name__)
  if hyperparams_config.force_use_bias and not allow_force_use_bias:
    raise errors.UserInputError(
        'hyperparams.force_use_bias applies to Keras models '
        'only; od_estimator builds tf-slim (TF1) models. Remove '
        'it.')
  if hyperparams_config.HasField('sync_batch_norm'):
    raise errors.UserInputError(
        'hyperparams.sync_batch_norm applies to Keras models '
        'only; use batch_norm (on TPU, batch norm statistics are '
        'per replica as in the original TF1 path).')
  return SlimHyperparams(hyperparams_config, is_training)
