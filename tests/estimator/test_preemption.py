"""SIGTERM and Ctrl-C during training: a checkpoint at the step reached.

The hook alone, then model_main in a subprocess: the tiniest model
(tiny_faster_rcnn's fake extractor) trains towards a far step count, gets
SIGTERM once steps are logged, must save a checkpoint at the step it
reached and exit 0 without evaluating; the relaunch resumes from that
checkpoint and stops on SIGINT the same way (exit status 130).
"""
import os
import re
import signal

import pytest
import tensorflow as tf
from tensorflow_estimator.python.estimator.tpu import tpu_config

from od_estimator.estimator import model_lib
from od_estimator.estimator import preemption
from tests import plain_command
from tests import signalled_training
from tests import tiny_faster_rcnn


def test_hook_stops_on_sigterm_and_restores_the_handlers():
  previous = signal.getsignal(signal.SIGTERM)
  previous_sigint = signal.getsignal(signal.SIGINT)
  hook = preemption.PreemptionHook('train_dir')
  hook.begin()
  try:
    assert signal.getsignal(signal.SIGTERM) != previous
    os.kill(os.getpid(), signal.SIGTERM)
    context = tf.compat.v1.train.SessionRunContext(original_args=None,
                                                   session=None)
    hook.after_run(context, None)
    assert context.stop_requested
    with pytest.raises(preemption.TrainingPreempted) as stopped:
      hook.checkpoint_saved(7)
    assert (stopped.value.step, stopped.value.exit_status) == (7, 0)
    assert signal.getsignal(signal.SIGTERM) == previous
  finally:
    hook.end(None)
  assert signal.getsignal(signal.SIGTERM) == previous
  assert signal.getsignal(signal.SIGINT) == previous_sigint


def test_hook_without_a_signal_lets_training_run():
  previous = signal.getsignal(signal.SIGTERM)
  hook = preemption.PreemptionHook()
  hook.begin()
  context = tf.compat.v1.train.SessionRunContext(original_args=None,
                                                 session=None)
  hook.after_run(context, None)
  hook.checkpoint_saved(3)
  hook.end(None)
  assert not context.stop_requested
  assert signal.getsignal(signal.SIGTERM) == previous


class _SignalAtStep(tf.compat.v1.train.SessionRunHook):
  """Sends this process `signum` once the global step reaches `step`."""

  def __init__(self, signum, step):
    self._signum, self._step = signum, step

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    if run_values.results + 1 == self._step:
      os.kill(os.getpid(), self._signum)


@pytest.mark.usefixtures('fake_extractor')
def test_tpu_estimator_training_saves_the_step_reached(tmp_path):
  # model_tpu_main's path (TPUEstimator, here on CPU), in this process, on
  # the tiniest model (tests/fakes.py): the hook does not depend on it.
  config = tiny_faster_rcnn.write_config(tmp_path, tmp_path / 'data',
                                         extractor='fake')
  model_dir = str(tmp_path / 'model')
  run_config = tpu_config.RunConfig(
      model_dir=model_dir, save_summary_steps=None, log_step_count_steps=None,
      checkpoint_save_graph_def=False,  # Only the step is checked.
      tpu_config=tpu_config.TPUConfig(iterations_per_loop=1, num_shards=1))
  parts = model_lib.create_estimator_and_inputs(
      run_config, pipeline_config_path=config, use_tpu_estimator=True)
  hook = preemption.PreemptionHook(model_dir)
  previous = signal.getsignal(signal.SIGINT)
  with pytest.raises(preemption.TrainingPreempted) as stopped:
    parts['estimator'].train(
        parts['train_input_fn'], max_steps=100000,
        hooks=[_SignalAtStep(signal.SIGINT, 2), hook],
        saving_listeners=[hook.saving_listener()])
  assert (stopped.value.step, stopped.value.exit_status) == (2, 130)
  assert signalled_training.checkpoint_step(model_dir) == 2
  assert signal.getsignal(signal.SIGINT) == previous


def test_model_main_saves_on_sigterm_and_resumes(tmp_path):
  # On the tiniest model (tiny_faster_rcnn's, 1x1-conv extractor): the
  # signals' handling does not depend on the model, and both processes
  # build its training graph in a fraction of the light SSD's time.
  config = tiny_faster_rcnn.write_config(tmp_path, tmp_path / 'data',
                                         extractor='fake')
  model_dir = str(tmp_path / 'model')
  command = plain_command.command('tests.fake_extractor_command') + [
      'od_estimator.model_main'] + signalled_training.FLAGS + [
          '--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir]

  first = signalled_training.Training(command, str(tmp_path / 'first.log'))
  assert first.signal_after_step(signal.SIGTERM, 1) == 0, (
      first.log()[-3000:])
  reached = max(first.steps())
  assert signalled_training.checkpoint_step(model_dir) == reached
  log = first.log()
  assert 'SIGTERM: saved a checkpoint at step %d in %s' % (
      reached, model_dir) in log
  assert 'Relaunch the same command' in log
  assert 'evaluating step' not in log
  assert not os.path.exists(os.path.join(model_dir, 'export'))

  second = signalled_training.Training(command, str(tmp_path / 'second.log'))
  assert second.signal_after_step(signal.SIGINT, reached + 1) == 130, (
      second.log()[-3000:])
  log = second.log()
  assert 'Restoring parameters from %s' % os.path.join(
      model_dir, 'model.ckpt-%d' % reached) in log
  # Its first step after the resume is logged with its number.
  assert second.steps()[0] == reached + 1, second.steps()
  assert re.search(r'step %d/100000\S* .*\(first step after resuming from '
                   r'step %d\)' % (reached + 1, reached), log), log[-3000:]
  assert signalled_training.checkpoint_step(model_dir) == max(second.steps())
  assert 'SIGINT: saved a checkpoint at step %d' % max(second.steps()) in log
