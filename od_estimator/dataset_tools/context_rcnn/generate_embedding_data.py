r"""Adds per-image context embeddings to camera-trap tf.Examples (Beam).

Runs a Faster R-CNN exported with `export_inference_graph --input_type
tf_example` from a config with `output_final_box_features: true` (its
SavedModel then serves detection_features) on each example, and adds the
embeddings add_context_to_examples gathers into Context R-CNN's context
features, in the original's layout:
  - one row per chosen detection: the detection's box classifier features
    averaged over their spatial positions, its box as [x centre, y centre,
    width, height] (normalized), and, when image/date_captured is
    'YYYY-mm-dd HH:MM:SS', the capture time as [(year - 1990) / 40,
    (month - 1) / 12, (day - 1) / 31, hour / 24, minute / 60];
  - the rows of the --top_k_embedding_count best detections, then of the
    --bottom_k_embedding_count worst from the last one backward (they may
    repeat rows). Without a detection the first (padding) row counts once;
    with detections but no row asked for, that row is written, counted 0;
  - image/embedding (the rows, flattened), image/embedding_score (each
    row's detection score), image/embedding_length (values per row),
    image/embedding_count (rows), and with the date image/unix_time
    (seconds since 1970-01-01, the date read as UTC).
Every other feature of the input is kept.

  python -m od_estimator.dataset_tools.context_rcnn.generate_embedding_data \
    --embedding_input_tfrecord 'path/to/input-*' \
    --embedding_output_tfrecord path/to/output \
    --embedding_model_dir path/to/exported/saved_model \
    [--top_k_embedding_count 1] [--bottom_k_embedding_count 0] \
    [--num_shards 0] [--embedding_type final_box_features] [--runner ...]
"""
import calendar
import datetime
import functools

import numpy as np

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.dataset_tools.context_rcnn import beam_model_io
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.dataset_tools.context_rcnn import exported_detector
from od_estimator.utils import flag_checks

_NAMESPACE = 'embedding_data_generation'
DATE_FORMAT = '%Y-%m-%d %H:%M:%S'
# --embedding_type: the SavedModel output embedded.
EMBEDDING_OUTPUTS = {
    'final_box_features': 'detection_features',
    'rpn_box_features': 'cropped_rpn_box_features',
}
# The capture time's scale: [first year, years covered].
_YEARS = (1990.0, 40.0)
_EMBEDDING_FIELDS = ('image/embedding', 'image/embedding_score',
                     'image/embedding_length', 'image/embedding_count',
                     'image/unix_time')
OUTCOMES = {
    'embedded_with_time': 'examples got embeddings with their capture time',
    'embedded_without_time': 'examples got embeddings without a capture '
                             'time (no readable image/date_captured)',
}


def date_captured(example):
  """image/date_captured as a datetime, or None when missing or unreadable."""
  values = example.features.feature['image/date_captured'].bytes_list.value
  if not values:
    return None
  try:
    return datetime.datetime.strptime(values[0].decode('utf-8'), DATE_FORMAT)
  except (UnicodeDecodeError, ValueError):
    return None


def time_embedding(date):
  """The capture time's 5 values in [0, 1) (for years 1990 to 2029)."""
  first_year, years = _YEARS
  return np.array([(date.year - first_year) / years, (date.month - 1) / 12.0,
                   (date.day - 1) / 31.0, date.hour / 24.0,
                   date.minute / 60.0])


def box_embedding(box):
  """[x centre, y centre, width, height] of a [ymin, xmin, ymax, xmax] box."""
  ymin, xmin, ymax, xmax = box
  width, height = xmax - xmin, ymax - ymin
  return np.array([xmin + width / 2.0, ymin + height / 2.0, width, height])


def chosen_rows(num_detections, top_k, bottom_k):
  """(detection indices embedded, count written) in the original's order.

  The top_k first detections, then bottom_k from the last one backward;
  with no detection at all, the padding row 0 once. Nothing chosen: row 0,
  counted 0.
  """
  rows = list(range(min(num_detections, top_k)))
  last = max(0, num_detections - 1)
  rows += list(range(last, max(-1, num_detections - 1 - bottom_k), -1))
  if not rows:
    return [0], 0
  return rows, len(rows)


def add_embedding(example, detect, top_k, bottom_k, features_output):
  """The example with its embeddings (see the module docstring).

  Args:
    example: a tf.train.Example.
    detect: function returning the model's outputs on the example
      (detection_boxes [1, N, 4], detection_scores [1, N], num_detections
      [1], and features_output [1, N, ..., depth]).
    top_k: --top_k_embedding_count.
    bottom_k: --bottom_k_embedding_count.
    features_output: the output whose rows are embedded.

  Returns:
    ([the example with embeddings], outcome name in OUTCOMES).
  """
  date = date_captured(example)
  outputs = detect()
  features = outputs[features_output][0]
  boxes = outputs['detection_boxes'][0]
  scores = outputs['detection_scores'][0]
  rows, count = chosen_rows(int(outputs['num_detections'][0]), top_k,
                            bottom_k)
  embeddings = []
  for row in rows:
    pooled = features[row].reshape(-1, features.shape[-1]).mean(axis=0)
    parts = [pooled, box_embedding(boxes[row])]
    if date is not None:
      parts.append(time_embedding(date))
    embeddings.append(np.concatenate(parts))
  output = type(example)()
  output.CopyFrom(example)
  out = output.features.feature
  for key in _EMBEDDING_FIELDS:
    if key in out:
      del out[key]
  if date is not None:
    out['image/unix_time'].float_list.value.append(
        calendar.timegm(date.timetuple()))
  out['image/embedding'].float_list.value.extend(
      np.concatenate(embeddings).tolist())
  out['image/embedding_score'].float_list.value.extend(
      [float(scores[row]) for row in rows])
  out['image/embedding_length'].int64_list.value.append(
      len(embeddings[0]))
  out['image/embedding_count'].int64_list.value.append(count)
  return [output], ('embedded_with_time' if date is not None
                    else 'embedded_without_time')


def construct_pipeline(pipeline, input_tfrecord, output_tfrecord, model_dir,
                       top_k_embedding_count, bottom_k_embedding_count,
                       num_shards, embedding_type='final_box_features'):
  """Adds the embedding pipeline to a beam.Pipeline (the original's
  signature).

  Args:
    pipeline: the beam.Pipeline.
    input_tfrecord: glob of the TFRecords of tf.Examples to read.
    output_tfrecord: prefix of the output TFRecords.
    model_dir: the exported detector's SavedModel (fed tf.Examples).
    top_k_embedding_count: rows of the best detections.
    bottom_k_embedding_count: rows of the worst detections.
    num_shards: output files; 0 lets the runner choose.
    embedding_type: a key of EMBEDDING_OUTPUTS.

  Raises:
    errors.UserInputError: for a glob matching nothing, an unknown
      embedding_type or a model without the features it names.
  """
  if embedding_type not in EMBEDDING_OUTPUTS:
    raise errors.UserInputError(
        '--embedding_type %s: expected one of %s.' % (
            embedding_type, ', '.join(sorted(EMBEDDING_OUTPUTS))))
  features_output = EMBEDDING_OUTPUTS[embedding_type]
  outputs = exported_detector.DETECTION_OUTPUTS + (features_output,)
  beam_model_io.construct(
      pipeline, 'embedding', input_tfrecord, output_tfrecord, num_shards,
      model_dir, outputs,
      functools.partial(add_embedding, top_k=top_k_embedding_count,
                        bottom_k=bottom_k_embedding_count,
                        features_output=features_output),
      _NAMESPACE)


def _parser():
  parser = beam_tool.argument_parser(
      'Adds context embeddings from an exported Faster R-CNN to tf.Examples, '
      'as an Apache Beam pipeline.')
  beam_model_io.add_tool_flags(
      parser, 'embedding', ' from a config with output_final_box_features: '
      'true (it serves detection_features)')
  parser.add_argument('--top_k_embedding_count', type=flag_checks.at_least(0),
                      default=1, help='Rows of the best detections.')
  parser.add_argument('--bottom_k_embedding_count',
                      type=flag_checks.at_least(0), default=0,
                      help='Rows of the worst detections.')
  parser.add_argument('--embedding_type', choices=sorted(EMBEDDING_OUTPUTS),
                      default='final_box_features',
                      help='The features embedded: final_box_features '
                      '(detection_features) or rpn_box_features '
                      '(cropped_rpn_box_features).')
  return parser


@tool_flags.reporting_input_errors
def main(argv=None):
  beam_model_io.run_tool(_parser(), 'embedding', construct_pipeline,
                         _NAMESPACE, OUTCOMES, argv)


if __name__ == '__main__':
  # Run the importable module's main: the functions the pipeline pickles
  # must be found by name on workers, not in this __main__ module.
  from od_estimator.dataset_tools.context_rcnn import generate_embedding_data as _tool
  _tool.main()
