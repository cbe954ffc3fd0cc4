"""Reading, writing and overriding pipeline configs.

A "configs" dict holds the parts of a TrainEvalPipelineConfig under the
original's keys: `model`, `train_config`, `train_input_config`, `eval_config`,
`eval_input_configs` (a list; `eval_input_config` is its first element), and
`graph_rewriter_config` when present. Functions here never modify the dict or
protos they are given, except the original's two editors
merge_external_params_with_configs and update_input_reader_config, which
update them in place as the original's do.
"""
import os

from absl import logging
from google.protobuf import text_format
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_overrides
from od_estimator.config import config_text
from od_estimator.utils import file_safety
from od_estimator.config import input_config_overrides

# Part of this module's interface, as in the original's config_util.
ConfigError = errors.ConfigError
LEGACY_FIELDS = config_text.LEGACY_FIELDS
parse_pipeline_text = config_text.parse_pipeline_text
parse_hparams_overrides = config_overrides.parse_hparams_overrides
check_and_parse_input_config_key = (
    input_config_overrides.check_and_parse_input_config_key)
update_input_reader_config = input_config_overrides.update_input_reader_config


def read_pipeline_config(pipeline_config_path, config_override=None,
                         dropped=None):
  """Reads a pipeline config file into a TrainEvalPipelineConfig.

  Args:
    pipeline_config_path: path (local or any tf.io.gfile scheme) of a
      text-format TrainEvalPipelineConfig.
    config_override: optional text-format TrainEvalPipelineConfig merged on
      top of the file's contents.
    dropped: optional list collecting warnings for dropped LEGACY_FIELDS.

  Returns:
    A pipeline_pb2.TrainEvalPipelineConfig.

  Raises:
    ConfigError: when the file is missing, unreadable or malformed.
  """
  text = config_text.read_config_text(pipeline_config_path)
  pipeline_config = parse_pipeline_text(text, path=pipeline_config_path,
                                        dropped=dropped)
  if config_override:
    parse_pipeline_text(config_override, path='<config_override>',
                        message=pipeline_config, dropped=dropped)
  return pipeline_config


def get_configs_from_pipeline_file(pipeline_config_path, config_override=None):
  """Reads a pipeline config file into a configs dict (see module doc)."""
  return create_configs_from_pipeline_proto(
      read_pipeline_config(pipeline_config_path, config_override))


def create_configs_from_pipeline_proto(pipeline_config):
  """Splits a TrainEvalPipelineConfig into a configs dict (see module doc).

  The dict's values are copies: editing them leaves `pipeline_config` as is.
  """
  pipeline_config = _copy(pipeline_config)
  configs = {
      'model': pipeline_config.model,
      'train_config': pipeline_config.train_config,
      'train_input_config': pipeline_config.train_input_reader,
      'eval_config': pipeline_config.eval_config,
      'eval_input_configs': list(pipeline_config.eval_input_reader),
  }
  if configs['eval_input_configs']:
    configs['eval_input_config'] = configs['eval_input_configs'][0]
  if pipeline_config.HasField('graph_rewriter'):
    configs['graph_rewriter_config'] = pipeline_config.graph_rewriter
  return configs


def create_pipeline_proto_from_configs(configs):
  """Joins a configs dict back into a new TrainEvalPipelineConfig."""
  pipeline_config = pipeline_pb2.TrainEvalPipelineConfig()
  pipeline_config.model.CopyFrom(configs['model'])
  pipeline_config.train_config.CopyFrom(configs['train_config'])
  pipeline_config.train_input_reader.CopyFrom(configs['train_input_config'])
  pipeline_config.eval_config.CopyFrom(configs['eval_config'])
  pipeline_config.eval_input_reader.extend(configs['eval_input_configs'])
  if 'graph_rewriter_config' in configs:
    pipeline_config.graph_rewriter.CopyFrom(configs['graph_rewriter_config'])
  return pipeline_config


# The pipeline field holding each file of get_configs_from_multiple_files,
# and the configs key it gets.
_SEPARATE_FILES = (
    ('model_config_path', 'model', 'model'),
    ('train_config_path', 'train_config', 'train_config'),
    ('train_input_config_path', 'train_input_reader', 'train_input_config'),
    ('eval_config_path', 'eval_config', 'eval_config'),
    ('eval_input_config_path', 'eval_input_reader', 'eval_input_configs'),
    ('graph_rewriter_config_path', 'graph_rewriter', 'graph_rewriter_config'),
)


def _read_pipeline_part(path, field):
  """Parses a file holding one part of a pipeline config (field's message)."""
  # Wrapped on the same line, the file's line numbers stay those of errors.
  return parse_pipeline_text('%s { %s\n}' % (
      field, config_text.read_config_text(path)), path=path)


def get_configs_from_multiple_files(model_config_path='',
                                    train_config_path='',
                                    train_input_config_path='',
                                    eval_config_path='',
                                    eval_input_config_path='',
                                    graph_rewriter_config_path=''):
  """Reads a configs dict from separate files, one per part (train.py's way).

  Each file holds the text of one message: DetectionModel, TrainConfig,
  InputReader, EvalConfig, InputReader, GraphRewriter.

  Returns:
    A configs dict (see module doc) with the keys of the paths given
    (eval_input_configs, a list of one, for eval_input_config_path).

  Raises:
    ConfigError: when a file is missing, unreadable or malformed.
  """
  paths = dict(model_config_path=model_config_path,
               train_config_path=train_config_path,
               train_input_config_path=train_input_config_path,
               eval_config_path=eval_config_path,
               eval_input_config_path=eval_input_config_path,
               graph_rewriter_config_path=graph_rewriter_config_path)
  configs = {}
  for argument, field, key in _SEPARATE_FILES:
    if paths[argument]:
      part = getattr(_read_pipeline_part(paths[argument], field), field)
      configs[key] = list(part) if key == 'eval_input_configs' else part
  if configs.get('eval_input_configs'):
    configs['eval_input_config'] = configs['eval_input_configs'][0]
  return configs


def get_graph_rewriter_config_from_file(graph_rewriter_config_file):
  """Reads a text-format GraphRewriter file."""
  return _read_pipeline_part(graph_rewriter_config_file,
                             'graph_rewriter').graph_rewriter


def save_pipeline_config(pipeline_config, directory):
  """Writes `pipeline_config` as text to `directory`/pipeline.config.

  The file is replaced in one step (see file_safety.write_file).

  Returns:
    The path written.
  """
  tf.io.gfile.makedirs(directory)
  path = os.path.join(directory, 'pipeline.config')
  logging.info('Writing pipeline config file to %s', path)
  file_safety.write_file(path, text_format.MessageToString(pipeline_config))
  return path


def _copy(message):
  duplicate = type(message)()
  duplicate.CopyFrom(message)
  return duplicate


def _copy_into(configs, source):
  """Sets each proto of `configs` to its value in `source`, in place.

  `source` is a copy of `configs` (see copy_configs), which may have gained
  keys; those are added.
  """
  for key, value in source.items():
    if key not in configs:
      configs[key] = value
    elif isinstance(value, list):
      for target, message in zip(configs[key], value):
        target.CopyFrom(message)
    else:
      configs[key].CopyFrom(value)
  if configs.get('eval_input_configs'):
    configs['eval_input_config'] = configs['eval_input_configs'][0]


def copy_configs(configs):
  """Returns a deep copy of a configs dict (which may hold only some keys)."""
  copied = {key: [_copy(c) for c in value] if isinstance(value, list)
            else _copy(value) for key, value in configs.items()}
  if copied.get('eval_input_configs'):
    copied['eval_input_config'] = copied['eval_input_configs'][0]
  return copied


# ---------------------------------------------------------------------------
# Queries.

def _meta_architecture_config(model_config):
  meta_architecture = model_config.WhichOneof('model')
  supported = model_builder.supported_meta_architectures()
  if meta_architecture not in supported:
    raise ValueError('Expected the model to be one of %s, got %r.' % (
        ' or '.join(repr(name) for name in sorted(supported)),
        meta_architecture))
  return getattr(model_config, meta_architecture)


def get_number_of_classes(model_config):
  """num_classes of a DetectionModel of a family model_builder builds."""
  return _meta_architecture_config(model_config).num_classes


def get_image_resizer_config(model_config):
  """The ImageResizer of a DetectionModel of a family model_builder builds."""
  return _meta_architecture_config(model_config).image_resizer


def get_spatial_image_size(image_resizer_config):
  """Returns [height, width] the resizer produces; -1 where not fixed."""
  kind = image_resizer_config.WhichOneof('image_resizer_oneof')
  if kind == 'fixed_shape_resizer':
    resizer = image_resizer_config.fixed_shape_resizer
    return [resizer.height, resizer.width]
  if kind == 'keep_aspect_ratio_resizer':
    resizer = image_resizer_config.keep_aspect_ratio_resizer
    if resizer.pad_to_max_dimension:
      return [resizer.max_dimension] * 2
    return [-1, -1]
  if kind in ('identity_resizer', 'conditional_shape_resizer',
              'pad_to_multiple_resizer'):
    return [-1, -1]
  raise ValueError('Unknown image resizer type %r.' % kind)


def get_max_num_context_features(model_config):
  """Returns context_config.max_num_context_features of a Faster R-CNN."""
  return model_config.faster_rcnn.context_config.max_num_context_features


def get_context_feature_length(model_config):
  """Returns context_config.context_feature_length of a Faster R-CNN."""
  return model_config.faster_rcnn.context_config.context_feature_length


def get_optimizer_type(train_config):
  """Returns the name of the optimizer oneof of a TrainConfig."""
  return train_config.optimizer.WhichOneof('optimizer')


def get_learning_rate_type(optimizer_config):
  """Returns the name of the learning_rate oneof of an optimizer config."""
  return optimizer_config.learning_rate.WhichOneof('learning_rate')


# ---------------------------------------------------------------------------
# Overrides.


def _update_initial_learning_rate(configs, learning_rate):
  optimizer_type = get_optimizer_type(configs['train_config'])
  if optimizer_type not in ('rms_prop_optimizer', 'momentum_optimizer',
                            'adam_optimizer'):
    raise TypeError('Optimizer %s is not supported.' % optimizer_type)
  optimizer = getattr(configs['train_config'].optimizer, optimizer_type)
  kind = get_learning_rate_type(optimizer)
  schedule = getattr(optimizer.learning_rate, kind) if kind else None
  if kind == 'constant_learning_rate':
    schedule.learning_rate = learning_rate
  elif kind == 'exponential_decay_learning_rate':
    schedule.initial_learning_rate = learning_rate
  elif kind == 'manual_step_learning_rate':
    # Every step of the schedule keeps its ratio to the initial rate.
    scale = float(learning_rate) / schedule.initial_learning_rate
    schedule.initial_learning_rate = learning_rate
    for step in schedule.schedule:
      step.learning_rate *= scale
  elif kind == 'cosine_decay_learning_rate':
    warmup_ratio = schedule.warmup_learning_rate / schedule.learning_rate_base
    schedule.learning_rate_base = learning_rate
    schedule.warmup_learning_rate = warmup_ratio * learning_rate
  else:
    raise TypeError('Learning rate %s is not supported.' % kind)


def _update_batch_size(configs, batch_size):
  configs['train_config'].batch_size = max(1, int(round(batch_size)))


def _update_momentum_optimizer_value(configs, momentum):
  optimizer_type = get_optimizer_type(configs['train_config'])
  if optimizer_type not in ('rms_prop_optimizer', 'momentum_optimizer'):
    raise TypeError('Optimizer type must be one of `rms_prop_optimizer` or '
                    '`momentum_optimizer`.')
  optimizer = getattr(configs['train_config'].optimizer, optimizer_type)
  optimizer.momentum_optimizer_value = min(max(0.0, momentum), 1.0)


def _update_classification_localization_weight_ratio(configs, ratio):
  # The localization weight is pinned to 1.0; the ratio sets the other.
  meta_architecture = configs['model'].WhichOneof('model')
  if meta_architecture == 'faster_rcnn':
    model = configs['model'].faster_rcnn
    model.first_stage_localization_loss_weight = 1.0
    model.first_stage_objectness_loss_weight = ratio
    model.second_stage_localization_loss_weight = 1.0
    model.second_stage_classification_loss_weight = ratio
  elif meta_architecture == 'ssd':
    configs['model'].ssd.loss.localization_weight = 1.0
    configs['model'].ssd.loss.classification_weight = ratio


def _focal_loss(configs):
  meta_architecture = configs['model'].WhichOneof('model')
  if meta_architecture == 'faster_rcnn':
    loss = configs['model'].faster_rcnn.second_stage_classification_loss
  elif meta_architecture == 'ssd':
    loss = configs['model'].ssd.loss.classification_loss
  else:
    raise TypeError('Did not recognize the model architecture.')
  if loss.WhichOneof('classification_loss') != 'weighted_sigmoid_focal':
    raise TypeError('Classification loss must be `weighted_sigmoid_focal`.')
  return loss.weighted_sigmoid_focal


def _update_focal_loss_gamma(configs, gamma):
  _focal_loss(configs).gamma = gamma


def _update_focal_loss_alpha(configs, alpha):
  _focal_loss(configs).alpha = alpha


def _update_train_steps(configs, train_steps):
  configs['train_config'].num_steps = int(train_steps)


def _update_all_eval_input_configs(configs, field, value):
  for eval_input_config in configs['eval_input_configs']:
    setattr(eval_input_config, field, value)


def _update_label_map_path(configs, label_map_path):
  configs['train_input_config'].label_map_path = label_map_path
  _update_all_eval_input_configs(configs, 'label_map_path', label_map_path)


def _update_mask_type(configs, mask_type):
  configs['train_input_config'].mask_type = mask_type
  _update_all_eval_input_configs(configs, 'mask_type', mask_type)


def _update_num_classes(configs, num_classes):
  _meta_architecture_config(configs['model']).num_classes = int(num_classes)


def _update_sample_from_datasets_weights(configs, weights):
  container = configs['train_input_config'].sample_from_datasets_weights
  weights = list(weights) if isinstance(weights, (list, tuple)) else [weights]
  if len(weights) != len(container):
    raise errors.UserInputError(
        'sample_from_datasets_weights override has %d values but the train '
        'input has %d dataset weights.' % (len(weights), len(container)))
  del container[:]
  container.extend(float(w) for w in weights)


# The original's accepted keypoint candidate ranking modes.
_CANDIDATE_RANKING_MODES = ('min_distance', 'score_distance_ratio',
                            'score_scaled_distance_ratio', 'gaussian_weighted')


def _set_keypoint_task(field):
  """Updater of a field of a CenterNet model's only keypoint task."""
  def update(configs, value):
    meta_architecture = configs['model'].WhichOneof('model')
    if meta_architecture != 'center_net':
      raise errors.UserInputError(
          'Override %s applies to a center_net keypoint '
          'estimation task; the model is %s.' %
          (field, meta_architecture))
    if field == 'candidate_ranking_mode' and (
        value not in _CANDIDATE_RANKING_MODES):
      raise errors.UserInputError(
          'Override candidate_ranking_mode=%r: one of %s.' %
          (value, ', '.join(_CANDIDATE_RANKING_MODES)))
    if field == 'rescore_instances' and isinstance(value, str):
      value = value == 'True'
    tasks = configs['model'].center_net.keypoint_estimation_task
    if len(tasks) != 1:
      # As the original: the key cannot say which task is meant.
      logging.warning('Ignoring config override %s: the model has %d '
                      'keypoint estimation tasks, not one.', field,
                      len(tasks))
      return
    config_overrides.set_field(tasks[0], field, value, key=field)
  return update


def _set_eval_config(field):
  def update(configs, value):
    setattr(configs['eval_config'], field, value)
  return update


def _set_train_config(field):
  def update(configs, value):
    setattr(configs['train_config'], field, value)
  return update


def _set_all_eval_inputs(field):
  def update(configs, value):
    _update_all_eval_input_configs(configs, field, value)
  return update


# Strategy keys: one name that updates every field it concerns.
_STRATEGY_UPDATERS = {
    'learning_rate': _update_initial_learning_rate,
    'batch_size': _update_batch_size,
    'momentum_optimizer_value': _update_momentum_optimizer_value,
    'classification_localization_weight_ratio':
        _update_classification_localization_weight_ratio,
    'focal_loss_gamma': _update_focal_loss_gamma,
    'focal_loss_alpha': _update_focal_loss_alpha,
    'train_steps': _update_train_steps,
    'label_map_path': _update_label_map_path,
    'mask_type': _update_mask_type,
    'num_classes': _update_num_classes,
    'sample_1_of_n_eval_examples': _set_all_eval_inputs(
        'sample_1_of_n_examples'),
    'eval_num_epochs': _set_all_eval_inputs('num_epochs'),
    'eval_with_moving_averages': _set_eval_config('use_moving_averages'),
    'retain_original_images_in_eval': _set_eval_config(
        'retain_original_images'),
    'use_bfloat16': _set_train_config('use_bfloat16'),
    'retain_original_image_additional_channels_in_eval': _set_eval_config(
        'retain_original_image_additional_channels'),
    'sample_from_datasets_weights': _update_sample_from_datasets_weights,
}
_STRATEGY_UPDATERS.update({
    field: _set_keypoint_task(field) for field in (
        'peak_max_pool_kernel_size', 'candidate_search_scale',
        'candidate_ranking_mode', 'score_distance_offset', 'box_scale',
        'keypoint_candidate_score_threshold', 'rescore_instances',
        'unmatched_keypoint_score', 'score_distance_multiplier',
        'std_dev_multiplier', 'rescoring_threshold')})

def supported_override_keys():
  """Returns the override keys understood besides generic dotted paths."""
  return sorted(set(_STRATEGY_UPDATERS) |
                set(input_config_overrides.LEGACY_INPUT_KEYS))


class OverrideError(errors.UserInputError, TypeError):
  """An override whose value or config does not fit its key.

  A TypeError too, as the original raised for these.
  """


def _apply_strategy_override(configs, key, value):
  """Runs the updater of `key`; a value or config it rejects is bad input."""
  try:
    _STRATEGY_UPDATERS[key](configs, value)
  except errors.UserInputError:
    raise
  except (TypeError, ValueError) as error:
    raise OverrideError('Override %s=%r does not fit: %s. Fix it in '
                        '--hparams_overrides.' % (key, value, error)) from error


def merge_external_params_with_configs(configs, hparams=None,
                                       kwargs_dict=None):
  """Applies the given overrides to `configs` in place and returns it.

  As the original: the protos in `configs` are updated (a script that
  ignores the returned dict gets the overrides too). The overrides are
  applied on a copy first, so when one is refused `configs` is left as it
  was.

  Keys are, as in the original:
  * strategy keys (see supported_override_keys()), e.g. learning_rate,
    which rescales the whole schedule, or batch_size;
  * input keys: the legacy train_input_path, eval_input_path,
    append_*_input_path, train_shuffle, eval_shuffle, or
    `eval_input_configs:NAME:FIELD` / `train_input_config:NAME:FIELD`;
  * generic dotted paths into the configs dict, e.g.
    model.ssd.loss.hard_example_miner.num_hard_examples, or from the
    pipeline.config field names, e.g. train_input_reader.shuffle,
    eval_input_reader[0].num_epochs, graph_rewriter.quantization.delay.
  None values are skipped (a caller's "not given"). Unlike the original,
  which skipped them too, an empty value ("") clears the text field of a
  generic path (e.g. train_config.fine_tune_checkpoint="", logged as a
  warning) and is refused for any other key.

  Args:
    configs: a configs dict (see module doc); updated.
    hparams: an object with .values() returning a dict (like HParams), or a
      dict; its entries win over kwargs_dict's.
    kwargs_dict: a dict of further overrides.

  Returns:
    `configs`.

  Raises:
    UserInputError: for an unknown key, naming the keys that are accepted,
      or (an OverrideError, also a TypeError) a value that does not fit
      its field or a config the key does not apply to.
  """
  overrides = dict(kwargs_dict or {})
  if hparams:
    overrides.update(hparams if isinstance(hparams, dict) else
                     hparams.values())
  merged = copy_configs(configs)
  for key, value in overrides.items():
    if value is None:
      continue
    logging.info('Overriding config %s: %s', key, value)
    if config_overrides.is_generic_key(key):
      _apply_generic_override(merged, key, value)
    elif key in _HPARAMS:
      continue
    elif not (key in _STRATEGY_UPDATERS or input_config_overrides
              .check_and_parse_input_config_key(merged, key)[0]):
      raise _unknown_key_error(key)
    elif value == '':  # pylint: disable=g-explicit-bool-comparison
      raise errors.UserInputError(
          'Override %r has an empty value: give a value or drop it (an '
          'empty value clears only a text field named by its path, e.g. '
          'train_config.fine_tune_checkpoint="").' % key)
    elif key in _STRATEGY_UPDATERS:
      _apply_strategy_override(merged, key, value)
    else:
      input_config_overrides.apply_input_override(merged, key, value)
  _copy_into(configs, merged)
  return configs


# Hparams of create_model_fn, not config fields (the original's model_main
# always adds load_pretrained).
_HPARAMS = ('load_pretrained', 'allow_partial_fine_tune')


def _apply_generic_override(configs, key, value):
  """Sets a dotted path; an empty value clears a text field, with a warning."""
  previous = config_overrides.set_path(configs, key, value)
  if value == '':  # pylint: disable=g-explicit-bool-comparison
    logging.warning('Override %s="": cleared (was %r).', key, previous)


def _unknown_key_error(key):
  return errors.UserInputError(
      'Unknown config override key %r%s. Accepted: %s; or a dotted path '
      'starting with one of %s (e.g. model.ssd.num_classes, '
      'train_input_reader.shuffle) or with eval_input_reader[INDEX]; or '
      'eval_input_configs:NAME:FIELD.' % (
          key, config_overrides.closest_key(key, supported_override_keys()),
          ', '.join(supported_override_keys()),
          ', '.join(config_overrides.ALL_ROOTS)))


def remove_unnecessary_ema(variables_to_restore, no_ema_collection=None):
  """Restores some variables from themselves instead of their moving average.

  ExponentialMovingAverage.variables_to_restore() maps
  'VAR/ExponentialMovingAverage' to VAR. Variables whose name contains one of
  `no_ema_collection`'s substrings have no average in the checkpoint (they
  were not averaged in training), so their entry is renamed back to 'VAR'.

  Args:
    variables_to_restore: dict from checkpoint name to variable.
    no_ema_collection: list of name substrings, or None.

  Returns:
    A new dict (the same dict when no_ema_collection is None).
  """
  if no_ema_collection is None:
    return variables_to_restore
  restore_map = {}
  for name, variable in variables_to_restore.items():
    if ('ExponentialMovingAverage' in name and
        any(part in name for part in no_ema_collection)):
      name = name.replace('/ExponentialMovingAverage', '')
    restore_map[name] = variable
  return restore_map
