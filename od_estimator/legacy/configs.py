"""Config loading of the legacy commands: one pipeline file, or one per part.

As the original's train.py and eval.py: --pipeline_config_path wins; else
--model_config_path with --train_config_path / --eval_config_path and
--input_config_path. The parts not given keep their defaults, so the
configs dict is complete for the model_fn and the launch checks.
"""
import os

import tensorflow as tf

from od_estimator import errors
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from od_estimator.utils import file_safety


def load(pipeline_config_path, model_config_path='', config_path='',
         input_config_path='', training=True):
  """Returns (configs dict, [(file, name copied as)], label for messages).

  Args:
    pipeline_config_path: the pipeline file, or '' for separate files.
    model_config_path: a DetectionModel file.
    config_path: a TrainConfig (training) or EvalConfig file.
    input_config_path: an InputReader file: the training input (training)
      or the evaluation input.
    training: which command reads the files (see above).

  Raises:
    errors.UserInputError: when neither way names the files.
  """
  if pipeline_config_path:
    configs = config_util.get_configs_from_pipeline_file(pipeline_config_path)
    return configs, [(pipeline_config_path, 'pipeline.config')], (
        pipeline_config_path)
  config_flag = '--train_config_path' if training else '--eval_config_path'
  missing = [flag for flag, path in (
      ('--model_config_path', model_config_path), (config_flag, config_path),
      ('--input_config_path', input_config_path)) if not path]
  if missing:
    raise errors.UserInputError(
        'give --pipeline_config_path, or all of --model_config_path, %s and '
        '--input_config_path (missing: %s)' % (config_flag,
                                               ', '.join(missing)))
  if training:
    parts = config_util.get_configs_from_multiple_files(
        model_config_path=model_config_path, train_config_path=config_path,
        train_input_config_path=input_config_path)
  else:
    parts = config_util.get_configs_from_multiple_files(
        model_config_path=model_config_path, eval_config_path=config_path,
        eval_input_config_path=input_config_path)
  configs = config_util.create_configs_from_pipeline_proto(
      pipeline_pb2.TrainEvalPipelineConfig())
  configs.update(parts)
  if not training:
    # Evaluation reads no training input: its checks see the eval input.
    configs['train_input_config'] = configs['eval_input_config']
  copies = [(model_config_path, 'model.config'),
            (config_path, 'train.config' if training else 'eval.config'),
            (input_config_path, 'input.config')]
  return configs, copies, model_config_path


def copy_files(copies, directory):
  """Copies the config files into `directory`, as the original did.

  Each copy replaces its destination in one step (a link there is replaced,
  not written through).
  """
  tf.io.gfile.makedirs(directory)
  for path, name in copies:
    with tf.io.gfile.GFile(path, 'rb') as f:
      file_safety.write_file(os.path.join(directory, name), f.read())
