r"""Exports an SSD model for TFLite (same flags as the original).

  python -m od_estimator.export_tflite_ssd_graph \
      --pipeline_config_path=TRAIN_DIR/pipeline.config \
      --trained_checkpoint_prefix=TRAIN_DIR/model.ckpt-50000 \
      --output_directory=EXPORT_DIR

EXPORT_DIR then holds tflite_graph.pb and tflite_graph.pbtxt, a frozen graph
with input `normalized_input_image_tensor` (float32 [1, height, width, 3] of
the fixed_shape_resizer, normalized as the feature extractor's preprocess
does, e.g. pixel / 128 - 1 for the MobileNets). Its outputs are the four of
the `TFLite_Detection_PostProcess` custom op (boxes, classes, scores, number
of detections) or, with --add_postprocessing_op=false,
`raw_outputs/box_encodings` and `raw_outputs/class_predictions`; the
constant `anchors` holds the anchors. Convert it with the TFLite converter
and allow_custom_ops, or add --convert to also write EXPORT_DIR/detect.tflite:
a float model for a float config, a fully quantized uint8 model (input uint8
pixels, mean 128, std 128) for a config with a graph_rewriter quantization
block. --post_training_quantize makes a float config's model full-integer
too, calibrated on --representative_examples images of its eval_input_reader.

Files of an earlier run in EXPORT_DIR are replaced, as the original did, but
only once the new ones are complete: they are written in a hidden staging
folder inside EXPORT_DIR and moved into place together (detect.tflite with
them under --convert), so a killed export leaves the previous files whole.

--config_override takes text-format TrainEvalPipelineConfig merged over the
file, e.g. to change the NMS thresholds of the exported op:
  --config_override="model { ssd { post_processing {
      batch_non_max_suppression { score_threshold: 0.0 iou_threshold: 0.5 }
  } } }"
"""
import os
import sys

from absl import flags

from od_estimator import command_line
from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.export import tflite_conversion
from od_estimator.utils import file_safety

flags.DEFINE_string('output_directory', None, 'Path to write outputs.')
flags.DEFINE_string('pipeline_config_path', None, 'Path to a '
                    'pipeline_pb2.TrainEvalPipelineConfig config file.')
flags.DEFINE_string('trained_checkpoint_prefix', None, 'Checkpoint prefix.')
flags.DEFINE_integer('max_detections', 10, 'Maximum number of detections '
                     '(boxes) to show.')
flags.DEFINE_integer('max_classes_per_detection', 1, 'Maximum number of '
                     'classes to output per detection box.')
flags.DEFINE_integer('detections_per_class', 100, 'Number of anchors used '
                     'per class in Regular Non-Max-Suppression.')
flags.DEFINE_bool('add_postprocessing_op', True, 'Add TFLite custom op for '
                  'postprocessing to the graph.')
flags.DEFINE_bool('use_regular_nms', False, 'Flag to set postprocessing op '
                  'to use Regular NMS instead of Fast NMS.')
flags.DEFINE_string('config_override', '', 'pipeline_pb2.'
                    'TrainEvalPipelineConfig text proto to override '
                    'pipeline_config_path.')
flags.DEFINE_bool('convert', False, 'Also convert tflite_graph.pb into '
                  'output_directory/detect.tflite (uint8 for a graph_rewriter '
                  'quantization config, else float).')
flags.DEFINE_bool('post_training_quantize', False, 'Implies --convert: '
                  'full-integer quantization of a float model (uint8 input, '
                  'int8 inside), calibrated on eval_input_reader images.')
flags.DEFINE_integer('representative_examples', 100, 'Images of the '
                     'eval_input_reader calibrating --post_training_quantize.')
FLAGS = flags.FLAGS

_PROG = 'export_tflite_ssd_graph'
_GRAPH_FILES = ('tflite_graph.pb', 'tflite_graph.pbtxt')
_REQUIRED = ('output_directory', 'pipeline_config_path',
             'trained_checkpoint_prefix')


def _export(unused_argv):
  pipeline_config = command_line.read_export_config(FLAGS, _REQUIRED)
  tflite_conversion.check_options(pipeline_config,
                                  FLAGS.post_training_quantize,
                                  FLAGS.representative_examples)
  convert = FLAGS.convert or FLAGS.post_training_quantize
  outputs = list(_GRAPH_FILES) + [tflite_conversion.TFLITE_NAME] * convert
  with file_safety.staged_outputs(FLAGS.output_directory, outputs, True,
                                  '--output_directory') as staging:
    export_tflite_ssd_graph_lib.export_tflite_graph(
        pipeline_config, FLAGS.trained_checkpoint_prefix, staging,
        FLAGS.add_postprocessing_op, FLAGS.max_detections,
        FLAGS.max_classes_per_detection,
        detections_per_class=FLAGS.detections_per_class,
        use_regular_nms=FLAGS.use_regular_nms)
    if convert:
      tflite_conversion.write_tflite(
          staging, pipeline_config, FLAGS.add_postprocessing_op,
          FLAGS.post_training_quantize, FLAGS.representative_examples)
  print('Exported to %s' % FLAGS.output_directory)
  if convert:
    print('Converted to %s' % os.path.join(FLAGS.output_directory,
                                           tflite_conversion.TFLITE_NAME))


def main(argv=None):
  """Console script: --help, or the export with bad input as one line.

  Args:
    argv: flags without the program name; None reads sys.argv.
  """
  return command_line.run_export(_export, _PROG, __doc__, __name__, argv)


if __name__ == '__main__':
  sys.exit(main())
