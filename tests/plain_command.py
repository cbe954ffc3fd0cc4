"""`python -m tests.plain_command MODULE FLAGS...`: `python -m MODULE FLAGS...`
with every session run without grappler (tests/plain_session.py).

TensorFlow's graph optimizer rewrites a graph again for each new set of
fetches: a few-step run of a tiny model pays it about ten times (variable
initialization, the readiness checks, the training step with and without
summaries, the evaluation, the restores), up to 12 s each for a quantized
training graph: a fifth of such a run's CPU time. It changes nothing the
tests that launch this way check (what signals, clusters, damaged
checkpoints, non-finite losses and quantization do to a run, and what it
writes), only float rounding.
"""
import runpy
import sys

from tests import plain_session


def command(module):
  """The argv prefix that runs `python -m module` this way."""
  return [sys.executable, '-m', __name__, module]


if __name__ == '__main__':
  plain_session.without_grappler()
  sys.argv = sys.argv[1:]
  runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)
