"""Exports a trained detector as the original's TF2 exporter lays it out.

The output directory holds:

  saved_model/       a TF2 SavedModel: called directly
                     (`tf.saved_model.load(path)(input_tensor)`) or through
                     its `serving_default` signature, with input
                     `input_tensor` (and the side inputs, by name).
  checkpoint/        ckpt-0, object-based, the model's values alone (the
                     moving averages when those are exported), with its
                     `checkpoint` state file.
  pipeline.config    the config the export was built from.

The model is built and frozen as exporter.py does for TF1 exports; the
SavedModel serves the frozen graph. Its outputs are those of the
original's TF2 exports: every post-processing output, float32, with
1-based detection_classes (for an SSD or a Faster R-CNN: detection_boxes,
detection_scores, detection_classes, num_detections,
detection_multiclass_scores, detection_anchor_indices (the anchor, or the
second stage's proposal, of each detection), raw_detection_boxes,
raw_detection_scores; a Mask R-CNN's detection_masks too).

checkpoint/ckpt-0 keys each value by the original's object path for the
models of its TF2 names (original_object_paths: the SSD, Faster R-CNN and
Mask R-CNN ones), so its TF2 code, and our fine-tuning, restore it. Other
models' values are keyed `model/<variable name>`, which our evaluation,
export and fine-tuning read; the original cannot, as it has no TF2 form of
those models.
"""
import os

from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.export import bfloat16_graph
from od_estimator.export import exporter
from od_estimator.export import original_object_paths
from od_estimator.protos import pipeline_pb2
from od_estimator.utils import file_safety
from od_estimator.utils import graph_building
from od_estimator.utils import graph_functions
from od_estimator.utils import object_checkpoint_writer

EXPORT_ENTRIES = ('saved_model', 'checkpoint', 'pipeline.config')

# --input_type -> the signature input's (shape, dtype), as the original's.
INPUT_SPECS = {
    'image_tensor': ([1, None, None, 3], tf.uint8),
    'encoded_image_string_tensor': ([None], tf.string),
    'tf_example': ([None], tf.string),
    'float_image_tensor': ([None, None, None, 3], tf.float32),
}
# The signature's image input.
INPUT_NAME = 'input_tensor'

_DET = fields.DetectionResultFields


def _outputs(detections, unused_collection_name=None):
  """Named float32 outputs: every post-processing output, classes 1-based."""
  outputs = {}
  for key, tensor in detections.items():
    tensor = tf.cast(tensor, tf.float32)
    if key == _DET.detection_classes:
      tensor += fields.LABEL_ID_OFFSET
    outputs[key] = tf.identity(tensor, name=key)
  return outputs


def _check_input_type(input_type, use_side_inputs):
  if input_type not in INPUT_SPECS:
    raise errors.UserInputError(
        '--input_type=%s is not supported; use one of %s.' % (
            input_type, ', '.join(sorted(INPUT_SPECS))))
  if use_side_inputs and input_type != 'image_tensor':
    raise errors.UserInputError(
        '--use_side_inputs takes --input_type=image_tensor only (as the '
        'original), got --input_type=%s.' % input_type)


def _second_stage_dropout(model_config):
  """Whether a two-stage model's second-stage predictor has dropout."""
  if model_config is None or model_config.WhichOneof('model') != (
      'faster_rcnn'):
    return False
  predictor = model_config.faster_rcnn.second_stage_box_predictor
  return (predictor.WhichOneof('box_predictor_oneof') ==
          'mask_rcnn_box_predictor' and
          predictor.mask_rcnn_box_predictor.use_dropout)


def checkpoint_entries(names, values, model_config=None):
  """object_checkpoint_writer.Entry of each model variable's value, keyed
  by the original's object path (else `model/<name>`).

  Args:
    names: the model's variable names in creation order.
    values: {name: value}.
    model_config: the DetectionModel config, for what the names do not
      tell (a two-stage predictor's dropout); None for an SSD.
  """
  paths = original_object_paths.original_paths(
      names, second_stage_dropout=_second_stage_dropout(model_config))
  if paths is None:
    logging.info('No TF2 layout of the original for this model: '
                 'checkpoint/ckpt-0 keys its values by variable name.')
    paths = {name: 'model/' + name for name in names}
  return [object_checkpoint_writer.Entry(paths[name], name, values[name])
          for name in names]


def frozen_graph_function(frozen_graph_def, inputs, outputs):
  """A TF2 function running a frozen GraphDef.

  The GraphDef is imported once, into the function itself, its input
  placeholders replaced by the function's arguments (utils/graph_functions).

  Args:
    frozen_graph_def: GraphDef without variables.
    inputs: names of the placeholder tensors fed, in the function's
      argument order.
    outputs: names of the tensors returned, in any tf.nest structure (the
      function returns that structure).
  """
  nodes = {node.name: node for node in frozen_graph_def.node}
  specs = [tf.TensorSpec(
      tf.TensorShape(nodes[name.split(':')[0]].attr['shape'].shape),
      tf.as_dtype(nodes[name.split(':')[0]].attr['dtype'].type))
           for name in inputs]
  return graph_functions.function_of_graph_def(frozen_graph_def, inputs,
                                               specs, outputs)


class _Detector(tf.Module):
  """Serves a frozen inference graph as a TF2 function."""

  def __init__(self, frozen_graph_def, placeholders, outputs, specs):
    super().__init__()
    self._serve = frozen_graph_function(
        frozen_graph_def, [placeholder.name for placeholder in placeholders],
        {key: output.name for key, output in outputs.items()})
    self.__call__ = tf.function(self._call, input_signature=specs)

  def _call(self, input_tensor, *side_inputs):
    return self._serve(input_tensor, *side_inputs)


def _write_saved_model(directory, frozen_graph_def, placeholders, outputs,
                       specs):
  detector = _Detector(frozen_graph_def, placeholders, outputs, specs)
  tf.saved_model.save(detector, directory,
                      signatures=detector.__call__.get_concrete_function())


def export_inference_graph(input_type, pipeline_config,
                           trained_checkpoint_dir, output_directory,
                           use_side_inputs=False, side_input_shapes=None,
                           side_input_names=None, side_input_types=None,
                           overwrite=False, bfloat16=False):
  """Exports the model of a pipeline config as the original's TF2 exporter.

  The moving averages are exported when eval_config.use_moving_averages
  is set (as exporter.export_inference_graph), so the export serves what
  evaluation and Estimator.predict compute.

  Args:
    input_type: a key of INPUT_SPECS.
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig (not modified).
    trained_checkpoint_dir: a directory, whose latest checkpoint (TF1
      `model.ckpt-N` or TF2 `ckpt-N`) is exported, or a checkpoint prefix.
    output_directory: where the export is written (created if needed); an
      export already there is refused unless `overwrite`.
    use_side_inputs: see exporter.build_detection_graph; image_tensor only.
    side_input_shapes: see exporter.build_detection_graph.
    side_input_names: see exporter.build_detection_graph.
    side_input_types: see exporter.build_detection_graph.
    overwrite: replace an export already in output_directory.
    bfloat16: on a CPU with bfloat16 instructions, the SavedModel runs in
      bfloat16 where oneDNN has it (bfloat16_graph); checkpoint/ stays
      float32. Elsewhere one log line and a float32 export.

  Raises:
    errors.UserInputError: an unsupported input type or side inputs, a
      missing or damaged checkpoint, one that does not match the model, an
      output_directory holding training checkpoints or (without
      `overwrite`) an export.
  """
  if not isinstance(pipeline_config, pipeline_pb2.TrainEvalPipelineConfig):
    raise ValueError('pipeline_config must be a TrainEvalPipelineConfig, got '
                     '%s.' % type(pipeline_config).__name__)
  _check_input_type(input_type, use_side_inputs)
  exporter.check_side_input_flags(pipeline_config, use_side_inputs,
                                  side_input_shapes, side_input_names,
                                  side_input_types)
  checkpoint = exporter.resolve_checkpoint(trained_checkpoint_dir,
                                          pipeline_config)
  exporter.check_not_a_training_directory(output_directory)
  bfloat16 = bfloat16_graph.wanted(bfloat16)
  shape, dtype = INPUT_SPECS[input_type]
  specs = [tf.TensorSpec(shape, dtype, name=INPUT_NAME)]
  for side_shape, name, side_dtype in zip(side_input_shapes or [],
                                          side_input_names or [],
                                          side_input_types or []):
    specs.append(tf.TensorSpec(side_shape, side_dtype, name=name))
  with file_safety.staged_outputs(output_directory, EXPORT_ENTRIES, overwrite,
                                  '--output_directory') as staging:
    with tf.Graph().as_default() as graph, graph_building.identity_equality():
      detection_model = model_builder.build(pipeline_config.model,
                                            is_training=False,
                                            add_summaries=False)
      outputs, placeholders = exporter.build_detection_graph(
          input_type, detection_model,
          shape if input_type.endswith('image_tensor') else None,
          output_collection_name=None,
          graph_hook_fn=exporter.evaluation_graph_rewriter(pipeline_config),
          use_side_inputs=use_side_inputs,
          side_input_shapes=side_input_shapes,
          side_input_names=side_input_names,
          side_input_types=side_input_types, output_fn=_outputs)
      variables = [variable for variable in tf.compat.v1.global_variables()
                   if variable.op.name !=
                   tf.compat.v1.GraphKeys.GLOBAL_STEP]
      values = {}
      _, frozen_graph_def = exporter.restore_and_freeze(
          graph, exporter.uses_moving_averages(pipeline_config), checkpoint,
          list(outputs), lambda sess: values.update(sess.run(
              {variable.op.name: variable for variable in variables})))
      names = [variable.op.name for variable in variables]
    if bfloat16:
      frozen_graph_def = bfloat16_graph.rewrite(frozen_graph_def,
                                                list(outputs))
    # Written eagerly, outside the inference graph.
    object_checkpoint_writer.save_numbered(
        os.path.join(staging, 'checkpoint'),
        checkpoint_entries(names, values, pipeline_config.model), 0)
    ordered = [placeholders['inputs']] + [
        placeholders[name] for name in side_input_names or []]
    _write_saved_model(os.path.join(staging, 'saved_model'),
                       frozen_graph_def, ordered, outputs, specs)
    exporter.save_exported_config(pipeline_config, staging)
  logging.info('Exported %s (%s input) to %s', checkpoint, input_type,
               output_directory)

