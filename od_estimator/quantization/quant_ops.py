"""Fake quantization with min/max variables (last value or moving average).

Each quantizer makes a variable scope `<name_prefix>` holding the non-
trainable variables `min` and `max` (slim model variables), as the original
did, so checkpoints name them `<layer context>/act_quant/min` etc. In
training the range follows the current tensor: its last value (weights) or an
exponential moving average with zero debiasing (activations; the debiasing
adds the original's `.../<var>/biased` and `.../<var>/local_step`
variables). The range always includes 0.0, as TFLite requires. In evaluation
the variables are only read.
"""
import tensorflow as tf
import tf_slim as slim
# TF 2 exports assign_moving_average (with zero debiasing) nowhere public.
from tensorflow.python.training import moving_averages

QUANTIZATION_STEP_NAME = 'fake_quantization_step'


def _range_variables(init_min, init_max, vars_collection):
  make = lambda name, value: slim.model_variable(
      name, shape=[], initializer=tf.compat.v1.constant_initializer(value),
      collections=[vars_collection], trainable=False)
  return make('min', init_min), make('max', init_max)


def _batch_range(inputs):
  batch_min = tf.minimum(tf.reduce_min(inputs, name='BatchMin'), 0.0)
  batch_max = tf.maximum(tf.reduce_max(inputs, name='BatchMax'), 0.0)
  return batch_min, batch_max


def _fake_quantize(inputs, name_prefix, is_training, num_bits, narrow_range,
                   init_min, init_max, vars_collection, update, kind):
  """FakeQuant of `inputs` in [min, max]; `update(var, value, name)` moves a
  range end in training, under the name 'Assign{Min,Max}<kind>'."""
  with tf.compat.v1.variable_scope(None, default_name=name_prefix,
                                   values=[inputs]) as scope:
    scope.set_partitioner(None)
    min_var, max_var = _range_variables(init_min, init_max, vars_collection)
    if is_training:
      batch_min, batch_max = _batch_range(inputs)
      min_var = update(min_var, batch_min, 'AssignMin' + kind)
      max_var = update(max_var, batch_max, 'AssignMax' + kind)
    return tf.quantization.fake_quant_with_min_max_vars(
        inputs, min_var, max_var, num_bits=num_bits, narrow_range=narrow_range)


def last_value_quantize(inputs, name_prefix, is_training=True, num_bits=8,
                        narrow_range=False, init_min=-6.0, init_max=6.0,
                        vars_collection=tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
  """Fake-quantizes `inputs` in the range of its last value (weights)."""
  update = lambda var, value, name: tf.compat.v1.assign(var, value, name=name)
  return _fake_quantize(inputs, name_prefix, is_training, num_bits,
                        narrow_range, init_min, init_max, vars_collection,
                        update, 'Last')


def moving_avg_quantize(inputs, name_prefix, is_training=True, num_bits=8,
                        narrow_range=False, init_min=-6.0, init_max=6.0,
                        ema_decay=0.999,
                        vars_collection=tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
  """Fake-quantizes `inputs` in an EMA of its ranges (activations)."""
  update = lambda var, value, name: moving_averages.assign_moving_average(
      var, value, ema_decay, name=name)
  return _fake_quantize(inputs, name_prefix, is_training, num_bits,
                        narrow_range, init_min, init_max, vars_collection,
                        update, 'Ema')


def quantization_step():
  """The original's step counter for quant_delay: `fake_quantization_step`.

  A non-trainable int64 variable at the graph root, incremented each time the
  graph runs; returns the incremented value (`fake_quantization_step/
  Identity:0`), shared by every delayed quantizer of the graph.
  """
  graph = tf.compat.v1.get_default_graph()
  try:
    return graph.get_tensor_by_name(QUANTIZATION_STEP_NAME + '/Identity:0')
  except KeyError:
    pass
  with graph.name_scope(None):
    step = tf.compat.v1.get_variable(
        QUANTIZATION_STEP_NAME, shape=[], dtype=tf.int64,
        initializer=tf.compat.v1.zeros_initializer(), trainable=False,
        collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES])
    with graph.name_scope(step.op.name + '/'):
      return tf.identity(tf.compat.v1.assign_add(step, 1))
