"""model_main_tf2: the original's TF2 command line on the Estimator engine.

One tiny SSD (tiny_ssd.LIGHT_OVERRIDES with tests/fakes.py's one-conv
feature extractor: the test is about the command, and MobileNet's graph
would be most of its time) trains 3 steps and its folder is then evaluated
with --checkpoint_dir, both in this process (run_command);
the flag errors need no model. A folder of the original TF2 trainer's
ckpt-N for a tiny TF2 SSD (tiny_tf2_ssd) is evaluated in place. Two
worker processes on localhost train the tiniest model synchronously
(--num_workers=2) and are compared variable by variable.
"""
import glob
import json
import os
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.models import ssd_feature_extractor_registry
from tests import event_tags
from tests import fakes
from tests import local_ports
from tests import plain_command
from tests import tiny_faster_rcnn
from tests import file_trees
from tests import tiny_ssd
from tests import tiny_tf2_ssd
from tests.command_modules import run_command

TRAIN_STEPS = 3
# Training steps of the TF2 trainer's ckpt-1 and ckpt-2.
TF2_STEPS = (3, 6)
# Size of the class logits the TF2 checkpoint's averages give.
LOGIT = 1000.0
EVAL_TIMEOUT_SECS = 300
# The original's flags (its model_main_tf2.py), each listed by --help.
ORIGINAL_FLAGS = ('pipeline_config_path', 'num_train_steps',
                  'eval_on_train_data', 'sample_1_of_n_eval_examples',
                  'sample_1_of_n_eval_on_train_examples', 'model_dir',
                  'checkpoint_dir', 'eval_timeout', 'use_tpu', 'tpu_name',
                  'num_workers', 'checkpoint_every_n', 'record_summaries')


# The light SSD with the fake extractor's two feature maps (2x2, 1x1).
FAKE_EXTRACTOR_OVERRIDES = tiny_ssd.LIGHT_OVERRIDES + ','.join([
    '', 'model.ssd.feature_extractor.type=fake_ssd',
    'model.ssd.feature_extractor.num_layers=2',
    'model.ssd.anchor_generator.ssd_anchor_generator.num_layers=2'])


def _common(config, model_dir):
  return ['--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
          '--num_train_steps=%d' % TRAIN_STEPS,
          '--hparams_overrides=%s' % FAKE_EXTRACTOR_OVERRIDES]


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  root = tmp_path_factory.mktemp('model_main_tf2')
  return tiny_ssd.write_config(root, root / 'data')


@pytest.fixture(scope='module')
def runs(config, tmp_path_factory):
  """Trains, then evaluates the training folder.

  Returns:
    (model_dir, training's result, the files it left, evaluation's
    result, the evaluation's seconds, the result of the evaluation of
    the training data).
  """
  model_dir = str(tmp_path_factory.mktemp('tf2_model'))
  common = _common(config, model_dir)
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  'fake_ssd', fakes.FakeSSDFeatureExtractor)
    return _train_and_evaluate(model_dir, common)


def _train_and_evaluate(model_dir, common):
  """The runs fixture's commands (flags `common`)."""
  training = run_command('model_main_tf2', common + [
      '--checkpoint_every_n=2', '--record_summaries=false'])
  trained_files = sorted(os.listdir(model_dir))
  start = time.monotonic()
  evaluation = run_command('model_main_tf2', common + [
      '--checkpoint_dir=%s' % model_dir,
      '--eval_timeout=%d' % EVAL_TIMEOUT_SECS])
  seconds = time.monotonic() - start
  on_training_data = run_command('model_main_tf2', common + [
      '--checkpoint_dir=%s' % model_dir, '--eval_on_train_data',
      '--sample_1_of_n_eval_on_train_examples=4'])
  return (model_dir, training, trained_files, evaluation, seconds,
          on_training_data)


def test_trains_only_with_a_checkpoint_every_n_steps_and_the_last(runs):
  model_dir, training, files = runs[:3]
  assert training.returncode == 0, training.stderr[-3000:]
  for step in (0, 2, 3):
    assert 'model.ckpt-%d.index' % step in files, files
  assert 'pipeline.config' in files
  # No evaluation while training, as the original's TF2 trainer.
  assert not [name for name in files if name.startswith('eval')], files
  tags = event_tags.scalar_tags(model_dir)
  for tag in ('Loss/localization_loss', 'Loss/classification_loss',
              'Loss/total_loss', 'learning_rate'):
    assert tag in tags, (tag, sorted(tags))
  # --record_summaries=false: the model's own summaries are left out.
  assert not [tag for tag in tags if tag.startswith('TargetAssignment')]


def test_checkpoint_dir_evaluates_until_the_last_step(runs):
  model_dir, _, _, evaluation, seconds, _ = runs
  assert evaluation.returncode == 0, evaluation.stderr[-3000:]
  assert 'Evaluation at step %d:' % TRAIN_STEPS in evaluation.stdout
  # Stopped after the final checkpoint, not at the timeout.
  assert seconds < EVAL_TIMEOUT_SECS
  # Summaries in model_dir/eval, as the original's.
  tags = event_tags.scalar_tags(os.path.join(model_dir, 'eval'))
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/total_loss'):
    assert tag in tags, (tag, sorted(tags))


def test_eval_on_train_data_evaluates_the_training_data(runs):
  model_dir, on_training_data = runs[0], runs[-1]
  assert on_training_data.returncode == 0, on_training_data.stderr[-3000:]
  assert 'Evaluation at step %d:' % TRAIN_STEPS in on_training_data.stdout
  tags = event_tags.scalar_tags(os.path.join(model_dir,
                                             'eval_training_data'))
  assert 'DetectionBoxes_Precision/mAP' in tags, sorted(tags)


def test_help_lists_the_flags_and_the_layout_differences():
  result = run_command('model_main_tf2', ['--help'])
  assert result.returncode == 0
  for flag in ORIGINAL_FLAGS:
    assert '--%s' % flag in result.stdout or (
        '--[no]%s' % flag in result.stdout), flag
  for difference in ('model.ckpt-N', 'ckpt-N (object-based)',
                     'not model_dir/train', 'model_dir/eval',
                     'tmp_worker_<index>'):
    assert difference in result.stdout, difference


def _one_error_line(result):
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  lines = [line for line in result.stderr.splitlines()
           if line.startswith('error:')]
  assert len(lines) == 1, result.stderr[-3000:]
  return lines[0]


@pytest.mark.parametrize('argv, expected', [
    (['--num_train_step=3', '--model_dir=M', '--pipeline_config_path=P'],
     "Unknown command line flag 'num_train_step'"),
    (['--pipeline_config_path=P'], '--model_dir is required'),
    (['--model_dir=M', '--pipeline_config_path=P', '--checkpoint_every_n=0'],
     '--checkpoint_every_n=0: must be at least 1'),
    (['--model_dir=M', '--pipeline_config_path=P', '--num_workers=2'],
     '--num_workers=2 trains on 2 machines: set TF_CONFIG'),
    (['--model_dir=M', '--pipeline_config_path=P', '--eval_on_train_data'],
     '--eval_on_train_data: training does not evaluate'),
])
def test_flag_errors_are_one_line(tmp_path, monkeypatch, argv, expected):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  argv = [arg.replace('=M', '=%s' % (tmp_path / 'model')) for arg in argv]
  assert expected in _one_error_line(run_command('model_main_tf2', argv))


def test_a_worker_count_other_than_tf_configs_is_one_line(tmp_path,
                                                          monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'worker': ['localhost:1', 'localhost:2', 'localhost:3']},
      'task': {'type': 'worker', 'index': 0}}))
  line = _one_error_line(run_command('model_main_tf2', [
      '--model_dir=%s' % tmp_path, '--pipeline_config_path=P',
      '--num_workers=2']))
  assert '--num_workers=2 but the TF_CONFIG cluster has 3' in line


def test_a_batch_the_workers_cannot_share_is_one_line(config, tmp_path,
                                                     monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'worker': ['localhost:1', 'localhost:2']},
      'task': {'type': 'worker', 'index': 0}}))
  assert 'batch_size=4' in tiny_ssd.LIGHT_OVERRIDES
  line = _one_error_line(run_command('model_main_tf2', [
      '--model_dir=%s' % (tmp_path / 'model'), '--pipeline_config_path=%s' %
      config, '--num_workers=2', '--hparams_overrides=%s' %
      tiny_ssd.LIGHT_OVERRIDES.replace('batch_size=4', 'batch_size=3')]))
  assert ('train_config.batch_size=3 is the batch of all workers, split '
          'among them') in line


def _sure_of_nothing(fact):
  """The class predictors' averages: every class logit (background
  included) of every anchor is -LOGIT. None for other values."""
  if not (fact.keras_name.endswith('/average') and
          '/ClassPredictor/' in fact.keras_name):
    return None
  if '/kernel/' in fact.keras_name:
    return np.zeros(fact.shape)
  return np.full(fact.shape, -LOGIT)


@pytest.fixture(scope='module')
def tf2_run(tmp_path_factory):
  """Evaluates a folder of the original's TF2 training checkpoints.

  The folder holds ckpt-1 and ckpt-2 (steps TF2_STEPS, the last the
  config's num_steps) with random weights and moving averages, which the
  config's eval_config.use_moving_averages evaluates: the class
  predictors' averages are _sure_of_nothing's.

  Returns:
    (result, the evaluation's model_dir, seconds).
  """
  root = tmp_path_factory.mktemp('tf2_trainer_folder')
  config = tiny_tf2_ssd.write_config(root, root / 'data',
                                     num_steps=TF2_STEPS[-1],
                                     use_moving_averages=True)
  tf2_dir = str(root / 'tf2_train')
  tiny_tf2_ssd.write_training_folder(
      tf2_dir, config, TF2_STEPS,
      facts_name=tiny_tf2_ssd.CONFIG + '.use_moving_average',
      chosen=_sure_of_nothing)
  before = file_trees.snapshot(tf2_dir)
  model_dir = str(root / 'evaluation')
  start = time.monotonic()
  result = run_command('model_main_tf2', [
      '--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
      '--checkpoint_dir=%s' % tf2_dir,
      '--eval_timeout=%d' % EVAL_TIMEOUT_SECS])
  seconds = time.monotonic() - start
  assert file_trees.snapshot(tf2_dir) == before
  return result, model_dir, seconds


def test_a_tf2_trainer_folder_is_evaluated_at_its_last_step(tf2_run):
  result, model_dir, seconds = tf2_run
  assert result.returncode == 0, result.stderr[-3000:]
  # Its `step`, not the N of ckpt-N; stopped there, not at the timeout.
  assert 'Evaluation at step %d:' % TF2_STEPS[-1] in result.stdout
  assert seconds < EVAL_TIMEOUT_SECS
  eval_dir = os.path.join(model_dir, 'eval')
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/total_loss'):
    # The latest checkpoint only, as the original's evaluation starts.
    assert event_tags.scalar_steps(eval_dir, tag) == [TF2_STEPS[-1]], tag


def test_a_tf2_trainer_folder_is_evaluated_with_its_averages(tf2_run):
  """The focal loss (alpha 0.75) of each matched anchor is 0.75 * LOGIT
  (its class's logit), of the others (all targets 0) nothing; it is
  normalized by the matches. The raw (random) weights cost about 10."""
  result, model_dir, _ = tf2_run
  assert result.returncode == 0, result.stderr[-3000:]
  scalars = event_tags.last_scalars(os.path.join(model_dir, 'eval'))
  np.testing.assert_allclose(scalars['Loss/classification_loss'],
                             0.75 * LOGIT, rtol=1e-4)


@pytest.mark.parametrize('layout, message', [
    ({'model.ckpt-3.index': ''}, 'model.ckpt-3.index without the '
     '`checkpoint` state file'),
    ({'saved_model/saved_model.pb': '', 'pipeline.config': ''},
     'but saved_model.'),
])
def test_a_folder_of_neither_kind_is_one_line(tmp_path, layout, message):
  folder = tmp_path / 'folder'
  for path, text in layout.items():
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_text(text)
  line = _one_error_line(run_command('model_main_tf2', [
      '--model_dir=%s' % (tmp_path / 'eval'), '--pipeline_config_path=P',
      '--checkpoint_dir=%s' % folder]))
  assert ('--checkpoint_dir=%s holds neither our checkpoints' % folder) in line
  assert message in line


def test_a_checkpoint_for_a_folder_is_one_line(tmp_path):
  prefix = tf.train.Checkpoint(step=tf.Variable(7)).save(
      str(tmp_path / 'ckpt'))
  line = _one_error_line(run_command('model_main_tf2', [
      '--model_dir=%s' % (tmp_path / 'eval'), '--pipeline_config_path=P',
      '--checkpoint_dir=%s' % prefix]))
  assert ('--checkpoint_dir=%s is a checkpoint; --checkpoint_dir takes the '
          'folder holding it (%s)' % (prefix, tmp_path)) in line


def _launch_worker(index, addresses, args, log_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', TF_CONFIG=json.dumps({
      'cluster': {'worker': addresses},
      'task': {'type': 'worker', 'index': index}}))
  with open(log_path, 'w') as log:
    return subprocess.Popen(
        plain_command.command('tests.fake_extractor_command') +
        ['od_estimator.model_main_tf2'] + args,
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tiny_ssd.REPO)


def _values(checkpoint):
  """{name: value} of a checkpoint's model variables (not the optimizer's)."""
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if 'Momentum' not in name}


def test_two_workers_apply_the_same_updates(tmp_path):
  """On the tiniest model (tiny_faster_rcnn's, 1x1-conv extractor): the
  light SSD takes about three times as long to build in both workers."""
  model_dir = str(tmp_path / 'model')
  # A batch of 2: one image per worker.
  config = tiny_faster_rcnn.write_config(tmp_path, tmp_path / 'data',
                                         extractor='fake', batch_size=2)
  args = ['--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
          '--num_train_steps=1', '--num_workers=2', '--log_every_n_steps=0']
  logs = [str(tmp_path / ('worker%d.log' % index)) for index in (0, 1)]
  with local_ports.reserved(2) as ports:
    addresses = ['localhost:%d' % port for port in ports]
    workers = [_launch_worker(index, addresses, args, logs[index])
               for index in (0, 1)]
    try:
      codes = [worker.wait(timeout=300) for worker in workers]
    finally:
      for worker in workers:
        if worker.poll() is None:
          worker.kill()
          worker.wait()
  texts = []
  for path in logs:
    with open(path) as f:
      texts.append(f.read()[-3000:])
  assert codes == [0, 0], texts
  # Worker 0 writes model_dir; worker 1 its copy, after the same update.
  chief = _values(os.path.join(model_dir, 'model.ckpt-1'))
  other = _values(os.path.join(model_dir, 'tmp_worker_1', 'model.ckpt-1'))
  initial = _values(os.path.join(model_dir, 'model.ckpt-0'))
  assert sorted(chief) == sorted(other)
  for name in chief:
    np.testing.assert_array_equal(chief[name], other[name], err_msg=name)
  moved = [name for name in chief if name != 'global_step' and
           not np.array_equal(chief[name], initial[name])]
  assert len(moved) > len(chief) // 2, len(moved)
  assert not glob.glob(os.path.join(model_dir, 'tmp_worker_0'))


def test_a_tpu_that_cannot_be_found_is_one_line(tmp_path, monkeypatch):
  def no_tpu(*args, **kwargs):
    del args, kwargs  # Unused.
    raise ValueError('Please provide a TPU Name to connect to.')
  monkeypatch.setattr(tf.distribute.cluster_resolver, 'TPUClusterResolver',
                      no_tpu)
  line = _one_error_line(run_command('model_main_tf2', [
      '--model_dir=%s' % tmp_path, '--pipeline_config_path=P', '--use_tpu',
      '--tpu_name=nope']))
  assert line.startswith('error: --use_tpu: cannot find the Cloud TPU '
                         '(--tpu_name=nope): Please provide a TPU Name')
