"""What a checkpoint holds, value by value, in either format.

A name-based (TF1) checkpoint keys each value by its variable's name. An
object-based (TF2) one, written by tf.train.Checkpoint as the original's
`model_main_tf2` does, keys it by its object path from the checkpoint's
root (`model/_feature_extractor/classification_backbone/layer_with_weights-0/
kernel/.ATTRIBUTES/VARIABLE_VALUE`) and records in its object graph (the
TrackableObjectGraph proto saved under `_CHECKPOINTABLE_OBJECT_GRAPH`) the
name the variable had: for Keras models, its Keras name (`Conv1/kernel`).
Optimizer slots hang below their variable's path:
`<path>/.OPTIMIZER_SLOT/optimizer/momentum`, and the moving averages of the
original's ExponentialMovingAverage optimizer are such slots, named
`average`.
"""
import collections

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

# Where tf.train.Checkpoint saves its object graph.
OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
# Appended to a variable's object path to make its checkpoint key.
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_SLOT_MARK = '/.OPTIMIZER_SLOT/'
# The slot of the original's TF2 moving averages.
AVERAGE_SLOT = 'average'

SavedValue = collections.namedtuple('SavedValue', [
    'key',         # checkpoint key, as tf.train.list_variables gives it
    'path',        # object path (TF2) or variable name (TF1)
    'keras_name',  # name recorded in the object graph; None in TF1
    'shape',       # list of ints
    'dtype',       # e.g. 'float32'
    'slot_of',     # object path of the slot's variable, or None
    'slot_name',   # e.g. 'momentum', 'average'; None if not a slot
])


def resolve(checkpoint_path):
  """The checkpoint prefix of a prefix or of a directory's latest checkpoint.

  Raises:
    tf.errors.NotFoundError: a directory without any checkpoint.
  """
  if tf.io.gfile.isdir(checkpoint_path):
    latest = tf.train.latest_checkpoint(checkpoint_path)
    if latest is None:
      raise tf.errors.NotFoundError(
          None, None, 'No checkpoint in directory %s' % checkpoint_path)
    return latest
  return checkpoint_path


def is_object_based(checkpoint_prefix):
  """Whether tf.train.Checkpoint wrote it (the TF2 format)."""
  reader = tf.train.load_checkpoint(checkpoint_prefix)
  return reader.has_tensor(OBJECT_GRAPH_KEY)


def _object_graph(reader):
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  return graph


def object_path(key):
  """A TF2 checkpoint key's object path (a TF1 key is returned as is)."""
  return key[:-len(_VALUE_SUFFIX)] if key.endswith(_VALUE_SUFFIX) else key


def _names_and_slots(graph):
  """({key: recorded name}, {slot key: (variable path, slot name)})."""
  names = {}
  keys_of_nodes = {}
  for node_id, node in enumerate(graph.nodes):
    for attribute in node.attributes:
      names[attribute.checkpoint_key] = attribute.full_name
      keys_of_nodes[node_id] = attribute.checkpoint_key
  slots = {}
  for node in graph.nodes:
    for slot in node.slot_variables:
      slot_key = keys_of_nodes.get(slot.slot_variable_node_id)
      variable_key = keys_of_nodes.get(slot.original_variable_node_id)
      if slot_key and variable_key:
        slots[slot_key] = (object_path(variable_key), slot.slot_name)
  return names, slots


def read(checkpoint_prefix):
  """Every saved value of a checkpoint of either format, sorted by key.

  Args:
    checkpoint_prefix: a checkpoint prefix (see `resolve` for directories).

  Returns:
    list of SavedValue; the object graph itself is not listed.
  """
  reader = tf.train.load_checkpoint(checkpoint_prefix)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  names, slots = {}, {}
  object_based = reader.has_tensor(OBJECT_GRAPH_KEY)
  if object_based:
    names, slots = _names_and_slots(_object_graph(reader))
  values = []
  for key in sorted(shapes):
    if key == OBJECT_GRAPH_KEY:
      continue
    slot_of, slot_name = slots.get(key, (None, None))
    if object_based and slot_of is None and _SLOT_MARK in key:
      # A slot whose variable the graph does not name: path tells it.
      slot_of, _, rest = object_path(key).partition(_SLOT_MARK)
      slot_name = rest.rpartition('/')[2]
    values.append(SavedValue(
        key=key, path=object_path(key) if object_based else key,
        keras_name=names.get(key) if object_based else None,
        shape=list(shapes[key]), dtype=dtypes[key].name,
        slot_of=slot_of, slot_name=slot_name))
  return values
