"""Damaged checkpoints and a full disk (utils/checkpoint_health, disk_full).

Small checkpoints written here show what checkpoint_health finds; the
commands run in this process (absl flags parsed as in a launch) on a copy
of the one-step tiny SSD model_dir (tests/trained_models.py), its newest
checkpoint damaged: each refuses with one `error:` line before the graph is
built, leaving every file of the model_dir as it was, or with
--resume_from_last_good goes on from the intact checkpoint. A training
whose model_dir is a small tmpfs fills it and ends in one line, its failed
save removed.
"""
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.estimator import model_lib
from od_estimator.estimator import training_jobs
from od_estimator.utils import checkpoint_health
from tests import file_trees
from tests import log_capture
from tests import small_checkpoints
from tests import tiny_ssd
from tests.command_modules import import_command

model_main = import_command('model_main')
legacy_train = import_command('legacy.train')


_save = small_checkpoints.save
_truncate = small_checkpoints.truncate


def test_problem_finds_truncated_and_missing_files(tmp_path):
  prefix, = _save(tmp_path, [3])
  assert checkpoint_health.problem(prefix) is None
  data = prefix + '.data-00000-of-00001'
  _truncate(data)
  # 100 x 3 float32 weights and the int64 global step.
  assert checkpoint_health.problem(prefix) == (
      '%s is truncated: 100 bytes where its index needs 1208' % data)
  os.remove(data)
  assert checkpoint_health.problem(prefix) == '%s does not exist' % data
  _truncate(prefix + '.index', 30)
  assert 'is not a readable checkpoint index' in checkpoint_health.problem(
      prefix)
  assert checkpoint_health.problem(str(tmp_path / 'model.ckpt-9')) == (
      '%s.index does not exist' % (tmp_path / 'model.ckpt-9'))


def test_a_state_file_naming_missing_files_names_the_intact_one(tmp_path):
  older, newer = _save(tmp_path, [1, 2])
  for path in glob.glob(newer + '.*'):
    os.remove(path)
  with pytest.raises(errors.UserInputError) as raised:
    checkpoint_health.resume_point(str(tmp_path), '--model_dir')
  message = str(raised.value)
  assert '\n' not in message
  assert '%s.index does not exist' % newer in message
  assert 'The last intact checkpoint there is %s' % older in message
  assert '--resume_from_last_good' in message


@pytest.mark.parametrize('content', ['garbage {{', ''])
def test_an_unreadable_state_file_is_named(tmp_path, content):
  older, = _save(tmp_path, [1])
  (tmp_path / 'checkpoint').write_text(content)
  with pytest.raises(errors.UserInputError,
                     match='%s is not a readable checkpoint state file.*'
                     'The last intact checkpoint there is %s' % (
                         tmp_path / 'checkpoint', older)):
    checkpoint_health.resume_point(str(tmp_path), '--model_dir')


def test_resume_from_last_good_rewrites_the_state_file_only(tmp_path):
  first, second, third = _save(tmp_path, [1, 2, 3])
  _truncate(third + '.data-00000-of-00001')
  damaged = file_trees.snapshot(tmp_path)
  with log_capture.absl_messages() as messages:
    assert checkpoint_health.resume_point(
        str(tmp_path), '--model_dir', resume_from_last_good=True) == second
  assert tf.train.latest_checkpoint(str(tmp_path)) == second
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert list(state.all_model_checkpoint_paths) == [first, second]
  after = file_trees.snapshot(tmp_path)
  assert after.pop('checkpoint') != damaged.pop('checkpoint')
  assert after == damaged
  assert not glob.glob(str(tmp_path / '*.tmp*'))
  skipped = [m for m in messages if 'skipping the damaged checkpoint' in m]
  assert len(skipped) == 1 and 'resuming from %s' % second in skipped[0]


def test_no_intact_checkpoint_left_is_said(tmp_path):
  only, = _save(tmp_path, [1])
  _truncate(only + '.data-00000-of-00001')
  before = file_trees.snapshot(tmp_path)
  with pytest.raises(errors.UserInputError,
                     match='no intact checkpoint is left in that directory'):
    checkpoint_health.resume_point(str(tmp_path), '--model_dir',
                                   resume_from_last_good=True)
  assert file_trees.snapshot(tmp_path) == before


class _RecordingEstimator:
  """Records the checkpoints continuous_eval evaluates."""

  def __init__(self):
    self.evaluated = []

  def evaluate(self, input_fn, steps, checkpoint_path, name, hooks=None):
    del input_fn, steps, name, hooks  # Unused.
    self.evaluated.append(checkpoint_path)
    return {'global_step': int(checkpoint_path.rsplit('-', 1)[1])}


def test_continuous_evaluation_names_or_skips_a_damaged_checkpoint(
    tmp_path):
  older, newer = _save(tmp_path, [1, 2])
  _truncate(newer + '.data-00000-of-00001')
  estimator = _RecordingEstimator()
  with pytest.raises(errors.UserInputError,
                     match='cannot evaluate checkpoint %s: %s.data-00000-of-'
                     '00001 is truncated' % (newer, newer)):
    model_lib.continuous_eval(estimator, str(tmp_path), None, 2, 'x',
                              timeout_secs=0)
  assert not estimator.evaluated
  model_lib.continuous_eval(estimator, str(tmp_path), None, 2, 'x',
                            timeout_secs=0, skip_damaged=True)
  assert estimator.evaluated == [older]


# ---------------------------------------------------------------------------
# The commands, on the tiny SSD's model_dir.

@pytest.fixture
def damaged(one_step_tiny_ssd, tmp_path):
  """A copy of the one-step model_dir whose model.ckpt-1 data is truncated.

  Returns (config, model_dir, truncated data file, intact model.ckpt-0).
  """
  _, config, trained = one_step_tiny_ssd
  model_dir = str(tmp_path / 'model')
  shutil.copytree(trained, model_dir)
  latest = tf.train.latest_checkpoint(model_dir)
  assert latest == os.path.join(model_dir, 'model.ckpt-1')
  data, = glob.glob(latest + '.data-*')
  _truncate(data, os.path.getsize(data) // 2)
  assert os.path.exists(os.path.join(model_dir, 'pipeline.config'))
  return config, model_dir, data, os.path.join(model_dir, 'model.ckpt-0')


def _launch(module, monkeypatch, capsys, args, model_dir):
  """Runs a command's run() in this process; returns (exit code, stderr)."""
  flags = module.FLAGS
  validators = {name: list(flags[name].validators) for name in flags}
  monkeypatch.setattr('sys.argv', [module.__name__] + args)
  try:
    with pytest.raises(SystemExit) as raised:
      command_line.run_training(module.main, lambda: model_dir, 'doc',
                                module.__name__)
  finally:
    for name, kept in validators.items():
      flags[name].validators[:] = kept
    flags.unparse_flags()
  return raised.value.code, capsys.readouterr().err


def _model_main_args(config, model_dir, *extra):
  return ['--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
          '--num_train_steps=5',
          '--hparams_overrides=%s' % tiny_ssd.LIGHT_OVERRIDES] + list(extra)


def _one_error_line(stderr):
  lines = [line for line in stderr.splitlines() if line.startswith('error:')]
  assert len(lines) == 1 and 'Traceback' not in stderr, stderr[-3000:]
  return lines[0]


def test_model_main_refuses_a_truncated_checkpoint_untouched(
    damaged, monkeypatch, capsys):
  config, model_dir, data, intact = damaged
  before = file_trees.snapshot(model_dir)
  code, stderr = _launch(model_main, monkeypatch, capsys,
                         _model_main_args(config, model_dir), model_dir)
  assert code == 1
  error = _one_error_line(stderr)
  assert '%s is truncated' % data in error
  assert 'The last intact checkpoint there is %s' % intact in error
  assert '--resume_from_last_good' in error
  # pipeline.config included: the refusal comes before any write.
  assert file_trees.snapshot(model_dir) == before


def test_model_main_refuses_a_state_naming_missing_files(
    damaged, monkeypatch, capsys):
  config, model_dir, data, intact = damaged
  for path in glob.glob(os.path.join(model_dir, 'model.ckpt-1.*')):
    os.remove(path)
  before = file_trees.snapshot(model_dir)
  code, stderr = _launch(model_main, monkeypatch, capsys,
                         _model_main_args(config, model_dir), model_dir)
  assert code == 1
  error = _one_error_line(stderr)
  assert '%s.index does not exist' % os.path.join(
      model_dir, 'model.ckpt-1') in error
  assert intact in error and data not in error
  assert file_trees.snapshot(model_dir) == before


def test_model_main_resumes_from_last_good(damaged, monkeypatch, capsys):
  config, model_dir, data, intact = damaged
  with open(data, 'rb') as f:
    truncated = f.read()
  resumed = []
  monkeypatch.setattr(
      training_jobs, 'train_and_evaluate', lambda job, parts, *_, **__: (
          resumed.append(tf.train.latest_checkpoint(parts['estimator']
                                                    .model_dir))))
  code, _ = _launch(model_main, monkeypatch, capsys, _model_main_args(
      config, model_dir, '--resume_from_last_good'), model_dir)
  assert code is None
  assert resumed == [intact]
  with open(data, 'rb') as f:
    assert f.read() == truncated


def test_evaluation_names_the_damaged_checkpoint(damaged, monkeypatch,
                                                 capsys, tmp_path):
  config, model_dir, data, intact = damaged
  eval_dir = str(tmp_path / 'eval')
  args = ['--pipeline_config_path=%s' % config, '--model_dir=%s' % eval_dir,
          '--checkpoint_dir=%s' % model_dir, '--run_once',
          '--hparams_overrides=%s' % tiny_ssd.LIGHT_OVERRIDES]
  before = file_trees.snapshot(model_dir)
  code, stderr = _launch(model_main, monkeypatch, capsys, args, eval_dir)
  assert code == 1
  error = _one_error_line(stderr)
  assert error.startswith('error: --checkpoint_dir=%s: the checkpoint to '
                          'evaluate is damaged: %s is truncated' % (
                              model_dir, data))
  assert intact in error
  evaluated = []
  monkeypatch.setattr(model_lib.estimator_lib.Estimator, 'evaluate',
                      lambda self, input_fn, steps, checkpoint_path, name,
                      hooks=None: evaluated.append(checkpoint_path))
  code, _ = _launch(model_main, monkeypatch, capsys,
                    args + ['--resume_from_last_good'], eval_dir)
  assert code is None and evaluated == [intact]
  assert file_trees.snapshot(model_dir) == before


def test_legacy_train_refuses_a_truncated_checkpoint(damaged, monkeypatch,
                                                     capsys):
  config, model_dir, data, intact = damaged
  before = file_trees.snapshot(model_dir)
  code, stderr = _launch(
      legacy_train, monkeypatch, capsys,
      ['--train_dir=%s' % model_dir, '--pipeline_config_path=%s' % config],
      model_dir)
  assert code == 1
  error = _one_error_line(stderr)
  assert error.startswith('error: --train_dir=%s: ' % model_dir)
  assert '%s is truncated' % data in error and intact in error
  assert file_trees.snapshot(model_dir) == before


# ---------------------------------------------------------------------------
# A full disk.

@pytest.fixture
def small_disk(tmp_path, monkeypatch):
  """A 1 MB tmpfs at tmp_path/disk; if it cannot be mounted, a plain
  folder whose third checkpoint save fails as a full device would."""
  disk = tmp_path / 'disk'
  disk.mkdir()
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs',
                            str(disk)], capture_output=True,
                           check=False).returncode == 0
  if not mounted:
    _simulate_full_disk(monkeypatch, after_saves=2)
  yield disk
  if mounted:
    # The Estimator's event writers keep files open on it.
    tf.compat.v1.summary.FileWriterCache.clear()
    if subprocess.run(['umount', str(disk)], check=False).returncode:
      subprocess.run(['umount', '-l', str(disk)], check=True)


def _simulate_full_disk(monkeypatch, after_saves):
  """Saver.save fails after `after_saves` saves, leaving its _temp folder."""
  save = tf.compat.v1.train.Saver.save
  calls = []

  def failing_save(self, sess, save_path, global_step=None, **kwargs):
    calls.append(save_path)
    if len(calls) <= after_saves:
      return save(self, sess, save_path, global_step=global_step, **kwargs)
    step = tf.compat.v1.train.global_step(sess, global_step)
    temp = '%s-%d_temp' % (save_path, step)
    os.makedirs(temp)
    part = os.path.join(temp, 'part-00000-of-00001.data-00000-of-00001')
    with open(part, 'wb') as f:
      f.write(b'\0' * 1000)
    raise tf.errors.ResourceExhaustedError(
        None, None, '%s.tempstate123; No space left on device' % part)
  monkeypatch.setattr(tf.compat.v1.train.Saver, 'save', failing_save)


def _model_fn(features, labels, mode):
  """300 KB of weights, a checkpoint of about that size."""
  del labels  # Unused.
  weights = tf.compat.v1.get_variable('weights', [75000, 1])
  loss = tf.reduce_sum(features * weights[:1])
  return tf.estimator.EstimatorSpec(
      mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
          0.1).minimize(loss, tf.compat.v1.train.get_global_step()))


def test_a_full_disk_names_the_path_and_removes_the_failed_save(
    small_disk, monkeypatch, capsys):
  model_dir = str(small_disk / 'model')

  def main(unused_argv):
    estimator = tf.estimator.Estimator(
        _model_fn, config=tf.estimator.RunConfig(
            model_dir=model_dir, save_checkpoints_steps=1,
            checkpoint_save_graph_def=False, save_summary_steps=None,
            log_step_count_steps=None))
    estimator.train(lambda: tf.data.Dataset.from_tensors(
        (np.ones([1], np.float32), 0.0)).repeat(), max_steps=10)

  monkeypatch.setattr('sys.argv', ['train'])
  with pytest.raises(SystemExit) as raised:
    command_line.run_training(main, lambda: model_dir, 'doc', __name__)
  assert raised.value.code == 1
  error = _one_error_line(capsys.readouterr().err)
  assert error.startswith('error: no space left on the device while '
                          'writing %s/model.ckpt-' % model_dir)
  last = tf.train.latest_checkpoint(model_dir)
  assert checkpoint_health.problem(last) is None
  assert 'Each checkpoint save needs about 0.3 MB (the size of %s)' % (
      last) in error
  assert 'Removed the incomplete save %s/model.ckpt-' % model_dir in error
  assert not glob.glob(os.path.join(model_dir, '*_temp'))
  assert 'relaunch to resume' in error
