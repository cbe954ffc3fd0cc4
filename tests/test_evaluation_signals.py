"""Ctrl-C and SIGTERM during model_main's evaluations stop them at once.

On a copy of the session's one-step model_dir of the tiniest model
(tests/trained_models.py's one_step_fake_faster_rcnn: the signals' handling
does not depend on the network): an evaluation-only run in a subprocess
(tests/fake_extractor_command.py) gets SIGINT once it logs that evaluation
started; the --run_once evaluation and train_and_evaluate's evaluation run
in this process and get the signal from their second evaluated image. Each
exits with the status of its signal, writes no metrics, and leaves the
checkpoints as they were.
"""
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import time

import pytest
import tensorflow as tf

from od_estimator.estimator import preemption
from od_estimator.utils import interrupts
from tests import plain_command
from tests import tiny_ssd
from tests.command_modules import import_command

model_main = import_command('model_main')

DEADLINE_SECS = 600
# The tiniest model (tests/fakes.py) for the runs around the model.
pytestmark = pytest.mark.usefixtures('fake_extractor')


def _checksums(directory):
  sums = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        sums[os.path.relpath(path, directory)] = hashlib.sha256(
            f.read()).hexdigest()
  return sums



@pytest.fixture
def trained(one_step_fake_faster_rcnn, tmp_path):
  """(config, a copy of the one-step model_dir); 4 validation images."""
  _, config, model_dir = one_step_fake_faster_rcnn
  copy = str(tmp_path / 'trained')
  shutil.copytree(model_dir, copy)
  return config, copy


def _events(directory):
  return glob.glob(os.path.join(directory, '**', 'events.out.tfevents.*'),
                   recursive=True)


def test_ctrl_c_stops_an_evaluation_only_run(trained, tmp_path):
  config, checkpoint_dir = trained
  before = _checksums(checkpoint_dir)
  eval_dir = str(tmp_path / 'eval')
  log_path = str(tmp_path / 'eval.log')
  with open(log_path, 'w') as log:
    process = subprocess.Popen(
        plain_command.command('tests.fake_extractor_command') + [
            'od_estimator.model_main', '--pipeline_config_path=%s' % config,
            '--model_dir=%s' % eval_dir,
            '--checkpoint_dir=%s' % checkpoint_dir,
            '--eval_timeout_secs=600'],
        stdout=log, stderr=log, cwd=tiny_ssd.REPO)
  try:
    deadline = time.monotonic() + DEADLINE_SECS
    while process.poll() is None and time.monotonic() < deadline:
      with open(log_path) as f:
        # The evaluation's session restoring the checkpoint.
        if 'Restoring parameters from' in f.read():
          break
      time.sleep(0.2)
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    status = process.wait(timeout=DEADLINE_SECS)
  finally:
    if process.poll() is None:
      process.kill()
  with open(log_path) as f:
    log = f.read()
  assert status == 130, log[-3000:]
  lines = [line for line in log.splitlines() if line.startswith('Ctrl-C')]
  assert len(lines) == 1, log[-3000:]
  assert lines[0].startswith('Ctrl-C: model_main stopped; the evaluation')
  assert lines[0].endswith('no metrics were written for it; nothing in '
                           '--checkpoint_dir=%s was changed' % checkpoint_dir)
  assert 'Traceback' not in log
  assert _checksums(checkpoint_dir) == before
  assert not _events(eval_dir)


def _signal_at_second_image(monkeypatch, signum):
  after_run = preemption.EvaluationProgress.after_run

  def counting(self, run_context, run_values):
    after_run(self, run_context, run_values)
    if self.images == 2:
      os.kill(os.getpid(), signum)

  monkeypatch.setattr(preemption.EvaluationProgress, 'after_run',
                      counting)


def _main(args):
  """model_main.main with `args` parsed as absl does, in this process.

  main() marks its flags required (absl validators, process-wide): they
  are taken off again for the other tests of this process. The outer scope
  puts back this process's signal handlers, as the command boundary does.
  """
  flags = model_main.FLAGS
  validators = {name: list(flags[name].validators)
                for name in ('model_dir', 'pipeline_config_path')}
  flags(['model_main'] + args)
  try:
    with interrupts.stopping_on_signals('model_main'):
      model_main.main(None)
  finally:
    for name, kept in validators.items():
      flags[name].validators[:] = kept
    flags.unparse_flags()


def test_sigterm_stops_a_run_once_evaluation(trained, tmp_path,
                                             monkeypatch):
  config, checkpoint_dir = trained
  before = _checksums(checkpoint_dir)
  _signal_at_second_image(monkeypatch, signal.SIGTERM)
  eval_dir = str(tmp_path / 'eval')
  with pytest.raises(interrupts.Interrupted) as stopped:
    _main(['--pipeline_config_path=%s' % config, '--model_dir=%s' % eval_dir,
           '--checkpoint_dir=%s' % checkpoint_dir, '--run_once'])
  assert stopped.value.exit_status == 143
  assert stopped.value.line() == (
      'SIGTERM: model_main stopped; the evaluation of step 1 stopped after '
      '2 image(s); no metrics were written for it; nothing in '
      '--checkpoint_dir=%s was changed' % checkpoint_dir)
  assert _checksums(checkpoint_dir) == before
  assert not _events(eval_dir)


def test_ctrl_c_stops_the_evaluation_of_train_and_evaluate(trained,
                                                           monkeypatch):
  config, model_dir = trained
  _signal_at_second_image(monkeypatch, signal.SIGINT)
  with pytest.raises(interrupts.Interrupted) as stopped:
    _main(['--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
           '--num_train_steps=2'])
  assert stopped.value.exit_status == 130
  assert stopped.value.line() == (
      'Ctrl-C: training stopped; the evaluation of step 2 stopped after 2 '
      'image(s); no metrics were written for it; the checkpoint at step 2 in '
      '%s is complete: relaunch the same command to resume from it' %
      model_dir)
  assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-2')
  assert not _events(os.path.join(model_dir, 'eval_0'))
  assert not os.path.exists(os.path.join(model_dir, 'export'))
