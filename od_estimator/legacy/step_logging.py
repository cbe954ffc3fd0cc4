"""The original legacy training loop's per-step line, as a session hook."""
import time

from absl import logging
import tensorflow as tf


class StepLossHook(tf.compat.v1.train.SessionRunHook):
  """Logs `global step N: loss = X (T sec/step)` after every step.

  The format of the original's train.py (tf-slim's training loop): N is the
  global step after the step, X the Estimator's training loss, T the step's
  wall time. `lines` keeps what was logged.
  """

  def __init__(self):
    self.lines = []

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    # The Estimator adds its spec's loss to LOSSES before hooks begin.
    self._loss = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.LOSSES)[-1]

  def before_run(self, run_context):
    self._start = time.time()
    return tf.compat.v1.train.SessionRunArgs(
        {'loss': self._loss, 'step': self._global_step})

  def after_run(self, run_context, run_values):
    seconds = time.time() - self._start
    step = run_context.session.run(self._global_step)
    line = 'global step %d: loss = %.4f (%.3f sec/step)' % (
        step, run_values.results['loss'], seconds)
    self.lines.append(line)
    logging.info(line)
