"""Runs samples/scripts/*.py as a user would: `python script.py --flags`."""
import os
import subprocess
import sys

from tests import tiny_ssd

SCRIPTS = os.path.join(tiny_ssd.REPO, 'samples', 'scripts')


def run(script, **flags):
  """Runs the script with --name=value flags; returns its stdout."""
  result = subprocess.run(
      [sys.executable, os.path.join(SCRIPTS, script)] +
      ['--%s=%s' % item for item in flags.items()],
      capture_output=True, text=True, timeout=300, cwd=tiny_ssd.REPO,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout
