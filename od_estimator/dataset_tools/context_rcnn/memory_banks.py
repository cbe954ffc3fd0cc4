"""Context R-CNN's memory banks, built from grouped camera-trap frames.

The steps of add_context_to_examples' pipeline, as plain functions over
tf.train.Example protos (each testable without Beam):

  group_key         a frame's group: its sequence key's value, and with a
                    time horizon the period of image/date_captured.
  order_and_split   a group in frame order, in chunks of at most
                    max_num_elements_in_context_features frames.
  build_bank        the group's memory bank: the image/embedding of the
                    frames kept (subsampled, by score or by groundtruth).
  with_context      each frame as a tf.Example carrying the bank in
                    image/context_features + image/context_feature_length.
  sequence_clips    the group as tf.SequenceExamples (clips of at most
                    max_clip_length frames), the bank in their context.

The keys written are the original's; every problem with a record raises
errors.UserInputError naming the record (image/source_id) and the field.
"""
import dataclasses
import datetime
import io
from PIL import Image
import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import dataset_util

TIME_HORIZONS = ('year', 'month', 'week', 'day', 'hour', 'minute')
# The keys the original orders a group by: frame number in a sequence;
# source id (or capture time) at a location.
SEQUENCE_KEYS = ('image/seq_id', 'image/location')
DATE_FORMAT = '%Y-%m-%d %H:%M:%S'
# A frame that gives the bank no embedding has the index max_elements
# plus this, as in the original.
_NOT_IN_BANK = 1

_COORDINATES = ('xmin', 'xmax', 'ymin', 'ymax')


def _values(example, key):
  """The values of a feature, [] when absent (without adding it)."""
  if key not in example.features.feature:
    return []
  feature = example.features.feature[key]
  kind = feature.WhichOneof('kind')
  return list(getattr(feature, kind).value) if kind else []


def source_id(example):
  ids = _values(example, 'image/source_id')
  return ids[0].decode('utf-8', 'replace') if ids else '<no image/source_id>'


def _first(example, key):
  values = _values(example, key)
  if not values:
    raise errors.UserInputError('record %s has no %s' % (
        source_id(example), key))
  return values[0]


def _date_captured(example):
  text = _first(example, 'image/date_captured')
  try:
    return datetime.datetime.strptime(text.decode('utf-8'), DATE_FORMAT)
  except ValueError:
    raise errors.UserInputError(
        'record %s: image/date_captured %r is not a %s date' % (
            source_id(example), text, DATE_FORMAT)) from None


def _set(example, key, feature):
  example.features.feature[key].CopyFrom(feature)


def shrink_image(example, max_image_dimension):
  """Makes the image at most max_image_dimension a side, in place.

  The aspect ratio is kept; the smaller image is JPEG-encoded and
  image/height, image/width and image/format follow. Returns whether the
  image was resized (a smaller one is left untouched).

  Raises:
    errors.UserInputError: image/encoded is missing or not an image.
  """
  encoded = _first(example, 'image/encoded')
  try:
    image = Image.open(io.BytesIO(encoded))
    image.load()
  except (OSError, SyntaxError, ValueError) as error:
    raise errors.UserInputError('record %s: image/encoded is not an image: '
                                '%s' % (source_id(example), error)) from None
  width, height = image.size
  scale = max_image_dimension / max(width, height)
  if scale >= 1:
    return False
  size = (max(1, int(width * scale)), max(1, int(height * scale)))
  output = io.BytesIO()
  image.convert('RGB').resize(size).save(output, format='JPEG')
  f = dataset_util
  _set(example, 'image/encoded', f.bytes_feature(output.getvalue()))
  _set(example, 'image/width', f.int64_feature(size[0]))
  _set(example, 'image/height', f.int64_feature(size[1]))
  _set(example, 'image/format', f.bytes_feature('jpeg'))
  return True


def group_key(example, sequence_key, time_horizon=None):
  """The bytes key of a frame's group, as the original spells it.

  Args:
    example: a tf.train.Example.
    sequence_key: the feature grouping frames (one of SEQUENCE_KEYS).
    time_horizon: None, or one of TIME_HORIZONS: the key then ends with
      the period of image/date_captured, e.g. b'loc1/2020/1' by month.

  Raises:
    errors.UserInputError: the record lacks the key or a readable date.
  """
  key = _first(example, sequence_key)
  if not time_horizon:
    return key
  date = _date_captured(example)
  # The original's week of the month, written as a float ('0.0' ...).
  parts = {
      'year': [date.year],
      'month': [date.year, date.month],
      'week': [date.year, date.month, float(date.day // 7)],
      'day': [date.year, date.month, date.day],
      'hour': [date.year, date.month, date.day, date.hour],
      'minute': [date.year, date.month, date.day, date.hour, date.minute],
  }[time_horizon]
  return key + ''.join('/%s' % part for part in parts).encode('utf-8')


def order_and_split(key, examples, sequence_key, sorted_image_ids,
                    max_elements):
  """A group's frames in order, in chunks of at most max_elements.

  Frames of a sequence are ordered by image/seq_frame_num; frames of a
  location by image/source_id (sorted_image_ids) or image/date_captured,
  ties broken by source id. A group larger than max_elements becomes
  chunks keyed KEY_0, KEY_1, ... (the original meant to split so, but its
  loop never ended).

  Returns:
    [(key, [tf.train.Example])].
  """
  if sequence_key == 'image/seq_id':
    order = lambda e: (_first(e, 'image/seq_frame_num'), source_id(e))
  elif sorted_image_ids:
    order = source_id
  else:
    order = lambda e: (_date_captured(e), source_id(e))
  ordered = sorted(examples, key=order)
  if len(ordered) <= max_elements:
    return [(key, ordered)]
  return [(key + b'_%d' % index, ordered[start:start + max_elements])
          for index, start in enumerate(range(0, len(ordered),
                                              max_elements))]


@dataclasses.dataclass(frozen=True)
class BankSettings:
  """Which frames give their embedding to the memory bank.

  Attributes:
    subsample_rate: > 0 keeps every n-th frame of the group only.
    keep_only_positives: keeps frames whose image/embedding_score reaches
      score_threshold only.
    score_threshold: see keep_only_positives.
    keep_only_positives_gt: keeps frames with a groundtruth box only.
    max_elements: the group size limit (an index past the bank is this
      plus one, as the original's).
    default_length: the embedding length when frames carry no
      image/embedding_length (--context_feature_length).
  """
  subsample_rate: int = 0
  keep_only_positives: bool = False
  score_threshold: float = 0.7
  keep_only_positives_gt: bool = False
  max_elements: int = 2000
  default_length: int = 2057


@dataclasses.dataclass(frozen=True)
class Bank:
  """A group's memory bank.

  Attributes:
    features: the kept embeddings, concatenated (flat float list).
    length: the length of one embedding.
    image_ids: the kept frames' image/source_id, in bank order.
    indices: per frame of the group, its row in the bank, or
      max_elements + 1 when it gave none.
  """
  features: list[float]
  length: int
  image_ids: list[bytes]
  indices: list[int]


def _in_bank(index, example, settings):
  if settings.subsample_rate > 0 and index % settings.subsample_rate:
    return False
  if settings.keep_only_positives:
    score = _values(example, 'image/embedding_score')
    if not score:
      raise errors.UserInputError(
          'record %s has no image/embedding_score (--keep_only_positives '
          'reads it)' % source_id(example))
    if score[0] < settings.score_threshold:
      return False
  if settings.keep_only_positives_gt:
    return bool(_values(example, 'image/object/bbox/xmin'))
  return True


def build_bank(examples, settings):
  """The memory bank of a group's ordered frames.

  Raises:
    errors.UserInputError: a kept frame has no image/embedding, or one
      whose size is not the embedding length.
  """
  lengths = _values(examples[0], 'image/embedding_length') if examples else []
  length = lengths[0] if lengths else settings.default_length
  features, image_ids, indices = [], [], []
  for index, example in enumerate(examples):
    if not _in_bank(index, example, settings):
      indices.append(settings.max_elements + _NOT_IN_BANK)
      continue
    embedding = _values(example, 'image/embedding')
    if not embedding or len(embedding) != length:
      raise errors.UserInputError(
          'record %s: image/embedding has %d values, not the embedding '
          'length %d (image/embedding_length, else --context_feature_length)'
          % (source_id(example), len(embedding), length))
    indices.append(len(image_ids))
    features.extend(embedding)
    image_ids.append(_first(example, 'image/source_id'))
  return Bank(features, length, image_ids, indices)


def with_context(examples, bank, keep_image_id_list=False):
  """The group's frames as tf.Examples carrying the bank.

  Args:
    examples: the group's ordered frames.
    bank: their Bank, or None to add no context.
    keep_image_id_list: also write image/context_features_image_id_list.

  Returns:
    New tf.train.Examples: each frame's features plus
    image/context_features, image/context_feature_length and (the
    original's key) context_features_idx, the frame's row in the bank.
  """
  f = dataset_util
  output = []
  for index, example in enumerate(examples):
    example = _copy(example)
    if bank is not None:
      _set(example, 'image/context_features',
           f.float_list_feature(bank.features))
      _set(example, 'image/context_feature_length',
           f.int64_feature(bank.length))
      _set(example, 'context_features_idx',
           f.int64_feature(bank.indices[index]))
      if keep_image_id_list:
        _set(example, 'image/context_features_image_id_list',
             f.bytes_list_feature(bank.image_ids))
    output.append(example)
  return output


def _copy(example):
  copied = tf.train.Example()
  copied.CopyFrom(example)
  return copied


def clips(examples, max_clip_length=None):
  """The group cut into consecutive clips of at most max_clip_length."""
  if not max_clip_length:
    return [list(examples)]
  return [list(examples[start:start + max_clip_length])
          for start in range(0, len(examples), max_clip_length)]


# Per frame: (feature list key, the frame's feature key, its kind).
_BYTES, _INT64, _FLOAT = 'bytes', 'int64', 'float'
_FRAME_FEATURES = (
    ('image/encoded', 'image/encoded', _BYTES),
    ('image/source_id', 'image/source_id', _BYTES),
    ('image/date_captured', 'image/date_captured', _BYTES),
    ('image/unix_time', 'image/unix_time', _FLOAT),
    ('image/location', 'image/location', _BYTES),
    ('region/label/index', 'image/object/class/label', _INT64),
    ('region/label/string', 'image/object/class/text', _BYTES),
) + tuple(('region/bbox/' + c, 'image/object/bbox/' + c, _FLOAT)
          for c in _COORDINATES)
_LIST_FEATURE = {_BYTES: dataset_util.bytes_list_feature,
                 _INT64: dataset_util.int64_list_feature,
                 _FLOAT: dataset_util.float_list_feature}


def keep_images(examples, bank, image_ids):
  """The frames whose image/source_id is in image_ids, and their bank.

  The bank is the whole group's (the original filters after building it);
  only the kept frames' rows in it are returned with them.
  """
  kept = [index for index, example in enumerate(examples)
          if source_id(example) in image_ids]
  if bank is not None:
    bank = dataclasses.replace(bank, indices=[bank.indices[i] for i in kept])
  return [examples[i] for i in kept], bank


def sequence_clips(key, examples, bank, max_clip_length=None,
                   keep_image_id_list=False):
  """The group as tf.SequenceExamples in the original's layout.

  Args:
    key: the group's key; clip i's clip/media_id is KEY_i.
    examples: the group's ordered frames.
    bank: their Bank, or None to add no context.
    max_clip_length: frames per clip at most (None: one clip).
    keep_image_id_list: also write image/context_features_image_id_list.

  Returns:
    tf.train.SequenceExamples. Context: clip/media_id, clip/frames,
    clip/start/timestamp, clip/end/timestamp, image/format, image/channels,
    image/height and image/width (of the first frame) and the bank
    (image/context_features, image/context_feature_length). Per frame:
    image/encoded, image/source_id, image/timestamp (the frame's place in
    the clip), image/context_features_idx, image/date_captured,
    image/unix_time, image/location, region/bbox/*, region/label/index,
    region/label/string and region/is_annotated (1).
  """
  f = dataset_util
  output = []
  offset = 0
  for number, clip in enumerate(clips(examples, max_clip_length)):
    context = {
        'clip/media_id': f.bytes_feature(
            key + ('_%d' % number).encode('utf-8')),
        'clip/frames': f.int64_feature(len(clip)),
        'clip/start/timestamp': f.int64_feature(0),
        'clip/end/timestamp': f.int64_feature(len(clip)),
        # The original's spelling; readers decode whatever the bytes are.
        'image/format': f.bytes_feature('JPG'),
        'image/channels': f.int64_feature(3),
        'image/height': f.int64_feature(_first(clip[0], 'image/height')),
        'image/width': f.int64_feature(_first(clip[0], 'image/width')),
    }
    lists = {name: [] for name, _, _ in _FRAME_FEATURES}
    lists.update({'image/timestamp': [], 'region/is_annotated': []})
    if bank is not None:
      context['image/context_features'] = f.float_list_feature(bank.features)
      context['image/context_feature_length'] = f.int64_feature(bank.length)
      if keep_image_id_list:
        context['image/context_features_image_id_list'] = (
            f.bytes_list_feature(bank.image_ids))
      lists['image/context_features_idx'] = []
    for index, example in enumerate(clip):
      for name, key_in_frame, kind in _FRAME_FEATURES:
        lists[name].append(_LIST_FEATURE[kind](_values(example, key_in_frame)))
      lists['image/timestamp'].append(f.int64_feature(index))
      lists['region/is_annotated'].append(f.int64_feature(1))
      if bank is not None:
        lists['image/context_features_idx'].append(
            f.int64_feature(bank.indices[offset + index]))
    offset += len(clip)
    output.append(tf.train.SequenceExample(
        context=tf.train.Features(feature=context),
        feature_lists=tf.train.FeatureLists(feature_list={
            name: tf.train.FeatureList(feature=features)
            for name, features in lists.items()})))
  return output
