"""Training progress: step, loss, speed and ETA, as a bar or log lines.

On a terminal (stderr is one) a bar is redrawn at each step; elsewhere a
line is logged every N steps (utils/progress_bar.py). Either way the first
step after a start or a resume is logged with its number.
"""
import time

import tensorflow as tf

from od_estimator.utils import progress_bar

# The training commands' --log_every_n_steps.
LOG_EVERY_N_STEPS_HELP = (
    'Log step, loss, steps/s and ETA every N training steps when stderr is '
    'not a terminal; on a terminal a progress bar shows them at every step '
    '(0: neither).')


def _format_duration(seconds):
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  return '%d:%02d:%02d' % (hours, minutes, seconds)


class ProgressHook(tf.compat.v1.train.SessionRunHook):
  """Shows `step S/T, loss L, X steps/s, ETA h:mm:ss`.

  Attributes:
    lines: the lines logged (the first step's, then every N steps').
  """

  def __init__(self, every_n_steps=100, last_step=None,
               loss_tensor_name='total_loss:0'):
    """Creates the hook.

    Args:
      every_n_steps: how often to log a line when not on a terminal.
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
    self._bar = progress_bar.Bar()

  def before_run(self, run_context):
    fetches = {'step': self._global_step}
    if self._loss is not None:
      fetches['loss'] = self._loss
    return tf.compat.v1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    step = int(run_values.results['step']) + 1
    loss = run_values.results.get('loss')
    now = time.time()
    if self._start_time is None:
      self._start_time, self._start_step = now, step
      self._log('%s (first step%s)' % (self._describe(step, loss), (
          ' after resuming from step %d' % (step - 1) if step > 1 else '')))
      return
    rate = (step - self._start_step) / max(now - self._start_time, 1e-9)
    line = self._describe(step, loss, rate)
    last = step == self._last_step
    if self._bar.on_terminal:
      self._bar.draw(line, step / self._last_step if self._last_step else None,
                     now=last)
      if last:
        self._bar.keep()
    elif last or not step % self._every_n_steps:
      self._log(line)

  def end(self, session):
    del session  # Unused.
    self._bar.keep()

  def _describe(self, step, loss, rate=None):
    """'step S/T, loss L, X steps/s, ETA h:mm:ss' (what is known)."""
    line = 'step %d' % step
    if self._last_step:
      line += '/%d' % self._last_step
    if loss is not None:
      line += ', loss %.4f' % loss
    if rate is not None:
      line += ', %.2f steps/s' % rate
      if self._last_step and rate > 0:
        line += ', ETA %s' % _format_duration((self._last_step - step) / rate)
    return line

  def _log(self, line):
    self.lines.append(line)
    progress_bar.log(line)


class EvaluationDisplay:
  """An evaluation's images done, as a bar or log lines.

  On a terminal: a bar `evaluating step S: N images` redrawn as batches
  finish; elsewhere a line when it starts and every minute. Either way a
  line when it ends.
  """

  _EVERY_SECS = 60

  def __init__(self, step=None, total_images=None):
    """Starts showing it.

    Args:
      step: the evaluated checkpoint's step, when known.
      total_images: how many images it evaluates, when known.
    """
    self._what = 'step %d' % step if step is not None else 'the checkpoint'
    self._total = total_images
    self._start = self._last_line = time.time()
    self._bar = progress_bar.Bar()
    if not self._bar.on_terminal:
      progress_bar.log('evaluating %s' % self._what)

  def update(self, images):
    """Shows that `images` images are done."""
    text = 'evaluating %s: %s' % (self._what, self._count(images))
    if self._bar.on_terminal:
      self._bar.draw(text, images / self._total if self._total else None)
    elif time.time() - self._last_line >= self._EVERY_SECS:
      self._last_line = time.time()
      progress_bar.log(text)

  def end(self, images):
    """Logs how many images were evaluated, and in how long."""
    progress_bar.clear()
    progress_bar.log('evaluated %s: %s in %.1f s' % (
        self._what, self._count(images), time.time() - self._start))

  def _count(self, images):
    if self._total:
      return '%d/%d images' % (images, self._total)
    return '%d image(s)' % images
