"""Sessions without grappler, for tests that run a graph once or twice.

Grappler's rewrites (constant folding, layout, remapping) cost seconds on a
whole detection graph at each new run signature and are not what these
tests check; they check the shapes and values the graph computes (the
same up to float rounding). tiny_ssd.run_config's in-process trainings use
it too; the commands' own runs keep grappler.
"""
import tensorflow as tf


def config(**fields):
  """A ConfigProto with grappler's meta optimizer off (and `fields` set)."""
  proto = tf.compat.v1.ConfigProto(**fields)
  proto.graph_options.rewrite_options.disable_meta_optimizer = True
  return proto


def session(graph=None):
  """A tf.compat.v1.Session on `graph` (default: the default graph)."""
  return tf.compat.v1.Session(graph=graph, config=config())
