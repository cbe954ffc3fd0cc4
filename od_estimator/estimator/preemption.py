"""SIGTERM and Ctrl-C during training: a checkpoint, then a clean exit.

PreemptionHook turns SIGTERM (a preemptible VM's or Cloud TPU's notice)
and Ctrl-C into a checkpoint at the current step and a clean exit
(TrainingPreempted), and stops the evaluation of train_and_evaluate at
once; EvaluationProgress counts the images an evaluation has done, for
the message of such an interruption, and shows them (a bar on a
terminal, see progress.py, where training progress is too).
"""
import signal
import threading

from absl import logging
import tensorflow as tf

from od_estimator.estimator import progress
from od_estimator.utils import interrupts


class TrainingPreempted(Exception):
  """Training stopped on a signal after saving a checkpoint.

  Raised once the Estimator's checkpoint of the last step is written, so
  that train_and_evaluate does not go on to evaluate and export: the
  commands catch it and exit.

  Attributes:
    signal_name: 'SIGTERM' or 'SIGINT'.
    step: the global step of the saved checkpoint.
    exit_status: 0 after SIGTERM (a preemption the job survives); 130
      after Ctrl-C, so that a shell script running the command stops.
  """

  def __init__(self, signal_name, step):
    super().__init__('%s: saved a checkpoint at step %d' % (signal_name,
                                                            step))
    self.signal_name = signal_name
    self.step = step
    self.exit_status = 0 if signal_name == 'SIGTERM' else 130


class PreemptionHook(tf.compat.v1.train.SessionRunHook):
  """On SIGTERM or Ctrl-C, stops after the current step with a checkpoint.

  Preemptible VMs and Cloud TPUs send SIGTERM shortly before they stop a
  job. While training runs, this hook turns SIGTERM and SIGINT into a
  request to stop after the step under way; the Estimator's
  CheckpointSaverHook then saves that step as training ends, and the
  listener from `saving_listener()` (passed to the Estimator as a saving
  listener) logs the step and raises TrainingPreempted, so no evaluation
  follows. Relaunching the same command resumes from that checkpoint. A
  second Ctrl-C interrupts at once.

  Between a checkpoint's save and the next step, train_and_evaluate
  evaluates (and exports) that checkpoint: a signal then raises
  interrupts.Interrupted at once (exit status as for TrainingPreempted)
  saying how far the evaluation got (see `evaluation_hook`). The previous
  signal handlers are back when training ends; the final checkpoint's
  evaluation follows the end of the training session, so callers call
  restore_handlers() once training returns (or raises).
  """

  _SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self, model_dir=None, eval_batch_size=1):
    """Creates the hook.

    Args:
      model_dir: where the checkpoint goes, named in the log line.
      eval_batch_size: images per evaluation step, to count them.
    """
    self._model_dir = model_dir
    self._previous_handlers = {}
    self._after_save = None
    self._evaluation = EvaluationProgress(eval_batch_size)
    self.received = None

  def evaluation_hook(self):
    """The EvaluationProgress hook for the EvalSpec of train_and_evaluate."""
    return self._evaluation

  def begin(self):
    self.received = None
    # Python lets only the main thread install signal handlers.
    if threading.current_thread() is not threading.main_thread():
      logging.warning('Training runs outside the main thread: SIGTERM and '
                      'Ctrl-C will not save a checkpoint before exiting.')
      return
    for signum in self._SIGNALS:
      self._previous_handlers[signum] = signal.signal(signum, self._handle)

  def _handle(self, signum, frame):
    del frame  # Unused.
    if self.received is not None and signum == signal.SIGINT:
      self.restore_handlers()
      raise KeyboardInterrupt
    self.received = signal.Signals(signum).name
    logging.warning('Received %s: stopping after the current step and '
                    'saving a checkpoint (Ctrl-C again stops at once).',
                    self.received)

  def before_run(self, run_context):
    del run_context  # Unused.
    self._end_after_save()

  def after_run(self, run_context, run_values):
    del run_values  # Unused.
    if self.received is not None:
      run_context.request_stop()

  def end(self, session):
    del session  # Unused.
    self.restore_handlers()

  def restore_handlers(self):
    """Puts back the signal handlers installed before training began."""
    self._end_after_save()
    for signum, handler in self._previous_handlers.items():
      signal.signal(signum, handler)
    self._previous_handlers = {}

  def saving_listener(self):
    """The CheckpointSaverListener ending training after a signal's save."""
    return _PreemptionListener(self)

  def checkpoint_saved(self, step):
    """Called once the checkpoint at `step` is written; raises after a signal.

    Raises:
      TrainingPreempted: when a signal was received.
    """
    if self.received is None:
      self._begin_after_save(step)
      return
    self.restore_handlers()
    logging.warning(
        '%s: saved a checkpoint at step %d%s. Relaunch the same command to '
        'resume training from it.', self.received, step,
        ' in %s' % self._model_dir if self._model_dir else '')
    raise TrainingPreempted(self.received, step)

  def _begin_after_save(self, step):
    """Until the next step, a signal stops what follows the save at once."""
    if self._after_save is not None or not interrupts.in_main_thread():
      return
    self._after_save = interrupts.SignalScope(
        'training', sigterm_status=0,
        kept=lambda: self._kept_after_save(step))
    self._after_save.install()

  def _end_after_save(self):
    if self._after_save is not None:
      self._after_save.restore()
      self._after_save = None

  def _kept_after_save(self, step):
    checkpoint = ('the checkpoint at step %d%s is complete: relaunch the '
                  'same command to resume from it' % (
                      step, ' in %s' % self._model_dir if self._model_dir
                      else ''))
    if self._evaluation.running:
      return '%s; %s' % (self._evaluation.describe(step), checkpoint)
    return checkpoint


class EvaluationProgress(tf.compat.v1.train.SessionRunHook):
  """Counts the images an evaluation has gone through, for interruptions.

  Attributes:
    running: whether an evaluation is under way.
    images: how many images it has evaluated (batches times batch_size).
  """

  def __init__(self, batch_size=1):
    self._batch_size = batch_size
    self.running = False
    self.images = 0
    self.step = None

  def begin(self):
    self.running, self.images, self.step = True, 0, None
    self._display = None  # Once the session (and the step) is there.
    self._global_step = tf.compat.v1.train.get_global_step()

  def after_create_session(self, session, coord):
    del coord  # Unused.
    if self._global_step is not None:
      self.step = int(session.run(self._global_step))
    self._display = progress.EvaluationDisplay(self.step)

  def after_run(self, run_context, run_values):
    del run_context, run_values  # Unused.
    self.images += self._batch_size
    if self._display:
      self._display.update(self.images)

  def end(self, session):
    del session  # Unused.
    self.running = False
    if self._display:
      self._display.end(self.images)

  def describe(self, step=None):
    """'the evaluation of step S stopped after N image(s); no metrics ...'.

    Args:
      step: the checkpoint's step when the session has not read it yet.
    """
    step = self.step if self.step is not None else step
    return ('the evaluation%s stopped after %d image(s); no metrics were '
            'written for it' % ('' if step is None else ' of step %d' % step,
                                self.images))


class _PreemptionListener(tf.compat.v1.train.CheckpointSaverListener):
  """Hands each written checkpoint's step to a PreemptionHook."""

  def __init__(self, hook):
    self._hook = hook

  def after_save(self, session, global_step_value):
    del session  # Unused.
    self._hook.checkpoint_saved(global_step_value)

  def end(self, session, global_step_value):
    # Training ended on a step saved earlier: no new checkpoint is written.
    del session  # Unused.
    self._hook.checkpoint_saved(global_step_value)
