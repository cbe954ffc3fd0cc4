"""Tests for od_estimator.config.config_text: parsing and its errors."""
import pytest

from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_text
from od_estimator.config import config_util

_SMALL = 'model { ssd { num_classes: 3 } }\n'


def _write(tmp_path, text, name='pipeline.config'):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def test_text_format_corner_cases(tmp_path):
  text = """
  # a comment line
  model { ssd { num_classes: 2; image_resizer < fixed_shape_resizer { height: 8, width: 8 } > } }
  train_config: {
    batch_size: 4,  # trailing comment
    optimizer { adam_optimizer { learning_rate { constant_learning_rate { learning_rate: 1e-3 } } } }
  }
  eval_config { metrics_set: ["coco_detection_metrics", "pascal_voc_detection_metrics"] }
  model { ssd { post_processing { score_converter: SIGMOID } } }
  """
  configs = config_util.get_configs_from_pipeline_file(_write(tmp_path, text))
  assert configs['model'].ssd.num_classes == 2
  assert configs['model'].ssd.image_resizer.fixed_shape_resizer.width == 8
  assert configs['train_config'].batch_size == 4
  assert list(configs['eval_config'].metrics_set) == [
      'coco_detection_metrics', 'pascal_voc_detection_metrics']
  # The second `model` block merges into the first, as in the original.
  assert configs['model'].ssd.post_processing.score_converter == 1


@pytest.mark.parametrize('text, line, field, words', [
    ('train_config {\n  batchsize: 3\n}\n', 2, 'train_config.batchsize',
     ['no field named "batchsize"', '`batch_size`']),
    ('model {\n  ssd {\n    num_classes: "three"\n  }\n}\n', 3,
     'model.ssd.num_classes', ['num_classes']),
    ('model { ssd { post_processing {\n score_converter: SIGMOD } } }\n', 2,
     'model.ssd.post_processing.score_converter',
     ['SIGMOD', 'accepted values', 'SIGMOID']),
    ('train_config {\n  batch_size: 3\n', 2, 'train_config', ['Expected']),
])
def test_parse_errors_name_file_line_and_field(tmp_path, text, line, field,
                                               words):
  path = _write(tmp_path, text)
  with pytest.raises(config_text.ConfigError) as raised:
    config_util.get_configs_from_pipeline_file(path)
  error = raised.value
  assert error.path == path
  assert error.line == line
  assert error.field == field
  message = str(error)
  assert message.startswith('%s:%d:' % (path, line))
  for word in words:
    assert word in message


def test_missing_file_is_a_config_error(tmp_path):
  with pytest.raises(config_text.ConfigError, match='file not found'):
    config_util.get_configs_from_pipeline_file(str(tmp_path / 'nope.config'))


def test_legacy_fields_of_the_original_samples_are_dropped_with_a_warning():
  text = ('model { ssd { feature_extractor { type: "x"\n'
          '  batch_norm_trainable: true } } }\n'
          'train_config { include_global_step: False batch_size: 3 }\n')
  dropped = []
  config = config_text.parse_pipeline_text(text, path='p.config',
                                           dropped=dropped)
  assert config.train_config.batch_size == 3
  assert config.model.ssd.feature_extractor.type == 'x'
  assert len(dropped) == 2
  assert 'p.config:2' in dropped[0] and 'freeze_batchnorm' in dropped[0]
  assert 'train_config.include_global_step' in dropped[1]


def test_legacy_field_with_a_value_we_cannot_honour_is_an_error():
  with pytest.raises(config_text.ConfigError) as raised:
    config_text.parse_pipeline_text(
        'train_config {\n  load_all_optimizer_checkpoint_vars: true\n}\n',
        path='p.config')
  assert raised.value.line == 2
  assert raised.value.field == 'train_config.load_all_optimizer_checkpoint_vars'
  assert 'cannot be honoured' in str(raised.value)


def test_more_text_format_corner_cases(tmp_path):
  text = """
  model { ssd { num_classes: 0x3
    post_processing { score_converter: 2 batch_non_max_suppression {
        score_threshold: -inf iou_threshold: 6E-1 } }
    feature_extractor: < type: "ssd_" 'mobilenet' "_v2" > } }
  train_config { gradient_clipping_by_norm: inf
    data_augmentation_options: [{random_horizontal_flip {}},
                                {ssd_random_crop {}}] }
  eval_input_reader: [{name: "a"}, {name: "b"}]
  """
  path = _write(tmp_path, text)
  configs = config_util.get_configs_from_pipeline_file(path)
  ssd = configs['model'].ssd
  assert ssd.num_classes == 3
  assert ssd.post_processing.score_converter == 2  # SOFTMAX, by number
  assert ssd.post_processing.batch_non_max_suppression.score_threshold == (
      float('-inf'))
  assert ssd.post_processing.batch_non_max_suppression.iou_threshold == (
      pytest.approx(0.6))
  assert ssd.feature_extractor.type == 'ssd_mobilenet_v2'
  train = configs['train_config']
  assert train.gradient_clipping_by_norm == float('inf')
  assert [o.WhichOneof('preprocessing_step')
          for o in train.data_augmentation_options] == [
              'random_horizontal_flip', 'ssd_random_crop']
  assert [c.name for c in configs['eval_input_configs']] == ['a', 'b']
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  saved = config_util.save_pipeline_config(pipeline, str(tmp_path / 'out'))
  assert config_util.read_pipeline_config(saved) == pipeline


@pytest.mark.parametrize('text, line, field, words', [
    ('eval_input_reader: [{name: "a"},\n {nme: "b"}]\n', 2,
     'eval_input_reader.nme', ['`name`']),
    ('train_config { data_augmentation_options: [\n'
     '  {random_flip {}}] }\n', 2,
     'train_config.data_augmentation_options.random_flip',
     ['random_horizontal_flip']),
    ('model { ssd { num_classes: 3 } }\n}\n', 2, None,
     ['no matching opening brace', 'remove it']),
    ('model { ssd { num_classes: 3 }\ntrain_config { batch_size: 1 }\n', 2,
     'model.train_config',
     ['`train_config` belongs at the top level, not in `model`',
      'closing `}` missing']),
    ('model {\n  ssd {\n    num_classes: 3\n', 3, 'model.ssd',
     ['ends before `model.ssd` is closed', 'add 2 closing `}`']),
])
def test_brace_and_list_errors_name_the_field(tmp_path, text, line, field,
                                              words):
  path = _write(tmp_path, text)
  with pytest.raises(config_text.ConfigError) as raised:
    config_util.get_configs_from_pipeline_file(path)
  assert (raised.value.line, raised.value.field) == (line, field)
  for word in words:
    assert word in str(raised.value)


def test_file_problems_are_config_errors(tmp_path):
  (tmp_path / 'run').mkdir()
  (tmp_path / 'run' / 'pipeline.config').write_text(_SMALL)
  with pytest.raises(config_text.ConfigError) as raised:
    config_util.get_configs_from_pipeline_file(str(tmp_path / 'run'))
  assert 'is a directory' in str(raised.value)
  assert 'run/pipeline.config?' in str(raised.value)
  latin1 = tmp_path / 'latin1.config'
  latin1.write_bytes(b'model { ssd {\n  num_classes: 3 } }\n# caf\xe9\n')
  with pytest.raises(config_text.ConfigError) as raised:
    config_util.get_configs_from_pipeline_file(str(latin1))
  assert (raised.value.line, raised.value.column) == (3, 6)
  assert 'not UTF-8' in str(raised.value) and '0xe9' in str(raised.value)


def test_byte_order_mark_and_empty_file_parse(tmp_path):
  bom = tmp_path / 'bom.config'
  bom.write_bytes(b'\xef\xbb\xbf' + _SMALL.encode())
  assert config_util.get_configs_from_pipeline_file(
      str(bom))['model'].ssd.num_classes == 3
  empty = config_util.read_pipeline_config(_write(tmp_path, '', 'e.config'))
  assert empty == pipeline_pb2.TrainEvalPipelineConfig()
