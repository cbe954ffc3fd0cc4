"""A GraphDef run as a TF2 function, imported once, fed by its arguments."""
import tensorflow as tf


def _node(tensor_name):
  return tensor_name.split(':')[0].lstrip('^')


def function_of_graph_def(graph_def, feeds, specs, outputs, captured=None,
                          scope=''):
  """A wrap_function that imports `graph_def` once, fed by its arguments.

  The nodes whose outputs the arguments (or captured variables) replace are
  left out of the import, and so is colocation with them: the graph is
  built once (importing it whole and pruning it would copy it again).

  Args:
    graph_def: the GraphDef (left unchanged).
    feeds: names of the tensors the function's arguments replace, in order.
    specs: the arguments' tf.TensorSpecs, in the same order.
    outputs: names of the tensors returned, in any tf.nest structure (the
      function returns that structure).
    captured: optional {tensor name: tf.Variable}: each tensor replaced by
      the variable's handle, captured by the function.
    scope: the import's name scope.
  """
  captured = captured or {}
  left_out = {_node(name) for name in list(feeds) + list(captured)}
  kept = [node for node in graph_def.node if node.name not in left_out]
  needed = {_node(name) for node in kept for name in node.input}
  trimmed = tf.compat.v1.GraphDef()
  trimmed.CopyFrom(graph_def)
  del trimmed.node[:]
  trimmed.node.extend(kept)
  for node in trimmed.node:
    if '_class' in node.attr:
      places = [place for place in node.attr['_class'].list.s
                if place.decode()[len('loc:@'):] not in left_out]
      del node.attr['_class'].list.s[:]
      node.attr['_class'].list.s.extend(places)
      if not places:
        del node.attr['_class']

  def run(*arguments):
    input_map = {name: argument for name, argument in zip(feeds, arguments)
                 if _node(name) in needed}  # (the others unused)
    input_map.update({name: tf.identity(variable.handle)
                      for name, variable in captured.items()
                      if _node(name) in needed})
    returned = tf.compat.v1.import_graph_def(
        trimmed, input_map=input_map, name=scope,
        return_elements=tf.nest.flatten(outputs))
    return tf.nest.pack_sequence_as(outputs, returned)
  return tf.compat.v1.wrap_function(run, specs)
