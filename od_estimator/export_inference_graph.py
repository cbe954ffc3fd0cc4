r"""Exports a trained detector for inference (same flags as the original).

  python -m od_estimator.export_inference_graph \
      --input_type=image_tensor \
      --pipeline_config_path=TRAIN_DIR/pipeline.config \
      --trained_checkpoint_prefix=TRAIN_DIR/model.ckpt-50000 \
      --output_directory=EXPORT_DIR

EXPORT_DIR then holds frozen_inference_graph.pb, saved_model/ (signature
`serving_default`, input `inputs`), model.ckpt.*, checkpoint and
pipeline.config. They are written in a hidden staging folder inside
EXPORT_DIR and moved into place once all are complete. An export already in
EXPORT_DIR is kept (one `error:` line) unless --overwrite is given; it is
then removed only after the new one is in place. A training directory
(holding model.ckpt-N) is refused: export elsewhere. The input is one of:
  image_tensor                 uint8 [batch, height, width, 3]
  encoded_image_string_tensor  string [batch] of JPEG/PNG bytes
  tf_example                   string [batch] of serialized tf.Examples
The outputs are detection_boxes, detection_scores, detection_classes
(1-based label ids), num_detections, and the model's optional outputs.

A Context R-CNN (context_config) also takes its context features, with the
original's side input flags (its export without them is an error naming them):
  --use_side_inputs --side_input_shapes=1,2000,2057/1 \
  --side_input_names=context_features,valid_context_size \
  --side_input_types=float,int
with context_config's max_num_context_features (2000) and
context_feature_length (2057). The export then also takes context_features
[1, 2000, 2057] float32 (rows past the valid ones are ignored) and
valid_context_size [1] int32, as SavedModel inputs keyed by those names and
placeholders of those names in the frozen graph.

--config_override takes text-format TrainEvalPipelineConfig merged over the
file, e.g. to raise the score threshold of the exported model:
  --config_override="model { ssd { post_processing {
      batch_non_max_suppression { score_threshold: 0.5 } } } }"

--bfloat16 exports a frozen graph and SavedModel that run in bfloat16 on
CPUs with AVX-512 BF16 or AMX (the oneDNN rewrite model_main --bfloat16
trains with, baked into the graph), with the float32 export's inputs and
outputs.
Float32 is the default whatever train_config.use_bfloat16 says.
"""
import sys

from absl import flags

from od_estimator import command_line
from od_estimator import errors
from od_estimator.export import bfloat16_graph
from od_estimator.export import export_inputs
from od_estimator.export import exporter

flags.DEFINE_string('input_type', 'image_tensor', 'Type of input node. Can be '
                    'one of [`image_tensor`, `encoded_image_string_tensor`, '
                    '`tf_example`]')
flags.DEFINE_string('input_shape', None, 'If input_type is `image_tensor`, '
                    'the fixed shape of the input tensor as a comma-separated '
                    'list of integers, -1 for an unknown dimension; for the '
                    'string inputs, decoded images are resized to its height '
                    'and width. Default for `image_tensor`: '
                    '[None, None, None, 3].')
flags.DEFINE_string('pipeline_config_path', None, 'Path to a '
                    'pipeline_pb2.TrainEvalPipelineConfig config file.')
flags.DEFINE_string('trained_checkpoint_prefix', None, 'Path to trained '
                    'checkpoint, typically of the form path/to/model.ckpt-N '
                    '(a directory means its latest checkpoint).')
flags.DEFINE_string('output_directory', None, 'Path to write outputs.')
flags.DEFINE_boolean('overwrite', False, 'Replace an export already in '
                     'output_directory (frozen_inference_graph.pb, '
                     'saved_model/, model.ckpt.*, checkpoint, '
                     'pipeline.config, inference_graph.pbtxt). The old export '
                     'is kept until the new one is complete. Without it, an '
                     'existing export is an error and nothing is changed.')
flags.DEFINE_string('config_override', '', 'pipeline_pb2.'
                    'TrainEvalPipelineConfig text proto to override '
                    'pipeline_config_path.')
flags.DEFINE_boolean('write_inference_graph', False, 'If true, writes '
                     'inference graph to disk.')
flags.DEFINE_string('additional_output_tensor_names', None, 'Additional '
                    'Tensors to output, to be specified as a comma separated '
                    'list of tensor names.')
flags.DEFINE_boolean('use_side_inputs', False, 'If True, uses side inputs as '
                     'well as image inputs: required for Context R-CNN (a '
                     'faster_rcnn with context_config), whose export also '
                     'takes context_features and valid_context_size; refused '
                     'for other models.')
flags.DEFINE_string('side_input_shapes', None, 'With use_side_inputs: the '
                    'shape of each side input, comma-separated integers (-1 '
                    'for unknown), `/` before the next input. Context R-CNN: '
                    '1,MAX,LENGTH/1 with context_config\'s '
                    'max_num_context_features and context_feature_length '
                    '(1,2000,2057/1 in the sample configs).')
flags.DEFINE_string('side_input_types', None, 'With use_side_inputs: '
                    'comma-separated types, each of `float`, `int` or '
                    '`string`. Context R-CNN: float,int.')
flags.DEFINE_string('side_input_names', None, 'With use_side_inputs: '
                    'comma-separated names of the side inputs, each a '
                    'placeholder of that name and a SavedModel signature '
                    'input keyed by it. Context R-CNN: '
                    'context_features,valid_context_size.')
flags.DEFINE_boolean('bfloat16', False, bfloat16_graph.FLAG_HELP)
FLAGS = flags.FLAGS

_PROG = 'export_inference_graph'
_REQUIRED = ('pipeline_config_path', 'trained_checkpoint_prefix',
             'output_directory')


def _export(unused_argv):
  pipeline_config = command_line.read_export_config(FLAGS, _REQUIRED)
  input_shape = None
  if FLAGS.input_shape:
    try:
      input_shape = [None if dim.strip() == '-1' else int(dim)
                     for dim in FLAGS.input_shape.split(',')]
    except ValueError:
      raise errors.UserInputError(
          '--input_shape must be comma-separated integers (-1 '
          'for unknown), got %r' % FLAGS.input_shape) from None
  side_input_shapes, side_input_names, side_input_types = (
      export_inputs.side_inputs_from_flags(FLAGS))
  additional = None
  if FLAGS.additional_output_tensor_names:
    additional = FLAGS.additional_output_tensor_names.split(',')
  exporter.export_inference_graph(
      FLAGS.input_type, pipeline_config, FLAGS.trained_checkpoint_prefix,
      FLAGS.output_directory, input_shape=input_shape,
      write_inference_graph=FLAGS.write_inference_graph,
      additional_output_tensor_names=additional,
      use_side_inputs=FLAGS.use_side_inputs,
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
