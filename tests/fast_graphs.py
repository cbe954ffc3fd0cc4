"""New graphs whose variables hash by identity while a test builds them.

tf-slim and Keras' legacy layers put every global variable in a set on each
`add_weight`; under TF 2 behaviour each hash first walks the context stack,
so a network's build costs O(variables^2) such walks (half the build of a
900-variable backbone). od_estimator.utils.graph_building turns that off
while a graph is built; new_graph wraps it for tests (the `execute`
fixture's graphs too).
"""
import contextlib

import tensorflow as tf

from od_estimator.utils import graph_building


@contextlib.contextmanager
def new_graph():
  """Context: a new tf.Graph, made the default, built with identity hashing.

  Yields:
    the graph.
  """
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    yield graph

