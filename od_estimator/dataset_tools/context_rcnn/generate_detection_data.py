r"""Adds an exported detector's boxes to camera-trap tf.Examples (Beam).

Camera-trap images often carry one image-level class and no boxes. This
pipeline runs a detector exported with `export_inference_graph
--input_type tf_example` on each such image and writes the example back
with the detections scoring at least --confidence_threshold as its boxes,
each labelled with the image's class, as the original tool:
  - an example that has boxes (image/object/bbox/ymin) is written as it is;
  - one with exactly one image/object/class/label gets the detections:
    image/object/bbox/{ymin,xmin,ymax,xmax}, image/object/class/score, and
    that label and its image/object/class/text on every box;
  - one without a label (an empty image) is written without boxes;
  - one with several labels is left out (a box cannot be given a class).
Where the original rebuilt each example from a fixed list of features, the
output keeps every image-level feature of the input (image/format,
image/filename, ...); its image/object/* features are the detections'.

  python -m od_estimator.dataset_tools.context_rcnn.generate_detection_data \
    --detection_input_tfrecord 'path/to/input-*' \
    --detection_output_tfrecord path/to/output \
    --detection_model_dir path/to/exported/saved_model \
    [--confidence_threshold 0.9] [--num_shards 0] [--runner DirectRunner ...]
"""
import functools

from od_estimator.dataset_tools import tool_flags
from od_estimator.dataset_tools.context_rcnn import beam_model_io
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.dataset_tools.context_rcnn import exported_detector
from od_estimator.utils import flag_checks

_NAMESPACE = 'detection_data_generation'
_OBJECT_PREFIX = 'image/object/'
# What each outcome of add_detections counts, for the summary.
OUTCOMES = {
    'kept_boxes': 'examples had boxes already and were written as they were',
    'detections_added': 'examples got detections above the threshold',
    'no_detection_above_threshold': 'examples had no detection above the '
                                    'threshold (written without boxes)',
    'empty_image': 'examples without a class label were written without '
                   'boxes',
    'several_classes': 'examples with several class labels were LEFT OUT '
                       '(a box cannot be given one class), as the original '
                       'does',
}


def add_detections(example, detect, confidence_threshold):
  """The example with its detections as boxes (see the module docstring).

  Args:
    example: a tf.train.Example.
    detect: function returning the model's outputs on the example
      (detection_boxes [1, N, 4], detection_scores [1, N], num_detections
      [1]).
    confidence_threshold: lowest score of a detection kept.

  Returns:
    (list of the examples to write, outcome name in OUTCOMES).
  """
  feature = example.features.feature
  if feature['image/object/bbox/ymin'].float_list.value:
    return [example], 'kept_boxes'
  labels = feature['image/object/class/label'].int64_list.value
  if len(labels) > 1:
    return [], 'several_classes'
  texts = feature['image/object/class/text'].bytes_list.value
  output = type(example)()
  output.CopyFrom(example)
  for key in [key for key in output.features.feature
              if key.startswith(_OBJECT_PREFIX)]:
    del output.features.feature[key]
  if not labels:
    return [output], 'empty_image'
  outputs = detect()
  count = int(outputs['num_detections'][0])
  scores = outputs['detection_scores'][0][:count]
  kept = [index for index, score in enumerate(scores)
          if score >= confidence_threshold]
  boxes = outputs['detection_boxes'][0]
  out = output.features.feature
  for coordinate, name in enumerate(('ymin', 'xmin', 'ymax', 'xmax')):
    out['image/object/bbox/' + name].float_list.value.extend(
        [boxes[index, coordinate] for index in kept])
  out['image/object/class/score'].float_list.value.extend(
      [scores[index] for index in kept])
  out['image/object/class/label'].int64_list.value.extend(
      [labels[0]] * len(kept))
  if texts:
    out['image/object/class/text'].bytes_list.value.extend(
        [texts[0]] * len(kept))
  return [output], ('detections_added' if kept
                    else 'no_detection_above_threshold')


def construct_pipeline(pipeline, input_tfrecord, output_tfrecord, model_dir,
                       confidence_threshold, num_shards):
  """Adds the detection data pipeline to a beam.Pipeline (the original's
  signature).

  Args:
    pipeline: the beam.Pipeline.
    input_tfrecord: glob of the TFRecords of tf.Examples to read.
    output_tfrecord: prefix of the output TFRecords.
    model_dir: the exported detector's SavedModel (fed tf.Examples).
    confidence_threshold: lowest score of a detection kept as a box.
    num_shards: output files; 0 lets the runner choose.

  Raises:
    errors.UserInputError: for a glob matching nothing or an unusable model.
  """
  beam_model_io.construct(
      pipeline, 'detection', input_tfrecord, output_tfrecord, num_shards,
      model_dir, exported_detector.DETECTION_OUTPUTS,
      functools.partial(add_detections,
                        confidence_threshold=confidence_threshold),
      _NAMESPACE)


def _parser():
  parser = beam_tool.argument_parser(
      'Adds an exported detector\'s boxes to tf.Examples, as an Apache Beam '
      'pipeline.')
  beam_model_io.add_tool_flags(parser, 'detection', '')
  parser.add_argument('--confidence_threshold', type=flag_checks.fraction,
                      default=0.9,
                      help='Lowest score of a detection kept as a box.')
  return parser


@tool_flags.reporting_input_errors
def main(argv=None):
  beam_model_io.run_tool(_parser(), 'detection', construct_pipeline,
                         _NAMESPACE, OUTCOMES, argv)


if __name__ == '__main__':
  # Run the importable module's main: the functions the pipeline pickles
  # must be found by name on workers, not in this __main__ module.
  from od_estimator.dataset_tools.context_rcnn import generate_detection_data as _tool
  _tool.main()
