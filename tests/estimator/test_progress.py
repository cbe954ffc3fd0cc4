"""progress.ProgressHook: the step, loss, speed and ETA lines (off a
terminal; tests/test_quiet_output.py draws its bar on one)."""
import re

import tensorflow as tf

from od_estimator.estimator import progress


def _after_step(hook, step, loss):
  values = tf.compat.v1.train.SessionRunValues(
      results={'step': step - 1, 'loss': loss}, options=None,
      run_metadata=None)
  hook.after_run(None, values)


def test_logs_every_n_steps_with_the_loss_and_an_eta():
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    tf.constant(0.5, name='total_loss')
    hook = progress.ProgressHook(every_n_steps=2, last_step=10)
    hook.begin()
    assert set(hook.before_run(None).fetches) == {'step', 'loss'}
  for step in range(1, 5):
    _after_step(hook, step, 0.25)
  # The first step's line (its number), then every second step's.
  assert hook.lines[0] == 'step 1/10, loss 0.2500 (first step)'
  assert len(hook.lines) == 3
  assert re.fullmatch(r'step 4/10, loss 0\.2500, [\d.]+ steps/s, ETA '
                      r'\d+:\d\d:\d\d', hook.lines[-1])


def test_without_a_loss_tensor_or_last_step_logs_the_step_and_speed():
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    hook = progress.ProgressHook(every_n_steps=1)
    hook.begin()
    assert set(hook.before_run(None).fetches) == {'step'}
  values = tf.compat.v1.train.SessionRunValues(
      results={'step': 0}, options=None, run_metadata=None)
  hook.after_run(None, values)
  hook.after_run(None, values._replace(results={'step': 1}))
  assert re.fullmatch(r'step 2, [\d.]+ steps/s', hook.lines[-1])


def test_the_first_step_after_a_resume_is_logged_with_its_number():
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    hook = progress.ProgressHook(every_n_steps=100, last_step=50)
    hook.begin()
  _after_step(hook, 21, 1.5)
  _after_step(hook, 22, 1.25)
  assert hook.lines == [
      'step 21/50, loss 1.5000 (first step after resuming from step 20)']
