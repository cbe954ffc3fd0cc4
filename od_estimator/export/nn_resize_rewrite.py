"""Replaces the stack-and-reshape nearest-neighbour upsampling by the op.

FPN feature extractors upsample with feature_map_generators'
nearest_neighbor_upsampling (Pack, Pack, Reshape: TPU friendly). For TFLite
the original's export_tflite_ssd_graph rewrote each such upsampling feeding
an Add/AddV2/Max/Mul into one ResizeNearestNeighbor
(`<scope>/resize_nearest_neighbor`), which converts into a single TFLite
op; in a quantized graph only upsamplings of a FakeQuant output qualify.
"""
import os

from absl import logging
import tensorflow as tf

from od_estimator.quantization import graph_edit

_CONSUMER_TYPES = ('Add', 'AddV2', 'Max', 'Mul')


def _repeated_input(op, op_type):
  """The one tensor `op` (of op_type) packs several times, or None."""
  if op.type != op_type or len(op.inputs) < 2:
    return None
  first = op.inputs[0]
  return first if all(t is first for t in op.inputs) else None


def _upsampled_tensor(reshape_op, is_quantized):
  """The input of a Pack-Pack-Reshape(Const) upsampling, or None."""
  if (reshape_op.type != 'Reshape' or
      reshape_op.inputs[1].op.type != 'Const'):
    return None
  h_stacked = _repeated_input(reshape_op.inputs[0].op, 'Pack')
  if h_stacked is None:
    return None
  source = _repeated_input(h_stacked.op, 'Pack')
  if source is None or (is_quantized and
                        source.op.type != 'FakeQuantWithMinMaxVars'):
    return None
  return source


def rewrite_nn_resize_op(is_quantized=False, graph=None):
  """Rewrites the graph's upsamplings in place (the original's name).

  Args:
    is_quantized: the graph was rewritten for quantization: the upsampled
      tensor must be a FakeQuant's output.
    graph: the tf.Graph, default the default graph.

  Returns:
    The number of consumer inputs rewired to a ResizeNearestNeighbor.
  """
  graph = graph or tf.compat.v1.get_default_graph()
  count = 0
  with graph.as_default():
    for op in graph.get_operations():
      source = _upsampled_tensor(op, is_quantized)
      if source is None:
        continue
      output = op.outputs[0]
      if not output.shape[1:3].is_fully_defined():
        continue
      consumers = [c for c in graph_edit.consumer_ops(output)
                   if c.type in _CONSUMER_TYPES]
      if not consumers:
        continue
      resized = tf.compat.v1.image.resize_nearest_neighbor(
          source, output.shape[1:3], align_corners=False,
          name=os.path.split(op.name)[0] + '/resize_nearest_neighbor')
      count += graph_edit.reroute(resized, output, consumers)
  logging.info('Matched %d nn ops', count)
  return count
