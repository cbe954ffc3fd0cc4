"""--bfloat16 at export: the oneDNN bfloat16 rewrite baked into the graph.

Training and evaluation get bfloat16 as a session option (grappler's
`auto_mixed_precision_onednn_bfloat16`, estimator/cpu_bfloat16.py), which
an exported graph does not carry: TF Serving and `tf.saved_model.load` run
what the GraphDef says. So the export runs that rewrite once, offline, on
the frozen inference graph, and writes its result: with training's lists
(cpu_bfloat16._FLOAT32_OPS) the dense convolutions and matrix products take
bfloat16, with casts inserted around them (the weights stay float32
constants, cast where they are used, casts that the loading runtime's
constant folding may fold); batch norms, activations, element-wise ops and
depthwise convolutions stay float32, and so do tf.map_fn's tensor lists
(_FLOAT32_LISTS). The inputs and the fetched outputs are never rewritten,
so the signature's names, dtypes and shapes are the float32 export's.

Float32 is the default, whatever train_config.use_bfloat16 says (the
original's exporter ignores that field too): only the commands' --bfloat16
asks for this, and where the exporting CPU lacks bfloat16 instructions one
log line says so and the export is float32.
"""
import contextlib
import os

from absl import logging
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.grappler import tf_optimizer
import tensorflow as tf

from od_estimator.estimator import cpu_bfloat16

_BFLOAT16 = tf.bfloat16.as_datatype_enum
REWRITE = 'auto_mixed_precision_onednn_bfloat16'
# Tensor lists (tf.map_fn's, in the preprocessor and the post-processing)
# stay float32: the rewrite changes a list's element type in the graph but
# not in the While loop's body function, which then writes float32 into a
# bfloat16 list ("Invalid data types; op elements float but list elements
# bfloat16", the tiny SSD's preprocessor map). Training never met this: its
# preprocessing runs in tf.data, outside the rewritten graph.
_FLOAT32_LISTS = ('TensorListFromTensor', 'TensorListReserve',
                  'TensorListStack', 'TensorListGetItem', 'TensorListSetItem',
                  'TensorListGather', 'TensorListScatterV2',
                  'TensorListConcatV2')
# An op is in one list at most: off the clear and infer lists, onto the
# deny list.
_LIST_CHANGES = tuple('TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_' + change
                      for change in ('CLEARLIST_REMOVE', 'INFERLIST_REMOVE',
                                     'DENYLIST_ADD'))
# The export commands' --bfloat16.
FLAG_HELP = (
    'Export a graph that runs its dense convolutions and matrix products in '
    'bfloat16 (oneDNN), for CPUs with AVX-512 BF16 or AMX; inputs and '
    'outputs keep their float32 export\'s names and dtypes, detections '
    'differ from float32\'s by bfloat16 rounding. Default float32, whatever '
    'train_config.use_bfloat16 says (as the original). Where the exporting '
    'CPU lacks those instructions: one log line and a float32 export.')


def wanted(requested):
  """Whether the export is rewritten: --bfloat16 and a CPU that runs it."""
  return bool(requested) and cpu_bfloat16.available(
      '--bfloat16', 'exporting float32')


@contextlib.contextmanager
def _denied(ops):
  """The rewrite's op lists with `ops` moved to its deny list (environment
  variables read by the rewrite) while inside; as they were afterwards."""
  before = {name: os.environ.get(name) for name in _LIST_CHANGES}
  for name in _LIST_CHANGES:
    os.environ[name] = ','.join(
        [op for op in (before[name] or '').split(',') if op] + list(ops))
  try:
    yield
  finally:
    for name, value in before.items():
      if value is None:
        del os.environ[name]
      else:
        os.environ[name] = value


def _fetched(output_node_names):
  """A MetaGraphDef collection naming the nodes grappler must keep as they
  are (its fetch nodes)."""
  collection = meta_graph_pb2.CollectionDef()
  collection.node_list.value.extend(output_node_names)
  return collection


def rewrite(frozen_graph_def, output_node_names):
  """The frozen graph with the oneDNN bfloat16 rewrite applied.

  Args:
    frozen_graph_def: GraphDef without variables (float32).
    output_node_names: names of the nodes fetched (the outputs); they and
      the placeholders keep their dtypes.

  Returns:
    A new GraphDef; frozen_graph_def itself (not modified) when the
    rewrite converts nothing, with a log line.
  """
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(frozen_graph_def, name='')
    meta_graph = tf.compat.v1.train.export_meta_graph(graph=graph)
  meta_graph.collection_def['train_op'].CopyFrom(
      _fetched(output_node_names))
  config = config_pb2.ConfigProto()
  options = config.graph_options.rewrite_options
  # This pass alone, once, on any graph size.
  options.optimizers[:] = [REWRITE]
  options.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
  options.min_graph_nodes = -1
  with _denied(_FLOAT32_LISTS):
    cpu_bfloat16.keep_float32_ops()
    rewritten = tf_optimizer.OptimizeGraph(config, meta_graph)
  if not has_bfloat16(rewritten.node):
    # Nothing to convert, or the pass failed (it then logs why and returns
    # the graph as it was).
    logging.warning('bfloat16: the rewrite left the graph float32 (see '
                    'grappler\'s %s lines above): exporting float32.',
                    REWRITE)
    return frozen_graph_def
  return rewritten


def has_bfloat16(nodes):
  """Whether any of the NodeDefs has a bfloat16 type attribute."""
  return any(value.type == _BFLOAT16 or _BFLOAT16 in value.list.type
             for node in nodes for value in node.attr.values())

