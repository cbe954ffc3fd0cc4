"""The legacy commands' cheap checks: notes per command, cluster refusals,
the training RunConfig, separate config files."""
import json
import os

from google.protobuf import text_format
import pytest
import tensorflow as tf

from od_estimator.checks import config_notes
from od_estimator import errors
from od_estimator.legacy import cluster
from od_estimator.legacy import configs as legacy_configs
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from tests.command_modules import import_command

legacy_train = import_command('legacy.train')


def _configs():
  pipeline = pipeline_pb2.TrainEvalPipelineConfig()
  pipeline.train_config.sync_replicas = True
  pipeline.train_config.replicas_to_aggregate = 2
  pipeline.eval_config.num_examples = 10
  pipeline.eval_config.export_path = 'detections.json'
  pipeline.eval_config.save_graph = True
  return config_util.create_configs_from_pipeline_proto(pipeline)


def _noted_fields(command):
  return {note.split(' has no effect')[0]
          for note in config_notes.no_effect_notes(_configs(), command)}


def test_notes_depend_on_the_command():
  everything = {'train_config.sync_replicas',
                'train_config.replicas_to_aggregate',
                'eval_config.num_examples', 'eval_config.export_path',
                'eval_config.save_graph'}
  assert _noted_fields(None) == everything
  assert _noted_fields('legacy_train') == everything - {
      'train_config.sync_replicas', 'train_config.replicas_to_aggregate'}
  # save_graph is not honoured by legacy.eval: still a note there.
  assert _noted_fields('legacy_eval') == everything - {
      'eval_config.num_examples', 'eval_config.export_path'}


def _run_config(monkeypatch, cluster_spec, task_type='chief'):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': cluster_spec, 'task': {'type': task_type, 'index': 0}}))
  return tf.estimator.RunConfig()


def test_workers_without_parameter_server_are_refused(monkeypatch):
  run_config = _run_config(monkeypatch, {'chief': ['h0:1'],
                                         'worker': ['h1:1']})
  with pytest.raises(errors.UserInputError, match='At least 1 ps task'):
    cluster.check(run_config, 1, pipeline_pb2.TrainEvalPipelineConfig()
                  .train_config)


def test_sync_replicas_count_every_training_task(monkeypatch):
  run_config = _run_config(monkeypatch, {
      'master': ['h0:1'], 'worker': ['h1:1', 'h2:1'], 'ps': ['h3:1']},
                           task_type='master')
  train_config = pipeline_pb2.TrainEvalPipelineConfig().train_config
  cluster.check(run_config, 1, train_config)
  # As the original: the workers and the master.
  assert cluster.training_tasks(run_config) == 3


def test_clones_in_a_cluster_are_refused(monkeypatch):
  run_config = _run_config(monkeypatch, {
      'chief': ['h0:1'], 'worker': ['h1:1'], 'ps': ['h3:1']})
  with pytest.raises(errors.UserInputError, match='--num_clones=2 in a '
                     'TF_CONFIG cluster'):
    cluster.check(run_config, 2, pipeline_pb2.TrainEvalPipelineConfig()
                  .train_config)


def test_batch_smaller_than_replicas_to_aggregate_is_refused():
  train_config = pipeline_pb2.TrainEvalPipelineConfig().train_config
  train_config.sync_replicas = True
  train_config.batch_size = 2
  train_config.replicas_to_aggregate = 4
  with pytest.raises(errors.UserInputError, match='batch_size 2 is smaller'):
    cluster.check(tf.estimator.RunConfig(), 1, train_config)


def test_run_config_keeps_checkpoints_every_n_hours_and_makes_clones(
    monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  train_config = pipeline_pb2.TrainEvalPipelineConfig().train_config
  train_config.keep_checkpoint_every_n_hours = 0.5
  flags = legacy_train.FLAGS
  flags.unparse_flags()
  try:
    flags(['legacy', '--train_dir=/tmp/unused', '--num_clones=2',
           '--clone_on_cpu'])
    run_config = legacy_train._run_config(train_config)  # pylint: disable=protected-access
    assert run_config.keep_checkpoint_every_n_hours == 0.5
    assert run_config.train_distribute.num_replicas_in_sync == 2
    flags(['legacy', '--num_clones=2', '--noclone_on_cpu'])
    if not tf.config.list_physical_devices('GPU'):
      with pytest.raises(errors.UserInputError,
                         match='--num_clones=2 asks for 2 GPUs but '
                         'TensorFlow sees 0; add --clone_on_cpu'):
        legacy_train._run_config(train_config)  # pylint: disable=protected-access
  finally:
    flags.unparse_flags()


def test_separate_config_files_load_and_are_copied(tmp_path):
  pipeline = pipeline_pb2.TrainEvalPipelineConfig()
  pipeline.model.ssd.num_classes = 3
  pipeline.train_config.batch_size = 5
  pipeline.eval_config.num_examples = 7
  reader = pipeline.eval_input_reader.add()
  reader.label_map_path = 'labels.pbtxt'
  files = {}
  for name, message in (('model', pipeline.model),
                        ('train', pipeline.train_config),
                        ('eval', pipeline.eval_config),
                        ('input', reader)):
    files[name] = str(tmp_path / (name + '.txt'))
    with open(files[name], 'w') as f:
      f.write(text_format.MessageToString(message))
  configs, copies, _ = legacy_configs.load(
      '', files['model'], files['eval'], files['input'], training=False)
  assert configs['model'].ssd.num_classes == 3
  assert configs['eval_config'].num_examples == 7
  assert configs['eval_input_config'].label_map_path == 'labels.pbtxt'
  legacy_configs.copy_files(copies, str(tmp_path / 'eval_dir'))
  assert sorted(os.listdir(tmp_path / 'eval_dir')) == [
      'eval.config', 'input.config', 'model.config']
  configs, _, _ = legacy_configs.load(
      '', files['model'], files['train'], files['input'], training=True)
  assert configs['train_config'].batch_size == 5
  with pytest.raises(errors.UserInputError,
                     match='missing: --train_config_path'):
    legacy_configs.load('', files['model'], '', files['input'])
