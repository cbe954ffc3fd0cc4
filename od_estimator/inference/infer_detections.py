"""Runs an exported detector over TFRecords: `od-estimator infer_detections`.

The original's inference/infer_detections.py, with its flags:
  od-estimator infer_detections \\
      --input_tfrecord_paths=/path/a.record,/path/b-*.record \\
      --output_tfrecord_path=/path/detections.record \\
      --inference_graph=EXPORT/frozen_inference_graph.pb \\
      [--discard_image_pixels]

Each input tf.Example is copied to the output with the export's detections
added (the original's keys): image/detection/bbox/ymin, .../xmin, .../ymax,
.../xmax (normalized floats), image/detection/label (1-based int64 ids) and
image/detection/score, num_detections of each. --discard_image_pixels drops
image/encoded from the copies (much smaller records for computing metrics).

--inference_graph takes the frozen graph as the original did, or the export
directory or its saved_model/ (any --input_type), or a .tflite SSD (see
inference/exported_model). --input_tfrecord_paths is
a comma-separated list of files, each of which may be a glob. The output is
written beside its destination and renamed over it once complete.
"""
import argparse
import sys

import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.core import standard_fields as fields
from od_estimator.inference import command_runs
from od_estimator.inference import exported_model
from od_estimator.inference import labeled_records
from od_estimator.utils import file_safety

_TF = fields.TfExampleFields


def _boolean(text):
  """absl's boolean flag values, for --discard_image_pixels=false."""
  value = text.lower()
  if value in ('true', 't', '1', 'yes'):
    return True
  if value in ('false', 'f', '0', 'no'):
    return False
  raise argparse.ArgumentTypeError('expected true or false, got %r' % text)


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator infer_detections',
      description='Adds an exported detector\'s detections to each '
                  'tf.Example of TFRecords (the original\'s '
                  'infer_detections.py).')
  parser.add_argument('--input_tfrecord_paths', required=True,
                      help='comma-separated list of input TFRecords (globs '
                           'allowed).')
  parser.add_argument('--output_tfrecord_path', required=True,
                      help='the output TFRecord.')
  parser.add_argument('--inference_graph', required=True,
                      help='frozen_inference_graph.pb, an export '
                           'directory or its saved_model/, or a .tflite '
                           'SSD.')
  parser.add_argument('--discard_image_pixels', type=_boolean, nargs='?',
                      const=True, default=False,
                      help='leave image/encoded out of the output examples.')
  return parser


def add_detections(example, detections, discard_image_pixels=False):
  """Adds one image's detections to its tf.Example, in place.

  Args:
    example: a tf.train.Example.
    detections: exported_model's detect output for its image.
    discard_image_pixels: delete image/encoded.

  Returns:
    example.
  """
  count = int(detections['num_detections'])
  boxes = np.asarray(detections['detection_boxes'][:count]).T.reshape(4, -1)
  feature = example.features.feature
  feature[_TF.detection_score].float_list.value[:] = (
      detections['detection_scores'][:count])
  for key, values in zip((_TF.detection_bbox_ymin, _TF.detection_bbox_xmin,
                          _TF.detection_bbox_ymax, _TF.detection_bbox_xmax),
                         boxes):
    feature[key].float_list.value[:] = values
  feature[_TF.detection_class_label].int64_list.value[:] = np.round(
      detections['detection_classes'][:count]).astype(np.int64)
  if discard_image_pixels:
    del feature[_TF.image_encoded]
  return example


def _decoded_image(encoded, where):
  try:
    return tf.io.decode_image(encoded, channels=3,
                              expand_animations=False).numpy()
  except tf.errors.InvalidArgumentError as error:
    raise errors.UserInputError('record %s: image/encoded is not an image '
                                '(%s).' % (where, error.message)) from None


def run(input_tfrecord_paths, output_tfrecord_path, inference_graph,
        discard_image_pixels=False):
  """Writes the records with their detections; returns how many.

  Raises:
    errors.UserInputError: a glob matching nothing, an output path that is
      a folder, a path that is not an export, a record without an image.
  """
  paths = labeled_records.record_paths(input_tfrecord_paths)
  file_safety.check_file_destination(output_tfrecord_path,
                                     '--output_tfrecord_path')
  model = exported_model.open_model(inference_graph)
  count = 0
  try:
    with file_safety.replacing_paths([output_tfrecord_path]) as (temp,):
      with tf.io.TFRecordWriter(temp) as writer:
        for path, index, serialized in labeled_records.serialized_records(
            paths):
          where = '%s:%d' % (path, index)
          example = tf.train.Example.FromString(serialized)
          encoded = example.features.feature[_TF.image_encoded].bytes_list
          if not encoded.value:
            raise errors.UserInputError('record %s has no image/encoded.' %
                                        where)
          image = _decoded_image(encoded.value[0], where)
          detections = model.detect(image, encoded.value[0], where,
                                    serialized)
          writer.write(add_detections(
              example, detections, discard_image_pixels).SerializeToString())
          count += 1
  finally:
    model.close()
  return count


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

  def work():
    count = run(args.input_tfrecord_paths, args.output_tfrecord_path,
                args.inference_graph, args.discard_image_pixels)
    print('od-estimator infer_detections: %d record(s) with detections -> %s'
          % (count, args.output_tfrecord_path))
    return 0
  return command_runs.run('infer_detections', work)


if __name__ == '__main__':
  sys.exit(main())
