r"""Exports a trained detector as the original's TF2 exporter_main_v2 does.

  python -m od_estimator.exporter_main_v2 \
      --input_type=image_tensor \
      --pipeline_config_path=MODEL_DIR/pipeline.config \
      --trained_checkpoint_dir=MODEL_DIR \
      --output_directory=EXPORT_DIR

--trained_checkpoint_dir is read as the original reads it: its latest
checkpoint is exported, ours (model.ckpt-N, from model_main or
model_main_tf2) or one of the original's TF2 loop (ckpt-N). EXPORT_DIR then
holds, as the original's:
  saved_model/     TF2 SavedModel; `tf.saved_model.load(path)(images)` or
                   its `serving_default` signature, input `input_tensor`
  checkpoint/      ckpt-0: the model's values, object-based, under the
                   original's TF2 keys (for the SSD models of TF2 names;
                   others by variable name), to fine-tune from
                   (fine_tune_checkpoint_type: "full" or "detection")
  pipeline.config  the config exported
They are written in a hidden staging folder inside EXPORT_DIR and moved
into place once complete; an export already there is kept (one `error:`
line) unless --overwrite is given. A training directory is refused.

--input_type, the signature's `input_tensor`:
  image_tensor                 uint8 [1, height, width, 3]
  encoded_image_string_tensor  string [batch] of JPEG/PNG bytes
  tf_example                   string [batch] of serialized tf.Examples
  float_image_tensor           float32 [batch, height, width, 3]
The outputs are every post-processing output, float32: detection_boxes,
detection_scores, detection_classes (1-based label ids), num_detections,
detection_multiclass_scores, detection_anchor_indices (an SSD's anchor,
a Faster R-CNN's proposal each detection comes from), raw_detection_boxes,
raw_detection_scores; detection_masks for Mask R-CNN.

The weights exported are the moving averages when
eval_config.use_moving_averages is set, so the export serves what
evaluation computes. Side inputs (Context R-CNN) take --input_type
image_tensor: --use_side_inputs --side_input_shapes=1,2000,2057/1
--side_input_names=context_features,valid_context_size
--side_input_types=float,int (tf.float32,tf.int32 as the original also
works).

For the TF1 layout (frozen_inference_graph.pb, a TF1 SavedModel with input
`inputs`), use export_inference_graph.

--bfloat16 exports a SavedModel that runs in bfloat16 on CPUs with
AVX-512 BF16 or AMX (the oneDNN rewrite model_main --bfloat16 trains with,
baked into the graph), with the float32 export's inputs and outputs.
Float32 is the default whatever train_config.use_bfloat16 says.
"""
import sys

from absl import flags

from od_estimator import command_line
from od_estimator.export import bfloat16_graph
from od_estimator.export import export_inputs
from od_estimator.export import exporter_v2

flags.DEFINE_string('input_type', 'image_tensor', 'Type of input node. Can be '
                    'one of [`image_tensor`, `encoded_image_string_tensor`, '
                    '`tf_example`, `float_image_tensor`].')
flags.DEFINE_string('pipeline_config_path', None,
                    'Path to a pipeline_pb2.TrainEvalPipelineConfig config '
                    'file.')
flags.DEFINE_string('trained_checkpoint_dir', None,
                    'Path to trained checkpoint directory (its latest '
                    'checkpoint, model.ckpt-N or ckpt-N, is exported).')
flags.DEFINE_string('output_directory', None, 'Path to write outputs.')
flags.DEFINE_string('config_override', '',
                    'pipeline_pb2.TrainEvalPipelineConfig '
                    'text proto to override pipeline_config_path.')
flags.DEFINE_boolean('use_side_inputs', False,
                     'If True, uses side inputs as well as image inputs '
                     '(Context R-CNN; --input_type=image_tensor only).')
flags.DEFINE_string('side_input_shapes', '',
                    'With use_side_inputs: the shape of each side input, '
                    'comma-separated integers (-1 for unknown), `/` before '
                    'the next input.')
flags.DEFINE_string('side_input_types', '',
                    'With use_side_inputs: comma-separated types, each of '
                    '`float`, `int` or `string` (or tf.float32, tf.int32, '
                    'tf.string).')
flags.DEFINE_string('side_input_names', '',
                    'With use_side_inputs: comma-separated names of the side '
                    'inputs, each a signature input of that name.')
flags.DEFINE_boolean('overwrite', False, 'Replace an export already in '
                     'output_directory (saved_model/, checkpoint/, '
                     'pipeline.config), kept until the new one is complete.')
flags.DEFINE_boolean('bfloat16', False, bfloat16_graph.FLAG_HELP)
FLAGS = flags.FLAGS

_PROG = 'exporter_main_v2'
_REQUIRED = ('pipeline_config_path', 'trained_checkpoint_dir',
             'output_directory')


def _export(unused_argv):
  pipeline_config = command_line.read_export_config(FLAGS, _REQUIRED)
  side_input_shapes, side_input_names, side_input_types = (
      export_inputs.side_inputs_from_flags(FLAGS))
  exporter_v2.export_inference_graph(
      FLAGS.input_type, pipeline_config, FLAGS.trained_checkpoint_dir,
      FLAGS.output_directory, use_side_inputs=FLAGS.use_side_inputs,
      side_input_shapes=side_input_shapes, side_input_names=side_input_names,
      side_input_types=side_input_types, overwrite=FLAGS.overwrite,
      bfloat16=FLAGS.bfloat16)
  print('Exported to %s' % FLAGS.output_directory)


def main(argv=None):
  """Console script: --help, or the export with bad input as one line.

  Args:
    argv: flags without the program name; None reads sys.argv.
  """
  return command_line.run_export(_export, _PROG, __doc__, __name__, argv)


if __name__ == '__main__':
  sys.exit(main())
