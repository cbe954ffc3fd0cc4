"""Exports a trained detector as a frozen graph and a TF1 SavedModel.

The export directory has the layout of the original API's exporter:

  frozen_inference_graph.pb  GraphDef with the weights as constants.
  saved_model/               SavedModel, tag `serve`, signature
                             `serving_default` (PREDICT) with input `inputs`.
  model.ckpt.*               the weights actually exported (the moving
                             averages when those are used).
  pipeline.config            the config the export was built from.

The export is written in a staging folder inside the output directory and
moved into place once complete (utils/file_safety.staged_outputs): an
existing export is kept unless `overwrite` is given, and a replaced one is
removed only after its successor is in place.

Tensor names match the original, so serving code written for it works:
the input placeholder is `image_tensor`, `encoded_image_string_tensor` or
`tf_example`, and the outputs are `detection_boxes`, `detection_scores`,
`detection_classes` (1-based label ids, float32), `num_detections`
(float32) plus the optional outputs the model produces. A Context R-CNN
also takes its side inputs, placeholders named (and signature inputs keyed)
`context_features` and `valid_context_size`.
"""
import os

from absl import logging
import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.export import as_run_config
from od_estimator.export import bfloat16_graph
from od_estimator.export import export_inputs
from od_estimator.estimator import model_fn
from od_estimator.estimator import moving_averages
from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.input_pipeline import context_features
from od_estimator.protos import pipeline_pb2
from od_estimator.utils import checkpoint_health
from od_estimator.config import config_util
from od_estimator.utils import file_safety
from od_estimator.utils import graph_building

# Everything an export writes in its output directory: replaced as a whole.
EXPORT_ENTRIES = ('frozen_inference_graph.pb', 'saved_model', 'model.ckpt.*',
                  'checkpoint', 'pipeline.config', 'inference_graph.pbtxt')


# The input placeholders live in export_inputs; the original's names stay
# importable from here.
input_placeholder_fn_map = export_inputs.input_placeholder_fn_map
parse_side_inputs = export_inputs.parse_side_inputs


# ---------------------------------------------------------------------------
# Graph.

def add_output_tensor_nodes(postprocessed_tensors,
                            output_collection_name='inference_op'):
  """Adds identity nodes named after each exported output.

  Args:
    postprocessed_tensors: DetectionModel.postprocess() outputs:
      detection_boxes [batch, max_detections, 4], detection_scores and
      detection_classes (0-based) [batch, max_detections], num_detections
      [batch], and optionally any of
      standard_fields.OPTIONAL_EXPORTED_OUTPUTS.
    output_collection_name: graph collection the outputs are added to; None
      adds them to none.

  Returns:
    dict from output name to its tensor: detection_boxes [batch, N, 4]
    float32 normalized ymin, xmin, ymax, xmax; detection_scores [batch, N];
    detection_classes [batch, N] float32 1-based; num_detections [batch]
    float32; and the optional outputs present in postprocessed_tensors.
  """
  exported = model_fn.output_dict_for_export(postprocessed_tensors)
  outputs = {}
  for key, tensor in exported.items():
    outputs[key] = tf.identity(tensor, name=key)
    if output_collection_name:
      tf.compat.v1.add_to_collection(output_collection_name, outputs[key])
  return outputs


def _get_outputs_from_inputs(input_tensors, detection_model,
                             output_collection_name, output_fn,
                             **side_inputs):
  images = tf.cast(input_tensors, tf.float32)
  preprocessed, true_image_shapes = detection_model.preprocess(images)
  predictions = detection_model.predict(preprocessed, true_image_shapes,
                                        **side_inputs)
  detections = detection_model.postprocess(predictions, true_image_shapes)
  return output_fn(detections, output_collection_name)


# As model_fn builds the model for the Estimator: plain graph-building
# Python, which tf.map_fn's AutoGraph conversion would only slow down (by
# seconds per export) without changing a node.
@tf.autograph.experimental.do_not_convert
def build_detection_graph(input_type, detection_model, input_shape,
                          output_collection_name='inference_op',
                          graph_hook_fn=None, use_side_inputs=False,
                          side_input_shapes=None, side_input_names=None,
                          side_input_types=None,
                          output_fn=add_output_tensor_nodes):
  """Builds input placeholder -> model -> named outputs in the default graph.

  Args:
    input_type: 'image_tensor', 'encoded_image_string_tensor' or
      'tf_example'.
    detection_model: a DetectionModel built with is_training=False.
    input_shape: [batch, height, width, 3] with None for unknown dimensions,
      or None. For image_tensor it is the placeholder's shape; for the
      string inputs decoded images are resized to its height and width.
    output_collection_name: collection the outputs are added to.
    graph_hook_fn: optional fn() called once the graph is built (e.g. a
      graph rewriter).
    use_side_inputs: also add a placeholder for each side input the model's
      predict() takes (detection_model.side_input_names: Context R-CNN's
      context_features and valid_context_size), named after it and passed
      to predict() by name. Required exactly when the model takes some.
    side_input_shapes: list of shapes (lists, None for unknown dimensions),
      with use_side_inputs.
    side_input_names: list of names, with use_side_inputs.
    side_input_types: list of tf.DTypes, with use_side_inputs.
    output_fn: fn(postprocessed tensors, output_collection_name) -> dict
      from output name to its named tensor; add_output_tensor_nodes, or
      the TF2 export's outputs (exporter_v2).

  Returns:
    (outputs: dict from output name to tensor, placeholders: dict with the
    input placeholder under 'inputs' and each side input under its name).

  Raises:
    UserInputError: for an unknown input_type, a malformed input_shape, or
      side inputs other than the model takes (export_inputs.
      check_side_inputs).
  """
  if input_type not in input_placeholder_fn_map:
    raise errors.UserInputError(
        'Unknown input type: %r; expected one of %s.' % (
        input_type, ', '.join(sorted(input_placeholder_fn_map))))
  placeholder_args = {}
  if input_shape is not None:
    input_shape = list(input_shape)
    if len(input_shape) != 4 or input_shape[3] not in (3, None):
      raise errors.UserInputError(
          'input_shape must be [batch, height, width, 3] (-1 or '
          'None for unknown), got %s.' % (input_shape,))
    placeholder_args['input_shape'] = input_shape
  placeholder, images = input_placeholder_fn_map[input_type](
      **placeholder_args)
  placeholders = {'inputs': placeholder}
  side_inputs = {}
  export_inputs.check_side_inputs(detection_model.side_input_names,
                                  use_side_inputs, side_input_shapes,
                                  side_input_names, side_input_types)
  if use_side_inputs:
    for shape, name, dtype in zip(side_input_shapes, side_input_names,
                                  side_input_types):
      placeholders[name], side_inputs[name] = (
          export_inputs.side_input_tensor_placeholder(shape, name, dtype))
  outputs = _get_outputs_from_inputs(images, detection_model,
                                     output_collection_name, output_fn,
                                     **side_inputs)
  # Restored from the checkpoint so the export records the trained step.
  tf.compat.v1.train.get_or_create_global_step()
  if graph_hook_fn:
    graph_hook_fn()
  return outputs, placeholders


def profile_inference_graph(graph):
  """Logs the number of trainable parameters of `graph`.

  Batch-norm variables are left out, as they are usually folded into the
  preceding convolution for inference.
  """
  with graph.as_default():
    variables = tf.compat.v1.trainable_variables()
  count = sum(int(np.prod(v.shape.as_list())) for v in variables
              if 'BatchNorm' not in v.op.name)
  logging.info('Inference graph: %d trainable parameters (batch norm '
               'excluded) in %d variables.', count, len(variables))


# ---------------------------------------------------------------------------
# Checkpoints and freezing.

def resolve_checkpoint(trained_checkpoint_prefix, pipeline_config=None):
  """Returns the checkpoint prefix; a directory means its latest checkpoint.

  Given the pipeline_config being exported, logs one warning when its model
  differs from the as-run pipeline.config beside the checkpoint
  (as_run_config.warn_if_different).

  Raises:
    UserInputError: when there is no checkpoint there, or it is damaged.
  """
  prefix = trained_checkpoint_prefix
  if prefix and tf.io.gfile.isdir(prefix):
    latest = tf.train.latest_checkpoint(prefix)
    if not latest:
      raise errors.UserInputError(
          'no checkpoint in directory %s (expected a prefix like '
          '%s/model.ckpt-NNNN or ckpt-N, and its `checkpoint` file).' % (
              prefix, prefix))
    prefix = latest
  if not prefix or not (tf.io.gfile.exists(prefix + '.index') or
                        tf.io.gfile.exists(prefix)):
    raise errors.UserInputError(
        'checkpoint not found: %s (pass the prefix of the '
        '.index/.data files, e.g. path/model.ckpt-50000%s).' % (
            prefix, '' if tf.io.gfile.isdir(os.path.dirname(prefix) or '.')
            else ', or a training folder; %s does not exist' % prefix))
  _check_intact(prefix)
  if pipeline_config is not None:
    as_run_config.warn_if_different(pipeline_config, prefix)
  return prefix


def _check_intact(prefix):
  """Raises UserInputError naming the damaged file and an intact neighbour."""
  wrong = checkpoint_health.problem(prefix)
  if wrong is None:
    return
  good = checkpoint_health.last_intact(os.path.dirname(prefix) or '.',
                                       skip=(prefix,))
  raise errors.UserInputError(
      'checkpoint %s is damaged: %s. %s' % (
          prefix, wrong, 'The last intact checkpoint beside it is %s: '
          'export that one.' % good if good else
          'No intact checkpoint is beside it.'))


def replace_variable_values_with_moving_averages(graph,
                                                 current_checkpoint_file,
                                                 new_checkpoint_file,
                                                 no_ema_collection=None):
  """Writes a checkpoint holding the moving averages under the raw names.

  Trainable variables without an average in the checkpoint keep their raw
  values (with a logged warning).

  Args:
    graph: tf.Graph with the model's variables.
    current_checkpoint_file: checkpoint with `<var>/ExponentialMovingAverage`
      entries.
    new_checkpoint_file: prefix to write.
    no_ema_collection: optional list of name substrings whose variables keep
      their raw values.
  """
  with graph.as_default():
    with tf.compat.v1.Session() as sess:
      moving_averages.restore(sess, True, current_checkpoint_file,
                              no_ema_collection)
      tf.compat.v1.train.Saver().save(sess, new_checkpoint_file)


def freeze_graph_with_def_protos(input_graph_def, input_saver_def,
                                 input_checkpoint, output_node_names,
                                 restore_op_name=None,
                                 filename_tensor_name=None, output_graph='',
                                 clear_devices=True, initializer_nodes=''):
  """Restores a graph's variables and bakes them in as constants.

  Args:
    input_graph_def: GraphDef containing the variables and the saver ops.
    input_saver_def: SaverDef of a saver in input_graph_def.
    input_checkpoint: checkpoint prefix holding every saver variable.
    output_node_names: comma-separated names of the nodes to keep.
    restore_op_name: unused (the SaverDef names it); kept for the
      original's signature.
    filename_tensor_name: unused, as restore_op_name.
    output_graph: optional path the frozen GraphDef is written to.
    clear_devices: drop device placements, so the graph runs anywhere.
    initializer_nodes: comma-separated ops run before freezing (e.g. table
      initializers).

  Returns:
    The frozen GraphDef, pruned to what output_node_names need.
  """
  del restore_op_name, filename_tensor_name
  graph_def = tf.compat.v1.GraphDef()
  graph_def.CopyFrom(input_graph_def)
  if clear_devices:
    for node in graph_def.node:
      node.device = ''
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as sess:
      tf.compat.v1.train.Saver(saver_def=input_saver_def).restore(
          sess, input_checkpoint)
      if initializer_nodes:
        sess.run(initializer_nodes.replace(' ', '').split(','))
      frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
          sess, graph_def, [n for n in output_node_names.split(',') if n])
  if output_graph:
    file_safety.write_file(output_graph, frozen.SerializeToString())
  return frozen


def write_saved_model(saved_model_path, frozen_graph_def, inputs, outputs):
  """Writes a SavedModel serving the frozen graph.

  The SavedModel is built beside `saved_model_path` and replaces what is
  there (a link is replaced, never followed) only once complete.

  Args:
    saved_model_path: directory to create; an existing one is replaced.
    frozen_graph_def: GraphDef without variables.
    inputs: dict from signature key to tensor (or one tensor, keyed
      'inputs'); tensors are looked up by name in frozen_graph_def.
    outputs: dict from signature key to tensor, looked up the same way.
  """
  name = os.path.basename(os.path.normpath(saved_model_path))
  with file_safety.staged_outputs(
      os.path.dirname(os.path.normpath(saved_model_path)) or '.', [name],
      True, 'saved_model_path') as staging:
    _build_saved_model(os.path.join(staging, name), frozen_graph_def, inputs,
                       outputs)


def _build_saved_model(saved_model_path, frozen_graph_def, inputs, outputs):
  """Writes the SavedModel of write_saved_model into a new directory."""
  if not isinstance(inputs, dict):
    inputs = {'inputs': inputs}
  saved_model = tf.compat.v1.saved_model
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(frozen_graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as sess:
      def info(tensors):
        return {key: saved_model.utils.build_tensor_info(
            graph.get_tensor_by_name(tensor.name))
                for key, tensor in tensors.items()}
      signature = saved_model.signature_def_utils.build_signature_def(
          inputs=info(inputs), outputs=info(outputs),
          method_name=saved_model.signature_constants.PREDICT_METHOD_NAME)
      builder = saved_model.builder.SavedModelBuilder(saved_model_path)
      builder.add_meta_graph_and_variables(
          sess, [saved_model.tag_constants.SERVING],
          signature_def_map={
              saved_model.signature_constants
              .DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature})
      builder.save()


def _node_name(tensor_name):
  return tensor_name.strip().split(':')[0]


def restore_and_freeze(graph, use_moving_averages, checkpoint,
                       output_node_names, save_fn):
  """Restores the exported weights and freezes the graph with them.

  Exactly the session's values are frozen (freeze_graph_with_def_protos
  would restore a saved copy into a second graph for the same constants).

  Args:
    graph: the inference graph with the model's variables.
    use_moving_averages: restore the averages under the raw names.
    checkpoint: the checkpoint prefix, TF1 or TF2.
    output_node_names: the nodes the frozen graph keeps.
    save_fn: fn(session) called once the weights are restored, to save
      them.

  Returns:
    (graph_def without device placements, frozen GraphDef).
  """
  with tf.compat.v1.Session(graph=graph) as sess:
    moving_averages.restore(sess, use_moving_averages, checkpoint)
    save_fn(sess)
    graph_def = graph.as_graph_def()
    for node in graph_def.node:
      node.device = ''
    frozen_graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
        sess, graph_def, output_node_names)
  return graph_def, frozen_graph_def


def _export_inference_graph(input_type, detection_model, use_moving_averages,
                            trained_checkpoint_prefix, output_directory,
                            additional_output_tensor_names=None,
                            input_shape=None,
                            output_collection_name='inference_op',
                            graph_hook_fn=None, write_inference_graph=False,
                            use_side_inputs=False, side_input_shapes=None,
                            side_input_names=None, side_input_types=None,
                            bfloat16=False):
  """Builds the inference graph in the default graph and writes the export.

  output_directory is the (new, empty) staging folder of the export;
  bfloat16: bake the bfloat16 rewrite into the frozen graph
  (bfloat16_graph.rewrite).
  """
  frozen_graph_path = os.path.join(output_directory,
                                   'frozen_inference_graph.pb')
  saved_model_path = os.path.join(output_directory, 'saved_model')
  model_path = os.path.join(output_directory, 'model.ckpt')

  outputs, placeholders = build_detection_graph(
      input_type=input_type, detection_model=detection_model,
      input_shape=input_shape, output_collection_name=output_collection_name,
      graph_hook_fn=graph_hook_fn, use_side_inputs=use_side_inputs,
      side_input_shapes=side_input_shapes, side_input_names=side_input_names,
      side_input_types=side_input_types)
  graph = tf.compat.v1.get_default_graph()
  profile_inference_graph(graph)

  output_node_names = list(outputs)
  output_node_names += [_node_name(name)
                        for name in additional_output_tensor_names or []]
  # Re-save the weights that are exported (averages under the raw names), so
  # model.ckpt is complete.
  saver = tf.compat.v1.train.Saver(save_relative_paths=True)
  graph_def, frozen_graph_def = restore_and_freeze(
      graph, use_moving_averages, trained_checkpoint_prefix,
      output_node_names, lambda sess: saver.save(sess, model_path))
  if bfloat16:
    frozen_graph_def = bfloat16_graph.rewrite(frozen_graph_def,
                                              output_node_names)
  if write_inference_graph:
    file_safety.write_file(
        os.path.join(output_directory, 'inference_graph.pbtxt'),
        str(graph_def))
  file_safety.write_file(frozen_graph_path,
                         frozen_graph_def.SerializeToString())
  _build_saved_model(saved_model_path, frozen_graph_def, placeholders,
                     outputs)


# The checkpoints of a training directory, ours and the original's TF2 loop's.
TRAINING_CHECKPOINTS = ('model.ckpt-*.index', 'ckpt-*.index')


def check_not_a_training_directory(output_directory):
  """Raises UserInputError when output_directory holds training checkpoints.

  The export's `checkpoint` file (or folder) would replace the training's,
  so that a resumed training would restore the exported copy instead.
  """
  found = [path for pattern in TRAINING_CHECKPOINTS
           for path in tf.io.gfile.glob(os.path.join(output_directory,
                                                     pattern))]
  if found:
    raise errors.UserInputError(
        '--output_directory=%s holds training checkpoints (e.g. %s); an '
        'export there would replace their `checkpoint` file. Export into '
        'another directory.' % (output_directory,
                                os.path.basename(min(found))))


def check_side_input_flags(pipeline_config, use_side_inputs,
                           side_input_shapes, side_input_names,
                           side_input_types):
  """export_inputs.check_side_inputs against the config's side inputs."""
  specs = context_features.side_input_specs(pipeline_config.model)
  export_inputs.check_side_inputs(
      [name for name, _, _ in specs], use_side_inputs, side_input_shapes,
      side_input_names, side_input_types, expected_specs=specs)


def save_exported_config(pipeline_config, directory):
  """Writes directory/pipeline.config; the exported weights already are the
  averages, so it no longer asks for them."""
  saved_config = pipeline_pb2.TrainEvalPipelineConfig()
  saved_config.CopyFrom(pipeline_config)
  saved_config.eval_config.use_moving_averages = False
  config_util.save_pipeline_config(saved_config, directory)


def evaluation_graph_rewriter(pipeline_config):
  """The config's evaluation rewrite (FakeQuant ops before freezing, as the
  original), or None."""
  if not pipeline_config.HasField('graph_rewriter'):
    return None
  return graph_rewriter_builder.build(pipeline_config.graph_rewriter,
                                      is_training=False)


def uses_moving_averages(pipeline_config):
  """EMA weights are exported when evaluation uses them, as in the original.

  Evaluation, Estimator.predict and the Servo export all follow
  eval_config.use_moving_averages, so the export reproduces their
  detections. Training's use_moving_average only keeps the averages: with
  its default decay (0.9999) they stay near the initial weights for
  thousands of steps.
  """
  return pipeline_config.eval_config.use_moving_averages


def export_inference_graph(input_type, pipeline_config,
                           trained_checkpoint_prefix, output_directory,
                           input_shape=None,
                           output_collection_name='inference_op',
                           additional_output_tensor_names=None,
                           write_inference_graph=False, use_side_inputs=False,
                           side_input_shapes=None, side_input_names=None,
                           side_input_types=None, overwrite=False,
                           bfloat16=False):
  """Exports the model of a pipeline config with a checkpoint's weights.

  The moving averages of the weights are exported when
  eval_config.use_moving_averages is set; trainable variables without an
  average in the checkpoint then keep their raw values.

  Args:
    input_type: a key of input_placeholder_fn_map.
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig (not modified).
    trained_checkpoint_prefix: checkpoint prefix (path/model.ckpt-N), or a
      directory whose latest checkpoint is used.
    output_directory: where the export is written (created if needed). An
      export already there is refused unless `overwrite`; other entries
      are left alone.
    input_shape: optional [batch, height, width, 3] with None for unknown
      dimensions; see build_detection_graph.
    output_collection_name: collection the outputs are added to.
    additional_output_tensor_names: optional list of further tensor names
      kept in the frozen graph.
    write_inference_graph: also write inference_graph.pbtxt (unfrozen).
    use_side_inputs: see build_detection_graph; a Context R-CNN is
      exported with side_input_shapes [[1, max_num_context_features,
      context_feature_length], [1]], side_input_names ['context_features',
      'valid_context_size'] and side_input_types [tf.float32, tf.int32]
      (context_features.side_input_specs), as the original documents it.
    side_input_shapes: see build_detection_graph.
    side_input_names: see build_detection_graph.
    side_input_types: see build_detection_graph.
    overwrite: replace an export already in output_directory (it is kept
      until the new one is complete).
    bfloat16: the frozen graph and SavedModel in bfloat16 where the CPU
      has it (bfloat16_graph.wanted); model.ckpt stays float32.

  Raises:
    errors.UserInputError: for a missing checkpoint, one that does not
      match the model, an unsupported config, bad input arguments (side
      inputs missing for a Context R-CNN, given to another model, or of
      other names, types or ranks than the config's), an output_directory
      that is a file, or one holding an export without `overwrite`.

  A config whose model differs from the as-run pipeline.config beside the
  checkpoint gets one warning naming the fields (as_run_config).
  """
  if not isinstance(pipeline_config, pipeline_pb2.TrainEvalPipelineConfig):
    raise ValueError('pipeline_config must be a TrainEvalPipelineConfig, got '
                     '%s.' % type(pipeline_config).__name__)
  check_side_input_flags(pipeline_config, use_side_inputs, side_input_shapes,
                         side_input_names, side_input_types)
  checkpoint = resolve_checkpoint(trained_checkpoint_prefix, pipeline_config)
  check_not_a_training_directory(output_directory)
  graph_rewriter_fn = evaluation_graph_rewriter(pipeline_config)
  with file_safety.staged_outputs(output_directory, EXPORT_ENTRIES, overwrite,
                                  '--output_directory') as staging, \
      tf.Graph().as_default(), graph_building.identity_equality():
    detection_model = model_builder.build(pipeline_config.model,
                                          is_training=False,
                                          add_summaries=False)
    _export_inference_graph(
        input_type, detection_model, uses_moving_averages(pipeline_config),
        checkpoint, staging,
        additional_output_tensor_names=additional_output_tensor_names,
        input_shape=input_shape,
        output_collection_name=output_collection_name,
        graph_hook_fn=graph_rewriter_fn,
        write_inference_graph=write_inference_graph,
        use_side_inputs=use_side_inputs, side_input_shapes=side_input_shapes,
        side_input_names=side_input_names, side_input_types=side_input_types,
        bfloat16=bfloat16_graph.wanted(bfloat16))
    save_exported_config(pipeline_config, staging)
  logging.info('Exported %s (%s input) to %s', checkpoint, input_type,
               output_directory)


def export_for_serving(pipeline_config, trained_checkpoint_prefix,
                       output_directory):
  """export_inference_graph with image_tensor input and the config's own
  side inputs (Context R-CNN's), replacing an export in output_directory."""
  specs = context_features.side_input_specs(pipeline_config.model)
  export_inference_graph(
      'image_tensor', pipeline_config, trained_checkpoint_prefix,
      output_directory, use_side_inputs=bool(specs),
      side_input_shapes=[shape for _, shape, _ in specs] or None,
      side_input_names=[name for name, _, _ in specs] or None,
      side_input_types=[dtype for _, _, dtype in specs] or None,
      overwrite=True)
