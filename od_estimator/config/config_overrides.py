"""The generic parts of config overrides.

The --hparams_overrides text syntax, and setting the field at a dotted path
such as model.ssd.num_classes inside a configs dict (see config_util). A
path starts with a configs dict key or with the pipeline.config field it
holds (train_input_reader.shuffle is train_input_config.shuffle).
"""
import difflib
import re

from google.protobuf import descriptor as descriptor_lib

from od_estimator import errors
from od_estimator.protos import graph_rewriter_pb2


def parse_hparams_overrides(text):
  """Parses "key=value,key2=[v1,v2]" (the --hparams_overrides syntax).

  Values become bool ("true"/"false"), int, float or str, in that order of
  preference, or a list of those when written in brackets; generic overrides
  convert them to the field's type later. Commas inside quotes or brackets
  do not separate entries.

  Returns:
    A dict from key to value.

  Raises:
    ValueError: on an entry without "=", or unbalanced brackets or quotes.
  """
  overrides = {}
  for entry in filter(None, (e.strip() for e in _split_top_level(text or ''))):
    if '=' not in entry:
      raise errors.UserInputError(
          'Override %r is not of the form key=value.' % entry)
    key, value = (part.strip() for part in entry.split('=', 1))
    if value.startswith('[') and value.endswith(']'):
      overrides[key] = [_parse_scalar(v.strip()) for v in
                        _split_top_level(value[1:-1]) if v.strip()]
    else:
      overrides[key] = _parse_scalar(value)
  return overrides


def _split_top_level(text):
  """Splits at the commas that are outside quotes and brackets."""
  pieces, start, depth, quote = [], 0, 0, None
  for position, char in enumerate(text):
    if quote:
      quote = None if char == quote else quote
    elif char in '"\'':
      quote = char
    elif char == '[':
      depth += 1
    elif char == ']':
      depth -= 1
    elif char == ',' and depth == 0:
      pieces.append(text[start:position])
      start = position + 1
  if quote or depth:
    raise errors.UserInputError('Overrides %r: unbalanced %s.' % (
        text, 'quotes' if quote else 'brackets'))
  pieces.append(text[start:])
  return pieces


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



# Roots of generic paths: the configs dict keys.
GENERIC_ROOTS = ('model', 'train_config', 'train_input_config', 'eval_config',
                 'eval_input_configs', 'graph_rewriter_config')
# pipeline.config field -> the configs dict key holding it.
PIPELINE_FIELD_ROOTS = {
    'train_input_reader': 'train_input_config',
    'eval_input_reader': 'eval_input_configs',
    'graph_rewriter': 'graph_rewriter_config',
}


ALL_ROOTS = GENERIC_ROOTS + tuple(PIPELINE_FIELD_ROOTS)


def _root(key):
  return key.split('.')[0].split('[')[0]


def is_generic_key(key):
  """Whether `key` is a dotted path from a configs key or pipeline field."""
  return '.' in key and _root(key) in ALL_ROOTS


def did_you_mean(name, candidates, spell=lambda close: close):
  """' (did you mean X?)' with X = spell(the candidate nearest name), or ''."""
  close = difflib.get_close_matches(name, candidates, n=1)
  return ' (did you mean %s?)' % spell(close[0]) if close else ''


def closest_key(key, keys):
  """did_you_mean for an unknown override key: among `keys`, or for a
  dotted key the same path from the nearest root."""
  if '.' not in key:
    return did_you_mean(key, keys)
  root = _root(key)
  return did_you_mean(root, ALL_ROOTS, lambda close: close + key[len(root):])


def _coerce(field, value, key):
  """Converts a parsed override value to a proto field's Python type."""
  fd = descriptor_lib.FieldDescriptor
  if field.type == fd.TYPE_ENUM and isinstance(value, str):
    enum_value = field.enum_type.values_by_name.get(value)
    if enum_value is None:
      raise errors.UserInputError('Override %s=%s: %s accepts %s.' % (
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


def set_field(message, name, value, key):
  """Sets message.name to value converted to the field's type.

  An empty value ('') clears a text field; for other fields it is refused.

  Returns:
    The field's previous value (a list for a repeated field).
  """
  field = message.DESCRIPTOR.fields_by_name.get(name)
  if field is None:
    names = sorted(message.DESCRIPTOR.fields_by_name)
    raise errors.UserInputError(
        'Override %r: %s has no field %r%s (it has %s).' % (
        key, message.DESCRIPTOR.name, name, did_you_mean(name, names),
        ', '.join(names)))
  if value == '' and (field.type != field.TYPE_STRING or  # pylint: disable=g-explicit-bool-comparison
                      field.label == field.LABEL_REPEATED):
    raise errors.UserInputError(
        'Override %r has an empty value; only a text field can be cleared '
        'that way (e.g. train_config.fine_tune_checkpoint=""), and %s is '
        'not one: give a value (a list as []) or drop the override.' %
        (key, name))
  previous = getattr(message, name)
  if field.label == field.LABEL_REPEATED:
    previous = list(previous)
    values = value if isinstance(value, (list, tuple)) else [value]
    container = getattr(message, name)
    del container[:]
    container.extend(_coerce(field, v, key) for v in values)
    return previous
  if field.message_type is not None:
    raise errors.UserInputError(
        'Override %r names the message %s; name one of its '
        'scalar fields instead.' % (key, name))
  value = _coerce(field, value, key)
  try:
    setattr(message, name, value)
  except (TypeError, ValueError) as error:
    raise errors.UserInputError('Override %s=%r does not fit field %s: %s' %
                                (key, value, name, error)) from None
  return previous


_PATH_PART = re.compile(r'^(\w+)(?:\[(-?\d+)\])?$')


def _path_parts(key):
  """Splits 'a.b[1].c' into [('a', None), ('b', 1), ('c', None)]."""
  parts = []
  for part in key.split('.'):
    match = _PATH_PART.match(part)
    if not match:
      raise errors.UserInputError(
          'Override %r: cannot read %r; path parts are field '
          'names, optionally with an index as in '
          'data_augmentation_options[0].' % (key, part))
    index = match.group(2)
    parts.append((match.group(1), None if index is None else int(index)))
  return parts


def _element(container, index, key, name):
  """container[index] of a repeated field, with a readable range error."""
  if not -len(container) <= index < len(container):
    raise errors.UserInputError(
        'Override %r: %s has %d element(s); index %d is out of '
        'range.' % (key, name, len(container), index))
  return container[index]


def _generic_root(configs, key, name, index):
  """The configs entry a generic override path starts from."""
  name = PIPELINE_FIELD_ROOTS.get(name, name)
  if name == 'eval_input_configs':
    if index is None:
      raise errors.UserInputError('Override %r: say which eval input, as in '
                                  '%s[0].shuffle.' % (key, key.split('.')[0]))
    return _element(configs[name], index, key, name)
  if index is not None:
    raise errors.UserInputError('Override %r: %s is not a list.' % (key, name))
  if name == 'graph_rewriter_config' and name not in configs:
    configs[name] = graph_rewriter_pb2.GraphRewriter()
  return configs[name]


def set_path(configs, key, value):
  """Sets the field at a dotted path such as model.ssd.num_classes.

  A repeated field on the path takes an index: `name[i]` (negative counts
  from the end), e.g. train_config.data_augmentation_options[0]
  .random_horizontal_flip.probability, or as the last part
  train_input_config.tf_record_input_reader.input_path[1]; the list
  `eval_input_configs[i]` starts a path too. Messages missing on the path
  are created, except that an override never switches a oneof to another
  member (e.g. model.faster_rcnn.* on an SSD config): that is almost
  always a typo.

  The path may start with a pipeline.config field instead of the configs
  key (PIPELINE_FIELD_ROOTS), e.g. eval_input_reader[0].shuffle.

  Returns:
    The field's previous value (see set_field).
  """
  parts = _path_parts(key)
  message = _generic_root(configs, key, *parts[0])
  for name, index in parts[1:-1]:
    field = message.DESCRIPTOR.fields_by_name.get(name)
    if field is None or field.message_type is None:
      raise errors.UserInputError('Override %r: %s has no message field %r.' %
                                  (key, message.DESCRIPTOR.name, name))
    if field.label == field.LABEL_REPEATED:
      if index is None:
        raise errors.UserInputError(
            'Override %r: %s.%s is a repeated field; add an '
            'index such as %s[0].' %
            (key, message.DESCRIPTOR.name, name, name))
      message = _element(getattr(message, name), index, key, name)
      continue
    if index is not None:
      raise errors.UserInputError(
          'Override %r: %s.%s is not a repeated field.' %
          (key, message.DESCRIPTOR.name, name))
    oneof = field.containing_oneof
    current = oneof and message.WhichOneof(oneof.name)
    if current and current != name:
      raise errors.UserInputError(
          'Override %r: %s.%s is not set in the config (its oneof '
          '`%s` holds `%s`).' % (key, message.DESCRIPTOR.name,
                      name, oneof.name, current))
    message = getattr(message, name)
  name, index = parts[-1]
  if index is None:
    return set_field(message, name, value, key)
  return _set_element(message, name, index, value, key)


def _set_element(message, name, index, value, key):
  """Sets one element of a repeated scalar field."""
  field = message.DESCRIPTOR.fields_by_name.get(name)
  if field is None or field.label != field.LABEL_REPEATED:
    raise errors.UserInputError('Override %r: %s has no repeated field %r.' %
                                (key, message.DESCRIPTOR.name, name))
  if field.message_type is not None:
    raise errors.UserInputError(
        'Override %r names the message %s[%d]; name one of its '
        'fields instead.' % (key, name, index))
  container = getattr(message, name)
  previous = _element(container, index, key, name)
  try:
    container[index] = _coerce(field, value, key)
  except (TypeError, ValueError) as error:
    raise errors.UserInputError('Override %s=%r does not fit field %s: %s' %
                                (key, value, name, error)) from None
  return previous
