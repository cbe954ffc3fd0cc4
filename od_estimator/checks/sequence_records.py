"""record_scanner's checks of tf.SequenceExample records (Context R-CNN).

What the sequence decoder and the input functions would refuse in a
record, in the original's layout: context image/height and image/width;
per frame image/encoded (a decodable image), image/source_id and
region/is_annotated, region/bbox/* and region/label/string lists (absent,
or one per frame); per frame as many label strings as boxes, boxes not
inverted, label-map ids in 1..num_classes; context features that fill
whole rows of image/context_feature_length.
"""
import math

import tensorflow as tf

_BOX_KEYS = tuple('region/bbox/' + name
                  for name in ('ymin', 'xmin', 'ymax', 'xmax'))
_LABEL_KEY = 'region/label/string'
_PER_FRAME_KEYS = ('image/source_id', 'region/is_annotated')


def parse(serialized):
  """The record as a tf.train.SequenceExample with frames, or None.

  A tf.Example parses as a SequenceExample too (its features become the
  context), but has no image/encoded feature list.
  """
  sequence = tf.train.SequenceExample()
  try:
    sequence.ParseFromString(serialized)
  except Exception:  # pylint: disable=broad-except
    # protobuf's DecodeError: not a SequenceExample.
    return None
  if 'image/encoded' not in sequence.feature_lists.feature_list:
    return None
  return sequence


def _strings(features):
  return [value.decode('utf-8', 'replace')
          for feature in features for value in feature.bytes_list.value]


def name(sequence):
  """`media_id=..., source_ids=first..last` of a parsed sequence."""
  media = _strings([sequence.context.feature['clip/media_id']])
  ids = _strings(sequence.feature_lists.feature_list['image/source_id']
                 .feature)
  first_to_last = '..'.join([ids[0], ids[-1]] if len(ids) > 1 else ids)
  return 'media_id=%s, source_ids=%s' % (media[0] if media else '',
                                          first_to_last)


def frames_decode(sequence, decodes):
  """Whether every frame's image/encoded passes `decodes(bytes)`."""
  return all(
      decodes(feature.bytes_list.value[0] if feature.bytes_list.value
              else b'')
      for feature in sequence.feature_lists.feature_list['image/encoded']
      .feature)


def _frame_problem(boxes, texts, num_classes, label_ids):
  """The problem of one frame's regions, or None."""
  lengths = [len(values) for values in boxes]
  if len(set(lengths)) > 1:
    return ('region/bbox/{ymin,xmin,ymax,xmax} have different lengths %s' %
            ', '.join(map(str, lengths)))
  if len(texts) != lengths[0]:
    return '%s has %d entries for %d boxes' % (_LABEL_KEY, len(texts),
                                               lengths[0])
  for box in zip(*boxes):
    if (not all(math.isfinite(value) for value in box) or
        box[0] > box[2] or box[1] > box[3]):
      return ('inverted (ymin > ymax or xmin > xmax) or non-finite box '
              '(ymin, xmin, ymax, xmax) = (%s)' % ', '.join(
                  '%g' % value for value in box))
  wrong = sorted({label_ids[text] for text in texts if text in label_ids
                  and not 1 <= label_ids[text] <= num_classes})
  if wrong:
    return ('%s maps to class ids %s outside 1..num_classes=%d' % (
        _LABEL_KEY, ', '.join(map(str, wrong)), num_classes))
  return None


def _context_problem(sequence):
  context = sequence.context.feature
  for key in ('image/height', 'image/width'):
    if not context[key].int64_list.value:
      return 'context %s is missing' % key
  values = len(context['image/context_features'].float_list.value)
  length = list(context['image/context_feature_length'].int64_list.value)
  if values and (not length or length[0] < 1 or values % length[0]):
    return ('image/context_features holds %d values, not whole rows of '
            'image/context_feature_length %s' % (
                values, length[0] if length else '(missing)'))
  return None


def problem(serialized, num_classes, label_ids, decodes):
  """What the input pipeline would refuse in one sequence record, or None.

  Args:
    serialized: the record's bytes.
    num_classes: the model's classes (ids 1..num_classes).
    label_ids: {class text: id} of the reader's label map; texts it does
      not hold are dropped by the decoder, as in the original.
    decodes: fn(image bytes) -> whether the image decodes.
  """
  sequence = parse(serialized)
  if sequence is None:
    return 'not a tf.train.SequenceExample with an image/encoded feature list'
  lists = sequence.feature_lists.feature_list
  num_frames = len(lists['image/encoded'].feature)
  for key in _PER_FRAME_KEYS + _BOX_KEYS + (_LABEL_KEY,):
    count = len(lists[key].feature) if key in lists else None
    if count != num_frames and (count is not None or key in _PER_FRAME_KEYS):
      return '%s has %s entries for %d frames' % (key, count or 0,
                                                  num_frames)
  context = _context_problem(sequence)
  if context:
    return context
  if not frames_decode(sequence, decodes):
    return 'an image/encoded frame is not a decodable JPEG/PNG/GIF/BMP image'
  for frame in range(num_frames):
    boxes = [list(lists[key].feature[frame].float_list.value)
             if key in lists else [] for key in _BOX_KEYS]
    texts = (_strings([lists[_LABEL_KEY].feature[frame]])
             if _LABEL_KEY in lists else [])
    found = _frame_problem(boxes, texts, num_classes, label_ids or {})
    if found:
      return 'frame %d: %s' % (frame, found)
  return None
