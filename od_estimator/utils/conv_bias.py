"""Convolution biases before a normalizer (Keras `use_bias` with batch norm).

slim layers drop their biases when they have a normalizer_fn; the
original's Keras layers keep them under `hyperparams.force_use_bias`. Used
as the normalizer_fn, `biased(normalizer_fn)` adds the layer's `biases`
(zeros, in the layer's scope, as slim names them) before normalizing.
"""
import tensorflow as tf
import tf_slim as slim


def biased(normalizer_fn):
  """normalizer_fn preceded by a per-channel bias of the layer's output."""

  def add_bias_and_normalize(inputs, **normalizer_params):
    # In the inputs' type: under a TPU's bfloat16 scope, its variable getter
    # keeps a float32 variable and gives a bfloat16 copy.
    biases = slim.model_variable(
        'biases', shape=[inputs.shape[-1]], dtype=inputs.dtype.base_dtype,
        initializer=tf.compat.v1.zeros_initializer())
    return normalizer_fn(tf.nn.bias_add(inputs, biases), **normalizer_params)

  return add_bias_and_normalize
