"""Decodes serialized tf.Examples in the original's format into tensor dicts.

Keys read (all optional but `image/encoded`): image/encoded, image/format,
image/height, image/width, image/filename, image/source_id,
image/key/sha256, image/object/bbox/{ymin,xmin,ymax,xmax} (normalized),
image/object/class/label (1-based), image/object/class/text,
image/object/area, image/object/is_crowd, image/object/difficult,
image/object/group_of, image/object/weight, image/object/mask (PNG strings
or dense floats), image/object/keypoint/{x,y,visibility},
image/class/label, image/class/text, image/class/confidence,
image/neg_category_ids, image/not_exhaustive_category_ids,
image/additional_channels/encoded, image/object/class/multiclass_scores,
image/context_features, image/context_feature_length.

Bad records. A training job should not silently learn from garbage, but
neither should it die on harmless rounding. So:
  * image/encoded that is missing or not a JPEG, PNG, GIF or BMP fails with
    an InvalidArgumentError naming the record's source_id and filename.
  * Box coordinate lists of different lengths, non-finite coordinates or
    inverted boxes (ymin > ymax or xmin > xmax) fail the same way: there is
    no safe repair. Zero-size boxes (ymin == ymax) are accepted.
  * Instance masks (when loaded) stored in another encoding than the
    configured mask_type, or numerical ones not height * width values per
    box, fail the same way, saying what to fix. PNG masks decode as the
    original's, at their own size; transform_input_data refuses the ones
    of another size than the image or not one per box, naming the record.
  * Coordinates outside [0, 1] are clipped into it, and a warning naming the
    record and showing its boxes is printed to stderr (from the graph, so
    it shows even where TF_CPP_MIN_LOG_LEVEL hides TensorFlow's warnings).
"""
import sys

import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.utils import label_map_util

# Instance mask encodings, named as in input_reader.proto's InstanceMaskType;
# its enum numbers work too (0 DEFAULT and 1 mean numerical, 2 PNG).
NUMERICAL_MASKS = 'NUMERICAL_MASKS'
PNG_MASKS = 'PNG_MASKS'
_MASK_TYPES = {0: NUMERICAL_MASKS, 1: NUMERICAL_MASKS, 2: PNG_MASKS,
               'DEFAULT': NUMERICAL_MASKS, NUMERICAL_MASKS: NUMERICAL_MASKS,
               PNG_MASKS: PNG_MASKS}

# COCO keypoint visibility: 0 unlabeled, 1 labeled but hidden, 2 visible.
# Both labeled states count as visible, as in the original.
_UNLABELED = 0
_NOT_VISIBLE = 1
_VISIBLE = 2

# Leading bytes tf.io.decode_image recognises.
_IMAGE_MAGIC = (b'\xff\xd8\xff', b'\x89PNG', b'GIF8', b'BM')

_F = fields.InputDataFields


def _var_len(dtype):
  return tf.io.VarLenFeature(dtype)


def _dense(sparse, default):
  return tf.sparse.to_dense(sparse, default_value=default)


def _weights_or_ones(sparse_weights, boxes):
  """The boxes' weights; ones when the example has none."""
  weights = _dense(sparse_weights, 0.0)
  return tf.cond(tf.size(weights) > 0, lambda: weights,
                 lambda: tf.ones([tf.shape(boxes)[0]], tf.float32))


def label_map_lookup(label_map_proto_file):
  """Returns (texts, ids) matching both item names and display names.

  The original looks a text up by name and by display_name and keeps the
  larger id; merging both dicts with max gives the same answer.
  """
  merged = {}
  for use_display_name in (False, True):
    for text, label in label_map_util.get_label_map_dict(
        label_map_proto_file, use_display_name=use_display_name).items():
      merged[text] = max(label, merged.get(text, label))
  return list(merged), list(merged.values())


class TfExampleDecoder:
  """Turns a serialized tf.Example into a dict keyed by InputDataFields."""

  def __init__(self, load_instance_masks=False,
               instance_mask_type=NUMERICAL_MASKS, label_map_proto_file=None,
               use_display_name=False, dct_method='', num_keypoints=0,
               num_additional_channels=0, load_multiclass_scores=False,
               load_context_features=False):
    """Configures what to decode.

    Args:
      load_instance_masks: decode image/object/mask into
        groundtruth_instance_masks [N, H, W] float32 (0 or 1).
      instance_mask_type: NUMERICAL_MASKS (dense floats, H*W per object) or
        PNG_MASKS (one PNG string per object); enum numbers work too.
      label_map_proto_file: a label map path (or StringIntLabelMap). When
        given, image/object/class/text (and image/class/text) are mapped to
        ids, matching an item's name or display_name; the numeric labels
        are used only for examples without texts. Texts not in the label
        map become -1, as in the original.
      use_display_name: accepted for compatibility and ignored: texts match
        both names and display names, as in the original.
      dct_method: JPEG decoding method ('', 'INTEGER_FAST',
        'INTEGER_ACCURATE').
      num_keypoints: keypoints per object; > 0 decodes
        groundtruth_keypoints [N, num_keypoints, 2] (y, x normalized, NaN
        where unlabeled) and groundtruth_keypoint_visibilities.
      num_additional_channels: images in image/additional_channels/encoded,
        decoded as one channel each into [H, W, C] uint8.
      load_multiclass_scores: decode image/object/class/multiclass_scores.
      load_context_features: decode image/context_features reshaped to
        [num_context, image/context_feature_length].

    Raises:
      ValueError: for an unknown instance_mask_type.
    """
    del use_display_name
    if instance_mask_type not in _MASK_TYPES:
      raise ValueError('instance_mask_type must be NUMERICAL_MASKS or '
                       'PNG_MASKS, got %r' % (instance_mask_type,))
    self._load_instance_masks = load_instance_masks
    self._mask_type = _MASK_TYPES[instance_mask_type]
    self._dct_method = dct_method
    self._num_keypoints = num_keypoints
    self._num_additional_channels = num_additional_channels
    self._load_multiclass_scores = load_multiclass_scores
    self._load_context_features = load_context_features
    self._label_map = None
    if label_map_proto_file:
      self._label_map = label_map_lookup(label_map_proto_file)
    self.keys_to_features = self._features()

  def _features(self):
    string = lambda default='': tf.io.FixedLenFeature((), tf.string, default)
    features = {
        'image/encoded': string(),
        'image/format': string('jpeg'),
        'image/filename': string(),
        'image/key/sha256': string(),
        'image/source_id': string(),
        'image/height': tf.io.FixedLenFeature((), tf.int64, 1),
        'image/width': tf.io.FixedLenFeature((), tf.int64, 1),
        'image/class/text': _var_len(tf.string),
        'image/class/label': _var_len(tf.int64),
        'image/class/confidence': _var_len(tf.float32),
        'image/neg_category_ids': _var_len(tf.int64),
        'image/not_exhaustive_category_ids': _var_len(tf.int64),
        'image/object/class/label': _var_len(tf.int64),
        'image/object/class/text': _var_len(tf.string),
        'image/object/area': _var_len(tf.float32),
        'image/object/is_crowd': _var_len(tf.int64),
        'image/object/difficult': _var_len(tf.int64),
        'image/object/group_of': _var_len(tf.int64),
        'image/object/weight': _var_len(tf.float32),
    }
    for coordinate in ('ymin', 'xmin', 'ymax', 'xmax'):
      features['image/object/bbox/' + coordinate] = _var_len(tf.float32)
    if self._num_keypoints:
      features['image/object/keypoint/y'] = _var_len(tf.float32)
      features['image/object/keypoint/x'] = _var_len(tf.float32)
      features['image/object/keypoint/visibility'] = _var_len(tf.int64)
    if self._num_additional_channels:
      features['image/additional_channels/encoded'] = tf.io.FixedLenFeature(
          (self._num_additional_channels,), tf.string)
    if self._load_multiclass_scores:
      features['image/object/class/multiclass_scores'] = _var_len(tf.float32)
    if self._load_context_features:
      features['image/context_features'] = _var_len(tf.float32)
      features['image/context_feature_length'] = tf.io.FixedLenFeature(
          (), tf.int64)
    return features

  def _decode_image(self, encoded, record):
    """Decodes image/encoded to [H, W, 3] uint8, naming `record` on error."""
    is_image = tf.reduce_any([
        tf.equal(tf.strings.substr(encoded, 0, len(magic)), magic)
        for magic in _IMAGE_MAGIC])
    check = tf.debugging.Assert(is_image, [
        'image/encoded is missing or not a JPEG/PNG/GIF/BMP image in record',
        record])
    with tf.control_dependencies([check]):
      encoded = tf.identity(encoded)
    decode_any = lambda: tf.io.decode_image(encoded, channels=3,
                                            expand_animations=False)
    if self._dct_method:
      image = tf.cond(
          tf.io.is_jpeg(encoded),
          lambda: tf.io.decode_jpeg(encoded, channels=3,
                                    dct_method=self._dct_method),
          decode_any)
    else:
      image = decode_any()
    return tf.ensure_shape(image, [None, None, 3])

  def _boxes(self, parsed, record):
    """[N, 4] boxes, validated and clipped to [0, 1] (see module doc)."""
    coordinates = [_dense(parsed['image/object/bbox/' + name], 0.0)
                   for name in ('ymin', 'xmin', 'ymax', 'xmax')]
    sizes = [tf.size(c) for c in coordinates]
    same_length = tf.reduce_all([tf.equal(size, sizes[0]) for size in sizes])
    check_lengths = tf.debugging.Assert(same_length, [
        'image/object/bbox/{ymin,xmin,ymax,xmax} have different lengths in '
        'record', record, 'lengths:'] + sizes)
    with tf.control_dependencies([check_lengths]):
      boxes = tf.stack(coordinates, axis=1)
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
    valid = tf.logical_and(
        tf.reduce_all(tf.math.is_finite(boxes)),
        tf.reduce_all(tf.logical_and(ymin <= ymax, xmin <= xmax)))
    check_valid = tf.debugging.Assert(valid, [
        'Inverted (ymin > ymax or xmin > xmax) or non-finite boxes in record',
        record, 'boxes (ymin, xmin, ymax, xmax):', boxes], summarize=100)
    outside = tf.reduce_any(tf.logical_or(boxes < 0.0, boxes > 1.0))

    def warn():
      printed = tf.print(
          'WARNING: clipping boxes to [0, 1] in record', record,
          'boxes (ymin, xmin, ymax, xmax):', boxes, summarize=100,
          output_stream=sys.stderr)
      with tf.control_dependencies([printed]):
        return tf.constant(True)

    warned = tf.cond(outside, warn, lambda: tf.constant(False))
    with tf.control_dependencies([check_valid, warned]):
      return tf.clip_by_value(boxes, 0.0, 1.0)

  def _class_ids(self, texts, labels):
    """int32 class ids: texts through the label map, else numeric labels."""
    labels = tf.cast(labels, tf.int32)
    if self._label_map is None:
      return labels
    names, ids = self._label_map
    # A dense comparison instead of a hash table: there is no table to
    # initialize, so one-shot iterators and any tf.data pipeline work.
    matches = tf.equal(texts[:, tf.newaxis], tf.constant(names)[tf.newaxis])
    mapped = tf.reduce_max(
        tf.where(matches, tf.constant(ids, tf.int32)[tf.newaxis], -1), axis=1)
    return tf.cond(tf.size(texts) > 0, lambda: mapped, lambda: labels)

  def _parse_masks(self, serialized, record):
    """image/object/mask as a SparseTensor, once its encoding is checked.

    The records' encoding must be the configured mask_type's; otherwise
    parsing would fail with a bare "Data types don't match". (The original's
    pets tool writes PNG masks by default while its mask_rcnn pets config
    reads numerical ones.) The check reads the Example's wire format.
    """
    def decode(messages, message_type, fields):
      # One empty message more: decode_proto refuses an empty batch.
      return tf.io.decode_proto(
          tf.concat([tf.reshape(messages, [-1]), ['']], 0), message_type,
          fields, [tf.string] * len(fields))

    _, (features,) = decode(serialized, 'tensorflow.Example', ['features'])
    _, (entries,) = decode(features, 'tensorflow.Features', ['feature'])
    _, (keys, values) = decode(entries, 'tensorflow.Features.FeatureEntry',
                               ['key', 'value'])
    mask_feature = tf.boolean_mask(
        tf.reshape(values, [-1]),
        tf.equal(tf.reshape(keys, [-1]), 'image/object/mask'))
    kinds, _ = decode(mask_feature, 'tensorflow.Feature',
                      ['bytes_list', 'float_list'])
    png = self._mask_type == PNG_MASKS
    other_kind = tf.reduce_sum(kinds[:, 1 if png else 0]) > 0
    check = tf.debugging.Assert(tf.logical_not(other_kind), [
        'image/object/mask holds %s but the input reader has mask_type: %s '
        '(set mask_type: %s in the input reader) in record' % (
            ('numerical masks', PNG_MASKS, NUMERICAL_MASKS) if png else
            ('PNG-encoded masks', NUMERICAL_MASKS, PNG_MASKS)), record])
    with tf.control_dependencies([check]):
      return tf.io.parse_single_example(tf.identity(serialized), {
          'image/object/mask': _var_len(tf.string if png else tf.float32),
      })['image/object/mask']

  def _instance_masks(self, masks, height, width, num_boxes, record):
    """[N, H, W] 0/1 float32 masks (any pixel above 0 is the mask).

    PNG masks decode as the original's: each at its own size, as many as
    the record holds (transform_input_data then refuses masks that do not
    fit the image and boxes, naming the record). Numerical masks are
    height * width values per box; other counts fail naming the record,
    instead of a bare reshape error.
    """
    if self._mask_type == PNG_MASKS:
      pngs = _dense(masks, '')

      def decode_png(png):
        mask = tf.io.decode_image(png, channels=1,
                                  expand_animations=False)[:, :, 0]
        return tf.cast(tf.greater(mask, 0), tf.float32)

      return tf.cond(
          tf.size(pngs) > 0,
          lambda: tf.map_fn(decode_png, pngs, fn_output_signature=tf.float32),
          lambda: tf.zeros([0, height, width], tf.float32))
    values = tf.cast(tf.greater(_dense(masks, 0.0), 0.0), tf.float32)
    check = tf.debugging.Assert(
        tf.equal(tf.size(values), num_boxes * height * width), [
            'image/object/mask holds a different number of masks than there '
            'are boxes (or is not height * width values per box) in record',
            record, 'masks:', tf.strings.as_string(
                tf.size(values) / (height * width), precision=2),
            'boxes:', num_boxes])
    with tf.control_dependencies([check]):
      return tf.reshape(values, [-1, height, width])

  def _keypoints(self, parsed):
    """[N, K, 2] keypoints (NaN where unlabeled) and [N, K] visibilities."""
    y = _dense(parsed['image/object/keypoint/y'], 0.0)
    x = _dense(parsed['image/object/keypoint/x'], 0.0)
    given = _dense(parsed['image/object/keypoint/visibility'], 0)
    # Without (a full) visibility list, NaN coordinates mark unlabeled points.
    default = tf.where(tf.math.is_nan(x), tf.constant(_UNLABELED, tf.int64),
                       tf.constant(_VISIBLE, tf.int64))
    visibility = tf.cond(tf.equal(tf.size(given), tf.size(x)),
                         lambda: given, lambda: default)
    visible = tf.logical_or(tf.equal(visibility, _NOT_VISIBLE),
                            tf.equal(visibility, _VISIBLE))
    visible = tf.reshape(visible, [-1, self._num_keypoints])
    keypoints = tf.reshape(tf.stack([y, x], axis=1),
                           [-1, self._num_keypoints, 2])
    keypoints = tf.where(visible[:, :, tf.newaxis], keypoints, float('nan'))
    return keypoints, visible

  def _additional_channels(self, encoded):
    channels = tf.map_fn(
        lambda image: tf.io.decode_image(image, channels=1,
                                         expand_animations=False)[:, :, 0],
        encoded, fn_output_signature=tf.uint8)
    return tf.transpose(channels, [1, 2, 0])

  def decode(self, tf_example_string_tensor):
    """Decodes one serialized tf.Example.

    Args:
      tf_example_string_tensor: scalar string tensor.

    Returns:
      A dict from InputDataFields names to tensors: image [H, W, 3] uint8,
      source_id, key, filename (strings), original_image_spatial_shape [2]
      int32, groundtruth_boxes [N, 4] float32 normalized ymin, xmin, ymax,
      xmax, groundtruth_classes [N] int32 1-based (the original returns
      int64), groundtruth_area [N] float32, groundtruth_is_crowd [N] bool,
      groundtruth_difficult [N] int64, groundtruth_group_of [N] bool,
      groundtruth_weights [N] float32 (ones when absent),
      groundtruth_image_classes [M] int32, groundtruth_image_confidences [M]
      float32, groundtruth_verified_neg_classes and
      groundtruth_not_exhaustive_classes int32; and, when configured,
      groundtruth_instance_masks [N, H, W] float32, groundtruth_keypoints
      [N, K, 2] float32, groundtruth_keypoint_visibilities [N, K] bool,
      image_additional_channels [H, W, C] uint8, multiclass_scores [N * C]
      float32, context_features [num, length] float32 and
      context_feature_length int64. Absent per-object keys give empty
      tensors; absent strings give ''.

    Raises:
      tf.errors.InvalidArgumentError (when run): for a record whose image or
        boxes are unusable, naming its source_id and filename (see the
        module docstring).
    """
    serialized = tf.reshape(tf_example_string_tensor, [])
    parsed = tf.io.parse_single_example(serialized, self.keys_to_features)
    source_id = parsed['image/source_id']
    filename = parsed['image/filename']
    record = tf.strings.join(['source_id=', source_id,
                              ', filename=', filename])
    image = self._decode_image(parsed['image/encoded'], record)
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    boxes = self._boxes(parsed, record)
    weights = _weights_or_ones(parsed['image/object/weight'], boxes)
    tensors = {
        _F.image: image,
        _F.source_id: source_id,
        _F.key: parsed['image/key/sha256'],
        _F.filename: filename,
        _F.original_image_spatial_shape: shape[:2],
        _F.groundtruth_boxes: boxes,
    }
    tensors.update(self._label_tensors(parsed, weights))
    tensors.update(self._optional_tensors(parsed, serialized, record, height,
                                          width, boxes))
    return tensors

  def _label_tensors(self, parsed, weights):
    """The per-object and image-level labels (empty when absent)."""
    return {
        _F.groundtruth_classes: self._class_ids(
            _dense(parsed['image/object/class/text'], ''),
            _dense(parsed['image/object/class/label'], 0)),
        _F.groundtruth_area: _dense(parsed['image/object/area'], 0.0),
        _F.groundtruth_is_crowd: tf.cast(
            _dense(parsed['image/object/is_crowd'], 0), tf.bool),
        _F.groundtruth_difficult: _dense(parsed['image/object/difficult'], 0),
        _F.groundtruth_group_of: tf.cast(
            _dense(parsed['image/object/group_of'], 0), tf.bool),
        _F.groundtruth_weights: weights,
        _F.groundtruth_image_classes: self._class_ids(
            _dense(parsed['image/class/text'], ''),
            _dense(parsed['image/class/label'], 0)),
        _F.groundtruth_image_confidences: _dense(
            parsed['image/class/confidence'], 0.0),
        _F.groundtruth_verified_neg_classes: tf.cast(
            _dense(parsed['image/neg_category_ids'], 0), tf.int32),
        _F.groundtruth_not_exhaustive_classes: tf.cast(
            _dense(parsed['image/not_exhaustive_category_ids'], 0),
            tf.int32),
    }

  def _optional_tensors(self, parsed, serialized, record, height, width,
                        boxes):
    """The masks, keypoints, channels, scores and context asked for."""
    tensors = {}
    if self._load_instance_masks:
      tensors[_F.groundtruth_instance_masks] = self._instance_masks(
          self._parse_masks(serialized, record), height, width,
          tf.shape(boxes)[0], record)
    if self._num_keypoints:
      (tensors[_F.groundtruth_keypoints],
       tensors[_F.groundtruth_keypoint_visibilities]) = self._keypoints(parsed)
    if self._num_additional_channels:
      tensors[_F.image_additional_channels] = self._additional_channels(
          parsed['image/additional_channels/encoded'])
    if self._load_multiclass_scores:
      tensors[_F.multiclass_scores] = _dense(
          parsed['image/object/class/multiclass_scores'], 0.0)
    if self._load_context_features:
      length = parsed['image/context_feature_length']
      tensors[_F.context_features] = tf.reshape(
          _dense(parsed['image/context_features'], 0.0),
          tf.stack([-1, tf.cast(length, tf.int32)]))
      tensors[_F.context_feature_length] = length
    return tensors
