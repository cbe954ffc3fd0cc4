"""Sessions without grappler, for the tests' own TensorFlow runs.

Grappler's rewrites (constant folding, layout, remapping) cost seconds on a
whole detection graph at each new run signature and are not what the tests
check; they check the shapes and values a graph computes (the same up to
float rounding) and what the commands do around it. So every session the
test processes open goes without it (conftest.py calls without_grappler,
and so does tests/plain_command.py in the commands tests launch). The
commands as users run them, grappler included, are run by the families'
end-to-end runs (tests/trained_models.py), tests/test_model_main.py's
launches, tests/estimator/test_xla.py and the console-script tests.
"""
import contextlib

import tensorflow as tf
from tensorflow.python.client import session as session_lib

_real_init = session_lib.Session.__init__


def config(**fields):
  """A ConfigProto with grappler's meta optimizer off (and `fields` set)."""
  proto = tf.compat.v1.ConfigProto(**fields)
  proto.graph_options.rewrite_options.disable_meta_optimizer = True
  return proto


def session(graph=None):
  """A tf.compat.v1.Session on `graph` (default: the default graph)."""
  return tf.compat.v1.Session(graph=graph, config=config())


def _init_without_grappler(self, target='', graph=None, config=None):  # pylint: disable=redefined-outer-name
  """Session.__init__ with the given config (a cluster task's device
  filters included) and grappler's meta optimizer off."""
  proto = tf.compat.v1.ConfigProto()
  if config is not None:
    proto.CopyFrom(config)
  proto.graph_options.rewrite_options.disable_meta_optimizer = True
  _real_init(self, target, graph, proto)


def without_grappler():
  """From now on, every Session of this process runs without grappler
  (Estimator's and MonitoredSession's included)."""
  session_lib.Session.__init__ = _init_without_grappler


@contextlib.contextmanager
def with_grappler():
  """Context: the sessions opened inside it run with grappler, as a user's
  (for comparing a graph with an export that grappler optimizes)."""
  patched = session_lib.Session.__init__
  session_lib.Session.__init__ = _real_init
  try:
    yield
  finally:
    session_lib.Session.__init__ = patched
