"""Overrides of the train and eval InputReaders of a configs dict.

Keys are the original's: the legacy train_input_path, eval_input_path,
append_*_input_path, train_shuffle, eval_shuffle, or
`KEY_NAME:INPUT_NAME:FIELD` with KEY_NAME train_input_config or
eval_input_configs. config_util re-exports update_input_reader_config and
check_and_parse_input_config_key under the original's names.
"""
from od_estimator import errors
from od_estimator.protos import input_reader_pb2
from od_estimator.config import config_overrides

# Legacy input keys: (which input config, which InputReader field).
LEGACY_INPUT_KEYS = {
    'train_shuffle': ('train_input_config', 'shuffle'),
    'eval_shuffle': ('eval_input_configs', 'shuffle'),
    'train_input_path': ('train_input_config', 'input_path'),
    'eval_input_path': ('eval_input_configs', 'input_path'),
    'append_train_input_path': ('train_input_config', 'input_path'),
    'append_eval_input_path': ('eval_input_configs', 'input_path'),
}
_KEY_NAMES = ('eval_input_configs', 'train_input_config')
_NAMED_INPUT_FIELDS = ('input_path', 'label_map_path', 'shuffle', 'mask_type',
                       'sample_1_of_n_examples')


def _input_names(configs, key_name):
  inputs = configs[key_name]
  if isinstance(inputs, input_reader_pb2.InputReader):
    return [inputs.name]
  return [config.name for config in inputs]


def check_and_parse_input_config_key(configs, key):
  """Tells whether `key` overrides an input config, and which field.

  Args:
    configs: a configs dict (see config_util).
    key: an override key.

  Returns:
    (is_valid_input_config_key, key_name, input_name, field_name): for a
    legacy key input_name is None; for a key that is no input key,
    (False, None, None, key).

  Raises:
    errors.UserInputError: for a key with ':' that is not
      KEY_NAME:INPUT_NAME:FIELD, or whose key name, input name or field is
      unknown.
  """
  parts = key.split(':')
  if len(parts) == 1:
    if key not in LEGACY_INPUT_KEYS:
      return False, None, None, key
    key_name, field = LEGACY_INPUT_KEYS[key]
    return True, key_name, None, field
  if len(parts) != 3:
    raise errors.UserInputError(
        'Invalid override key %r: input overrides have the form '
        'KEY_NAME:INPUT_NAME:FIELD.' % key)
  key_name, input_name, field = parts
  if key_name not in _KEY_NAMES:
    raise errors.UserInputError('Invalid key_name %r in override %r: use '
                                'eval_input_configs or train_input_config.' %
                                (key_name, key))
  if input_name not in _input_names(configs, key_name):
    raise errors.UserInputError(
        'Input name %r not found when overriding %r; the inputs are named '
        '%s.' % (input_name, key, _input_names(configs, key_name)))
  if field not in _NAMED_INPUT_FIELDS:
    raise errors.UserInputError(
        'Invalid field_name %r in override %r: one of %s.' %
        (field, key, ', '.join(_NAMED_INPUT_FIELDS)))
  return True, key_name, input_name, field


def _set_input_path(input_config, input_path, append=False):
  reader = input_config.WhichOneof('input_reader')
  if reader != 'tf_record_input_reader':
    raise TypeError('Input reader type must be `tf_record_input_reader`, '
                    'got %r.' % reader)
  paths = input_config.tf_record_input_reader.input_path
  if not append:
    del paths[:]
  paths.extend(input_path if isinstance(input_path, (list, tuple))
               else [input_path])


def _targets(configs, key_name, input_name, field_name):
  """The InputReaders an override of field_name applies to."""
  if key_name not in _KEY_NAMES or field_name is None:
    raise errors.UserInputError(
        'Unknown input config overriding: key_name:%s, input_name:%s, '
        'field_name:%s.' % (key_name, input_name, field_name))
  inputs = configs[key_name]
  if isinstance(inputs, input_reader_pb2.InputReader):
    inputs = [inputs]
  if input_name is None:
    if len(inputs) != 1:
      raise errors.UserInputError(
          'Override of %s field %r is ambiguous with %d inputs; use '
          '%s:NAME:%s.' % (key_name, field_name, len(inputs), key_name,
                           field_name))
    return inputs
  targets = [config for config in inputs if config.name == input_name]
  if not targets:
    raise errors.UserInputError(
        'Input name %r not found when overriding; the inputs are named %s.'
        % (input_name, [config.name for config in inputs]))
  if len(targets) > 1:
    raise errors.UserInputError(
        'Duplicate input name %r found when overriding.' % input_name)
  return targets


def update_input_reader_config(configs, key_name=None, input_name=None,
                               field_name=None, value=None,
                               path_updater=_set_input_path):
  """Sets a field of the train input or of the named (or only) eval input.

  Unlike the rest of config_util, this changes `configs` in place, as the
  original's function of this name does (merge_external_params_with_configs
  calls it on its own copy).

  Args:
    configs: a configs dict (see config_util); modified.
    key_name: 'train_input_config' or 'eval_input_configs'.
    input_name: the InputReader's `name`, or None when there is one input.
    field_name: an InputReader field.
    value: its new value.
    path_updater: for field_name 'input_path', called as
      path_updater(input_config=..., input_path=value).

  Raises:
    errors.UserInputError: for an unknown key_name or input name, a missing
      field_name, or no input_name when several inputs could be meant.
  """
  for target in _targets(configs, key_name, input_name, field_name):
    if field_name == 'input_path':
      path_updater(input_config=target, input_path=value)
    else:
      config_overrides.set_field(target, field_name, value,
                                 key='%s.%s' % (key_name, field_name))


def apply_input_override(configs, key, value):
  """Applies `key`=`value` when key is an input override (in place).

  Returns:
    True when `key` was an input override.
  """
  is_input_key, key_name, input_name, field_name = (
      check_and_parse_input_config_key(configs, key))
  if not is_input_key:
    return False
  append = key.startswith('append_')
  update_input_reader_config(
      configs, key_name, input_name, field_name, value,
      path_updater=lambda input_config, input_path: _set_input_path(
          input_config, input_path, append))
  return True
