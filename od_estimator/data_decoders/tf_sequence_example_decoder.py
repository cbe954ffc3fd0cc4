"""Decodes serialized tf.SequenceExamples (Context R-CNN's format).

Context keys: image/format, image/height, image/width and, with
load_context_features, image/context_features and
image/context_feature_length. Feature lists, one entry per frame:
image/encoded, image/source_id, region/bbox/{ymin,xmin,ymax,xmax}
(normalized), region/label/string (mapped to ids through the label map),
region/label/confidence and, unless fully_annotated, region/is_annotated.

As in the original, images stay encoded ([num_frames] strings); boxes and
classes are padded to the frame with the most boxes (boxes with 0.0,
classes with -1, as are texts not in the label map).
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.utils import label_map_util

_F = fields.InputDataFields
_COORDINATES = ('ymin', 'xmin', 'ymax', 'xmax')


def _dense(sparse, default):
  return tf.sparse.to_dense(sparse, default_value=default)


class TfSequenceExampleDecoder:
  """Turns a serialized tf.SequenceExample into a dict of per-frame tensors."""

  def __init__(self, label_map_proto_file, load_context_features=False,
               use_display_name=False, fully_annotated=False):
    """Configures what to decode.

    Args:
      label_map_proto_file: a label map path (or StringIntLabelMap) mapping
        region/label/string to ids by item name, as the original does.
      load_context_features: decode image/context_features reshaped to
        [num_context, image/context_feature_length].
      use_display_name: accepted for compatibility and ignored: the
        original matches names only.
      fully_annotated: treat every frame as annotated; otherwise
        region/is_annotated says which are.

    Raises:
      ValueError: without a label map (region/label/string needs one).
    """
    del use_display_name
    if not label_map_proto_file:
      raise ValueError('TfSequenceExampleDecoder needs a label map: '
                       'region/label/string is mapped through it (set '
                       'label_map_path in the input reader)')
    name_to_id = label_map_util.get_label_map_dict(label_map_proto_file)
    self._names = list(name_to_id)
    self._ids = list(name_to_id.values())
    self._load_context_features = load_context_features
    self._fully_annotated = fully_annotated

  def _context_features(self):
    features = {
        'image/format': tf.io.FixedLenFeature((), tf.string, 'jpeg'),
        'image/height': tf.io.FixedLenFeature((), tf.int64),
        'image/width': tf.io.FixedLenFeature((), tf.int64),
    }
    if self._load_context_features:
      features['image/context_features'] = tf.io.VarLenFeature(tf.float32)
      features['image/context_feature_length'] = tf.io.FixedLenFeature(
          (), tf.int64)
    return features

  def _sequence_features(self):
    frame_string = tf.io.FixedLenSequenceFeature([], tf.string)
    features = {
        'image/encoded': frame_string,
        'image/source_id': frame_string,
        'region/label/string': tf.io.VarLenFeature(tf.string),
        'region/label/confidence': tf.io.VarLenFeature(tf.float32),
    }
    for name in _COORDINATES:
      features['region/bbox/' + name] = tf.io.VarLenFeature(tf.float32)
    if not self._fully_annotated:
      features['region/is_annotated'] = tf.io.FixedLenSequenceFeature(
          [], tf.int64)
    return features

  def _class_ids(self, texts):
    """[num_frames, num_boxes] int32 ids of texts; -1 where unknown."""
    matches = tf.equal(texts[..., tf.newaxis], tf.constant(self._names))
    return tf.reduce_max(
        tf.where(matches, tf.constant(self._ids, tf.int32), -1), axis=-1)

  def decode(self, tf_seq_example_string_tensor):
    """Decodes one serialized tf.SequenceExample.

    Args:
      tf_seq_example_string_tensor: a scalar (or [1]) string tensor.

    Returns:
      A dict keyed by InputDataFields: image [num_frames] encoded strings,
      source_id [num_frames] string, num_groundtruth_boxes [num_frames]
      int32, groundtruth_boxes [num_frames, num_boxes, 4] float32,
      groundtruth_classes [num_frames, num_boxes] int32,
      groundtruth_weights [num_frames, num_boxes] float32 (the
      confidences, else 1.0 for real boxes and 0.0 for padding),
      is_annotated [num_frames] bool, original_image_spatial_shape [2]
      int32 and, with load_context_features, context_features
      [num_context, length] float32 and context_feature_length int64.
    """
    serialized = tf.reshape(tf_seq_example_string_tensor, [])
    context, sequence = tf.io.parse_single_sequence_example(
        serialized, context_features=self._context_features(),
        sequence_features=self._sequence_features())
    num_boxes = tf.cast(tf.sparse.reduce_sum(
        tf.sparse.map_values(tf.ones_like,
                             sequence['region/bbox/xmin']), axis=1),
                        tf.int32)
    # Static ranks, which reduce_sum and tf.cond below do not infer.
    num_boxes.set_shape([None])
    num_frames = tf.shape(sequence['image/encoded'])[0]
    # Pads every frame to the densest frame, even with no box at all.
    max_boxes = tf.reduce_max(tf.concat([num_boxes, [0]], 0))
    dense_shape = tf.cast(tf.stack([num_frames, max_boxes]), tf.int64)

    def dense(key, default):
      sparse = sequence[key]
      return _dense(tf.sparse.SparseTensor(sparse.indices, sparse.values,
                                           dense_shape), default)

    boxes = tf.stack([dense('region/bbox/' + name, 0.0)
                      for name in _COORDINATES], axis=-1)
    weights = dense('region/label/confidence', 0.0)
    default_weights = tf.cast(
        tf.range(max_boxes)[tf.newaxis] < num_boxes[:, tf.newaxis],
        tf.float32)
    weights = tf.cond(tf.size(sequence['region/label/confidence'].values) >
                      0, lambda: weights, lambda: default_weights)
    weights.set_shape([None, None])
    if self._fully_annotated:
      is_annotated = tf.ones([num_frames], tf.bool)
    else:
      is_annotated = tf.cast(sequence['region/is_annotated'], tf.bool)
    tensors = {
        _F.image: sequence['image/encoded'],
        _F.source_id: sequence['image/source_id'],
        _F.num_groundtruth_boxes: num_boxes,
        _F.groundtruth_boxes: boxes,
        _F.groundtruth_classes: self._class_ids(
            dense('region/label/string', '')),
        _F.groundtruth_weights: weights,
        _F.is_annotated: is_annotated,
        _F.original_image_spatial_shape: tf.cast(
            tf.stack([context['image/height'], context['image/width']]),
            tf.int32),
    }
    if self._load_context_features:
      length = context['image/context_feature_length']
      tensors[_F.context_features] = tf.reshape(
          _dense(context['image/context_features'], 0.0),
          tf.cast(tf.stack([-1, length]), tf.int32))
      tensors[_F.context_feature_length] = length
    return tensors
