"""od_estimator.compat: scripts written for the original run unchanged.

The scripts run in this process (tests/command_modules.run_command); only
the walk over every original path starts an interpreter, so that each
import is a first one.
"""
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

from od_estimator import compat
from tests.command_modules import run_command

SCRIPT = textwrap.dedent('''
    import sys
    from object_detection.utils import label_map_util
    import object_detection
    from object_detection.utils import ops as utils_ops

    label_map = label_map_util.load_labelmap(sys.argv[1])
    categories = label_map_util.convert_label_map_to_categories(
        label_map, max_num_classes=10, use_display_name=True)
    index = label_map_util.create_category_index(categories)
    print('CATEGORIES', sorted((k, v['name']) for k, v in index.items()))
    print('SAME MODULE', label_map_util.__name__, object_detection.__name__,
          utils_ops.reframe_box_masks_to_image_masks.__module__)
    try:
      import object_detection.no_such_module
    except ModuleNotFoundError as error:
      print('MISSING', error)
    ''')


@pytest.fixture
def restored_imports(monkeypatch):
  """Takes the alias and every object_detection module away afterwards."""
  monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
  yield
  for name in [n for n in sys.modules if n.split('.')[0] ==
               'object_detection']:
    del sys.modules[name]
  importlib.invalidate_caches()


def _run(tmp_path):
  """`python -m od_estimator.compat run inference.py label_map.pbtxt`."""
  script = tmp_path / 'inference.py'
  script.write_text(SCRIPT)
  label_map = tmp_path / 'label_map.pbtxt'
  label_map.write_text("item { id: 1 name: 'cat' display_name: 'Cat' }\n"
                       "item { id: 2 name: 'dog' }\n")
  return run_command('compat', ['run', str(script), str(label_map)])


def test_an_unchanged_script_runs_on_od_estimator(tmp_path, restored_imports):
  del restored_imports  # Used for its cleanup.
  result = _run(tmp_path)
  assert result.returncode == 0, result.stderr
  assert "CATEGORIES [(1, 'Cat'), (2, 'dog')]" in result.stdout
  assert ('SAME MODULE od_estimator.utils.label_map_util object_detection '
          'od_estimator.core.spatial_transform_ops') in result.stdout
  assert ('MISSING object_detection.no_such_module has no od_estimator '
          'counterpart' in result.stdout)


def test_a_real_installation_is_never_shadowed(tmp_path, monkeypatch,
                                               restored_imports):
  del restored_imports  # Used for its cleanup.
  real = tmp_path / 'site' / 'object_detection'
  real.mkdir(parents=True)
  (real / '__init__.py').write_text('')
  monkeypatch.syspath_prepend(str(tmp_path / 'site'))
  result = _run(tmp_path)
  assert result.returncode == 1
  assert result.stderr.startswith(
      'error: The original object_detection is installed here (')
  assert str(real) in result.stderr
  assert 'CATEGORIES' not in result.stdout


def test_usage_without_a_script():
  result = run_command('compat', [])
  assert result.returncode == 2
  assert 'python -m od_estimator.compat run SCRIPT.py' in result.stderr


def test_a_real_package_found_after_install_wins(tmp_path, monkeypatch,
                                                 restored_imports):
  del restored_imports  # Used for its cleanup.
  compat.install_alias()
  real = tmp_path / 'object_detection'
  real.mkdir()
  (real / '__init__.py').write_text('REAL = True\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  importlib.invalidate_caches()
  module = importlib.import_module('object_detection')
  assert getattr(module, 'REAL', False), module


WALK = textwrap.dedent('''
    import importlib, sys
    from absl.flags import DuplicateFlagError
    from od_estimator import compat
    compat.install_alias()
    for name in sys.argv[1:]:
      try:
        module = importlib.import_module(name)
      except DuplicateFlagError:
        continue  # Found and run: two commands' flags clash in one process.
      served = getattr(module, '__wrapped__', module).__name__  # A package.
      if served != compat.counterpart(name):
        print('WRONG', name, served)
      parent, _, child = name.rpartition('.')
      found = {}
      exec('from %s import %s as found' % (parent, child), found)
      if found['found'] is not module:
        print('FROM', name, found['found'])
    ''')


def test_every_original_path_still_imports_through_the_table():
  paths_file = os.path.join(os.path.dirname(__file__),
                            'original_module_paths.txt')
  with open(paths_file) as lines:
    names = [line.strip() for line in lines
             if line.strip() and not line.startswith('#')]
  names += sorted(compat.COUNTERPARTS)
  missing = [name for name in names if compat.counterpart(name) is None]
  assert not missing
  result = subprocess.run(
      [sys.executable, '-c', WALK] + names, capture_output=True, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'), timeout=300,
      check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout == ''
  assert compat.counterpart('object_detection.model_lib') == (
      'od_estimator.estimator.model_lib')
  assert compat.counterpart('object_detection.no_such_module') is None
  assert compat.counterpart('tensorflow.compat') is None
