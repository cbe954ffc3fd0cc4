"""Where the original's sample configs are, for the tests that read them.

The configs are test data this repository does not ship. The folder is
$OD_UPSTREAM_CONFIGS, else ../shared/upstream_configs next to the clone
(TF2-era configs: $OD_UPSTREAM_CONFIGS_TF2, else
../shared/upstream_configs_tf2). When it is absent, the tests that need it
skip with one reason line. Use the `upstream_configs` /
`upstream_configs_tf2` fixtures of tests/conftest.py in a test, and
`params()` below to parametrize over every config in the folder.
"""
import glob
import os

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FOLDERS = {
    False: ('OD_UPSTREAM_CONFIGS', 'upstream_configs'),
    True: ('OD_UPSTREAM_CONFIGS_TF2', 'upstream_configs_tf2'),
}


def folder(tf2=False):
  """The configs folder, or None when it does not exist.

  Args:
    tf2: the original's TF2-era configs instead of its TF1 ones.
  """
  variable, name = _FOLDERS[tf2]
  path = os.environ.get(variable) or os.path.join(
      os.path.dirname(_REPO), 'shared', name)
  return path if os.path.isdir(path) else None


def skip_reason(tf2=False):
  """The one line a test prints when it skips for want of the folder."""
  variable, name = _FOLDERS[tf2]
  return ("the original's sample configs are absent: set %s to a copy of "
          "them (default: ../shared/%s next to the repository)" % (
              variable, name))


def require(tf2=False):
  """The configs folder; skips the calling test when it is absent."""
  path = folder(tf2)
  if path is None:
    pytest.skip(skip_reason(tf2))
  return path


def config_path(name, tf2=False):
  """The path of sample config `name` (no .config); skips when absent."""
  return os.path.join(require(tf2), name + '.config')


def paths(tf2=False):
  """Every *.config of the folder, sorted; empty when it is absent."""
  path = folder(tf2)
  return sorted(glob.glob(os.path.join(path, '*.config'))) if path else []


def params(tf2=False, keep=None):
  """pytest parameters, one per config path (id: its file name).

  Args:
    tf2: the TF2-era folder instead of the TF1 one.
    keep: optional predicate on a path choosing the configs to test.

  Returns:
    A list of pytest.param; when the folder is absent, a single parameter
    that skips with skip_reason().
  """
  if folder(tf2) is None:
    return [pytest.param(None, marks=pytest.mark.skip(reason=skip_reason(tf2)),
                         id='absent')]
  return [pytest.param(path, id=os.path.basename(path))
          for path in paths(tf2) if keep is None or keep(path)]
