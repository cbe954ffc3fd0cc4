"""Parsing pipeline config text with errors that say where and why.

Protobuf's own parse errors name a line and column at best; these name the
file, the dotted path of the field concerned and, where one is known, a fix.
"""
import difflib
import os
import re

from absl import logging
from google.protobuf import text_format
import tensorflow as tf

from od_estimator import errors
from od_estimator.protos import pipeline_pb2


# Defined with the other errors of the user's input; importable from here.
ConfigError = errors.ConfigError


# ---------------------------------------------------------------------------
# Parsing text protos with readable errors.

_TOKEN = re.compile(r'''
    (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<open>[{<])
  | (?P<close>[}>])
  | (?P<name>\[[\w.]+\]|[A-Za-z_][\w.]*)
  | (?P<list_open>\[)
  | (?P<list_close>\])
  | (?P<colon>:)
  | (?P<newline>\n)
''', re.VERBOSE)


def _scan_blocks(text, line, column):
  """Scans text-format nesting up to (line, column).

  A light scan (names followed by `{` or `<`, and `name: [{...}, ...]`
  lists), used only to say where an error is; it tolerates malformed text.

  Returns:
    (open blocks as field names, the field name being set or None, the
    number of blocks closed while none was open).
  """
  stack, lists, last_name, current = [], [], None, None
  row, row_start, after_colon, unmatched = 1, 0, False, 0
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
    elif kind == 'list_open':
      lists.append((last_name or '?', len(stack)))
      last_name = current = None
    elif kind == 'list_close':
      if lists:
        lists.pop()
      last_name = current = None
    elif kind == 'open':
      # An element of `name: [{...}]` is a `name` block.
      in_list = lists and lists[-1][1] == len(stack)
      stack.append(last_name or (lists[-1][0] if in_list else '?'))
      last_name = current = None
    elif kind == 'close':
      if stack:
        stack.pop()
      else:
        unmatched += 1
      last_name = current = None
    elif kind == 'string':
      last_name = None
    after_colon = False
  return stack, current, unmatched


def _field_path_at(text, line, column):
  """Returns the dotted path of the field being parsed at (line, column)."""
  stack, current, _ = _scan_blocks(text, line, column)
  return '.'.join(stack + ([current] if current else [])) or None


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


def _message_types(names):
  """Descriptors of the pipeline messages along a path of field names."""
  types = [pipeline_pb2.TrainEvalPipelineConfig.DESCRIPTOR]
  for name in names:
    field = types[-1].fields_by_name.get(name)
    if field is None or field.message_type is None:
      break
    types.append(field.message_type)
  return types


def _misplaced_field_hint(blocks, name):
  """Hint for a field set inside the wrong block, or None.

  A field unknown to the innermost block but known to an enclosing one
  usually means a `}` is missing above it.
  """
  types = _message_types(blocks)
  if len(types) != len(blocks) + 1:
    return None
  for depth in range(len(blocks) - 1, -1, -1):
    if name in types[depth].fields_by_name:
      owner = ('in `%s`' % '.'.join(blocks[:depth]) if depth else
               'at the top level')
      return ('`%s` belongs %s, not in `%s`: is a closing `}` missing '
              'above this line?' % (name, owner, '.'.join(blocks)))
  return None


def _parse_error(text, error, path):
  """A ConfigError for a text_format.ParseError, with field and hint."""
  line, column = error.GetLine(), error.GetColumn()
  # ParseError's text starts with "line:column : "; keep the message only.
  problem = re.sub(r'^\d+:\d+ : ', '', str(error))
  if not line:
    return ConfigError(problem, path=path, hint=_hint_for(problem))
  blocks, current, unmatched = _scan_blocks(text, line, column)
  field = _field_path_at(text, line, column)
  hint = _hint_for(problem)
  rest = text[_offset(text, line, column):]
  unknown = _UNKNOWN_FIELD.search(problem)
  if unmatched:
    problem = ('a closing `}` or `>` here has no matching opening brace (%s)'
               % problem)
    hint = 'remove it, or add the `{` it should close'
  elif _TRUNCATED.search(problem) and not rest.strip(' \t\n};,'):
    field = '.'.join(blocks) or None
    problem = ('the file ends before `%s` is closed; it may be truncated '
               '(%s)' % (field, problem))
    hint = 'add %d closing `}` at the end, or restore the full file' % len(
        blocks)
  elif unknown:
    hint = _misplaced_field_hint(blocks, unknown.group(2)) or hint
  return ConfigError(problem, path=path, line=line, column=column,
                     field=field, hint=hint)


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
      raise _parse_error(text, error, path) from None
  if message is None:
    return parsed
  message.CopyFrom(parsed)
  return message


def read_config_text(path):
  """Returns the text of a UTF-8 config file, without a byte-order mark.

  Args:
    path: local path or any tf.io.gfile scheme.

  Raises:
    ConfigError: when the file is missing, a directory, unreadable or not
      UTF-8 (naming the line and column of the first bad byte).
  """
  if not tf.io.gfile.exists(path):
    raise ConfigError('config file not found', path=path,
                      hint='pass --pipeline_config_path=PATH/pipeline.config')
  if tf.io.gfile.isdir(path):
    inside = os.path.join(path, 'pipeline.config')
    raise ConfigError('is a directory, not a config file', path=path,
                      hint=('did you mean %s?' % inside
                            if tf.io.gfile.exists(inside) else None))
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      data = f.read()
  except tf.errors.OpError as error:
    raise ConfigError('cannot read the file: %s' % error.message,
                      path=path) from None
  try:
    return data.decode('utf-8').lstrip('\ufeff')
  except UnicodeDecodeError as error:
    line = data.count(b'\n', 0, error.start) + 1
    column = error.start - data.rfind(b'\n', 0, error.start)
    raise ConfigError('not UTF-8 text: byte 0x%02x cannot be decoded' %
                      data[error.start], path=path, line=line, column=column,
                      hint='save the file with UTF-8 encoding') from None
