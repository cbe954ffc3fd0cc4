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

from tests import fork_server


def command(module):
  """The argv prefix that runs `python -m module` this way."""
  return [sys.executable, '-m', __name__, module]


def run_here(argv):
  """Runs `python -m argv[0] argv[1:]` in this process, without grappler."""
  from tests import plain_session  # pylint: disable=g-import-not-at-top
  plain_session.without_grappler()
  sys.argv = list(argv)
  runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  # Forked from the test run's warm interpreter when it has one (this
  # process then only stands for the command: tests/fork_server.py).
  fork_server.run_forked(sys.argv[1:])
  run_here(sys.argv[1:])
