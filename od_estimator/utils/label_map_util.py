"""Label maps: `item { id: 1 name: 'cat' display_name: 'Cat' }` files.

Ids are 1-based (0 is the background class and may only name it). A
"category" is a dict {'id': int, 'name': str} as the COCO tools expect; a
"category index" maps id to category.
"""
import re

from absl import logging
from google.protobuf import message as message_lib
from google.protobuf import text_format
import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.protos import string_int_label_map_pb2

_BACKGROUND = 'background'


class LabelMapError(errors.UserInputError):
  """A label map that cannot be used; the message names the file and item."""


def _item_label(item):
  return 'item with id %d%s' % (
      item.id, ' (%r)' % (item.name or item.display_name)
      if item.name or item.display_name else '')


def validate_label_map(label_map, path=None):
  """Checks ids and names of a StringIntLabelMap.

  Raises:
    LabelMapError: for a negative id, id 0 used for anything but background,
      an item without name and display_name, or an id given twice.
  """
  where = (path + ': ') if path else ''
  seen = {}
  for item in label_map.item:
    if not item.HasField('id'):
      raise LabelMapError('%sitem %r has no id; ids start at 1.' %
                          (where, item.name or item.display_name))
    if item.id < 0:
      raise LabelMapError('%s%s: label map ids must be >= 1.' %
                          (where, _item_label(item)))
    if item.id == 0 and _BACKGROUND not in (item.name, item.display_name):
      raise LabelMapError(
          '%s%s: id 0 is reserved for the background class; number your '
          'classes from 1.' % (where, _item_label(item)))
    if not item.name and not item.display_name:
      raise LabelMapError('%s%s has neither name nor display_name.' %
                          (where, _item_label(item)))
    if item.id in seen:
      raise LabelMapError('%sid %d is used twice (%r and %r); ids must be '
                          'unique.' % (where, item.id, seen[item.id],
                                       item.name or item.display_name))
    seen[item.id] = item.name or item.display_name


def load_labelmap(path):
  """Reads and validates a label map (text format, or binary as a fallback).

  Args:
    path: path of a StringIntLabelMap file (any tf.io.gfile scheme).

  Returns:
    A string_int_label_map_pb2.StringIntLabelMap.

  Raises:
    LabelMapError: when the file is missing, malformed or invalid.
  """
  try:
    if not tf.io.gfile.exists(path):
      raise LabelMapError('%s: label map file not found.' % path)
    if tf.io.gfile.isdir(path):
      raise LabelMapError('%s: is a directory, not a label map file.' % path)
    with tf.io.gfile.GFile(path, 'rb') as f:
      data = f.read()
  except tf.errors.OpError as error:
    # An unknown scheme (s3://), a host that does not resolve, no access.
    raise LabelMapError('%s: cannot read the label map: %s' % (
        path, errors.one_line(error.message))) from None
  label_map = string_int_label_map_pb2.StringIntLabelMap()
  problem = _parse_text(data, label_map)
  # The original also accepts binary StringIntLabelMap files.
  if problem and not _parse_binary(data, label_map):
    raise LabelMapError('%s%s' % (path, problem))
  validate_label_map(label_map, path)
  return label_map


def _parse_text(data, label_map):
  """Parses a text label map; returns None, or where and what went wrong."""
  try:
    text_format.Merge(data.decode('utf-8').lstrip('\ufeff'), label_map)
  except UnicodeDecodeError as error:
    line = data.count(b'\n', 0, error.start) + 1
    column = error.start - data.rfind(b'\n', 0, error.start)
    return (':%d:%d: not a valid label map: not UTF-8 text (byte 0x%02x) '
            'and not a binary StringIntLabelMap.' %
            (line, column, data[error.start]))
  except text_format.ParseError as error:
    where = (':%d:%d' % (error.GetLine(), error.GetColumn())
             if error.GetLine() else '')
    problem = re.sub(r'^\d+:\d+ : ', '', str(error))
    return '%s: not a valid label map: %s' % (where, problem)
  return None


def _parse_binary(data, label_map):
  """Parses a binary StringIntLabelMap; False unless it is clearly one.

  Random bytes (such as malformed text) often decode as unknown fields, so
  the parse only counts when every byte belongs to a known field.
  """
  try:
    label_map.ParseFromString(data)
  except message_lib.DecodeError:
    return False
  label_map.DiscardUnknownFields()
  return bool(label_map.item) and label_map.ByteSize() == len(data)


def _as_label_map(label_map_path_or_proto):
  if isinstance(label_map_path_or_proto, string_int_label_map_pb2
                .StringIntLabelMap):
    validate_label_map(label_map_path_or_proto)
    return label_map_path_or_proto
  return load_labelmap(label_map_path_or_proto)


def _name(item, use_display_name):
  if use_display_name and item.display_name:
    return item.display_name
  return item.name or item.display_name


def get_label_map_dict(label_map_path_or_proto, use_display_name=False,
                       fill_in_gaps_and_background=False):
  """Returns {class name: id} for a label map.

  Args:
    label_map_path_or_proto: a path, or a StringIntLabelMap.
    use_display_name: key by display_name where an item has one.
    fill_in_gaps_and_background: also map 'background' to 0 and name every
      missing id below the largest as its decimal string, so that the ids
      form 0..max.
  """
  label_map = _as_label_map(label_map_path_or_proto)
  label_map_dict = {_name(item, use_display_name): item.id
                    for item in label_map.item}
  if fill_in_gaps_and_background:
    present = set(label_map_dict.values())
    if 0 not in present:
      label_map_dict[_BACKGROUND] = 0
    for missing in range(1, max(present, default=0)):
      if missing not in present:
        label_map_dict[str(missing)] = missing
  return label_map_dict


def get_keypoint_label_map_dict(label_map_path_or_proto):
  """Returns {keypoint label: keypoint id} over all items of a label map.

  Raises:
    LabelMapError: when a keypoint label or id appears twice.
  """
  label_map = _as_label_map(label_map_path_or_proto)
  keypoints = {}
  for item in label_map.item:
    for keypoint in item.keypoints:
      if keypoint.label in keypoints:
        raise LabelMapError('keypoint label %r is used twice.' %
                            keypoint.label)
      if keypoint.id in keypoints.values():
        raise LabelMapError('keypoint id %d is used twice.' % keypoint.id)
      keypoints[keypoint.label] = keypoint.id
  return keypoints


def get_label_map_hierarchy_lut(label_map_path_or_proto,
                                include_identity=False):
  """Ancestor and descendant look-up tables of a label map's hierarchy.

  Args:
    label_map_path_or_proto: a path, or a StringIntLabelMap whose items may
      list ancestor_ids and descendant_ids.
    include_identity: also relate every class to itself (ones on the
      diagonal).

  Returns:
    (ancestors, descendants): float64 arrays [max_id, max_id] where
    ancestors[i, j] = 1 when class j + 1 is an ancestor of class i + 1
    (row and column k stand for id k + 1), and likewise for descendants.
  """
  label_map = _as_label_map(label_map_path_or_proto)
  max_id = get_max_label_map_index(label_map)

  def lut(related_ids):
    table = np.zeros([max_id, max_id])
    for item in label_map.item:
      for related in related_ids(item):
        table[item.id - 1, related - 1] = 1
    return table + np.eye(max_id) if include_identity else table

  return (lut(lambda item: item.ancestor_ids),
          lut(lambda item: item.descendant_ids))


def get_max_label_map_index(label_map):
  """Returns the largest id of a StringIntLabelMap (0 when empty)."""
  return max((item.id for item in label_map.item), default=0)


def convert_label_map_to_categories(label_map, max_num_classes,
                                    use_display_name=True):
  """Returns the categories of ids 1..max_num_classes, in label map order.

  Args:
    label_map: a StringIntLabelMap, or None to name every class
      'category_<id>' (what the original does without a label map).
    max_num_classes: ids above this are left out (with a log line).
    use_display_name: name categories by display_name where present.

  Returns:
    A list of {'id': int, 'name': str}; the first item wins for an id given
    twice.
  """
  if not label_map:
    return [{'id': i, 'name': 'category_%d' % i}
            for i in range(1, max_num_classes + 1)]
  categories, added = [], set()
  for item in label_map.item:
    if not 0 < item.id <= max_num_classes:
      logging.info('Ignoring label map item %d: outside 1..%d.', item.id,
                   max_num_classes)
      continue
    if item.id not in added:
      added.add(item.id)
      categories.append(_category(item, use_display_name))
  return categories


# LVIS frequency groups as the category's 'frequency' letter.
_FREQUENCY_LETTERS = {
    string_int_label_map_pb2.FREQUENT: 'f',
    string_int_label_map_pb2.COMMON: 'c',
    string_int_label_map_pb2.RARE: 'r',
}


def _category(item, use_display_name):
  """The category dict of a label map item, with its optional extras."""
  category = {'id': item.id, 'name': _name(item, use_display_name)}
  if item.HasField('frequency') and item.frequency in _FREQUENCY_LETTERS:
    category['frequency'] = _FREQUENCY_LETTERS[item.frequency]
  if item.HasField('instance_count'):
    category['instance_count'] = item.instance_count
  if item.keypoints:
    keypoints = {}
    for keypoint in item.keypoints:
      if keypoint.id in keypoints.values():
        raise LabelMapError('%s: keypoint id %d is used twice.' %
                            (_item_label(item), keypoint.id))
      keypoints[keypoint.label] = keypoint.id
    category['keypoints'] = keypoints
  return category


def create_categories_from_labelmap(label_map_path, use_display_name=True):
  """Reads a label map file into its list of categories (all its ids)."""
  label_map = load_labelmap(label_map_path)
  return convert_label_map_to_categories(
      label_map, get_max_label_map_index(label_map), use_display_name)


def create_category_index(categories):
  """Returns {id: category} for a list of categories."""
  return {category['id']: category for category in categories}


def create_category_index_from_labelmap(label_map_path,
                                        use_display_name=True):
  """Reads a label map file into a category index."""
  return create_category_index(
      create_categories_from_labelmap(label_map_path, use_display_name))


def create_class_agnostic_category_index():
  """The one-class index used by class-agnostic models."""
  return {1: {'id': 1, 'name': 'object'}}
