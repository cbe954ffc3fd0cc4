"""Sessions without grappler, for tests that run a graph once or twice.

Grappler's rewrites (constant folding, layout, remapping) cost seconds on a
whole detection graph at each new run signature and are not what these
tests check; they check the shapes and values the graph computes.
"""
import tensorflow as tf


def config():
  """A ConfigProto with grappler's meta optimizer off."""
  proto = tf.compat.v1.ConfigProto()
  proto.graph_options.rewrite_options.disable_meta_optimizer = True
  return proto


def session(graph=None):
  """A tf.compat.v1.Session on `graph` (default: the default graph)."""
  return tf.compat.v1.Session(graph=graph, config=config())
