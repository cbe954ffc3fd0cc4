"""Names the TFRecord file and record behind a data error of a training job.

TensorFlow reports a truncated or corrupt TFRecord (DataLossError), a
record that is not a tf.Example or an image it cannot decode
(InvalidArgumentError from a Parse or Decode op) without the file it came
from. After such a failure the commands read the pipeline config's input
files once, in order, to find the first bad record, and report it in one
line.

`mask_type_problem` reads the first record of an input that loads instance
masks and tells whether its masks are of the input reader's mask_type, so
`validate` and the launch refuse a mismatch in seconds.

`scan` checks every record of a config's inputs before training (`validate
--scan_records`) for what the input pipeline would refuse: unreadable
records, records that are not tf.Examples, images that do not decode,
inconsistent or inverted boxes, per-object lists of other lengths than the
boxes, and class ids outside 1..num_classes; the records of
TF_SEQUENCE_EXAMPLE readers frame by frame (see sequence_records).
"""
import contextlib
import io
import logging
import math
import re

from PIL import Image
import tensorflow as tf

from od_estimator.checks import sequence_records
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.input_pipeline.input_groundtruth import UNKNOWN_CLASS
from od_estimator.config import config_util
from od_estimator.protos import input_reader_pb2
from od_estimator.utils import label_map_util

# The tf_example_decoder's data assertions end their first part with this,
# followed by `[source_id=..., filename=...]`.
_DECODER_ASSERTION = re.compile(
    r'\[([^\[\]]* in record)\] \[(source_id=[^\]]*)\]')
# dataset_builder's end-of-file check: `[Corrupt or truncated TFRecord file]
# [path] [: read] [N] [bytes of valid records, but the file had] [M] ...`.
_TRUNCATED_FILE = re.compile(
    r'\[Corrupt or truncated TFRecord file\] \[([^\]]*)\]')
_DECODE_NODE = re.compile(r'Decode(Image|Jpeg|Png|Gif|Bmp)\b')
# tf.io.parse_single_example on bytes that are not a serialized Example.
_NOT_AN_EXAMPLE = 'Could not parse example input'
_BOX_KEYS = tuple('image/object/bbox/' + name
                  for name in ('ymin', 'xmin', 'ymax', 'xmax'))
# Optional per-object lists: absent, or one entry per box.
_OPTIONAL_OBJECT_KEYS = ('image/object/weight', 'image/object/area',
                         'image/object/is_crowd', 'image/object/difficult',
                         'image/object/group_of')
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
              _NOT_AN_EXAMPLE in message or _DECODE_NODE.search(message))


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
  configs = _configs(pipeline_config_path)
  paths = [truncated.group(1)] if truncated else _input_files(configs)
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
  if _NOT_AN_EXAMPLE in message:
    found = _find_serialized(paths, lambda serialized: _parse(serialized)
                             is None)
    if found:
      return ('record %d of %s is not a tf.train.Example. Fix or drop that '
              'record.' % found[1::-1])
    return ('an input record is not a tf.train.Example; input files: %s' %
            ', '.join(paths))
  assertion = _DECODER_ASSERTION.search(message)
  if assertion:
    problem, record = assertion.groups()
    source_id = record.split(',')[0][len('source_id='):]
    found = _find(paths, lambda example: _source_id(example) == source_id)
    problem = _found_problem(found, configs) or problem
  else:
    problem = ('image/encoded is not a decodable JPEG/PNG/GIF/BMP image in '
               'record')
    found = _find_serialized(paths,
                             lambda serialized: not _record_decodes(serialized))
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


def _configs(pipeline_config_path):
  """The configs dict of the pipeline config, or None if unreadable."""
  if not pipeline_config_path:
    return None
  try:
    return config_util.get_configs_from_pipeline_file(pipeline_config_path)
  except (ValueError, OSError, tf.errors.OpError):
    return None


def _readers(configs):
  return [configs['train_input_config']] + list(configs['eval_input_configs'])


def _reader_files(reader):
  return [path for pattern in reader.tf_record_input_reader.input_path
          for path in sorted(tf.io.gfile.glob(pattern))]


def _input_files(configs):
  """The files matched by the train and eval input_path globs, in order."""
  paths = []
  for reader in _readers(configs) if configs else ():
    for path in _reader_files(reader):
      if path not in paths:
        paths.append(path)
  return paths


def _found_problem(found, configs):
  """record_problem of a found (path, index, serialized), read as its input
  reader reads it (label map, num_classes); None when there is none."""
  if not found or not configs:
    return None
  path, _, serialized = found
  reader = next((reader for reader in _readers(configs)
                 if path in _reader_files(reader)), None)
  if reader is None:
    return None
  problem = record_problem(
      serialized, config_util.get_number_of_classes(configs['model']),
      _label_ids(reader.label_map_path, _is_sequence(reader)),
      _is_sequence(reader))
  return problem and problem + ' in record'


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


def _indexed_records(paths):
  """(path, index, serialized) of the readable records of `paths`, in order.

  A file stops at its first unreadable record.
  """
  for path in paths:
    try:
      for index, serialized in enumerate(_records(path)):
        yield path, index, serialized
    except tf.errors.OpError:
      continue


def _find_serialized(paths, is_bad):
  """(path, index, serialized) of the first record is_bad accepts."""
  return next((found for found in _indexed_records(paths)
               if is_bad(found[2])), None)


def _find(paths, is_bad):
  """(path, index, serialized) of the first parsable record is_bad accepts."""
  def parsed_and_bad(serialized):
    example = _parse(serialized)
    return example is not None and is_bad(example)
  return _find_serialized(paths, parsed_and_bad)


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
  if not isinstance(serialized, bytes):
    return None
  sequence = sequence_records.parse(serialized)
  if sequence is not None:
    return sequence_records.name(sequence)
  example = _parse(serialized)
  if example is None:
    return None
  return 'source_id=%s, filename=%s' % (
      _source_id(example),
      _bytes(example, 'image/filename').decode('utf-8', 'replace'))


def _image_decodes(encoded):
  try:
    with Image.open(io.BytesIO(encoded)) as image:
      image.load()
      return image.format in _IMAGE_FORMATS
  except (OSError, SyntaxError, ValueError):
    # What PIL raises for unknown, truncated or corrupt image data.
    return False


def _decodes(example):
  return _image_decodes(_bytes(example, 'image/encoded'))


def _record_decodes(serialized):
  """Whether a tf.Example's image, or every frame of a sequence, decodes."""
  sequence = sequence_records.parse(serialized)
  if sequence is not None:
    return sequence_records.frames_decode(sequence, _image_decodes)
  example = _parse(serialized)
  return example is not None and _decodes(example)


class ScanResult:
  """What `scan` found: problem lines (at most `limit`) and counts.

  Attributes:
    problems: one line per bad record (or unreadable file).
    records: records read.
    stopped: the scan stopped at `limit` problems, before the end.
  """

  def __init__(self):
    self.problems = []
    self.records = 0
    self.stopped = False


def scan(configs, limit=20):
  """Reads every record of the train and eval inputs; lists the bad ones.

  Args:
    configs: the configs dict of config_util.
    limit: stop after this many problems.

  Returns:
    A ScanResult. Each problem names the file, the record's index and its
    source_id, and what is wrong with it.
  """
  result = ScanResult()
  num_classes = config_util.get_number_of_classes(configs['model'])
  scanned = set()
  for reader in _readers(configs):
    label_ids = _label_ids(reader.label_map_path, _is_sequence(reader))
    for path in _reader_files(reader):
      if (path, reader.label_map_path) in scanned:
        continue
      scanned.add((path, reader.label_map_path))
      if not _scan_file(path, num_classes, label_ids, result, limit,
                        _is_sequence(reader)):
        result.stopped = True
        return result
  return result


# The encoding of image/object/mask's list kind, as InstanceMaskType names
# it, and how it reads.
_MASK_KINDS = {
    'float_list': ('NUMERICAL_MASKS', 'numerical masks (a float list)'),
    'bytes_list': ('PNG_MASKS', 'PNG-encoded masks (bytes)'),
}


def masks_kind(example):
  """A tf.Example's image/object/mask list kind ('float_list' or
  'bytes_list'), or None when it holds no masks."""
  feature = example.features.feature
  if 'image/object/mask' not in feature:
    return None
  kind = feature['image/object/mask'].WhichOneof('kind')
  return kind if kind in _MASK_KINDS else None


def mask_type_of(example):
  """The InstanceMaskType name (PNG_MASKS, NUMERICAL_MASKS) of a
  tf.Example's masks, or None when it holds none."""
  kind = masks_kind(example)
  return kind and _MASK_KINDS[kind][0]


def mask_type_problem(input_config, field):
  """The first record's masks against the reader's mask_type, or None.

  Args:
    input_config: an InputReader; checked when it loads instance masks
      from tf.Examples.
    field: its field path in pipeline.config, e.g. train_input_reader.

  Returns:
    None when the masks match (or the reader loads none, or its first
    record has no image/object/mask), else (problem, hint): one sentence
    naming the file and what its masks are, and the mask_type to set.
  """
  if not input_config.load_instance_masks or _is_sequence(input_config):
    return None
  first = next(_indexed_records(_reader_files(input_config)), None)
  example = first and _parse(first[2])
  kind = example and masks_kind(example)
  if not kind:
    return None
  wanted, what = _MASK_KINDS[kind]
  configured = input_reader_pb2.InstanceMaskType.Name(input_config.mask_type)
  if wanted == configured or (wanted, configured) == ('NUMERICAL_MASKS',
                                                      'DEFAULT'):
    return None
  return ('is %s but record %d of %s holds %s in image/object/mask' % (
      configured, first[1], first[0], what),
          'set mask_type: %s in %s' % (wanted, field))


def _label_ids(label_map_path, sequence=False):
  """{class text: id} the decoder maps class texts with.

  The tf.Example decoder matches item names and display names, the
  sequence decoder names only (both as the original's).
  """
  if not label_map_path:
    return None
  if sequence:
    return label_map_util.get_label_map_dict(label_map_path)
  return dict(zip(*tf_example_decoder.label_map_lookup(label_map_path)))


def _is_sequence(reader):
  return reader.input_type == input_reader_pb2.TF_SEQUENCE_EXAMPLE


def _scan_file(path, num_classes, label_ids, result, limit, sequence=False):
  """Adds the problems of one file to result; False once limit is reached."""
  read = 0
  try:
    for index, serialized in enumerate(_records(path)):
      result.records += 1
      read = index + 1
      problem = record_problem(serialized, num_classes, label_ids, sequence)
      if problem:
        result.problems.append('record %d of %s%s: %s' % (
            index, path, _named(serialized), problem))
        if len(result.problems) >= limit:
          return False
  except tf.errors.OpError as error:
    result.problems.append(
        'TFRecord file %s is truncated or corrupt at record %d (%s)' % (
            path, read, _last_line(_message(error))))
  return len(result.problems) < limit


def _named(serialized):
  name = _record_name(serialized)
  return ' (%s)' % name if name else ''


def record_problem(serialized, num_classes, label_ids=None, sequence=False):
  """What the input pipeline would refuse in one record, or None.

  Args:
    serialized: the record's bytes.
    num_classes: the model's classes (ids 1..num_classes).
    label_ids: {class text: id} of the reader's label map, or None.
    sequence: the record is read as a tf.SequenceExample (input_type
      TF_SEQUENCE_EXAMPLE; see sequence_records).

  Returns:
    A short description of the first problem found, or None.
  """
  if sequence:
    return sequence_records.problem(serialized, num_classes, label_ids,
                                    _image_decodes)
  example = _parse(serialized)
  if example is None:
    return 'not a tf.train.Example'
  if not _decodes(example):
    return 'image/encoded is not a decodable JPEG/PNG/GIF/BMP image'
  return _box_problem(example) or _object_problem(example, num_classes,
                                                  label_ids)


def _floats(example, key):
  return list(example.features.feature[key].float_list.value)


def _list_length(example, key):
  feature = example.features.feature[key]
  return max(len(feature.float_list.value), len(feature.int64_list.value),
             len(feature.bytes_list.value))


def _box_problem(example):
  ymin, xmin, ymax, xmax = [_floats(example, key) for key in _BOX_KEYS]
  lengths = [len(values) for values in (ymin, xmin, ymax, xmax)]
  if len(set(lengths)) > 1:
    return ('image/object/bbox/{ymin,xmin,ymax,xmax} have different lengths '
            '%s' % ', '.join(map(str, lengths)))
  for box in zip(ymin, xmin, ymax, xmax):
    if (not all(math.isfinite(value) for value in box) or
        box[0] > box[2] or box[1] > box[3]):
      return ('inverted (ymin > ymax or xmin > xmax) or non-finite box '
              '(ymin, xmin, ymax, xmax) = (%s)' % ', '.join(
                  '%g' % value for value in box))
  return None


def _class_ids(example, label_ids):
  """The decoder's class ids: texts through the label map, else labels."""
  texts = example.features.feature['image/object/class/text'].bytes_list.value
  if label_ids is not None and texts:
    return 'image/object/class/text', [
        label_ids.get(text.decode('utf-8', 'replace'), UNKNOWN_CLASS)
        for text in texts]
  return 'image/object/class/label', list(
      example.features.feature['image/object/class/label'].int64_list.value)


def _object_problem(example, num_classes, label_ids):
  num_boxes = len(_floats(example, _BOX_KEYS[0]))
  key, ids = _class_ids(example, label_ids)
  if len(ids) != num_boxes:
    return '%s has %d entries for %d boxes' % (key, len(ids), num_boxes)
  for optional in _OPTIONAL_OBJECT_KEYS:
    length = _list_length(example, optional)
    if length not in (0, num_boxes):
      return '%s has %d entries for %d boxes' % (optional, length, num_boxes)
  wrong = sorted({i for i in ids if i != UNKNOWN_CLASS and
                  not 1 <= i <= num_classes})
  if wrong:
    return ('%s holds class ids %s outside 1..num_classes=%d (ids are '
            '1-based; 0 is the background)' % (
                key, ', '.join(map(str, wrong)), num_classes))
  return None
