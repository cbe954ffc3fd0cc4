
"""Tests for od_estimator.config.config_util."""

from google.protobuf import text_format
import pytest

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.protos import model_pb2
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from tests import upstream_folder


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


def test_configs_are_copies_of_the_proto():
  pipeline = text_format.Parse(_BASE, pipeline_pb2.TrainEvalPipelineConfig())
  configs = config_util.create_configs_from_pipeline_proto(pipeline)
  configs['train_config'].batch_size = 99
  assert pipeline.train_config.batch_size == 8


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


@pytest.mark.parametrize('family', sorted(model_builder.META_ARCH_BUILDER_MAP))
def test_queries_read_the_families_of_the_model_registry(family):
  model = model_pb2.DetectionModel()
  getattr(model, family).SetInParent()
  if family in model_builder.supported_meta_architectures():
    assert config_util.get_number_of_classes(model) == 0
    assert config_util.get_image_resizer_config(model) == (
        getattr(model, family).image_resizer)
  else:
    with pytest.raises(ValueError, match='got %r' % family):
      config_util.get_number_of_classes(model)


# --- overrides -------------------------------------------------------------

def _merge(configs=None, **overrides):
  return config_util.merge_external_params_with_configs(
      configs or _configs(), kwargs_dict=overrides)


def test_merge_updates_its_input_in_place_and_returns_it():
  # A script that ignores the returned dict gets the override too.
  configs = _configs()
  train_config = configs['train_config']
  config_util.merge_external_params_with_configs(
      configs, kwargs_dict={'train_config.batch_size': 10, 'train_steps': 7})
  assert configs['train_config'] is train_config
  assert (train_config.batch_size, train_config.num_steps) == (10, 7)
  assert _merge(configs, batch_size=32) is configs
  assert train_config.batch_size == 32


def test_merge_refused_leaves_its_input_as_it_was():
  configs = _configs()
  with pytest.raises(errors.UserInputError, match='no_such_field'):
    _merge(configs, batch_size=32, **{'model.ssd.no_such_field': 1})
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


@pytest.mark.parametrize('key, value', [
    ('batch_size', 'four'), ('train_steps', '1e3x'), ('learning_rate', 'fast'),
    ('use_bfloat16', 'maybe'), ('mask_type', 'PNG_MASK'),
    ('eval_num_epochs', -1)])
def test_override_value_that_does_not_fit_is_user_input(key, value):
  # Typed on the command line: bad input named by its key, not a bug.
  with pytest.raises(errors.UserInputError, match='Override %s=' % key):
    _merge(**{key: value})


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
  with pytest.raises(errors.UserInputError, match='does not fit'):
    _merge(**{'train_config.batch_size': 'many'})


def test_unknown_key_is_a_clear_error():
  with pytest.raises(ValueError) as raised:
    _merge(learnin_rate=0.1)
  assert 'learnin_rate' in str(raised.value)
  assert 'learning_rate' in str(raised.value)


def test_none_values_and_load_pretrained_are_skipped():
  merged = _merge(batch_size=None, load_pretrained=True)
  assert merged['train_config'].batch_size == 8


def test_pipeline_config_field_names_are_override_paths():
  merged = _merge(**{
      'train_input_reader.shuffle': False,
      'train_input_reader.tf_record_input_reader.input_path': ['t.record'],
      'eval_input_reader[0].num_epochs': 3,
      'graph_rewriter.quantization.delay': 7,
      'model.ssd.num_classes': 4, 'train_config.batch_size': 2,
      'eval_config.num_visualizations': 5})
  assert merged['train_input_config'].shuffle is False
  assert list(merged['train_input_config'].tf_record_input_reader
              .input_path) == ['t.record']
  assert merged['eval_input_configs'][0].num_epochs == 3
  assert merged['graph_rewriter_config'].quantization.delay == 7
  assert (merged['model'].ssd.num_classes, merged['train_config'].batch_size,
          merged['eval_config'].num_visualizations) == (4, 2, 5)
  with pytest.raises(ValueError, match=r'eval_input_reader\[0\]\.shuffle'):
    _merge(**{'eval_input_reader.shuffle': False})


def test_an_empty_text_value_clears_the_field_with_a_warning(caplog):
  configs = _configs(_BASE.replace(
      'batch_size: 8', 'batch_size: 8 fine_tune_checkpoint: '
      '"PATH_TO_BE_CONFIGURED/model.ckpt"'))
  merged = config_util.merge_external_params_with_configs(
      configs, hparams=config_util.parse_hparams_overrides(
          'train_config.fine_tune_checkpoint='))
  assert merged['train_config'].fine_tune_checkpoint == ''
  assert ("Override train_config.fine_tune_checkpoint=\"\": cleared (was "
          "'PATH_TO_BE_CONFIGURED/model.ckpt')") in caplog.text


@pytest.mark.parametrize('key', [
    'label_map_path', 'train_input_path', 'train_config.batch_size',
    'train_input_reader.tf_record_input_reader.input_path',
    'eval_input_configs:eval_a:label_map_path'])
def test_an_empty_value_elsewhere_is_refused_naming_the_key(key):
  configs = _configs()
  with pytest.raises(errors.UserInputError) as raised:
    _merge(configs, **{key: ''})
  message = str(raised.value)
  assert repr(key) in message and 'empty value' in message
  assert '\n' not in message
  assert configs['train_config'].batch_size == 8


@pytest.mark.parametrize('key, suggestion', [
    ('trian_config.batch_size', 'train_config.batch_size'),
    ('train_input_readr.shuffle', 'train_input_reader.shuffle'),
    ('batch_sise', 'batch_size'),
    ('train_config.batchsize', 'batch_size'),
])
def test_an_unknown_key_is_one_line_with_the_closest_name(key, suggestion):
  with pytest.raises(errors.UserInputError) as raised:
    _merge(**{key: 1})
  message = str(raised.value)
  assert '\n' not in message
  assert 'did you mean %s?' % suggestion in message
  with pytest.raises(errors.UserInputError, match='Unknown config override'):
    _merge(**{'trian_config.batch_size': ''})


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


def test_upstream_config_dir_has_configs(upstream_configs):
  # Where the folder exists, the round trips below must not find it empty.
  assert upstream_folder.paths(), upstream_configs


@pytest.mark.parametrize('path', upstream_folder.params())
def test_upstream_config_parses_and_round_trips(tmp_path, path):
  configs = config_util.get_configs_from_pipeline_file(path)
  assert configs['model'].WhichOneof('model') in ('ssd', 'faster_rcnn')
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  saved = config_util.save_pipeline_config(pipeline, str(tmp_path))
  assert config_util.read_pipeline_config(saved) == pipeline
  assert config_util.read_pipeline_config(path) == pipeline


# --- every override key of the original -------------------------------------

# The keys the original's merge_external_params_with_configs understands
# besides generic dotted paths and KEY_NAME:INPUT_NAME:FIELD.
_ORIGINAL_OVERRIDE_KEYS = {
    'learning_rate', 'batch_size', 'momentum_optimizer_value',
    'classification_localization_weight_ratio', 'focal_loss_gamma',
    'focal_loss_alpha', 'train_steps', 'label_map_path', 'mask_type',
    'sample_1_of_n_eval_examples', 'eval_num_epochs',
    'eval_with_moving_averages', 'retain_original_images_in_eval',
    'use_bfloat16', 'retain_original_image_additional_channels_in_eval',
    'num_classes', 'sample_from_datasets_weights',
    'peak_max_pool_kernel_size', 'candidate_search_scale',
    'candidate_ranking_mode', 'score_distance_offset', 'box_scale',
    'keypoint_candidate_score_threshold', 'rescore_instances',
    'unmatched_keypoint_score', 'score_distance_multiplier',
    'std_dev_multiplier', 'rescoring_threshold', 'train_shuffle',
    'eval_shuffle', 'train_input_path', 'eval_input_path',
    'append_train_input_path', 'append_eval_input_path',
}


def test_every_override_key_of_the_original_is_supported():
  assert set(config_util.supported_override_keys()) == _ORIGINAL_OVERRIDE_KEYS


def test_retain_additional_channels_and_append_eval_path():
  merged = _merge(retain_original_image_additional_channels_in_eval=True,
                  append_eval_input_path='a2.record')
  assert merged['eval_config'].retain_original_image_additional_channels
  assert list(merged['eval_input_config'].tf_record_input_reader
              .input_path) == ['a.record', 'a2.record']


def test_sample_from_datasets_weights():
  configs = _configs(_BASE.replace(
      'label_map_path: "labels.pbtxt"',
      'label_map_path: "labels.pbtxt" sample_from_datasets_weights: [1, 2]'))
  merged = _merge(configs, sample_from_datasets_weights=[0.5, 0.5])
  assert list(merged['train_input_config']
              .sample_from_datasets_weights) == [0.5, 0.5]
  with pytest.raises(ValueError, match='3 values but the train input has 2'):
    _merge(configs, sample_from_datasets_weights=[0.5, 0.5, 0.5])


_CENTER_NET = """
model { center_net { num_classes: 1
  keypoint_estimation_task { task_name: "kp" rescore_instances: true } } }
"""


@pytest.mark.parametrize('key, value', [
    ('peak_max_pool_kernel_size', 5),
    ('candidate_search_scale', 0.5),
    ('candidate_ranking_mode', 'score_distance_ratio'),
    ('score_distance_offset', 2.0),
    ('box_scale', 1.5),
    ('keypoint_candidate_score_threshold', 0.25),
    ('rescore_instances', False),
    ('unmatched_keypoint_score', 0.5),
    ('score_distance_multiplier', 0.25),
    ('std_dev_multiplier', 2.0),
    ('rescoring_threshold', 0.5),
])
def test_center_net_keypoint_overrides(key, value):
  merged = _merge(_configs(_CENTER_NET), **{key: value})
  task = merged['model'].center_net.keypoint_estimation_task[0]
  expected = pytest.approx(value) if isinstance(value, float) else value
  assert getattr(task, key) == expected


def test_center_net_keypoint_override_corner_cases():
  merged = _merge(_configs(_CENTER_NET), rescore_instances='False')
  assert not merged['model'].center_net.keypoint_estimation_task[0] \
      .rescore_instances
  with pytest.raises(ValueError, match='gaussian_weighted'):
    _merge(_configs(_CENTER_NET), candidate_ranking_mode='closest')
  # With two tasks the key cannot say which: ignored, as the original.
  two_tasks = _configs(_CENTER_NET.replace(
      'keypoint_estimation_task', 'keypoint_estimation_task { '
      'task_name: "b" box_scale: 1.0 } keypoint_estimation_task', 1))
  merged = _merge(two_tasks, box_scale=9.0)
  assert [t.box_scale for t in merged['model'].center_net
          .keypoint_estimation_task] == [1.0, pytest.approx(1.2)]
  with pytest.raises(ValueError, match='center_net.*the model is ssd'):
    _merge(box_scale=2.0)


def test_faster_rcnn_ratio_and_num_classes():
  configs = _configs('model { faster_rcnn { num_classes: 4 } }')
  merged = _merge(configs, classification_localization_weight_ratio=3.0,
                  num_classes=7)
  model = merged['model'].faster_rcnn
  assert model.num_classes == 7
  assert (model.first_stage_localization_loss_weight,
          model.first_stage_objectness_loss_weight,
          model.second_stage_localization_loss_weight,
          model.second_stage_classification_loss_weight) == (1.0, 3.0, 1.0,
                                                             3.0)


def test_optimizer_overrides_need_a_fitting_optimizer():
  configs = _configs()
  configs['train_config'].optimizer.Clear()
  text_format.Merge('adam_optimizer { learning_rate { constant_learning_rate '
                    '{ learning_rate: 0.1 } } }',
                    configs['train_config'].optimizer)
  with pytest.raises(TypeError, match='rms_prop_optimizer'):
    _merge(configs, momentum_optimizer_value=0.5)
  configs['train_config'].optimizer.Clear()
  with pytest.raises(TypeError, match='not supported'):
    _merge(configs, learning_rate=0.5)


# --- generic dotted paths with indices ----------------------------------------

_AUGMENTED = _BASE.replace('num_steps: 100', '''num_steps: 100
  data_augmentation_options { random_horizontal_flip { probability: 0.5 } }
  data_augmentation_options { ssd_random_crop {} }''').replace(
      'input_path: "train.record"', 'input_path: ["t-1", "t-2"]')


def test_generic_override_with_list_indices():
  merged = _merge(_configs(_AUGMENTED), **{
      'train_config.data_augmentation_options[0].random_horizontal_flip'
      '.probability': 0.25,
      'train_input_config.tf_record_input_reader.input_path[1]': 't-9',
      'train_input_config.tf_record_input_reader.input_path[-2]': 't-0',
      'eval_input_configs[0].shuffle': False,
      'eval_input_configs[-1].tf_record_input_reader.input_path': ['e1',
                                                                   'e2']})
  train = merged['train_config']
  assert train.data_augmentation_options[0].random_horizontal_flip \
      .probability == pytest.approx(0.25)
  assert list(merged['train_input_config'].tf_record_input_reader
              .input_path) == ['t-0', 't-9']
  assert not merged['eval_input_config'].shuffle
  assert list(merged['eval_input_config'].tf_record_input_reader
              .input_path) == ['e1', 'e2']


@pytest.mark.parametrize('key, words', [
    ('train_config.data_augmentation_options[2].ssd_random_crop', [
        'has 2 element(s); index 2 is out of range']),
    ('train_config.data_augmentation_options.random_horizontal_flip'
     '.probability', ['repeated field', 'data_augmentation_options[0]']),
    ('train_config.optimizer[0].use_moving_average', ['not a repeated field']),
    ('train_input_config.tf_record_input_reader.input_path[5]',
     ['has 2 element(s)']),
    ('eval_input_configs.shuffle', ['eval_input_configs[0].shuffle']),
    ('model.ssd.num_classes[x]', ["cannot read 'num_classes[x]'"]),
    ('train_input_config.input_path[0]', ["has no repeated field "
                                          "'input_path'"]),
])
def test_generic_index_errors(key, words):
  with pytest.raises(ValueError) as raised:
    _merge(_configs(_AUGMENTED), **{key: 1})
  for word in words:
    assert word in str(raised.value)


def test_generic_override_creates_graph_rewriter():
  merged = _merge(**{'graph_rewriter_config.quantization.delay': 7})
  assert merged['graph_rewriter_config'].quantization.delay == 7
  pipeline = config_util.create_pipeline_proto_from_configs(merged)
  assert pipeline.graph_rewriter.quantization.delay == 7


def test_hparams_text_with_lists_and_indices():
  parsed = config_util.parse_hparams_overrides(
      'train_input_path=[x-1.record, "y,1.record"],sample_1_of_n_eval_examples'
      '=2,train_config.data_augmentation_options[0].random_horizontal_flip.'
      'probability=0.1')
  assert parsed == {
      'train_input_path': ['x-1.record', 'y,1.record'],
      'sample_1_of_n_eval_examples': 2,
      'train_config.data_augmentation_options[0].random_horizontal_flip.'
      'probability': 0.1}
  merged = _merge(_configs(_AUGMENTED), **parsed)
  assert list(merged['train_input_config'].tf_record_input_reader
              .input_path) == ['x-1.record', 'y,1.record']
  with pytest.raises(ValueError, match='unbalanced brackets'):
    config_util.parse_hparams_overrides('train_input_path=[a,b')


# --- text-format corner cases and readable parse errors -----------------------
