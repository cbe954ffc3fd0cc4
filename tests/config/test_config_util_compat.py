"""config_util's functions that scripts written for the original call."""
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util

PIPELINE = """
model { ssd { num_classes: 3 } }
train_config { batch_size: 2 }
train_input_reader {
  name: "train"
  tf_record_input_reader { input_path: "train.record" }
}
eval_input_reader {
  name: "eval_a"
  tf_record_input_reader { input_path: "a.record" }
}
eval_input_reader {
  name: "eval_b"
  tf_record_input_reader { input_path: "b.record" }
}
"""


def _configs(text=PIPELINE):
  return config_util.create_configs_from_pipeline_proto(
      config_util.parse_pipeline_text(text))


def test_get_configs_from_multiple_files(tmp_path):
  files = {
      'model_config_path': 'ssd { num_classes: 7 }',
      'train_config_path': 'batch_size: 5\nfrom_detection_checkpoint: true',
      'train_input_config_path':
          'tf_record_input_reader { input_path: "t.record" }',
      'eval_config_path': 'num_examples: 10',
      'eval_input_config_path':
          'tf_record_input_reader { input_path: "e.record" }',
      'graph_rewriter_config_path': 'quantization { delay: 100 }',
  }
  paths = {}
  for argument, text in files.items():
    paths[argument] = str(tmp_path / (argument + '.config'))
    with open(paths[argument], 'w') as f:
      f.write(text)
  configs = config_util.get_configs_from_multiple_files(**paths)
  assert configs['model'].ssd.num_classes == 7
  assert configs['train_config'].batch_size == 5
  assert list(configs['train_input_config'].tf_record_input_reader
              .input_path) == ['t.record']
  assert configs['eval_config'].num_examples == 10
  assert len(configs['eval_input_configs']) == 1
  assert configs['eval_input_config'] is configs['eval_input_configs'][0]
  assert configs['graph_rewriter_config'].quantization.delay == 100
  assert config_util.get_graph_rewriter_config_from_file(
      paths['graph_rewriter_config_path']).quantization.delay == 100
  only_model = config_util.get_configs_from_multiple_files(
      model_config_path=paths['model_config_path'])
  assert list(only_model) == ['model']
  # A partial configs dict takes overrides too.
  model_config = only_model['model']
  config_util.merge_external_params_with_configs(
      only_model, kwargs_dict={'num_classes': 2})
  assert only_model['model'] is model_config
  assert model_config.ssd.num_classes == 2
  # A key an override adds (graph_rewriter_config) is added to the dict.
  config_util.merge_external_params_with_configs(
      only_model, kwargs_dict={'graph_rewriter_config.quantization.delay': 3})
  assert only_model['graph_rewriter_config'].quantization.delay == 3


def test_multiple_files_errors_name_the_file_and_line(tmp_path):
  path = tmp_path / 'model.config'
  path.write_text('ssd {\n  num_clases: 3\n}\n')
  with pytest.raises(config_util.ConfigError) as error:
    config_util.get_configs_from_multiple_files(model_config_path=str(path))
  assert 'model.config' in str(error.value) and ':2:' in str(error.value)


def test_check_and_parse_input_config_key():
  configs = _configs()
  assert config_util.check_and_parse_input_config_key(
      configs, 'eval_input_configs:eval_b:shuffle') == (
          True, 'eval_input_configs', 'eval_b', 'shuffle')
  assert config_util.check_and_parse_input_config_key(
      configs, 'train_shuffle') == (True, 'train_input_config', None,
                                     'shuffle')
  assert config_util.check_and_parse_input_config_key(
      configs, 'learning_rate') == (False, None, None, 'learning_rate')
  for key, words in [('a:b', 'form'), ('bad:eval_a:shuffle', 'key_name'),
                     ('eval_input_configs:eval_z:shuffle', 'eval_z'),
                     ('eval_input_configs:eval_a:num_readers',
                      'field_name')]:
    with pytest.raises(errors.UserInputError, match=words):
      config_util.check_and_parse_input_config_key(configs, key)


def test_update_input_reader_config_in_place():
  configs = _configs()
  config_util.update_input_reader_config(
      configs, key_name='eval_input_configs', input_name='eval_b',
      field_name='input_path', value='new.record')
  config_util.update_input_reader_config(
      configs, key_name='train_input_config', field_name='shuffle',
      value=False)
  assert list(configs['eval_input_configs'][1].tf_record_input_reader
              .input_path) == ['new.record']
  assert not configs['train_input_config'].shuffle
  with pytest.raises(errors.UserInputError, match='ambiguous'):
    config_util.update_input_reader_config(
        configs, key_name='eval_input_configs', field_name='shuffle',
        value=False)
  with pytest.raises(errors.UserInputError, match='field_name:None'):
    config_util.update_input_reader_config(configs, 'train_input_config')
  seen = []
  config_util.update_input_reader_config(
      configs, 'train_input_config', field_name='input_path', value='x',
      path_updater=lambda input_config, input_path: seen.append(input_path))
  assert seen == ['x']


def test_merge_updates_the_input_configs_in_place():
  configs = _configs()
  eval_a = configs['eval_input_configs'][0]
  config_util.merge_external_params_with_configs(
      configs, kwargs_dict={'eval_input_configs:eval_a:shuffle': False,
                            'train_input_path': 'other.record'})
  assert not eval_a.shuffle and configs['eval_input_config'] is eval_a
  assert configs['eval_input_configs'][1].shuffle
  assert list(configs['train_input_config'].tf_record_input_reader
              .input_path) == ['other.record']


def test_remove_unnecessary_ema():
  with tf.Graph().as_default():
    weights = tf.Variable(1.0, name='conv/weights')
    gamma = tf.Variable(1.0, name='conv/BatchNorm/gamma')
    step = tf.Variable(0, name='global_step')
    variables_to_restore = {
        'conv/weights/ExponentialMovingAverage': weights,
        'conv/BatchNorm/gamma/ExponentialMovingAverage': gamma,
        'global_step': step}
    restore_map = config_util.remove_unnecessary_ema(
        variables_to_restore, no_ema_collection=['/BatchNorm'])
    assert restore_map == {
        'conv/weights/ExponentialMovingAverage': weights,
        'conv/BatchNorm/gamma': gamma, 'global_step': step}
    assert config_util.remove_unnecessary_ema(
        variables_to_restore) is variables_to_restore
