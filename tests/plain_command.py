"""`python -m tests.plain_command MODULE FLAGS...`: `python -m MODULE FLAGS...`
with the Estimator's sessions run without grappler.

TensorFlow's graph optimizer rewrites a graph again for each new set of
fetches: a few-step run of a tiny model pays it about ten times (variable
initialization, the readiness checks, the training step with and without
summaries, the evaluation, the restores), up to 12 s each for a quantized
training graph: a fifth of such a run's CPU time. It changes nothing the
tests that launch this way check (what signals, damaged checkpoints,
non-finite losses and quantization do to a run, and what it writes), only
float rounding. The commands as users run them, grappler included, are
tested by the families' end-to-end runs (tests/trained_models.py),
tests/test_model_main.py and the console-script tests.
"""
import runpy
import sys

import tensorflow as tf

_init = tf.estimator.RunConfig.__init__


def _init_without_grappler(self, *args, **kwargs):
  """RunConfig.__init__, then its session config (a cluster task's device
  filters included) with grappler's meta optimizer off."""
  _init(self, *args, **kwargs)
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  if self.session_config is not None:
    config.CopyFrom(self.session_config)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  self._session_config = config  # pylint: disable=protected-access


def command(module):
  """The argv prefix that runs `python -m module` this way."""
  return [sys.executable, '-m', __name__, module]


if __name__ == '__main__':
  tf.estimator.RunConfig.__init__ = _init_without_grappler
  sys.argv = sys.argv[1:]
  runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)
