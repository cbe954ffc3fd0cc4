"""Tests for od_estimator.utils.config_util."""
import os

from google.protobuf import text_format
import pytest

from od_estimator.protos import pipeline_pb2
from od_estimator.utils import config_util

# The original's sample configs (test data, never edited).
UPSTREAM_DIR = os.environ.get('OD_UPSTREAM_CONFIGS', os.path.join(
    os.path.dirname(__file__), '..', '..', '..', 'shared', 'upstream_configs'))
UPSTREAM_CONFIGS = sorted(
    f for f in (os.listdir(UPSTREAM_DIR) if os.path.isdir(UPSTREAM_DIR) else [])
    if f.endswith('.config'))

_BASE = """
model {
  ssd {
    num_classes: 3
    image_resizer { fixed_shape_resizer { height: 64 width: 64 } }
    loss {
      classification_loss { weighted_sigmoid_focal { gamma: 2.0 alpha: 0.25 } }
      localization_loss { weighted_smooth_l1 {} }
      hard_example_miner { num_hard_examples: 3000 }
      classification_weight: 2.0
      localization_weight: 3.0
    }
  }
}
train_config {
  batch_size: 8
  num_steps: 100
  optimizer {
    momentum_optimizer {
      learning_rate {
        manual_step_learning_rate {
          initial_learning_rate: 0.1
          schedule { step: 10 learning_rate: 0.01 }
          schedule { step: 20 learning_rate: 0.001 }
        }
      }
      momentum_optimizer_value: 0.9
    }
  }
}
train_input_reader {
  name: "train"
  tf_record_input_reader { input_path: "train.record" }
  label_map_path: "labels.pbtxt"
}
eval_config { num_examples: 10 }
eval_input_reader {
  name: "eval_a"
  tf_record_input_reader { input_path: "a.record" }
}
"""


def _configs(text=_BASE):
  return config_util.create_configs_from_pipeline_proto(
      text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig()))


def _write(tmp_path, text, name='pipeline.config'):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def test_reads_configs_dict_with_original_keys(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(
      _write(tmp_path, _BASE))
  assert set(configs) == {'model', 'train_config', 'train_input_config',
                          'eval_config', 'eval_input_configs',
                          'eval_input_config'}
  assert configs['model'].ssd.num_classes == 3
  assert configs['eval_input_config'].name == 'eval_a'
  assert len(configs['eval_input_configs']) == 1


def test_config_override_text_wins(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(
      _write(tmp_path, _BASE),
      config_override='train_config { batch_size: 2 }')
  assert configs['train_config'].batch_size == 2
  assert configs['train_config'].num_steps == 100


def test_save_and_reread_round_trips(tmp_path):
  pipeline = config_util.create_pipeline_proto_from_configs(_configs())
  written = config_util.save_pipeline_config(pipeline, str(tmp_path / 'out'))
  assert written == str(tmp_path / 'out' / 'pipeline.config')
  assert config_util.read_pipeline_config(written) == pipeline


def test_graph_rewriter_is_kept():
  configs = _configs(_BASE + 'graph_rewriter { quantization { delay: 5 } }')
  assert configs['graph_rewriter_config'].quantization.delay == 5
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  assert pipeline.graph_rewriter.quantization.delay == 5


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


def test_configs_are_copies_of_the_proto():
  pipeline = text_format.Parse(_BASE, pipeline_pb2.TrainEvalPipelineConfig())
  configs = config_util.create_configs_from_pipeline_proto(pipeline)
  configs['train_config'].batch_size = 99
  assert pipeline.train_config.batch_size == 8


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
  with pytest.raises(config_util.ConfigError) as raised:
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
  with pytest.raises(config_util.ConfigError, match='file not found'):
    config_util.get_configs_from_pipeline_file(str(tmp_path / 'nope.config'))


def test_queries():
  configs = _configs()
  assert config_util.get_number_of_classes(configs['model']) == 3
  resizer = config_util.get_image_resizer_config(configs['model'])
  assert config_util.get_spatial_image_size(resizer) == [64, 64]
  keep = text_format.Parse(
      'keep_aspect_ratio_resizer { min_dimension: 10 max_dimension: 20 '
      'pad_to_max_dimension: true }', type(resizer)())
  assert config_util.get_spatial_image_size(keep) == [20, 20]
  identity = text_format.Parse('identity_resizer {}', type(resizer)())
  assert config_util.get_spatial_image_size(identity) == [-1, -1]
  assert config_util.get_optimizer_type(
      configs['train_config']) == 'momentum_optimizer'
  with pytest.raises(ValueError, match="'faster_rcnn' or 'ssd'"):
    config_util.get_number_of_classes(type(configs['model'])())


# --- overrides -------------------------------------------------------------

def _merge(configs=None, **overrides):
  return config_util.merge_external_params_with_configs(
      configs or _configs(), kwargs_dict=overrides)


def test_merge_does_not_modify_its_input():
  configs = _configs()
  merged = _merge(configs, batch_size=32)
  assert merged['train_config'].batch_size == 32
  assert configs['train_config'].batch_size == 8


def test_learning_rate_rescales_manual_schedule():
  merged = _merge(learning_rate=0.2)
  schedule = (merged['train_config'].optimizer.momentum_optimizer
              .learning_rate.manual_step_learning_rate)
  assert schedule.initial_learning_rate == pytest.approx(0.2)
  assert [s.learning_rate for s in schedule.schedule] == pytest.approx(
      [0.02, 0.002])


@pytest.mark.parametrize('schedule, field', [
    ('constant_learning_rate { learning_rate: 0.1 }', 'learning_rate'),
    ('exponential_decay_learning_rate { initial_learning_rate: 0.1 }',
     'initial_learning_rate'),
])
def test_learning_rate_other_schedules(schedule, field):
  configs = _configs()
  optimizer = configs['train_config'].optimizer
  optimizer.Clear()
  text_format.Merge('rms_prop_optimizer { learning_rate { %s } }' % schedule,
                    optimizer)
  merged = _merge(configs, learning_rate=0.5)
  lr = merged['train_config'].optimizer.rms_prop_optimizer.learning_rate
  assert getattr(getattr(lr, lr.WhichOneof('learning_rate')),
                 field) == pytest.approx(0.5)


def test_learning_rate_cosine_keeps_warmup_ratio():
  configs = _configs()
  lr = configs['train_config'].optimizer.momentum_optimizer.learning_rate
  lr.Clear()
  text_format.Merge('cosine_decay_learning_rate { learning_rate_base: 0.4 '
                    'warmup_learning_rate: 0.1 }', lr)
  merged = _merge(configs, learning_rate=0.8)
  cosine = (merged['train_config'].optimizer.momentum_optimizer
            .learning_rate.cosine_decay_learning_rate)
  assert cosine.learning_rate_base == pytest.approx(0.8)
  assert cosine.warmup_learning_rate == pytest.approx(0.2)


def test_batch_size_rounds_and_floors_at_one():
  assert _merge(batch_size=3.6)['train_config'].batch_size == 4
  assert _merge(batch_size=0.2)['train_config'].batch_size == 1


def test_momentum_is_clipped():
  merged = _merge(momentum_optimizer_value=1.5)
  assert merged['train_config'].optimizer.momentum_optimizer \
      .momentum_optimizer_value == pytest.approx(1.0)


def test_loss_overrides():
  merged = _merge(classification_localization_weight_ratio=4.0,
                  focal_loss_gamma=3.0, focal_loss_alpha=0.5)
  loss = merged['model'].ssd.loss
  assert loss.localization_weight == 1.0
  assert loss.classification_weight == 4.0
  assert loss.classification_loss.weighted_sigmoid_focal.gamma == 3.0
  assert loss.classification_loss.weighted_sigmoid_focal.alpha == 0.5


def test_focal_override_needs_focal_loss():
  configs = _configs(_BASE.replace(
      'weighted_sigmoid_focal { gamma: 2.0 alpha: 0.25 }',
      'weighted_sigmoid {}'))
  with pytest.raises(TypeError, match='weighted_sigmoid_focal'):
    _merge(configs, focal_loss_gamma=1.0)


def test_steps_classes_and_flags():
  merged = _merge(train_steps=7, num_classes=5, use_bfloat16=True,
                  eval_with_moving_averages=True,
                  retain_original_images_in_eval=True,
                  sample_1_of_n_eval_examples=4, eval_num_epochs=2)
  assert merged['train_config'].num_steps == 7
  assert merged['model'].ssd.num_classes == 5
  assert merged['train_config'].use_bfloat16
  assert merged['eval_config'].use_moving_averages
  assert merged['eval_config'].retain_original_images
  assert merged['eval_input_config'].sample_1_of_n_examples == 4
  assert merged['eval_input_configs'][0].num_epochs == 2


def test_label_map_and_mask_type_reach_every_input():
  merged = _merge(label_map_path='new.pbtxt', mask_type='PNG_MASKS')
  assert merged['train_input_config'].label_map_path == 'new.pbtxt'
  assert merged['eval_input_config'].label_map_path == 'new.pbtxt'
  assert merged['eval_input_config'].mask_type == 2


def test_input_path_overrides():
  merged = _merge(train_input_path=['x-1.record', 'x-2.record'],
                  eval_input_path='y.record', train_shuffle=False,
                  eval_shuffle=True)
  train = merged['train_input_config']
  assert list(train.tf_record_input_reader.input_path) == [
      'x-1.record', 'x-2.record']
  assert not train.shuffle
  assert list(merged['eval_input_config'].tf_record_input_reader
              .input_path) == ['y.record']
  appended = _merge(append_train_input_path='z.record')
  assert list(appended['train_input_config'].tf_record_input_reader
              .input_path) == ['train.record', 'z.record']


def test_named_input_overrides():
  configs = _configs(_BASE + '''
  eval_input_reader { name: "eval_b" tf_record_input_reader { input_path: "b" } }''')
  merged = _merge(configs, **{
      'eval_input_configs:eval_b:input_path': 'b2.record',
      'eval_input_configs:eval_a:sample_1_of_n_examples': 3,
      'train_input_config:train:shuffle': False})
  assert list(merged['eval_input_configs'][1].tf_record_input_reader
              .input_path) == ['b2.record']
  assert merged['eval_input_configs'][0].sample_1_of_n_examples == 3
  assert not merged['train_input_config'].shuffle
  with pytest.raises(ValueError, match='ambiguous'):
    _merge(configs, eval_input_path='c.record')
  with pytest.raises(ValueError, match="'eval_z' not found"):
    _merge(configs, **{'eval_input_configs:eval_z:input_path': 'c'})
  with pytest.raises(ValueError, match='Invalid field_name'):
    _merge(configs, **{'eval_input_configs:eval_a:num_readers': 2})


def test_generic_dotted_overrides_convert_types():
  merged = _merge(**{
      'model.ssd.loss.hard_example_miner.num_hard_examples': 10,
      'model.ssd.loss.classification_weight': 5,
      'train_config.optimizer.momentum_optimizer.momentum_optimizer_value':
          0.5,
      'eval_config.num_examples': 3})
  assert merged['model'].ssd.loss.hard_example_miner.num_hard_examples == 10
  assert merged['model'].ssd.loss.classification_weight == 5.0
  assert merged['eval_config'].num_examples == 3


def test_generic_override_errors():
  with pytest.raises(ValueError, match='not set in the config'):
    _merge(**{'model.faster_rcnn.num_classes': 3})
  with pytest.raises(ValueError, match="has no field 'batchsize'"):
    _merge(**{'train_config.batchsize': 3})
  with pytest.raises(TypeError, match='does not fit'):
    _merge(**{'train_config.batch_size': 'many'})


def test_unknown_key_is_a_clear_error():
  with pytest.raises(ValueError) as raised:
    _merge(learnin_rate=0.1)
  assert 'learnin_rate' in str(raised.value)
  assert 'learning_rate' in str(raised.value)


def test_empty_values_and_load_pretrained_are_skipped():
  merged = _merge(label_map_path='', batch_size=None, load_pretrained=True)
  assert merged['train_config'].batch_size == 8


def test_hparams_object_and_text_overrides():
  class HParams:

    def values(self):
      return {'batch_size': 2}

  merged = config_util.merge_external_params_with_configs(
      _configs(), hparams=HParams(), kwargs_dict={'batch_size': 5})
  assert merged['train_config'].batch_size == 2
  parsed = config_util.parse_hparams_overrides(
      'learning_rate=0.5, batch_size=4,train_shuffle=false,'
      'label_map_path="a.pbtxt",model.ssd.post_processing.score_converter='
      'SOFTMAX')
  assert parsed == {'learning_rate': 0.5, 'batch_size': 4,
                    'train_shuffle': False, 'label_map_path': 'a.pbtxt',
                    'model.ssd.post_processing.score_converter': 'SOFTMAX'}
  merged = _merge(**{'model.ssd.post_processing.score_converter': 'SOFTMAX'})
  assert merged['model'].ssd.post_processing.score_converter == 2
  with pytest.raises(ValueError, match='key=value'):
    config_util.parse_hparams_overrides('batch_size')


def test_upstream_config_dir_exists():
  # The round-trip tests below must never pass by finding no configs.
  assert os.path.isdir(UPSTREAM_DIR), (
      'Set OD_UPSTREAM_CONFIGS to the original sample configs folder.')
  assert len(UPSTREAM_CONFIGS) >= 1


@pytest.mark.parametrize('name', UPSTREAM_CONFIGS)
def test_upstream_config_parses_and_round_trips(tmp_path, name):
  path = os.path.join(UPSTREAM_DIR, name)
  configs = config_util.get_configs_from_pipeline_file(path)
  assert configs['model'].WhichOneof('model') in ('ssd', 'faster_rcnn')
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  saved = config_util.save_pipeline_config(pipeline, str(tmp_path))
  assert config_util.read_pipeline_config(saved) == pipeline
  assert config_util.read_pipeline_config(path) == pipeline


def test_legacy_fields_of_the_original_samples_are_dropped_with_a_warning():
  text = ('model { ssd { feature_extractor { type: "x"\n'
          '  batch_norm_trainable: true } } }\n'
          'train_config { include_global_step: False batch_size: 3 }\n')
  dropped = []
  config = config_util.parse_pipeline_text(text, path='p.config',
                                           dropped=dropped)
  assert config.train_config.batch_size == 3
  assert config.model.ssd.feature_extractor.type == 'x'
  assert len(dropped) == 2
  assert 'p.config:2' in dropped[0] and 'freeze_batchnorm' in dropped[0]
  assert 'train_config.include_global_step' in dropped[1]


def test_legacy_field_with_a_value_we_cannot_honour_is_an_error():
  with pytest.raises(config_util.ConfigError) as raised:
    config_util.parse_pipeline_text(
        'train_config {\n  load_all_optimizer_checkpoint_vars: true\n}\n',
        path='p.config')
  assert raised.value.line == 2
  assert raised.value.field == 'train_config.load_all_optimizer_checkpoint_vars'
  assert 'cannot be honoured' in str(raised.value)
