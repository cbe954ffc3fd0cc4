"""Resuming a training from the original TF2 trainer's checkpoints (ckpt-N).

The original's model_main_tf2 saves tf.train.Checkpoint(step, model,
optimizer) as ckpt-N in its model_dir (N counts the saves, `step` holds the
training step). A training launched on that folder continues from its
latest ckpt-N as the original would: the training graph's Saver, which the
Estimator restores the folder's latest checkpoint with, reads a ckpt-N by
object path instead of by name:

  model weights      every one, by object path or Keras name, as a `full`
                     fine-tuning matches them (object_checkpoint); a value
                     missing or of another shape refuses the launch before
                     anything is written;
  global_step        the checkpoint's `step` (else the optimizer's `iter`);
  moving averages    `<var>/ExponentialMovingAverage` from the value's
                     `average` slot; without one, the restored weight;
  optimizer slots    from the value's slot of the Keras optimizer the
                     original built for the same config (KERAS_SLOTS);
                     Keras SGD keeps its velocity in weight units
                     (v = m * v - lr * g), our MomentumOptimizer in gradient
                     units (a = m * a + g), so a = -v / lr at the restored
                     step's learning rate (the same next update);
  Adam's beta powers beta^(iterations + 1), as Keras derives them.

A slot the checkpoint cannot give starts afresh, said in one log line. The
Saver then saves our model.ckpt-N beside the original's files: it forgets
the ckpt-N the `checkpoint` state file listed, so it never deletes them (it
rewrites the state file, which then names ours; a relaunch resumes from
ours as usual).
"""
import os

from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import object_checkpoint
from od_estimator.estimator import training_graph
from od_estimator.utils import checkpoint_contents

_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP
_EMA_NAME = 'ExponentialMovingAverage'
# Our optimizer's slot name -> the slot name of the Keras optimizer the
# original builds for the same config (momentum_optimizer: SGD,
# adam_optimizer: Adam, rms_prop_optimizer: RMSprop); tests/data/
# tf2_optimizer_slots records them.
KERAS_SLOTS = {
    tf.compat.v1.train.MomentumOptimizer: {'momentum': 'momentum'},
    tf.compat.v1.train.AdamOptimizer: {'m': 'm', 'v': 'v'},
    tf.compat.v1.train.RMSPropOptimizer: {'rms': 'rms',
                                          'momentum': 'momentum'},
}
# Where the original's optimizer keeps its slots and step count (below its
# ExponentialMovingAverage wrapper when it averages).
_OPTIMIZER_PATHS = ('optimizer', 'optimizer/ema_base_optimizer')
_SHOWN = 5


def resuming_model_fn(model_fn, model_dir, checkpoint, then):
  """model_fn whose training graph resumes from the TF2 `checkpoint`.

  Args:
    model_fn: the model_fn.
    model_dir: --model_dir as given (for the messages).
    checkpoint: the ckpt-N of model_dir training resumes from.
    then: fn() run once the training graph fits the checkpoint.

  Returns:
    fn(features, labels, mode, params=None).

  Raises (as the TRAIN graph is built, before anything is written):
    errors.UserInputError: the checkpoint is of another model, or the run
      uses a distribution strategy or TPUs.
  """
  def object_resuming_model_fn(features, labels, mode, params=None):
    spec = model_fn(features, labels, mode, params)
    if mode != tf.estimator.ModeKeys.TRAIN:
      return spec
    if tf.distribute.has_strategy() or not isinstance(
        spec, tf.estimator.EstimatorSpec):
      raise errors.UserInputError(
          '--model_dir=%s holds %s of the original TF2 trainer, which '
          'training resumes from on one machine only (no --num_workers, '
          'no --use_tpu): resume there, then relaunch on more once our '
          'model.ckpt-N is saved.' % (model_dir, os.path.basename(checkpoint)))
    plan = Plan(checkpoint, model_dir)
    if spec.scaffold is None or spec.scaffold.saver is None:
      saver = tf.compat.v1.train.Saver(sharded=True, save_relative_paths=True)
      spec = spec._replace(scaffold=tf.compat.v1.train.Scaffold(saver=saver))
    plan.attach(spec.scaffold.saver)
    then()
    return spec
  return object_resuming_model_fn


class Plan:
  """What of the default graph's global variables a TF2 checkpoint gives.

  Built with the training graph (its ops too); `attach` makes a Saver
  restore by it.
  """

  def __init__(self, checkpoint, model_dir):
    self._checkpoint = checkpoint
    values = checkpoint_contents.read(checkpoint)
    (optimizer, self._learning_rate), = tf.compat.v1.get_collection(
        training_graph.OPTIMIZER_COLLECTION)
    base = getattr(optimizer, 'optimizer', optimizer)
    restored = _model_weights(values, base, model_dir, checkpoint)
    path_of = {variable.ref(): checkpoint_contents.object_path(key)
               for key, variable in restored.items()}
    slots = {(value.slot_of, value.slot_name, value.key.split(
        '/.OPTIMIZER_SLOT/')[1].rsplit('/', 3)[0]): value
             for value in values if value.slot_of is not None}
    self._afresh, self._velocities, self._unaveraged = [], [], []
    for variable in tf.compat.v1.trainable_variables():
      path = path_of.get(variable.ref())
      self._map_slots(base, variable, path and {
          name: value for (owner, name, where), value in slots.items()
          if owner == path and where in _OPTIMIZER_PATHS}, restored)
      average = (optimizer.ema.average(variable) if base is not optimizer
                 else None)
      if average is not None:
        value = path and slots.get(
            (path, checkpoint_contents.AVERAGE_SLOT, 'optimizer'))
        if value is None:
          self._unaveraged.append((average, variable))
        else:
          restored[value.key] = average
    self._step_count = next((value.key for value in values if value.path in (
        [path + '/iter' for path in _OPTIMIZER_PATHS])), None)
    self._saver = tf.compat.v1.train.Saver(restored)
    self._build_ops(base, restored)

  def _map_slots(self, base, variable, saved, restored):
    """Adds the slots of `variable` to `restored` ({key: variable}) where
    `saved` ({Keras slot name: value}, None: no weight) gives them."""
    for name in base.get_slot_names():
      slot = base.get_slot(variable, name)
      if slot is None:
        continue
      value = (saved or {}).get(KERAS_SLOTS.get(type(base), {}).get(name))
      if value is None or value.shape != slot.shape.as_list():
        self._afresh.append(slot)
        continue
      restored[value.key] = slot
      if isinstance(base, tf.compat.v1.train.MomentumOptimizer):
        self._velocities.append(slot)

  def _build_ops(self, base, restored):
    """The ops run after the restore (the graph is final by then)."""
    self._betas = [variable for variable in base.variables()
                   if _is_beta_power(variable)]
    covered = {variable.ref() for variable in (
        list(restored.values()) + self._afresh + self._betas +
        [average for average, _ in self._unaveraged])}
    self._afresh += [variable for variable in tf.compat.v1.global_variables()
                     if variable.ref() not in covered]
    self._initialize = tf.compat.v1.variables_initializer(self._afresh)
    self._scale = tf.compat.v1.placeholder(tf.float32, [])
    self._rescale = tf.group([slot.assign(slot * self._scale)
                              for slot in self._velocities])
    self._initialize_velocities = tf.compat.v1.variables_initializer(
        self._velocities)
    self._average = tf.group([average.assign(variable) for average, variable
                              in self._unaveraged])
    self._iterations = tf.compat.v1.placeholder(tf.float32, [])
    self._beta_powers = tf.group([
        beta.assign(tf.pow(tf.cast(base_value, tf.float32),
                           self._iterations + 1.))
        for beta, base_value in zip(self._betas, _betas(base))])

  def attach(self, saver):
    """Makes `saver` restore this checkpoint by the plan, and keep the
    original's ckpt-N off the list of checkpoints it deletes."""
    name_based_restore = saver.restore
    name_based_recover = saver.recover_last_checkpoints

    def restore(sess, save_path):
      if save_path != self._checkpoint:
        return name_based_restore(sess, save_path)
      return self.restore(sess)

    def recover_last_checkpoints(paths):
      name_based_recover([path for path in paths
                          if not checkpoint_contents.is_object_based(path)])
    saver.restore = restore
    saver.recover_last_checkpoints = recover_last_checkpoints

  def restore(self, sess):
    """Restores the checkpoint into sess's variables, as planned."""
    self._saver.restore(sess, self._checkpoint)
    sess.run(self._initialize)
    sess.run(self._average)
    reader = tf.train.load_checkpoint(self._checkpoint)
    iterations = (reader.get_tensor(self._step_count) if self._step_count
                  else sess.run(tf.compat.v1.train.get_global_step()))
    sess.run(self._beta_powers, {self._iterations: float(iterations)})
    afresh = [variable.op.name for variable in self._afresh]
    if self._velocities:
      rate = float(sess.run(self._learning_rate))
      if rate:
        sess.run(self._rescale, {self._scale: -1. / rate})
      else:
        sess.run(self._initialize_velocities)
        afresh += ['%s (the learning rate is 0 at this step)' %
                   variable.op.name for variable in self._velocities]
    if afresh:
      logging.warning(
          '%d optimizer slot(s) start afresh, not given by %s: %s',
          len(afresh), self._checkpoint, _listed(afresh))
    if self._unaveraged:
      logging.warning(
          '%s holds no moving average of %d variable(s); their averages '
          'start at the restored weights: %s', self._checkpoint,
          len(self._unaveraged), _listed(
              [variable.op.name for _, variable in self._unaveraged]))
    logging.info('Resumed from %s (the original TF2 trainer\'s) at step %d.',
                 self._checkpoint,
                 sess.run(tf.compat.v1.train.get_global_step()))


def _model_weights(values, base, model_dir, checkpoint):
  """{checkpoint key: variable} of every global variable but the
  optimizer's, global_step included (see object_checkpoint).

  Raises:
    errors.UserInputError: one is missing or of another shape.
  """
  if not any(value.path.startswith('model/') for value in values):
    raise errors.UserInputError(
        '--model_dir=%s holds %s of the original TF2 trainer, which holds '
        'no model weights (it saves its first checkpoint before the first '
        'step); nothing to resume from. Nothing in --model_dir was '
        'changed. Train into a new --model_dir.' % (
            model_dir, os.path.basename(checkpoint)))
  keys = object_checkpoint.whole_model_keys(
      tf.compat.v1.global_variables(), values)
  shapes = {value.key: value.shape for value in values}
  owned = {variable.ref() for variable in base.variables()}
  restored, missing, mismatched = {}, [], []
  for key, variable in keys.items():
    name = variable.op.name
    if variable.ref() in owned or name.endswith('/' + _EMA_NAME):
      continue
    if key not in shapes:
      missing.append(name)
    elif shapes[key] != variable.shape.as_list():
      mismatched.append('%s %s vs %s' % (name, shapes[key],
                                         variable.shape.as_list()))
    else:
      restored[key] = variable
  if missing or mismatched:
    raise errors.UserInputError(_mismatch(model_dir, checkpoint, missing,
                                          mismatched))
  return restored


def _is_beta_power(variable):
  return variable.op.name.split('/')[-1].startswith(('beta1_power',
                                                     'beta2_power'))


def _betas(optimizer):
  """The decay rates of an AdamOptimizer's beta powers, in variables() order.
  """
  # pylint: disable=protected-access
  return [optimizer._beta1 if variable.op.name.split('/')[-1].startswith(
      'beta1') else optimizer._beta2 for variable in optimizer.variables()
          if _is_beta_power(variable)]


def _listed(names):
  shown = ', '.join(names[:_SHOWN])
  return shown + (' (and %d more)' % (len(names) - _SHOWN)
                  if len(names) > _SHOWN else '')


def _mismatch(model_dir, checkpoint, missing, mismatched):
  """The one-line refusal of a TF2 ckpt-N of another model."""
  parts = []
  if missing:
    parts.append('no value for %d of its variable(s): %s' % (
        len(missing), _listed(sorted(missing))))
  if mismatched:
    parts.append('another shape (checkpoint vs model) for %d: %s' % (
        len(mismatched), _listed(sorted(mismatched))))
  return ('--model_dir=%s holds %s, a checkpoint of the original TF2 '
          'trainer (model_main_tf2.py), of another model than this pipeline '
          'config builds (%s), so training cannot resume from it. Nothing in '
          '--model_dir was changed. Train into a new --model_dir, starting '
          'from the weights that fit with train_config { '
          'fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: "full" }.'
          % (model_dir, os.path.basename(checkpoint), '; '.join(parts),
             checkpoint))
