"""progress.ProgressHook: the step, loss, speed and ETA lines."""
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
  assert len(hook.lines) == 2
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
