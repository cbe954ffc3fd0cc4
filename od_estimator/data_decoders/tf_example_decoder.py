"""Decodes serialized tf.Examples in the original's format into tensor dicts.

Keys read (all optional but `image/encoded`): image/encoded, image/format,
image/height, image/width, image/filename, image/source_id,
image/key/sha256, image/object/bbox/{ymin,xmin,ymax,xmax} (normalized),
image/object/class/label (1-based), image/object/class/text,
image/object/area, image/object/is_crowd, image/object/difficult,
image/object/group_of, image/object/weight, image/object/mask (PNG strings
or dense floats), image/object/keypoint/{x,y,visibility},
image/class/label, image/class/text, image/class/confidence,
image/additional_channels/encoded, image/object/class/multiclass_scores,
image/context_features, image/context_feature_length.
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.utils import label_map_util

# Instance mask encodings, named as in input_reader.proto's InstanceMaskType
# (whose enum numbers are accepted too: 1 numerical, 2 PNG).
NUMERICAL_MASKS = 'NUMERICAL_MASKS'
PNG_MASKS = 'PNG_MASKS'
_MASK_TYPES = {1: NUMERICAL_MASKS, 2: PNG_MASKS,
               NUMERICAL_MASKS: NUMERICAL_MASKS, PNG_MASKS: PNG_MASKS}

_F = fields.InputDataFields


def _var_len(dtype):
  return tf.io.VarLenFeature(dtype)


def _dense(sparse, default):
  return tf.sparse.to_dense(sparse, default_value=default)


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
        PNG_MASKS (one PNG string per object); enum numbers 1/2 also work.
      label_map_proto_file: a label map; when given, object class texts are
        mapped to ids with it, and image/object/class/label is used only for
        examples without texts (the original's order). Unknown texts map to
        -1.
      use_display_name: map texts by display_name instead of name.
      dct_method: JPEG decoding method ('', 'INTEGER_FAST',
        'INTEGER_ACCURATE').
      num_keypoints: keypoints per object; > 0 decodes
        groundtruth_keypoints [N, num_keypoints, 2] (y, x normalized, NaN
        where not visible) and groundtruth_keypoint_visibilities.
      num_additional_channels: PNG channels in
        image/additional_channels/encoded, decoded to [H, W, C] uint8.
      load_multiclass_scores: decode image/object/class/multiclass_scores.
      load_context_features: decode image/context_features reshaped to
        [num_context, image/context_feature_length].

    Raises:
      ValueError: for an unknown instance_mask_type.
    """
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
      label_map = label_map_util.get_label_map_dict(
          label_map_proto_file, use_display_name=use_display_name)
      self._label_map = (list(label_map), list(label_map.values()))
    self._keys_to_features = self._features()

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
        'image/object/bbox/ymin': _var_len(tf.float32),
        'image/object/bbox/xmin': _var_len(tf.float32),
        'image/object/bbox/ymax': _var_len(tf.float32),
        'image/object/bbox/xmax': _var_len(tf.float32),
        'image/object/class/label': _var_len(tf.int64),
        'image/object/class/text': _var_len(tf.string),
        'image/object/area': _var_len(tf.float32),
        'image/object/is_crowd': _var_len(tf.int64),
        'image/object/difficult': _var_len(tf.int64),
        'image/object/group_of': _var_len(tf.int64),
        'image/object/weight': _var_len(tf.float32),
    }
    if self._load_instance_masks:
      features['image/object/mask'] = _var_len(
          tf.string if self._mask_type == PNG_MASKS else tf.float32)
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

  def _decode_image(self, encoded):
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
    image = tf.ensure_shape(tf.cast(image, tf.uint8), [None, None, 3])
    return image

  def _class_ids(self, texts, labels):
    """Object class ids: texts through the label map, else numeric labels."""
    if self._label_map is None:
      return tf.cast(labels, tf.int32)
    names, ids = self._label_map
    # A dense comparison instead of a hash table: no state to initialize, so
    # it works in any tf.data iterator and on TPU hosts.
    matches = tf.equal(texts[:, tf.newaxis], tf.constant(names)[tf.newaxis])
    found = tf.reduce_any(matches, axis=1)
    mapped = tf.where(found, tf.gather(tf.constant(ids, tf.int32),
                                       tf.argmax(tf.cast(matches, tf.int32),
                                                 axis=1)),
                      -tf.ones_like(found, tf.int32))
    return tf.cond(tf.size(texts) > 0, lambda: mapped,
                   lambda: tf.cast(labels, tf.int32))

  def _instance_masks(self, parsed, height, width):
    masks = parsed['image/object/mask']
    if self._mask_type == PNG_MASKS:
      pngs = _dense(masks, '')

      def decode_png(png):
        mask = tf.io.decode_png(png, channels=1)[:, :, 0]
        return tf.cast(tf.greater(mask, 0), tf.float32)

      return tf.cond(
          tf.size(pngs) > 0,
          lambda: tf.map_fn(decode_png, pngs, fn_output_signature=tf.float32),
          lambda: tf.zeros([0, height, width], tf.float32))
    values = tf.cast(tf.greater(_dense(masks, 0.0), 0.0), tf.float32)
    return tf.reshape(values, [-1, height, width])

  def _keypoints(self, parsed):
    y = _dense(parsed['image/object/keypoint/y'], 0.0)
    x = _dense(parsed['image/object/keypoint/x'], 0.0)
    given = _dense(parsed['image/object/keypoint/visibility'], 0)
    # Without a visibility feature, a keypoint is visible unless NaN.
    visible = tf.cond(tf.size(given) > 0,
                      lambda: tf.not_equal(given, 0),
                      lambda: tf.logical_not(tf.math.is_nan(y)))
    nan = tf.fill(tf.shape(y), float('nan'))
    keypoints = tf.stack([tf.where(visible, y, nan),
                          tf.where(visible, x, nan)], axis=1)
    keypoints = tf.reshape(keypoints, [-1, self._num_keypoints, 2])
    visibilities = tf.reshape(visible, [-1, self._num_keypoints])
    return keypoints, visibilities

  def decode(self, tf_example_string_tensor):
    """Decodes one serialized tf.Example.

    Args:
      tf_example_string_tensor: scalar string tensor.

    Returns:
      A dict from InputDataFields names to tensors: image [H, W, 3] uint8,
      source_id, key, filename (strings), original_image_spatial_shape [2]
      int32, groundtruth_boxes [N, 4] float32 normalized ymin, xmin, ymax,
      xmax, groundtruth_classes [N] int32 1-based, groundtruth_area [N],
      groundtruth_is_crowd [N] bool, groundtruth_difficult [N] int64,
      groundtruth_group_of [N] bool, groundtruth_weights [N] float32 (ones
      when absent), groundtruth_image_classes [M] int32,
      groundtruth_image_confidences [M] float32, and, when configured,
      groundtruth_instance_masks [N, H, W] float32, groundtruth_keypoints
      [N, K, 2], groundtruth_keypoint_visibilities [N, K] bool,
      image_additional_channels [H, W, C] uint8, multiclass_scores [N * C]
      float32, context_features [num, length] float32 and
      valid_context_size.
    """
    parsed = tf.io.parse_single_example(tf_example_string_tensor,
                                        self._keys_to_features)
    image = self._decode_image(parsed['image/encoded'])
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    boxes = tf.stack([_dense(parsed['image/object/bbox/' + k], 0.0)
                      for k in ('ymin', 'xmin', 'ymax', 'xmax')], axis=1)
    classes = self._class_ids(_dense(parsed['image/object/class/text'], ''),
                              _dense(parsed['image/object/class/label'], 0))
    num_boxes = tf.shape(boxes)[0]
    weights = _dense(parsed['image/object/weight'], 0.0)
    weights = tf.cond(tf.size(weights) > 0, lambda: weights,
                      lambda: tf.ones([num_boxes], tf.float32))
    image_classes = self._class_ids(_dense(parsed['image/class/text'], ''),
                                    _dense(parsed['image/class/label'], 0))
    tensors = {
        _F.image: image,
        _F.source_id: parsed['image/source_id'],
        _F.key: parsed['image/key/sha256'],
        _F.filename: parsed['image/filename'],
        _F.original_image_spatial_shape: tf.stack([height, width]),
        _F.groundtruth_boxes: boxes,
        _F.groundtruth_classes: classes,
        _F.groundtruth_area: _dense(parsed['image/object/area'], 0.0),
        _F.groundtruth_is_crowd: tf.cast(
            _dense(parsed['image/object/is_crowd'], 0), tf.bool),
        _F.groundtruth_difficult: _dense(parsed['image/object/difficult'], 0),
        _F.groundtruth_group_of: tf.cast(
            _dense(parsed['image/object/group_of'], 0), tf.bool),
        _F.groundtruth_weights: weights,
        _F.groundtruth_image_classes: image_classes,
        _F.groundtruth_image_confidences: _dense(
            parsed['image/class/confidence'], 0.0),
    }
    if self._load_instance_masks:
      tensors[_F.groundtruth_instance_masks] = self._instance_masks(
          parsed, height, width)
    if self._num_keypoints:
      (tensors[_F.groundtruth_keypoints],
       tensors[_F.groundtruth_keypoint_visibilities]) = self._keypoints(parsed)
    if self._num_additional_channels:
      channels = tf.map_fn(
          lambda png: tf.io.decode_png(png, channels=1)[:, :, 0],
          parsed['image/additional_channels/encoded'],
          fn_output_signature=tf.uint8)
      tensors[_F.image_additional_channels] = tf.transpose(channels,
                                                           [1, 2, 0])
    if self._load_multiclass_scores:
      tensors[_F.multiclass_scores] = _dense(
          parsed['image/object/class/multiclass_scores'], 0.0)
    if self._load_context_features:
      length = parsed['image/context_feature_length']
      context = _dense(parsed['image/context_features'], 0.0)
      tensors[_F.context_features] = tf.reshape(context, [-1, length])
      tensors[_F.valid_context_size] = tf.shape(
          tensors[_F.context_features])[0]
    return tensors
