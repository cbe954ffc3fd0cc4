"""The training commands check the merged configs before touching model_dir."""
import functools
import os

import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.checks import launch_check
from od_estimator.estimator import model_lib
from od_estimator.config import config_util
from tests import tiny_ssd
from tests.command_modules import run_command

_AS_RUN = 'pipeline.config of the last good run\n'


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  root = tmp_path_factory.mktemp('launch_check')
  return tiny_ssd.write_config(root, root / 'data')


@pytest.fixture
def model_dir(tmp_path):
  """A model_dir holding the as-run config of an earlier run."""
  (tmp_path / 'model').mkdir()
  (tmp_path / 'model' / 'pipeline.config').write_text(_AS_RUN)
  return str(tmp_path / 'model')


def _launch(config_path, model_dir, hparams='', **kwargs):
  """create_estimator_and_inputs as model_main calls it, with the check.

  The light tiny SSD: the launch, not the model, is checked (a good launch
  builds its training graph).
  """
  return model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(model_dir=model_dir),
      hparams=config_util.parse_hparams_overrides(
          ','.join(filter(None, [tiny_ssd.LIGHT_OVERRIDES, hparams]))),
      pipeline_config_path=config_path, save_final_config=True,
      check_configs=functools.partial(
          launch_check.check, pipeline_config_path=config_path), **kwargs)


def _edited(config_path, old, new, directory):
  with open(config_path) as f:
    text = f.read()
  assert old in text, old
  path = os.path.join(str(directory), 'edited.config')
  with open(path, 'w') as f:
    f.write(text.replace(old, new, 1))
  return path


# Case -> (edit of the config file or None, hparams override, words of the
# error line).
BAD_LAUNCHES = {
    'glob_matches_nothing': (('shapes_train.record-*', 'shapes_tran.record-*'),
                             '', ['no file matches', 'shapes_tran.record-*']),
    # (The strategy key batch_size=0 becomes 1, as in the original.)
    'zero_batch_size_override': (None, 'train_config.batch_size=0',
                                 ['train_config.batch_size',
                                  'must be at least 1, got 0']),
    'num_classes_below_label_map': (None, 'model.ssd.num_classes=2',
                                    ['beyond num_classes=2', '3 (triangle)']),
}


@pytest.mark.parametrize('case', sorted(BAD_LAUNCHES))
def test_bad_launch_stops_before_model_dir_is_touched(config, model_dir,
                                                      tmp_path, case):
  edit, hparams, words = BAD_LAUNCHES[case]
  path = _edited(config, *edit, tmp_path) if edit else config
  with pytest.raises(errors.UserInputErrors) as raised:
    _launch(path, model_dir, hparams)
  problems = [str(problem) for problem in raised.value.problems]
  assert any(all(word in line for word in words) for line in problems), (
      problems)
  assert 'nothing was written to --model_dir' in problems[-1]
  with open(os.path.join(model_dir, 'pipeline.config')) as f:
    assert f.read() == _AS_RUN


def test_good_launch_writes_the_as_run_config_with_the_graph(config, model_dir,
                                                             capsys):
  parts = _launch(config, model_dir, train_steps=7)
  assert parts['train_steps'] == 7
  assert 'note:' not in capsys.readouterr().err
  as_run = os.path.join(model_dir, 'pipeline.config')
  with open(as_run) as f:
    assert f.read() == _AS_RUN  # Not before the training graph is built.
  estimator = parts['estimator']
  train = tf.estimator.ModeKeys.TRAIN
  with tf.Graph().as_default():
    features, labels, _ = estimator._get_features_and_labels_from_input_fn(  # pylint: disable=protected-access
        parts['train_input_fn'], train)
    estimator._call_model_fn(features, labels, train, estimator.config)  # pylint: disable=protected-access
  with open(as_run) as f:
    text = f.read()
  assert 'num_steps: 7' in text and 'depth_multiplier: 0.25' in text


def test_notes_are_printed_once_at_launch(config, model_dir, tmp_path, capsys):
  path = _edited(config, 'metrics_set: "coco_detection_metrics"',
                 'metrics_set: "coco_detection_metrics" num_examples: 100',
                 tmp_path)
  _launch(path, model_dir)
  err = capsys.readouterr().err
  assert err.count('note: eval_config.num_examples has no effect') == 1, err


def test_evaluation_only_launch_does_not_need_the_training_files(
    config, tmp_path):
  path = _edited(config, 'shapes_train.record-*', 'elsewhere-*', tmp_path)
  configs = config_util.get_configs_from_pipeline_file(path)
  # The training machine's checkpoint and label map, absent where
  # evaluation runs.
  trainer = tmp_path / 'on_the_trainer'
  configs['train_config'].fine_tune_checkpoint = str(trainer / 'model.ckpt')
  configs['train_input_config'].label_map_path = str(trainer / 'labels.pbtxt')
  launch_check.check(configs, path, evaluation_only=True)
  with pytest.raises(errors.UserInputErrors) as raised:
    launch_check.check(configs, path)
  for field in ('elsewhere-', 'train_config.fine_tune_checkpoint',
                'train_input_reader.label_map_path'):
    assert field in str(raised.value)


@pytest.mark.parametrize('command, flags', [
    ('model_main', ['--num_train_steps=1']),
    ('model_tpu_main', ['--use_tpu=false', '--mode=train']),
])
def test_command_reports_every_problem_and_exits_1(config, model_dir, tmp_path,
                                                   command, flags):
  path = _edited(config, 'shapes_train.record-*', 'shapes_tran.record-*',
                 tmp_path)
  result = run_command(command, [
      '--pipeline_config_path=%s' % path, '--model_dir=%s' % model_dir,
      '--hparams_overrides=%s,model.ssd.num_classes=2,'
      'train_config.batch_size=0' % tiny_ssd.TINY_OVERRIDES] + flags)
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  errors_lines = [line for line in result.stderr.splitlines()
                  if line.startswith('error: ')]
  # The glob, the batch size, num_classes against both readers' label map,
  # then the summary.
  assert any('no file matches' in line for line in errors_lines)
  assert any('train_config.batch_size' in line for line in errors_lines)
  assert sum('beyond num_classes=2' in line for line in errors_lines) == 2
  assert 'nothing was written to --model_dir' in errors_lines[-1]
  with open(os.path.join(model_dir, 'pipeline.config')) as f:
    assert f.read() == _AS_RUN


@pytest.mark.parametrize('task_type, missing, refused', [
    ('evaluator', 'shapes_train.record-*', False),
    ('evaluator', 'shapes_val.record-*', True),
    ('ps', 'shapes_val.record-*', False),
    ('worker', 'shapes_train.record-*', True),
])
def test_cluster_tasks_need_only_the_files_they_read(
    config, tmp_path, monkeypatch, task_type, missing, refused):
  path = _edited(config, missing, 'elsewhere-*', tmp_path)
  configs = config_util.get_configs_from_pipeline_file(path)
  monkeypatch.setenv('TF_CONFIG', '{"cluster": {}, "task": {"type": "%s", '
                     '"index": 0}}' % task_type)
  if refused:
    with pytest.raises(errors.UserInputErrors, match='elsewhere-'):
      launch_check.check(configs, path)
  else:
    launch_check.check(configs, path)


def test_load_pretrained_false_skips_the_fine_tune_checkpoint_check(tmp_path):
  """With load_pretrained=false the checkpoint is never read: no error."""
  config = tiny_ssd.write_config(tmp_path, tmp_path / 'data')
  seen = []
  model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(model_dir=str(tmp_path / 'model')),
      hparams={'load_pretrained': False}, pipeline_config_path=config,
      config_override='train_config { fine_tune_checkpoint: "%s" }' % (
          tmp_path / 'missing' / 'model.ckpt'),
      check_configs=lambda configs: seen.append(
          launch_check.check(configs, config)))
  assert seen == [None]
