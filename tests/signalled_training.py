"""model_main training in a subprocess, stopped by a signal once it logs a step.

For the tests of what a signal does to a training (tests/estimator/
test_preemption.py), and for runs that only need a few steps trained: a
SIGTERM ends them with a checkpoint at the step reached and exit status 0,
without the evaluation and export a finished training goes on to.
"""
import re
import subprocess
import time

import tensorflow as tf

from tests import plain_command
from tests import tiny_ssd

DEADLINE_SECS = 600

# model_main training a step count it never reaches before the signal,
# with a progress line per step (tests/plain_command: without grappler).
FLAGS = ['--num_train_steps=100000', '--log_every_n_steps=1']
COMMAND = plain_command.command('od_estimator.model_main') + FLAGS


class Training:
  """model_main training in a subprocess, its log in a file."""

  def __init__(self, command, log_path, env=None):
    self.log_path = log_path
    with open(log_path, 'w') as log:
      self._process = subprocess.Popen(command, stdout=log, stderr=log,
                                       cwd=tiny_ssd.REPO, env=env)

  def log(self):
    with open(self.log_path) as f:
      return f.read()

  def steps(self):
    """Steps the progress lines reported so far."""
    return [int(step) for step in re.findall(r'step (\d+)/', self.log())]

  def signal_after_step(self, signum, step):
    """Sends `signum` once a step beyond `step` is logged; returns status."""
    deadline = time.monotonic() + DEADLINE_SECS
    while (self._process.poll() is None and time.monotonic() < deadline and
           not any(reached > step for reached in self.steps())):
      time.sleep(0.5)
    assert self._process.poll() is None, self.log()[-3000:]
    assert any(reached > step for reached in self.steps()), (
        self.log()[-3000:])
    self._process.send_signal(signum)
    try:
      return self._process.wait(timeout=DEADLINE_SECS)
    finally:
      if self._process.poll() is None:
        self._process.kill()


def checkpoint_step(model_dir):
  """The step of model_dir's latest checkpoint, None without one."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  return int(checkpoint.rsplit('-', 1)[1]) if checkpoint else None
