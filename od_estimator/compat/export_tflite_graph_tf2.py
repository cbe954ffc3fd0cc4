r"""Exports an SSD for TFLite as the original's TF2 export_tflite_graph_tf2.

  od-estimator export_tflite_graph_tf2 \
      --pipeline_config_path=MODEL_DIR/pipeline.config \
      --trained_checkpoint_dir=MODEL_DIR \
      --output_directory=EXPORT_DIR
  (also: python -m od_estimator.compat.export_tflite_graph_tf2 ..., and
  object_detection/export_tflite_graph_tf2.py under
  `python -m od_estimator.compat run`)

--trained_checkpoint_dir is read as the original reads it: its latest
checkpoint is exported, ours (model.ckpt-N of model_main or model_main_tf2)
or a TF2 one (ckpt-N of the original's training loop, or the checkpoint/
folder of a TF2 zoo model or of exporter_main_v2). The model must be an
SSD with a fixed_shape_resizer and a faster_rcnn_box_coder (the TF2 zoo's
ssd_mobilenet_v2_320x320 and the FPN-lite ones are); the weights are the
moving averages when eval_config.use_moving_averages is set.

EXPORT_DIR/saved_model/ is the intermediate SavedModel of the original's
TF2 TFLite recipe. Its `serving_default` signature takes `input`, float32
[1, height, width, 3] already normalized as the feature extractor's
preprocess does (pixel / 127.5 - 1 for the MobileNets), and ends in the
TFLite_Detection_PostProcess op (--max_detections boxes, fast NMS on
each box's best class, or per-class NMS keeping up to 100 boxes a class
with --ssd_use_regular_nms; thresholds and box coder scales from the
config):
  output_0  num_detections  [1]
  output_1  scores          [1, max_detections]
  output_2  classes         [1, max_detections], 0-based (label id - 1)
  output_3  boxes           [1, max_detections, 4] ymin, xmin, ymax, xmax
Unlike the original's, it also runs in TensorFlow, with the detections the
converted model gives. Convert it as the original's documentation says:

  converter = tf.lite.TFLiteConverter.from_saved_model(
      'EXPORT_DIR/saved_model')
  open('detect.tflite', 'wb').write(converter.convert())

or add --convert to write EXPORT_DIR/detect.tflite (float; TFLite builtins
and the op, with allow_custom_ops). In tf.lite.Interpreter,
get_signature_runner()(input=image) returns the four outputs by those
names (the TFLite runtime ships the op).

An export already in EXPORT_DIR is kept (one `error:` line) unless
--overwrite is given; the new one is written in a hidden staging folder
and moved into place once complete. --config_override takes text-format
TrainEvalPipelineConfig merged over the file, e.g.
  --config_override="model { ssd { post_processing {
      batch_non_max_suppression { score_threshold: 0.0 iou_threshold: 0.5 }
  } } }"
od_estimator has no CenterNet: --centernet_include_keypoints and
--keypoint_label_map_path are refused, as are quantization-aware configs
(graph_rewriter; use export_tflite_ssd_graph --convert).
"""
import os
import sys

from absl import flags

from od_estimator import command_line
from od_estimator.export import export_tflite_graph_lib_tf2
from od_estimator.export import tflite_conversion

flags.DEFINE_string('pipeline_config_path', None, 'Path to a '
                    'pipeline_pb2.TrainEvalPipelineConfig config file.')
flags.DEFINE_string('trained_checkpoint_dir', None, 'Path to trained '
                    'checkpoint directory (its latest checkpoint, TF1 or '
                    'TF2, is exported), or a checkpoint prefix.')
flags.DEFINE_string('output_directory', None, 'Path to write outputs.')
flags.DEFINE_string('config_override', '', 'pipeline_pb2.'
                    'TrainEvalPipelineConfig text proto to override '
                    'pipeline_config_path.')
flags.DEFINE_integer('max_detections', 10, 'Maximum number of detections '
                     '(boxes) to return.')
flags.DEFINE_bool('ssd_use_regular_nms', False, 'Flag to set postprocessing '
                  'op to use Regular NMS instead of Fast NMS.')
flags.DEFINE_bool('centernet_include_keypoints', False, 'The original\'s '
                  'CenterNet option; refused (od_estimator has no CenterNet).')
flags.DEFINE_string('keypoint_label_map_path', None, 'The original\'s '
                    'CenterNet option; refused (od_estimator has no '
                    'CenterNet).')
flags.DEFINE_boolean('overwrite', False, 'Replace an export already in '
                     'output_directory (saved_model/, detect.tflite), kept '
                     'until the new one is complete.')
flags.DEFINE_bool('convert', False, 'Also convert saved_model/ into '
                  'output_directory/detect.tflite (float).')
FLAGS = flags.FLAGS

_PROG = 'export_tflite_graph_tf2'
_REQUIRED = ('pipeline_config_path', 'trained_checkpoint_dir',
             'output_directory')


def _export(unused_argv):
  pipeline_config = command_line.read_export_config(FLAGS, _REQUIRED)
  export_tflite_graph_lib_tf2.export_tflite_model(
      pipeline_config, FLAGS.trained_checkpoint_dir, FLAGS.output_directory,
      FLAGS.max_detections, FLAGS.ssd_use_regular_nms,
      FLAGS.centernet_include_keypoints, FLAGS.keypoint_label_map_path,
      overwrite=FLAGS.overwrite, convert=FLAGS.convert)
  print('Exported to %s' % os.path.join(
      FLAGS.output_directory, export_tflite_graph_lib_tf2.SAVED_MODEL))
  if FLAGS.convert:
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
