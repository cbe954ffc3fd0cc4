"""Training progress in the log: step, loss, speed and ETA."""
import time

from absl import logging
import tensorflow as tf


def _format_duration(seconds):
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  return '%d:%02d:%02d' % (hours, minutes, seconds)


class ProgressHook(tf.compat.v1.train.SessionRunHook):
  """Logs `step S/T, loss L, X steps/s, ETA h:mm:ss` every N steps."""

  def __init__(self, every_n_steps=100, last_step=None,
               loss_tensor_name='total_loss:0'):
    """Creates the hook.

    Args:
      every_n_steps: how often to log.
      last_step: the step training stops at (for the ETA); None when
        training runs until stopped.
      loss_tensor_name: the total loss tensor in the training graph.
    """
    self._every_n_steps = max(int(every_n_steps), 1)
    self._last_step = last_step
    self._loss_tensor_name = loss_tensor_name
    self.lines = []

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    graph = tf.compat.v1.get_default_graph()
    try:
      self._loss = graph.get_tensor_by_name(self._loss_tensor_name)
    except KeyError:
      self._loss = None
    self._start_time, self._start_step = None, None

  def before_run(self, run_context):
    fetches = {'step': self._global_step}
    if self._loss is not None:
      fetches['loss'] = self._loss
    return tf.compat.v1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    step = int(run_values.results['step']) + 1
    now = time.time()
    if self._start_time is None:
      self._start_time, self._start_step = now, step
      return
    if step % self._every_n_steps and step != self._last_step:
      return
    rate = (step - self._start_step) / max(now - self._start_time, 1e-9)
    line = 'step %d' % step
    if self._last_step:
      line += '/%d' % self._last_step
    if 'loss' in run_values.results:
      line += ', loss %.4f' % run_values.results['loss']
    line += ', %.2f steps/s' % rate
    if self._last_step and rate > 0:
      line += ', ETA %s' % _format_duration((self._last_step - step) / rate)
    self.lines.append(line)
    logging.info(line)
