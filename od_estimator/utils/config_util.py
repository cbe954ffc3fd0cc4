"""Reading, writing and overriding pipeline configs.

A "configs" dict holds the parts of a TrainEvalPipelineConfig under the
original's keys: `model`, `train_config`, `train_input_config`, `eval_config`,
`eval_input_configs` (a list; `eval_input_config` is its first element), and
`graph_rewriter_config` when present. Functions here never modify the dict or
protos they are given: overrides return a new dict.
"""
import difflib
import os
import re

from absl import logging
from google.protobuf import descriptor as descriptor_lib
from google.protobuf import text_format
import tensorflow as tf

from od_estimator.protos import pipeline_pb2

class ConfigError(ValueError):
  """A config that cannot be used, with where and why.

  Attributes:
    path: the config file, or None for text given directly.
    line: 1-based line of the problem, or None.
    column: 1-based column of the problem, or None.
    field: dotted path of the field concerned, or None.
    problem: what is wrong, in a sentence.
    hint: what would fix it, or None.
  """

  def __init__(self, problem, path=None, line=None, column=None, field=None,
               hint=None):
    self.path, self.line, self.column = path, line, column
    self.field, self.problem, self.hint = field, problem, hint
    super().__init__(self._format())

  def _format(self):
    where = self.path or '<config text>'
    if self.line is not None:
      where += ':%d' % self.line
      if self.column is not None:
        where += ':%d' % self.column
    text = where + ': '
    if self.field:
      text += 'field `%s`: ' % self.field
    text += self.problem
    if self.hint:
      text += ' (hint: %s)' % self.hint
    return text


# ---------------------------------------------------------------------------
# Parsing text protos with readable errors.

_TOKEN = re.compile(r'''
    (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<open>[{<])
  | (?P<close>[}>])
  | (?P<name>\[[\w.]+\]|[A-Za-z_][\w.]*)
  | (?P<colon>:)
  | (?P<newline>\n)
''', re.VERBOSE)


def _field_path_at(text, line, column, blocks_only=False):
  """Returns the dotted path of the field being parsed at (line, column).

  A light scan of the text-format nesting (names followed by `{` or `<`),
  used only to say where an error is; it tolerates malformed text. With
  `blocks_only`, returns just the enclosing open messages.
  """
  stack, last_name, current = [], None, None
  row, row_start, after_colon = 1, 0, False
  for match in _TOKEN.finditer(text):
    col = match.start() - row_start + 1
    if row > line or (row == line and col > column):
      break
    kind = match.lastgroup
    if kind == 'newline':
      row, row_start = row + 1, match.end()
    elif kind == 'colon':
      after_colon = True
      continue
    elif kind == 'name' and not after_colon:  # a field name, not an enum value
      last_name = current = match.group()
    elif kind == 'open':
      stack.append(last_name or '?')
      last_name = current = None
    elif kind == 'close':
      if stack:
        stack.pop()
      last_name = current = None
    elif kind == 'string':
      last_name = None
    after_colon = False
  parts = stack + ([current] if current and not blocks_only else [])
  return '.'.join(parts) or None


_UNKNOWN_FIELD = re.compile(
    r'Message type "([\w.]+)" has no field named "(\w+)"')
_BAD_ENUM = re.compile(
    r'Enum type "([\w.]+)" has no value (?:named|with number) (\S+?)\.?$')


def _hint_for(problem):
  """Suggests a fix for common text-format errors, or returns None."""
  pool = pipeline_pb2.DESCRIPTOR.pool
  unknown = _UNKNOWN_FIELD.search(problem)
  if unknown:
    try:
      message = pool.FindMessageTypeByName(unknown.group(1))
    except KeyError:
      return None
    names = [f.name for f in message.fields]
    close = difflib.get_close_matches(unknown.group(2), names, n=3)
    if close:
      return 'did you mean %s?' % ' or '.join('`%s`' % c for c in close)
    return '%s accepts: %s' % (message.name, ', '.join(sorted(names)))
  bad_enum = _BAD_ENUM.search(problem)
  if bad_enum:
    try:
      enum = pool.FindEnumTypeByName(bad_enum.group(1))
    except KeyError:
      return None
    return 'accepted values: %s' % ', '.join(v.name for v in enum.values)
  if 'Couldn\'t parse' in problem or 'Expected' in problem:
    return ('check the value\'s type and the braces around this line; '
            'strings need quotes, numbers must not have them')
  return None


# Fields that appear in the original's own sample configs although its schema
# lacks them (they were removed from, or never made it into, the .proto files),
# so the original rejects those configs. We drop them with a warning when their
# value is what od_estimator does anyway, and refuse them otherwise.
# (message, field) -> (values we can honour or None for any, explanation).
LEGACY_FIELDS = {
    ('SsdFeatureExtractor', 'batch_norm_trainable'): (
        None, 'removed from the schema; use `model.ssd.freeze_batchnorm` '
        'to stop batch norm updates'),
    ('TrainConfig', 'load_all_optimizer_checkpoint_vars'): (
        ('false', 'False', '0'), 'not in the schema; optimizer slots are '
        'never restored from fine_tune_checkpoint'),
    ('TrainConfig', 'load_all_moving_average_checkpoint_vars'): (
        ('false', 'False', '0'), 'not in the schema; moving averages are '
        'never restored from fine_tune_checkpoint'),
    ('TrainConfig', 'include_global_step'): (
        ('false', 'False', '0'), 'not in the schema; global_step is never '
        'restored from fine_tune_checkpoint'),
}
_SCALAR_FIELD = re.compile(r'(\w+)\s*:\s*("[^"\n]*"|\'[^\'\n]*\'|[^\s,;{}#]+)\s*[,;]?')


def _drop_legacy_field(text, error, path, dropped):
  """Removes a LEGACY_FIELDS field at the error position; None if not one."""
  unknown = _UNKNOWN_FIELD.search(str(error))
  if not unknown or not error.GetLine():
    return None
  key = (unknown.group(1).rsplit('.', 1)[-1], unknown.group(2))
  if key not in LEGACY_FIELDS:
    return None
  lines = text.split('\n')
  row, col = error.GetLine() - 1, error.GetColumn() - 1
  match = _SCALAR_FIELD.match(lines[row], col)
  if not match or match.group(1) != key[1]:
    return None
  accepted, why = LEGACY_FIELDS[key]
  field = _field_path_at(text, row + 1, col + 1)
  if accepted is not None and match.group(2) not in accepted:
    raise ConfigError('`%s: %s` cannot be honoured: %s' % (
        key[1], match.group(2), why), path=path, line=row + 1, column=col + 1,
                      field=field, hint='remove the line')
  message = '%s:%d: ignoring `%s` (%s)' % (path or '<config text>', row + 1,
                                          field, why)
  logging.warning(message)
  dropped.append(message)
  lines[row] = lines[row][:col] + lines[row][match.end():]
  return '\n'.join(lines)


_TRUNCATED = re.compile(r'Expected "[}>]"')


def _offset(text, line, column):
  """Character offset just past the token at 1-based (line, column)."""
  lines = text.split('\n')
  start = sum(len(l) + 1 for l in lines[:line - 1]) + column - 1
  token = re.match(r'\S*', text[start:])
  return start + token.end()


def parse_pipeline_text(text, path=None, message=None, dropped=None):
  """Parses text-format TrainEvalPipelineConfig, merging into `message`.

  Args:
    text: the config text.
    path: file name for error messages.
    message: a pipeline_pb2.TrainEvalPipelineConfig to merge into (a new one
      when None). Merging, as the original does, lets a later value of a
      singular field replace an earlier one, which overrides rely on.
    dropped: optional list; a warning is appended for each LEGACY_FIELDS
      field that was dropped.

  Returns:
    The TrainEvalPipelineConfig.

  Raises:
    ConfigError: naming the file, line, column and field on a parse error.
  """
  dropped = [] if dropped is None else dropped
  while True:
    parsed = pipeline_pb2.TrainEvalPipelineConfig()
    if message is not None:
      parsed.CopyFrom(message)
    try:
      text_format.Merge(text, parsed)
      break
    except text_format.ParseError as error:
      retry = _drop_legacy_field(text, error, path, dropped)
      if retry is not None:
        text = retry
        continue
      line, column = error.GetLine(), error.GetColumn()
      # ParseError's text starts with "line:column : "; keep the message only.
      problem = re.sub(r'^\d+:\d+ : ', '', str(error))
      field = _field_path_at(text, line, column) if line else None
      rest = text[_offset(text, line, column):] if line else 'x'
      if _TRUNCATED.search(problem) and not rest.strip(' \t\n};,'):
        field = _field_path_at(text, line, column, blocks_only=True)
        problem = ('the file ends before `%s` is closed; it may be truncated '
                   '(%s)' % (field, problem))
      raise ConfigError(problem, path=path, line=line, column=column,
                        field=field, hint=_hint_for(problem)) from None
  if message is None:
    return parsed
  message.CopyFrom(parsed)
  return message


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
  if not tf.io.gfile.exists(pipeline_config_path):
    raise ConfigError('file not found', path=pipeline_config_path,
                      hint='pass --pipeline_config_path=PATH/pipeline.config')
  try:
    with tf.io.gfile.GFile(pipeline_config_path, 'r') as f:
      text = f.read()
  except (tf.errors.OpError, UnicodeDecodeError) as error:
    raise ConfigError('cannot read the file: %s' % error,
                      path=pipeline_config_path) from None
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


def save_pipeline_config(pipeline_config, directory):
  """Writes `pipeline_config` as text to `directory`/pipeline.config.

  Returns:
    The path written.
  """
  tf.io.gfile.makedirs(directory)
  path = os.path.join(directory, 'pipeline.config')
  logging.info('Writing pipeline config file to %s', path)
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(text_format.MessageToString(pipeline_config))
  return path


def _copy(message):
  duplicate = type(message)()
  duplicate.CopyFrom(message)
  return duplicate


def copy_configs(configs):
  """Returns a deep copy of a configs dict."""
  return create_configs_from_pipeline_proto(
      create_pipeline_proto_from_configs(configs))


# ---------------------------------------------------------------------------
# Queries.

def _meta_architecture_config(model_config):
  meta_architecture = model_config.WhichOneof('model')
  if meta_architecture not in ('ssd', 'faster_rcnn'):
    raise ValueError("Expected the model to be one of 'faster_rcnn' or "
                     "'ssd', got %r." % meta_architecture)
  return getattr(model_config, meta_architecture)


def get_number_of_classes(model_config):
  """Returns num_classes of an ssd or faster_rcnn DetectionModel."""
  return _meta_architecture_config(model_config).num_classes


def get_image_resizer_config(model_config):
  """Returns the ImageResizer of an ssd or faster_rcnn DetectionModel."""
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

def parse_hparams_overrides(text):
  """Parses "key=value,key2=value2" (the --hparams_overrides syntax).

  Values become bool ("true"/"false"), int, float or str, in that order of
  preference; generic overrides convert them to the field's type later.

  Returns:
    A dict from key to value.

  Raises:
    ValueError: on an entry without "=".
  """
  overrides = {}
  for entry in filter(None, (e.strip() for e in (text or '').split(','))):
    if '=' not in entry:
      raise ValueError('Override %r is not of the form key=value.' % entry)
    key, value = (part.strip() for part in entry.split('=', 1))
    overrides[key] = _parse_scalar(value)
  return overrides


def _parse_scalar(value):
  if value.lower() in ('true', 'false'):
    return value.lower() == 'true'
  for kind in (int, float):
    try:
      return kind(value)
    except ValueError:
      pass
  if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
    return value[1:-1]
  return value


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
}

# Legacy input keys: (which input config, which InputReader field).
_LEGACY_INPUT_KEYS = {
    'train_shuffle': ('train_input_config', 'shuffle'),
    'eval_shuffle': ('eval_input_configs', 'shuffle'),
    'train_input_path': ('train_input_config', 'input_path'),
    'eval_input_path': ('eval_input_configs', 'input_path'),
    'append_train_input_path': ('train_input_config', 'input_path'),
    'append_eval_input_path': ('eval_input_configs', 'input_path'),
}
_NAMED_INPUT_FIELDS = ('input_path', 'label_map_path', 'shuffle', 'mask_type',
                       'sample_1_of_n_examples')
_GENERIC_PREFIXES = ('graph_rewriter_config', 'model', 'train_input_config',
                     'train_config', 'eval_config')


def supported_override_keys():
  """Returns the override keys understood besides generic dotted paths."""
  return sorted(set(_STRATEGY_UPDATERS) | set(_LEGACY_INPUT_KEYS))


def _set_input_path(input_config, value, append):
  reader = input_config.WhichOneof('input_reader')
  if reader != 'tf_record_input_reader':
    raise TypeError('Input reader type must be `tf_record_input_reader`, '
                    'got %r.' % reader)
  paths = input_config.tf_record_input_reader.input_path
  if not append:
    del paths[:]
  paths.extend(value if isinstance(value, (list, tuple)) else [value])


def _update_input_config(configs, key_name, input_name, field, value,
                         append=False):
  """Sets `field` of the train input or of the named (or only) eval input."""
  if key_name == 'train_input_config':
    targets = [configs[key_name]]
    if input_name is not None and targets[0].name != input_name:
      raise ValueError('Input name %r not found when overriding; the train '
                       'input is named %r.' % (input_name, targets[0].name))
  elif input_name is None:
    targets = configs[key_name]
    if len(targets) != 1:
      raise ValueError(
          'Override of eval input field %r is ambiguous with %d eval inputs; '
          'use eval_input_configs:NAME:%s.' % (field, len(targets), field))
  else:
    targets = [c for c in configs[key_name] if c.name == input_name]
    if not targets:
      raise ValueError('Input name %r not found when overriding; eval inputs '
                       'are named %s.' % (input_name,
                                          [c.name for c in configs[key_name]]))
    if len(targets) > 1:
      raise ValueError('Duplicate input name %r found when overriding.' %
                       input_name)
  for target in targets:
    if field == 'input_path':
      _set_input_path(target, value, append)
    else:
      _set_field(target, field, value, key='%s.%s' % (key_name, field))


def _update_input_key(configs, key, value):
  """Applies a legacy or `key_name:input_name:field` input override.

  Returns:
    True when `key` was an input override.
  """
  parts = key.split(':')
  if len(parts) == 1:
    if key not in _LEGACY_INPUT_KEYS:
      return False
    key_name, field = _LEGACY_INPUT_KEYS[key]
    _update_input_config(configs, key_name, None, field, value,
                         append=key.startswith('append_'))
    return True
  if len(parts) != 3:
    raise ValueError('Invalid override key %r: input overrides have the form '
                     'KEY_NAME:INPUT_NAME:FIELD.' % key)
  key_name, input_name, field = parts
  if key_name not in ('eval_input_configs', 'train_input_config'):
    raise ValueError('Invalid key_name %r in override %r: use '
                     'eval_input_configs or train_input_config.' %
                     (key_name, key))
  if field not in _NAMED_INPUT_FIELDS:
    raise ValueError('Invalid field_name %r in override %r: one of %s.' %
                     (field, key, ', '.join(_NAMED_INPUT_FIELDS)))
  _update_input_config(configs, key_name, input_name, field, value)
  return True


def _coerce(field, value, key):
  """Converts a parsed override value to a proto field's Python type."""
  fd = descriptor_lib.FieldDescriptor
  if field.type == fd.TYPE_ENUM and isinstance(value, str):
    enum_value = field.enum_type.values_by_name.get(value)
    if enum_value is None:
      raise ValueError('Override %s=%s: %s accepts %s.' % (
          key, value, field.name,
          ', '.join(v.name for v in field.enum_type.values)))
    return enum_value.number
  if field.type in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE) and isinstance(
      value, (int, float)) and not isinstance(value, bool):
    return float(value)
  if field.type == fd.TYPE_BOOL and isinstance(value, int):
    return bool(value)
  if field.type == fd.TYPE_STRING and not isinstance(value, str):
    return str(value)
  return value


def _set_field(message, name, value, key):
  field = message.DESCRIPTOR.fields_by_name.get(name)
  if field is None:
    raise ValueError('Override %r: %s has no field %r (it has %s).' % (
        key, message.DESCRIPTOR.name, name,
        ', '.join(sorted(message.DESCRIPTOR.fields_by_name))))
  if field.label == field.LABEL_REPEATED:
    values = value if isinstance(value, (list, tuple)) else [value]
    container = getattr(message, name)
    del container[:]
    container.extend(_coerce(field, v, key) for v in values)
    return
  if field.message_type is not None:
    raise ValueError('Override %r names the message %s; name one of its '
                     'scalar fields instead.' % (key, name))
  try:
    setattr(message, name, _coerce(field, value, key))
  except (TypeError, ValueError) as error:
    raise TypeError('Override %s=%r does not fit field %s: %s' %
                    (key, value, name, error)) from None


def _update_generic(configs, key, value):
  """Sets the field at a dotted path such as model.ssd.num_classes.

  Messages missing on the path are created, except that an override never
  switches a oneof to another member (e.g. model.faster_rcnn.* on an SSD
  config): that is almost always a typo.
  """
  names = key.split('.')
  message = configs[names[0]]
  for name in names[1:-1]:
    field = message.DESCRIPTOR.fields_by_name.get(name)
    if field is None or field.message_type is None:
      raise ValueError('Override %r: %s has no message field %r.' %
                       (key, message.DESCRIPTOR.name, name))
    if field.label == field.LABEL_REPEATED:
      raise ValueError('Override %r: %s.%s is a repeated field; give the whole '
                       'message in --config_override instead.' %
                       (key, message.DESCRIPTOR.name, name))
    oneof = field.containing_oneof
    current = oneof and message.WhichOneof(oneof.name)
    if current and current != name:
      raise ValueError('Override %r: %s.%s is not set in the config (its oneof '
                       '`%s` holds `%s`).' % (key, message.DESCRIPTOR.name,
                                              name, oneof.name, current))
    message = getattr(message, name)
  _set_field(message, names[-1], value, key)


def merge_external_params_with_configs(configs, hparams=None,
                                       kwargs_dict=None):
  """Returns a copy of `configs` with the given overrides applied.

  Keys are, as in the original:
  * strategy keys (see supported_override_keys()), e.g. learning_rate,
    which rescales the whole schedule, or batch_size;
  * input keys: the legacy train_input_path, eval_input_path,
    append_*_input_path, train_shuffle, eval_shuffle, or
    `eval_input_configs:NAME:FIELD` / `train_input_config:NAME:FIELD`;
  * generic dotted paths into the configs dict, e.g.
    model.ssd.loss.hard_example_miner.num_hard_examples.
  Empty values ("" or None) are skipped.

  Args:
    configs: a configs dict (see module doc); not modified.
    hparams: an object with .values() returning a dict (like HParams), or a
      dict; its entries win over kwargs_dict's.
    kwargs_dict: a dict of further overrides.

  Returns:
    A new configs dict.

  Raises:
    ValueError: for an unknown key, naming the keys that are accepted.
    TypeError: for a value that does not fit its field.
  """
  overrides = dict(kwargs_dict or {})
  if hparams:
    overrides.update(hparams if isinstance(hparams, dict) else
                     hparams.values())
  configs = copy_configs(configs)
  for key, value in overrides.items():
    if value == '' or value is None:  # pylint: disable=g-explicit-bool-comparison
      continue
    logging.info('Overriding config %s: %s', key, value)
    if key in _STRATEGY_UPDATERS:
      _STRATEGY_UPDATERS[key](configs, value)
    elif _update_input_key(configs, key, value):
      continue
    elif key.split('.')[0] in _GENERIC_PREFIXES and '.' in key:
      _update_generic(configs, key, value)
    elif key == 'load_pretrained':
      # The original's model_main always adds this hparam; it is not a
      # config field, and fine-tuning is driven by train_config.
      continue
    else:
      raise ValueError(
          'Unknown config override key %r. Accepted: %s; or a dotted path '
          'starting with one of %s (e.g. model.ssd.num_classes); or '
          'eval_input_configs:NAME:FIELD.' % (
              key, ', '.join(supported_override_keys()),
              ', '.join(_GENERIC_PREFIXES)))
  if 'eval_input_configs' in configs and configs['eval_input_configs']:
    configs['eval_input_config'] = configs['eval_input_configs'][0]
  return configs

