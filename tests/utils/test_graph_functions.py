"""utils/graph_functions: a GraphDef as a function fed by its arguments."""
import numpy as np
import tensorflow as tf

from od_estimator.utils import graph_functions


def _graph_def():
  graph = tf.Graph()
  with graph.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
    unused = tf.compat.v1.placeholder(tf.float32, [], name='unused')
    del unused
    with tf.compat.v1.colocate_with(x):
      doubled = tf.multiply(x, 2.0, name='doubled')
    tf.add(doubled, 1.0, name='plus_one')
  return graph.as_graph_def()


def test_feeds_become_arguments_and_outputs_keep_their_structure():
  graph_def = _graph_def()
  function = graph_functions.function_of_graph_def(
      graph_def, ['x:0', 'unused:0'],
      [tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([], tf.float32)],
      {'doubled': 'doubled:0', 'both': ['plus_one:0']})
  got = function(tf.constant([[1.0, 2.0]]), tf.constant(0.0))
  np.testing.assert_array_equal(got['doubled'], [[2.0, 4.0]])
  np.testing.assert_array_equal(got['both'][0], [[3.0, 5.0]])
  # Imported once, its placeholders left out, the colocation with x dropped.
  names = [op.name for op in function.graph.get_operations()]
  assert names.count('doubled') == 1 and not {'x', 'unused'} & set(names)
  doubled = function.graph.get_operation_by_name('doubled')
  assert b'loc:@x' not in doubled.node_def.attr['_class'].list.s
  assert graph_def == _graph_def()  # The caller's GraphDef is unchanged.


def test_captured_variables_replace_their_handles():
  graph = tf.Graph()
  with graph.as_default():
    handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[],
                                    shared_name='v', name='v')
    tf.identity(tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32),
                name='value')
  variable = tf.Variable(7.0)
  function = graph_functions.function_of_graph_def(
      graph.as_graph_def(), [], [], 'value:0', captured={'v:0': variable})
  assert float(function()) == 7.0
