"""--keep_best_by: the best evaluated checkpoint kept in model_dir/best/.

The keeper alone is fed evaluation results over real checkpoints of a
one-variable graph (variable `v` holds the step it was saved at, so the
kept copy says which checkpoint it is). One model_main evaluation (in
this process) of the session's one-step tiny SSD, with --keep_best_by and
--keep_best_export: the evaluated checkpoint is kept and exported as
export_inference_graph exports. (test_model_main's train_and_evaluate run
keeps its evaluated checkpoint too.)
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import keep_best
from od_estimator.protos import pipeline_pb2
from od_estimator.utils import file_safety
from tests import command_modules
from tests import tiny_ssd

MAP = 'DetectionBoxes_Precision/mAP'
LOSS = 'Loss/total_loss'


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
  """Checkpoints model.ckpt-1..3 of a graph whose `v` holds the step."""
  folder = tmp_path_factory.mktemp('training')
  prefixes = {}
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    variable = tf.compat.v1.get_variable('v', initializer=0.0)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for number in (1, 2, 3):
        session.run([step.assign(number), variable.assign(float(number))])
        prefixes[number] = saver.save(session, str(folder / 'model.ckpt'),
                                      global_step=number)
  return prefixes


def _keeper(model_dir, metric=MAP, **kwargs):
  return keep_best.BestKeeper(keep_best.Options(metric, **kwargs),
                              str(model_dir),
                              pipeline_pb2.TrainEvalPipelineConfig())


def _evaluation(step, **values):
  """An evaluation's result as the Estimator returns it."""
  metrics = {MAP: np.float32(0.0), LOSS: np.float32(1.0),
             'global_step': np.int64(step)}
  metrics.update({name: np.float32(value) for name, value in values.items()})
  return metrics


def _kept(model_dir):
  """(best.json's step, the kept copy's `v`, best/'s checkpoint files)."""
  best = os.path.join(str(model_dir), 'best')
  record = keep_best.read_best(str(model_dir))
  value = tf.train.load_checkpoint(tf.train.latest_checkpoint(best)
                                   ).get_tensor('v')
  files = sorted(name for name in os.listdir(best) if 'ckpt' in name)
  return record['step'], float(value), files


def _files(step):
  return ['model.ckpt-%d.%s' % (step, ending) for ending in
          ('data-00000-of-00001', 'index', 'meta')]


@pytest.mark.parametrize('metric, values', [
    (MAP, (0.3, 0.1, 0.5)), (LOSS, (2.0, 3.0, 1.0))])
def test_keeps_the_better_checkpoint_of_each_evaluation(
    checkpoints, tmp_path, metric, values):
  keeper = _keeper(tmp_path, metric)
  kept = []
  for step, value in zip((1, 2, 3), values):
    updated = keeper.update(_evaluation(step, **{metric: value}),
                            checkpoints[step])
    kept.append((updated, _kept(tmp_path)))
  assert kept == [(True, (1, 1.0, _files(1))), (False, (1, 1.0, _files(1))),
                  (True, (3, 3.0, _files(3)))]
  record = keep_best.read_best(str(tmp_path))
  assert record['metric'] == metric
  assert record['value'] == pytest.approx(values[2])
  assert record['higher_is_better'] == (metric == MAP)
  assert os.path.exists(tmp_path / 'best' / 'pipeline.config')
  # Hard links: no bytes copied.
  assert os.stat(tmp_path / 'best' / 'model.ckpt-3.index').st_ino == (
      os.stat(checkpoints[3] + '.index').st_ino)


def test_a_resumed_job_keeps_the_better_model_kept_before(checkpoints,
                                                          tmp_path):
  assert _keeper(tmp_path).update(_evaluation(1, **{MAP: 0.5}),
                                  checkpoints[1])
  # The relaunch: a new keeper reads best.json back.
  relaunched = _keeper(tmp_path)
  assert not relaunched.update(_evaluation(2, **{MAP: 0.4}), checkpoints[2])
  assert _kept(tmp_path) == (1, 1.0, _files(1))
  assert relaunched.update(_evaluation(3, **{MAP: 0.6}), checkpoints[3])
  assert _kept(tmp_path) == (3, 3.0, _files(3))


def test_what_a_killed_keeper_left_is_removed(checkpoints, tmp_path):
  assert _keeper(tmp_path).update(_evaluation(1, **{MAP: 0.5}),
                                  checkpoints[1])
  best = tmp_path / 'best'
  # Killed while copying step 2 in: before best.json named it.
  for path in tf.io.gfile.glob(checkpoints[2] + '.*'):
    shutil.copy(path, best)
  (best / (file_safety.TEMP_PREFIX + 'model.ckpt-2.index.1234')).write_text('')
  assert not _keeper(tmp_path).update(_evaluation(2, **{MAP: 0.1}),
                                      checkpoints[2])
  assert _kept(tmp_path) == (1, 1.0, _files(1))
  assert sorted(os.listdir(best)) == sorted(
      _files(1) + ['best.json', 'checkpoint', 'pipeline.config'])


def test_an_unknown_metric_names_those_the_evaluation_writes(checkpoints,
                                                             tmp_path):
  keeper = _keeper(tmp_path, 'DetectionBoxes_Precision/mAP@.5IOU')
  with pytest.raises(errors.UserInputError) as error:
    keeper.update(_evaluation(1), checkpoints[1])
  assert str(error.value) == (
      '--keep_best_by=DetectionBoxes_Precision/mAP@.5IOU: the evaluation '
      'writes no such metric. It writes: DetectionBoxes_Precision/mAP, '
      'Loss/total_loss.')
  assert not os.path.exists(tmp_path / 'best')


def test_the_direction_comes_from_the_name_or_the_flag():
  def higher(metric, flag=None):
    return keep_best.higher_is_better(keep_best.Options(metric, flag))
  assert [higher(name) for name in (
      MAP, 'DetectionBoxes_Recall/AR@100 (small)',
      'PascalBoxes_PerformanceByCategory/AP@0.5IOU/circle',
      'OpenImagesV2_Precision/mAP@0.5IOU', LOSS,
      'Loss/BoxClassifierLoss/mask_loss', 'loss')] == [
          True, True, True, True, False, False, False]
  assert higher('learning_rate', False) is False
  with pytest.raises(errors.UserInputError,
                     match='--keep_best_by=learning_rate: its name does not '
                     'tell.*--nokeep_best_higher_is_better'):
    higher('learning_rate')


def test_a_folder_kept_by_another_metric_is_refused(checkpoints, tmp_path):
  assert _keeper(tmp_path).update(_evaluation(1, **{MAP: 0.5}),
                                  checkpoints[1])
  with pytest.raises(errors.UserInputError,
                     match='keeps the checkpoint of step 1 by '
                     'DetectionBoxes_Precision/mAP'):
    _keeper(tmp_path, LOSS)


@pytest.mark.parametrize('command, argv, instead', [
    ('model_main_tf2', [], 'pass it to the evaluation job '
     '(--checkpoint_dir=%(model_dir)s).'),
    ('model_tpu_main', ['--mode=train'], 'pass it to the --mode=eval job.')])
def test_a_training_only_job_refuses_keep_best_by(tmp_path, command, argv,
                                                  instead):
  model_dir = str(tmp_path / 'model')
  result = command_modules.run_command(command, argv + [
      '--pipeline_config_path=%s' % (tmp_path / 'pipeline.config'),
      '--model_dir=%s' % model_dir, '--keep_best_by=' + MAP])
  assert result.returncode == 1
  assert ('error: --keep_best_by=%s keeps the best evaluated checkpoint, but '
          'this run does not evaluate; %s' % (
              MAP, instead % {'model_dir': model_dir})) in result.stderr, (
                  result.stderr[-2000:])
  assert not os.path.exists(model_dir)


def test_companion_flags_need_keep_best_by(tmp_path):
  result = command_modules.run_command('model_main', [
      '--pipeline_config_path=%s' % (tmp_path / 'pipeline.config'),
      '--model_dir=%s' % (tmp_path / 'model'), '--keep_best_export'])
  assert result.returncode == 1
  assert 'error: --keep_best_export needs --keep_best_by=METRIC.' in (
      result.stderr), result.stderr[-2000:]


def test_model_main_keeps_and_exports_the_best(one_step_tiny_ssd, tmp_path):
  """An evaluation of the session's one-step tiny SSD (--checkpoint_dir,
  read only): its checkpoint is kept and exported."""
  _, _, trained = one_step_tiny_ssd
  model_dir = tmp_path / 'eval'
  result = command_modules.run_command('model_main', [
      '--pipeline_config_path=%s' % os.path.join(trained, 'pipeline.config'),
      '--model_dir=%s' % model_dir, '--checkpoint_dir=%s' % trained,
      '--run_once', '--keep_best_by=' + LOSS, '--keep_best_export'])
  assert result.returncode == 0, result.stderr[-3000:]
  printed = [line.split() for line in result.stdout.splitlines()
             if line.split()[:1] == [LOSS]]
  record = json.loads((model_dir / 'best' / 'best.json').read_text())
  assert (record['step'], record['metric'], record['checkpoint']) == (
      1, LOSS, 'model.ckpt-1')
  assert record['value'] == pytest.approx(float(printed[0][1]), abs=1e-4)
  assert tf.train.latest_checkpoint(str(model_dir / 'best')) == str(
      model_dir / 'best' / 'model.ckpt-1')
  export = model_dir / 'export' / 'best' / '1'
  assert os.listdir(model_dir / 'export' / 'best') == ['1']
  for name in ('frozen_inference_graph.pb', 'pipeline.config',
               'model.ckpt.index'):
    assert (export / name).exists(), sorted(os.listdir(export))
  weights = 'BoxPredictor_0/ClassPredictor/biases'
  np.testing.assert_array_equal(
      tf.train.load_checkpoint(str(export / 'model.ckpt')).get_tensor(weights),
      tf.train.load_checkpoint(os.path.join(trained, 'model.ckpt-1')
                               ).get_tensor(weights))
  serving = tf.saved_model.load(str(export / 'saved_model')).signatures[
      'serving_default']
  detections = serving(inputs=tf.zeros([1, 64, 64, 3], tf.uint8))
  assert {'detection_boxes', 'detection_scores', 'detection_classes',
          'num_detections'} <= set(detections)


@pytest.mark.parametrize('command', ['model_main', 'model_tpu_main',
                                     'model_main_tf2'])
def test_each_command_lists_the_flags_in_its_help(command):
  result = command_modules.run_command(command, ['--help'])
  assert result.returncode == 0, result.stderr[-2000:]
  for flag in ('--keep_best_by:', '--[no]keep_best_higher_is_better:',
               '--[no]keep_best_export:'):
    assert flag in result.stdout, (command, flag)
