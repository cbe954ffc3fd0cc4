"""Builds a training optimizer and its learning rate from an Optimizer config.

Graph mode only (the original's TF1 path): the optimizers are
tf.compat.v1.train optimizers and the learning rate is a tensor of the global
step. `use_moving_average` wraps the optimizer in MovingAverageOptimizer,
our replacement for tf.contrib.opt.MovingAverageOptimizer, which keeps
shadow variables named `<var>/ExponentialMovingAverage` like the original
so checkpoints stay interchangeable.
"""
from absl import logging
import tensorflow as tf
# PartitionedVariable has no public TF2 symbol.
from tensorflow.python.ops import variables as tf_variables

from od_estimator import errors
from od_estimator.protos import optimizer_pb2
from od_estimator.utils import learning_schedules

_EMA_NAME = 'ExponentialMovingAverage'


def _constant_rate(config, global_step):
  del global_step  # A constant rate does not depend on the step.
  return tf.constant(config.learning_rate, dtype=tf.float32,
                     name='learning_rate')


def _exponential_decay_rate(config, global_step):
  return learning_schedules.exponential_decay_with_burnin(
      global_step,
      config.initial_learning_rate,
      config.decay_steps,
      config.decay_factor,
      burnin_learning_rate=config.burnin_learning_rate,
      burnin_steps=config.burnin_steps,
      min_learning_rate=config.min_learning_rate,
      staircase=config.staircase)


def _manual_step_rate(config, global_step):
  if not config.schedule:
    raise errors.UserInputError(
        'ManualStepLearningRate.schedule is empty: give at '
        'least one { step, learning_rate } entry.')
  return learning_schedules.manual_stepping(
      global_step,
      [entry.step for entry in config.schedule],
      [config.initial_learning_rate] +
      [entry.learning_rate for entry in config.schedule],
      warmup=config.warmup)


def _cosine_decay_rate(config, global_step):
  return learning_schedules.cosine_decay_with_warmup(
      global_step,
      config.learning_rate_base,
      config.total_steps,
      config.warmup_learning_rate,
      config.warmup_steps,
      config.hold_base_rate_steps)


# Keyed by the LearningRate `learning_rate` oneof field name; each takes that
# field's message and the global step.
_LEARNING_RATES = {
    'constant_learning_rate': _constant_rate,
    'exponential_decay_learning_rate': _exponential_decay_rate,
    'manual_step_learning_rate': _manual_step_rate,
    'cosine_decay_learning_rate': _cosine_decay_rate,
}

# Keyed by the Optimizer `optimizer` oneof field name; each takes that
# field's message and the learning rate tensor.
_OPTIMIZERS = {
    'rms_prop_optimizer':
        lambda config, rate: tf.compat.v1.train.RMSPropOptimizer(
            rate,
            decay=config.decay,
            momentum=config.momentum_optimizer_value,
            epsilon=config.epsilon),
    'momentum_optimizer':
        lambda config, rate: tf.compat.v1.train.MomentumOptimizer(
            rate, momentum=config.momentum_optimizer_value),
    'adam_optimizer':
        lambda config, rate: tf.compat.v1.train.AdamOptimizer(
            rate, epsilon=config.epsilon),
}


def _create_learning_rate(learning_rate_config, global_step=None,
                          field='learning_rate'):
  """Builds the learning rate tensor of a LearningRate message.

  Args:
    learning_rate_config: optimizer_pb2.LearningRate.
    global_step: scalar int tensor or variable; None uses
      tf.compat.v1.train.get_or_create_global_step().
    field: path of the message in the config, for error messages.

  Returns:
    Scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if the `learning_rate` oneof is not set or the schedule's
      numbers are invalid.
  """
  if global_step is None:
    global_step = tf.compat.v1.train.get_or_create_global_step()
  which = learning_rate_config.WhichOneof('learning_rate')
  if which is None:
    raise errors.UserInputError(
        '%s: the learning_rate oneof is not set; expected one of %s.'
        % (field, ', '.join(sorted(_LEARNING_RATES))))
  return _LEARNING_RATES[which](getattr(learning_rate_config, which),
                                global_step)


def _variables_by_checkpoint_name(var_list):
  """Groups variables by the name tf.compat.v1.train.Saver saves them under.

  Args:
    var_list: list of variables, possibly PartitionedVariables or their parts.

  Returns:
    dict from name to variable, or to the list of parts of a partitioned
    variable (saved as slices of one tensor).
  """
  by_name = {}
  for var in var_list:
    if isinstance(var, tf_variables.PartitionedVariable):
      by_name.setdefault(var.name, []).extend(list(var))
      continue
    slice_info = getattr(var, '_save_slice_info', None)
    if slice_info is not None:
      by_name.setdefault(slice_info.full_name, []).append(var)
    else:
      by_name[var.op.name] = var
  return by_name


class MovingAverageOptimizer(tf.compat.v1.train.Optimizer):
  """Wraps an optimizer and keeps moving averages of the trained variables.

  After each update by the wrapped optimizer, a
  tf.compat.v1.train.ExponentialMovingAverage(average_decay) updates one
  shadow variable per variable that received a gradient, named
  `<var>/ExponentialMovingAverage` (as tf.contrib.opt.MovingAverageOptimizer
  did), so `shadow = decay * shadow + (1 - decay) * var`.

  Evaluation and export read the averages with a Saver built from
  variables_to_restore() (or the module function of the same purpose,
  moving_average_variables_to_restore, when no optimizer is built). Training
  may instead save with swapping_saver(), which writes the averages under the
  variables' own names.
  """

  def __init__(self, opt, average_decay=0.9999, num_updates=None,
               name='MovingAverageOptimizer'):
    """Creates the wrapper.

    Args:
      opt: tf.compat.v1.train.Optimizer doing the actual updates.
      average_decay: decay of the moving average.
      num_updates: optional step tensor; when given the decay is
        min(average_decay, (1 + num_updates) / (10 + num_updates)).
      name: name of this optimizer.
    """
    super().__init__(use_locking=False, name=name)
    self._optimizer = opt
    # No zero-debiasing: shadows start at the variables' initial values, as
    # in the original.
    self._ema = tf.compat.v1.train.ExponentialMovingAverage(
        average_decay, num_updates=num_updates, zero_debias=False)
    self._averaged_variables = None
    self._swap = None

  @property
  def optimizer(self):
    """The wrapped optimizer."""
    return self._optimizer

  @property
  def average_decay(self):
    return self._ema._decay  # pylint: disable=protected-access

  @property
  def ema(self):
    """The tf.compat.v1.train.ExponentialMovingAverage in use."""
    return self._ema

  def compute_gradients(self, *args, **kwargs):
    return self._optimizer.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """Applies gradients, then updates the moving averages.

    Args:
      grads_and_vars: list of (gradient, variable) pairs.
      global_step: optional variable incremented by the wrapped optimizer.
      name: optional name of the wrapped optimizer's update op.

    Returns:
      Op running the update and then the moving average update.
    """
    grads_and_vars = list(grads_and_vars)
    train_op = self._optimizer.apply_gradients(
        grads_and_vars, global_step=global_step, name=name)
    variables = [var for grad, var in grads_and_vars if grad is not None]
    # The averages must see the weights after this step's update.
    with tf.control_dependencies([train_op]):
      average_op = self._ema.apply(variables)
    self._averaged_variables = variables
    self._swap = {}
    for var in variables:
      average = self._ema.average(var)
      self._swap[var.ref()] = average
      self._swap[average.ref()] = var
    return tf.group(train_op, average_op, name='train_with_avg')

  def get_slot(self, var, name):
    return self._optimizer.get_slot(var, name)

  def get_slot_names(self):
    return self._optimizer.get_slot_names()

  def variables(self):
    return self._optimizer.variables()

  def _check_applied(self, method):
    if self._swap is None:
      raise RuntimeError('MovingAverageOptimizer.%s needs apply_gradients() '
                         'or minimize() to be called first.' % method)

  def variables_to_restore(self):
    """Saver var_list restoring the averages into the trained variables.

    Returns:
      dict from checkpoint name to variable: `<var>/ExponentialMovingAverage`
      for each averaged variable, the plain name for every other global
      variable.

    Raises:
      RuntimeError: if called before apply_gradients().
    """
    self._check_applied('variables_to_restore')
    return self._ema.variables_to_restore(
        moving_avg_variables=self._averaged_variables)

  def swapping_saver(self, var_list=None, name='swapping_saver', **kwargs):
    """Saver that exchanges each averaged variable with its average.

    Saving writes the averages under the variables' names (and the raw
    weights under the average names); restoring does the reverse. Build it
    after all variables exist.

    Args:
      var_list: list or dict of variables as for tf.compat.v1.train.Saver;
        None means all global variables.
      name: name of the saver.
      **kwargs: other tf.compat.v1.train.Saver arguments.

    Returns:
      tf.compat.v1.train.Saver.

    Raises:
      RuntimeError: if called before apply_gradients().
    """
    self._check_applied('swapping_saver')
    if var_list is None:
      var_list = tf.compat.v1.global_variables()
    if not isinstance(var_list, dict):
      var_list = _variables_by_checkpoint_name(var_list)
    swapped = {}
    for key, value in var_list.items():
      # Partitioned variables come as lists of parts; each part has its own
      # average.
      if isinstance(value, (list, tuple)):
        swapped[key] = [self._swap.get(part.ref(), part) for part in value]
      else:
        swapped[key] = self._swap.get(value.ref(), value)
    return tf.compat.v1.train.Saver(swapped, name=name, **kwargs)


def moving_average_variables_to_restore(var_list=None, checkpoint_path=None):
  """Saver var_list loading moving averages, for eval/export graphs.

  Each trainable variable is read from `<name>/ExponentialMovingAverage`,
  every other variable from its own name, as
  ExponentialMovingAverage.variables_to_restore() does. With a checkpoint,
  trainable variables that have no average in it (e.g. frozen during
  training, so never averaged) fall back to their own name instead of
  failing the restore.

  Args:
    var_list: variables to restore; None means all global variables.
    checkpoint_path: optional checkpoint prefix to check names against.

  Returns:
    dict from checkpoint name to variable.
  """
  if var_list is None:
    var_list = tf.compat.v1.global_variables()
  trainable = {var.ref() for var in tf.compat.v1.trainable_variables()}
  checkpoint_names = None
  if checkpoint_path is not None:
    checkpoint_names = set(tf.compat.v1.train.NewCheckpointReader(
        checkpoint_path).get_variable_to_shape_map())
  name_map = {}
  plain = []
  without_average = []
  for var in var_list:
    name = var.op.name
    if name.endswith('/' + _EMA_NAME):
      # A shadow variable of the training graph: its value comes from the
      # checkpoint entry of the same name through its own variable's mapping.
      continue
    average_name = '%s/%s' % (name, _EMA_NAME)
    if var.ref() not in trainable:
      plain.append((name, var))
    elif checkpoint_names is not None and average_name not in checkpoint_names:
      without_average.append(name)
      plain.append((name, var))
    else:
      name_map[average_name] = var
  for name, var in plain:
    name_map.setdefault(name, var)
  if without_average:
    logging.warning('No moving average in %s for %d trainable variables; '
                    'restoring their raw values: %s', checkpoint_path,
                    len(without_average), ', '.join(without_average))
  return name_map


def build(optimizer_config, global_step=None):
  """Builds the optimizer and learning rate of an Optimizer config.

  Args:
    optimizer_config: optimizer_pb2.Optimizer.
    global_step: scalar int step variable or tensor; None uses
      tf.compat.v1.train.get_or_create_global_step().

  Returns:
    optimizer: tf.compat.v1.train.Optimizer (a MovingAverageOptimizer when
      `use_moving_average`).
    summary_vars: list holding the learning rate tensor, for summaries.

  Raises:
    ValueError: if the config is not an Optimizer proto, the `optimizer` or
      a `learning_rate` oneof is not set, or a schedule is invalid.
    RuntimeError: if called eagerly (the schedules are graph tensors).
  """
  if not isinstance(optimizer_config, optimizer_pb2.Optimizer):
    raise ValueError('optimizer_config must be an optimizer_pb2.Optimizer, '
                     'got %s.' % type(optimizer_config).__name__)
  if tf.executing_eagerly():
    raise RuntimeError('optimizer_builder.build needs graph mode: a learning '
                       'rate schedule built eagerly would never change.')
  which = optimizer_config.WhichOneof('optimizer')
  if which is None:
    raise errors.UserInputError(
        'Optimizer.optimizer is not set; expected one of %s.'
        % ', '.join(sorted(_OPTIMIZERS)))
  config = getattr(optimizer_config, which)
  learning_rate = _create_learning_rate(
      config.learning_rate, global_step=global_step,
      field='Optimizer.%s.learning_rate' % which)
  optimizer = _OPTIMIZERS[which](config, learning_rate)
  if optimizer_config.use_moving_average:
    optimizer = MovingAverageOptimizer(
        optimizer, average_decay=optimizer_config.moving_average_decay)
  return optimizer, [learning_rate]
