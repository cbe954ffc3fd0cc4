"""The user's TFRecords of tf.Examples, one image and its groundtruth at a
time, as model_main's evaluation reads them.

The project's decoder (data_decoders/tf_example_decoder) decodes each
record; its groundtruth goes through the eval input's clean-up
(input_pipeline/input_groundtruth): absent optional fields filled, boxes
of NaN coordinates or of class texts the label map lacks dropped, class ids
out of the label map's range and inverted boxes refused, image-level
classes as a k-hot (none means every class). Instance masks, when asked
for, are the decoder's: [N, H, W] 0/1 at the image's size.
"""
import dataclasses

import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.inference import exported_model
from od_estimator.input_pipeline import input_groundtruth

_IN = fields.InputDataFields
# Per-box groundtruth fields kept for the evaluators.
_BOX_FIELDS = (_IN.groundtruth_boxes, _IN.groundtruth_classes,
               _IN.groundtruth_is_crowd, _IN.groundtruth_area,
               _IN.groundtruth_difficult, _IN.groundtruth_group_of)


def record_paths(patterns, flag='--input_tfrecord_paths'):
  """The files of comma-separated paths or globs, each matching one or more.

  Raises:
    exported_model.ExportedModelError: naming the flag and the pattern that
      matches no file (or that none was given).
  """
  paths = []
  for pattern in [part.strip() for part in patterns.split(',')
                  if part.strip()]:
    matched = sorted(tf.io.gfile.glob(pattern))
    if not matched:
      raise exported_model.ExportedModelError(
          '%s: %s matches no file.' % (flag, pattern))
    paths += matched
  if not paths:
    raise exported_model.ExportedModelError('%s names no file.' % flag)
  return paths


def serialized_records(paths):
  """(path, index in the file, serialized tf.Example) of every record.

  Raises:
    exported_model.ExportedModelError: a file that is not a TFRecord or is
      truncated, named with the index of the first record not read.
  """
  for path in paths:
    index = 0
    try:
      for record in tf.data.TFRecordDataset(path):
        yield path, index, record.numpy()
        index += 1
    except tf.errors.DataLossError as error:
      raise exported_model.ExportedModelError(
          '%s is not a TFRecord file, or is damaged at record %d (%s).' % (
              path, index, errors.op_error_words(error))) from None


@dataclasses.dataclass
class LabeledImage:
  """One record's image and groundtruth.

  Attributes:
    name: the record's image/filename, else its image/source_id, else
      `<file>:<index>`.
    image: uint8 [height, width, 3].
    encoded: the image file's bytes (image/encoded).
    serialized: the record as read.
    groundtruth: numpy groundtruth_boxes [N, 4] in pixels (ymin, xmin,
      ymax, xmax), groundtruth_classes [N] 1-based, groundtruth_is_crowd,
      groundtruth_area, groundtruth_difficult, groundtruth_group_of [N] and
      groundtruth_labeled_classes [num_classes + 1] k-hot by class id;
      groundtruth_instance_masks [N, H, W] uint8 0/1 when the decoder
      loads masks.
    unknown_classes: boxes dropped because the label map lacks their
      class text.
  """
  name: str
  image: np.ndarray
  encoded: bytes
  serialized: bytes
  groundtruth: dict
  unknown_classes: int


class GroundtruthDecoder:
  """Decodes records in a graph of its own, one session run per record."""

  def __init__(self, label_map_path, num_classes, mask_type=None):
    """Builds the decoding graph.

    Args:
      label_map_path: maps image/object/class/text to ids.
      num_classes: the label map's largest id: records holding larger (or
        0) class ids are refused.
      mask_type: the records' mask encoding (tf_example_decoder's
        PNG_MASKS or NUMERICAL_MASKS) to load instance masks, or None.
    """
    self._label_map_path = label_map_path
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._serialized = tf.compat.v1.placeholder(tf.string, [])
      decoded = tf_example_decoder.TfExampleDecoder(
          load_instance_masks=bool(mask_type),
          instance_mask_type=mask_type or tf_example_decoder.NUMERICAL_MASKS,
          label_map_proto_file=label_map_path).decode(self._serialized)
      decoded = input_groundtruth.fill_missing_per_box_fields(decoded)
      decoded = input_groundtruth.refuse_bad_objects(decoded, num_classes)
      unknown = tf.reduce_sum(tf.cast(tf.equal(
          decoded[_IN.groundtruth_classes], input_groundtruth.UNKNOWN_CLASS),
                                      tf.int32))
      decoded = input_groundtruth.refuse_inverted_boxes(
          input_groundtruth.drop_invalid_groundtruth(decoded))
      labeled = input_groundtruth.k_hot(
          decoded[_IN.groundtruth_image_classes], num_classes, True)
      self._outputs = {name: decoded[name] for name in _BOX_FIELDS}
      if mask_type:
        self._outputs[_IN.groundtruth_instance_masks] = tf.cast(
            decoded[_IN.groundtruth_instance_masks], tf.uint8)
      self._outputs.update({
          _IN.image: decoded[_IN.image],
          _IN.filename: decoded[_IN.filename],
          _IN.source_id: decoded[_IN.source_id],
          # Index 0, the background, is never labeled.
          _IN.groundtruth_labeled_classes: tf.pad(labeled, [[1, 0]]),
          'unknown': unknown})
    self._sess = tf.compat.v1.Session(graph=self._graph)

  def close(self):
    self._sess.close()

  def decode(self, serialized, where):
    """The LabeledImage of a serialized tf.Example.

    Args:
      serialized: the record.
      where: `<file>:<index>`, its name when it has no filename or
        source_id.

    Raises:
      exported_model.ExportedModelError: a record that cannot be evaluated
        (no image, class ids the label map lacks, inverted boxes), naming
        it.
    """
    try:
      values = self._sess.run(self._outputs, {self._serialized: serialized})
    except tf.errors.InvalidArgumentError as error:
      raise exported_model.ExportedModelError(
          'record %s cannot be evaluated with --label_map_path=%s: %s' % (
              where, self._label_map_path,
              errors.op_error_words(error))) from None
    image = values.pop(_IN.image)
    height, width = image.shape[:2]
    boxes = values[_IN.groundtruth_boxes]
    # float32, as model_main's evaluation scales them.
    values[_IN.groundtruth_boxes] = boxes * np.float32(
        [height, width, height, width])
    name = (values.pop(_IN.filename) or values.pop(_IN.source_id)).decode(
        'utf-8', 'replace') or where
    values.pop(_IN.source_id, None)
    example = tf.train.Example.FromString(serialized)
    encoded = example.features.feature['image/encoded'].bytes_list.value[0]
    return LabeledImage(name=name, image=image, encoded=encoded,
                        serialized=serialized, groundtruth=values,
                        unknown_classes=int(values.pop('unknown')))
