"""An exported SavedModel converted to ONNX with tf2onnx (extra: onnx).

`convert_saved_model` takes what export_inference_graph wrote (the export
folder or its saved_model/) and returns, and writes, an ONNX model of its
serving_default signature: the same input (`inputs`, uint8 [batch, height,
width, 3] for --input_type image_tensor) and the same outputs by name
(detection_boxes, detection_scores, detection_classes, num_detections, and
whatever else the export has), post-processing (box decoding, per-class
NMS, sorting) included as ONNX ops (Loop, NonMaxSuppression, TopK), so
ONNX Runtime, TensorRT's ONNX parser or OpenCV need no TensorFlow.

Two of tf2onnx's shortcuts give wrong detections on our graphs, and are
turned off here:
  - tf.where as arithmetic (cond * x + (1 - cond) * y): a -inf in the branch
    not taken (the NMS sorts invalid rows last with -inf) becomes NaN, and
    the sort puts the classes in the wrong order. Every tf.where becomes an
    ONNX Where.
  - the merge of duplicated nodes: it fuses a loop's int32 counter step with
    a float constant of the preprocessor's, a model ONNX Runtime refuses.
"""
import copy
import importlib
import os

from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.inference import exported_model
from od_estimator.utils import file_safety

# tf2onnx 1.17's preferred opset (ONNX Runtime 1.32 runs it in the tests).
DEFAULT_OPSET = 15
INSTALL_HINT = 'pip install od_estimator[onnx]'
# tf2onnx's ONNX optimizers that are wrong on our graphs (module docstring).
_UNSAFE_OPTIMIZERS = ('merge_duplication',)
_SELECT_OPS = ('Select', 'SelectV2')
_SHADOW_PREFIX = 'outer/'
# How many unconverted nodes an error names.
_NAMED_NODES = 5


class OnnxExportError(errors.UserInputError):
  """A SavedModel that cannot become an ONNX model; the message names why."""


def converter_modules():
  """tf2onnx and onnx, or a one-line UserInputError naming the extra."""
  try:
    return (importlib.import_module('tf2onnx'),
            importlib.import_module('onnx'))
  except ImportError as error:
    raise errors.UserInputError(
        'ONNX export needs the onnx extra (tf2onnx, onnx, onnxruntime), '
        'missing %s: %s' % (error.name, INSTALL_HINT)) from None


def _select_as_where(ctx, node, name, args):
  """tf2onnx custom handler: Select/SelectV2 as ONNX Where, never as Mul/Add
  (which turns an infinite value in the branch not taken into NaN)."""
  del name, args
  from tf2onnx.onnx_opset import controlflow  # pylint: disable=g-import-not-at-top
  node.set_attr('handles_nan', True)
  controlflow.Select.version_9(ctx, node)


def _unconverted_nodes(graph, onnx):
  """[(TensorFlow op, node name)] of `graph`'s nodes (and its loops' and
  branches') that tf2onnx left as TensorFlow ops."""
  found = []
  for node in graph.get_nodes():
    # Constants and graph inputs become initializers and inputs.
    if (node.domain in ('', 'ai.onnx') and not onnx.defs.has(node.type) and
        not node.is_const() and not node.is_graph_input()):
      found.append((node.type, node.name))
    for body in (node.get_body_graphs() or {}).values():
      found.extend(_unconverted_nodes(body, onnx))
  return found


def _unconverted_error(saved_model_dir, nodes, tf2onnx, opset):
  ops = sorted({op for op, _ in nodes})
  examples = ', '.join('%s (%s)' % node for node in nodes[:_NAMED_NODES])
  return OnnxExportError(
      'cannot convert %s to ONNX: TensorFlow op%s %s ha%s no ONNX conversion '
      'in tf2onnx %s at opset %d; node%s: %s%s' % (
          saved_model_dir, 's' if len(ops) > 1 else '', ', '.join(ops),
          've' if len(ops) > 1 else 's', tf2onnx.__version__, opset,
          's' if len(nodes) > 1 else '', examples,
          ' and %d more' % (len(nodes) - _NAMED_NODES)
          if len(nodes) > _NAMED_NODES else ''))


def _rename_shadowed_nodes(graph_def):
  """Renames the graph's nodes that share a name with a node of a loop body.

  tf2onnx renames a tensor in the graph and in its loops' bodies alike: a
  body node named as an outer one (Faster R-CNN's first-stage NMS loop and
  its second stage both have a Reshape_3) ends up reading the outer tensor,
  a cycle. Returns the function renaming a tensor name alike.
  """
  in_bodies = {node.name for function in graph_def.library.function
               for node in function.node_def}
  renamed = {node.name: _SHADOW_PREFIX + node.name for node in graph_def.node
             if node.name in in_bodies}

  def rename(reference):
    control = reference.startswith('^')
    name, colon, port = reference.lstrip('^').partition(':')
    return ('^' if control else '') + renamed.get(name, name) + colon + port

  for node in graph_def.node:
    node.name = renamed.get(node.name, node.name)
    node.input[:] = [rename(reference) for reference in node.input]
  return rename


def _optimized(graph, optimizer):
  """The graph after tf2onnx's ONNX optimizers, less _UNSAFE_OPTIMIZERS.

  They run on the graph itself, not each on a copy as tf2onnx's own
  fallback does (half the conversion's time); should one fail, they run
  again that way on a copy kept of the graph.
  """
  optimizers = {name: kind
                for name, kind in optimizer._optimizers.items()  # pylint: disable=protected-access
                if name not in _UNSAFE_OPTIMIZERS}
  kept = copy.deepcopy(graph)
  try:
    return optimizer.optimize_graph(graph, catch_errors=False,
                                    optimizers=optimizers)
  except Exception as error:  # pylint: disable=broad-except
    logging.warning('a tf2onnx optimizer failed (%s); running them again '
                    'one at a time, each failure leaving its input',
                    errors.one_line(error))
    return optimizer.optimize_graph(kept, catch_errors=True,
                                    optimizers=optimizers)


def _frozen_signature(saved_model_dir, tf_loader):
  """serving_default as a frozen GraphDef, with its tensors' names."""
  try:
    return tf_loader.from_saved_model(
        saved_model_dir, None, None, tag=[tf.saved_model.SERVING],
        signatures=[exported_model.SIGNATURE],
        return_initialized_tables=True, return_tensors_to_rename=True)
  except (ValueError, KeyError, OSError, tf.errors.OpError) as error:
    raise OnnxExportError('cannot read %s as a SavedModel with a %s '
                          'signature: %s' % (saved_model_dir,
                                             exported_model.SIGNATURE,
                                             errors.one_line(error))) from None


def convert_saved_model(saved_model_dir, output_path=None,
                        opset=DEFAULT_OPSET):
  """The ONNX model of an exported SavedModel's serving_default signature.

  Args:
    saved_model_dir: export_inference_graph's saved_model/ folder, or the
      export folder above it.
    output_path: where the .onnx file is written (in one step), or None.
    opset: the ONNX opset (at least 11: NonMaxSuppression and Loop).

  Returns:
    The onnx.ModelProto.

  Raises:
    UserInputError: the onnx extra is not installed, or no SavedModel there.
    OnnxExportError: a TensorFlow op that tf2onnx cannot convert (named).
  """
  tf2onnx, onnx = converter_modules()
  from tf2onnx import optimizer, tf_loader, tfonnx  # pylint: disable=g-import-not-at-top
  saved_model_dir = exported_model.resolve_saved_model_dir(saved_model_dir)
  if output_path:
    file_safety.check_file_destination(output_path, '--output_path')
  graph_def, inputs, outputs, tables, renames = _frozen_signature(
      saved_model_dir, tf_loader)
  rename = _rename_shadowed_nodes(graph_def)
  inputs, outputs = [rename(name) for name in inputs], [
      rename(name) for name in outputs]
  renames = {rename(name): new for name, new in renames.items()}
  with tf.Graph().as_default() as tf_graph:
    tf.import_graph_def(graph_def, name='')
    graph = tfonnx.process_tf_graph(
        tf_graph, opset=opset, input_names=inputs, output_names=outputs,
        tensors_to_rename=renames, initialized_tables=tables,
        continue_on_error=True,
        custom_op_handlers={op: (_select_as_where, [])
                            for op in _SELECT_OPS})
    unconverted = _unconverted_nodes(graph, onnx)
    if unconverted:
      raise _unconverted_error(saved_model_dir, unconverted, tf2onnx, opset)
    graph = _optimized(graph, optimizer)
    model = graph.make_model('od_estimator export of %s' % saved_model_dir)
  if output_path:
    directory = os.path.dirname(output_path)
    if directory:
      tf.io.gfile.makedirs(directory)
    file_safety.write_file(output_path, model.SerializeToString())
  return model
