"""Names the TFRecord file and record behind a data error of a training job.

TensorFlow reports a truncated or corrupt TFRecord (DataLossError) or an
image it cannot decode (InvalidArgumentError from a Decode op) without the
file it came from. After such a failure the commands read the pipeline
config's input files once, in order, to find the first bad record, and
report it in one line.
"""
import contextlib
import io
import re

from absl import logging
from PIL import Image
import tensorflow as tf

from od_estimator.utils import config_util

# The tf_example_decoder's data assertions end their first part with this,
# followed by `[source_id=..., filename=...]`.
_DECODER_ASSERTION = re.compile(
    r'\[([^\[\]]* in record)\] \[(source_id=[^\]]*)\]')
# dataset_builder's end-of-file check: `[Corrupt or truncated TFRecord file]
# [path] [: read] [N] [bytes of valid records, but the file had] [M] ...`.
_TRUNCATED_FILE = re.compile(
    r'\[Corrupt or truncated TFRecord file\] \[([^\]]*)\]')
_DECODE_NODE = re.compile(r'Decode(Image|Jpeg|Png|Gif|Bmp)\b')
# What tf.io.decode_image accepts (PIL names JPEG with extra frames MPO).
_IMAGE_FORMATS = ('JPEG', 'MPO', 'PNG', 'GIF', 'BMP')


def is_data_error(error):
  """True for errors caused by a bad input record rather than by the code.

  Args:
    error: an exception raised while training or evaluating.

  Returns:
    True for a DataLossError, a failed tf_example_decoder data assertion or
    a failed image decode.
  """
  if isinstance(error, tf.errors.DataLossError):
    return True
  if not isinstance(error, tf.errors.InvalidArgumentError):
    return False
  message = _message(error)
  return bool(_TRUNCATED_FILE.search(message) or
              _DECODER_ASSERTION.search(message) or
              _DECODE_NODE.search(message))


def describe(error, pipeline_config_path):
  """One line naming the bad file and record, for an is_data_error error.

  Args:
    error: a tf.errors.OpError for which is_data_error is True.
    pipeline_config_path: the pipeline config whose input_path globs are
      scanned; None or unreadable: the line names only what TF reported.

  Returns:
    A one-line description: the file, the record and what to do.
  """
  message = _message(error)
  truncated = _TRUNCATED_FILE.search(message)
  paths = ([truncated.group(1)] if truncated else
           _input_files(pipeline_config_path))
  if truncated or isinstance(error, tf.errors.DataLossError):
    found = _first_unreadable(paths)
    if found:
      path, index, previous = found
      return ('TFRecord file %s is truncated or corrupt at record %d%s. '
              'Re-create it, or remove it from input_path.' % (
                  path, index, ' (after %s)' % previous if previous else ''))
    return ('a TFRecord input file is truncated or corrupt (%s); input '
            'files: %s' % (_last_line(message), ', '.join(paths) or
                           '(none found)'))
  assertion = _DECODER_ASSERTION.search(message)
  if assertion:
    problem, record = assertion.groups()
    source_id = record.split(',')[0][len('source_id='):]
    found = _find(paths, lambda example: _source_id(example) == source_id)
  else:
    problem = ('image/encoded is not a decodable JPEG/PNG/GIF/BMP image in '
               'record')
    found = _find(paths, lambda example: not _decodes(example))
    record = _record_name(found[2]) if found else None
  where = ' (record %d of %s)' % (found[1], found[0]) if found else ''
  if not record:
    return ('an input record holds an image that cannot be decoded (%s); '
            'input files: %s' % (_last_line(message), ', '.join(paths)))
  return '%s %s%s. Fix or drop that record.' % (problem, record, where)


def _message(error):
  return getattr(error, 'message', None) or str(error)


def _last_line(message):
  lines = [line.strip() for line in message.splitlines()
           if line.strip() and not line.strip().startswith('[[')]
  return lines[-1] if lines else message


def _input_files(pipeline_config_path):
  """The files matched by the train and eval input_path globs, in order."""
  if not pipeline_config_path:
    return []
  try:
    configs = config_util.get_configs_from_pipeline_file(pipeline_config_path)
  except (ValueError, OSError, tf.errors.OpError):
    return []
  readers = [configs['train_input_config']] + list(
      configs['eval_input_configs'])
  paths = []
  for reader in readers:
    for pattern in reader.tf_record_input_reader.input_path:
      for path in sorted(tf.io.gfile.glob(pattern)):
        if path not in paths:
          paths.append(path)
  return paths


@contextlib.contextmanager
def _quiet_tf_logging():
  # tf_record_iterator logs a deprecation warning: keep the report one line.
  logger = tf.get_logger()
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


def _records(path):
  with _quiet_tf_logging():
    yield from tf.compat.v1.io.tf_record_iterator(path)


def _first_unreadable(paths):
  """(path, record index, last good record's name) of the first bad file."""
  for path in paths:
    index, previous = 0, None
    try:
      for serialized in _records(path):
        previous = _record_name(serialized)
        index += 1
    except tf.errors.DataLossError:
      return path, index, previous
  return None


def _find(paths, is_bad):
  """(path, index, serialized) of the first parsable record is_bad accepts."""
  for path in paths:
    try:
      for index, serialized in enumerate(_records(path)):
        example = _parse(serialized)
        if example is not None and is_bad(example):
          return path, index, serialized
    except tf.errors.OpError:
      continue
  return None


def _parse(serialized):
  example = tf.train.Example()
  try:
    example.ParseFromString(serialized)
  except Exception:  # pylint: disable=broad-except
    # protobuf's DecodeError: not an Example; not the record looked for.
    return None
  return example


def _bytes(example, key):
  values = example.features.feature[key].bytes_list.value
  return values[0] if values else b''


def _source_id(example):
  return _bytes(example, 'image/source_id').decode('utf-8', 'replace')


def _record_name(serialized):
  example = _parse(serialized) if isinstance(serialized, bytes) else None
  if example is None:
    return None
  return 'source_id=%s, filename=%s' % (
      _source_id(example),
      _bytes(example, 'image/filename').decode('utf-8', 'replace'))


def _decodes(example):
  try:
    with Image.open(io.BytesIO(_bytes(example, 'image/encoded'))) as image:
      image.load()
      return image.format in _IMAGE_FORMATS
  except (OSError, SyntaxError, ValueError):
    # What PIL raises for unknown, truncated or corrupt image data.
    return False
