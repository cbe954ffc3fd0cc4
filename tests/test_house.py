"""The package's structure: floors, no import cycles, a small root.

Every od_estimator module is parsed (not imported); its `import x` and
`from x import y` statements, at module level and inside functions, are its
edges to other od_estimator modules (`from od_estimator.pkg import mod` is an
edge to the module od_estimator.pkg.mod). Imports by name at run time
(importlib with a string, as the `od-estimator` dispatcher and the
compat alias do) are not edges.
"""
import ast
import os

PACKAGE = 'od_estimator'
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), PACKAGE)
ROOT = 'root'  # The modules at the package root (but errors).

# Lowest first. A module imports its own group, its floor's other groups
# and the floors below, never a floor above.
FLOORS = (
    ('errors', 'protos', 'utils'),
    ('core', 'nets', 'quantization'),
    ('anchor_generators', 'box_coders', 'data_decoders', 'matchers'),
    ('models',),
    ('meta_architectures', 'predictors'),
    ('builders',),
    ('config', 'input_pipeline', 'metrics'),
    ('estimator',),
    ('checks', 'export', 'inference'),
    (ROOT, 'compat', 'dataset_tools', 'legacy'),
)
# Above core: utils/ (the ground floor) imports none of these.
ABOVE_GROUND = ('anchor_generators', 'box_coders', 'builders', 'checks',
                'compat', 'config', 'core', 'data_decoders', 'dataset_tools',
                'estimator', 'export', 'inference', 'input_pipeline', 'legacy',
                'matchers', 'meta_architectures', 'metrics', 'models', 'nets',
                'predictors', 'quantization', ROOT)
MAX_ROOT_MODULES = 12


def _modules():
  """{module name: file path} of every od_estimator module."""
  modules = {}
  parent = os.path.dirname(PACKAGE_DIR)
  for folder, _, files in os.walk(PACKAGE_DIR):
    for name in files:
      if name.endswith('.py'):
        parts = os.path.relpath(os.path.join(folder, name),
                                parent)[:-3].split(os.sep)
        if parts[-1] == '__init__':
          parts.pop()
        modules['.'.join(parts)] = os.path.join(folder, name)
  return modules


MODULES = _modules()


def _owner(name):
  """The longest prefix of a dotted name that is one of our modules."""
  while name not in MODULES:
    name = name.rpartition('.')[0]
  return name


def _imported(module, path):
  """The od_estimator modules `module` imports."""
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  package = module if path.endswith('__init__.py') else module.rpartition(
      '.')[0]
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(_owner(alias.name) for alias in node.names
                   if alias.name.split('.')[0] == PACKAGE)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        anchor = package.split('.')[:len(package.split('.')) - node.level + 1]
        base = '.'.join(anchor + ([base] if base else []))
      if base.split('.')[0] == PACKAGE:
        found.update(_owner(base + '.' + alias.name) for alias in node.names)
  found.discard(module)
  return found


GRAPH = {module: _imported(module, path) for module, path in MODULES.items()
         if not module.startswith(PACKAGE + '.protos.')}


def _group(module):
  """A module's package below od_estimator; ROOT or 'errors' at the root."""
  parts = module.split('.')
  if len(parts) > 2 or len(parts) == 2 and os.path.isdir(
      os.path.join(PACKAGE_DIR, parts[1])):
    return parts[1]
  return 'errors' if parts[1:] == ['errors'] else ROOT


def _floor(group):
  return next(i for i, floor in enumerate(FLOORS) if group in floor)


def _edges(select):
  return sorted('%s -> %s' % (module, target)
                for module, targets in GRAPH.items() for target in targets
                if select(module, target))


def test_every_group_has_a_floor():
  groups = {_group(module) for module in MODULES}
  placed = {group for floor in FLOORS for group in floor}
  assert groups == placed


def test_utils_is_the_ground_floor():
  upward = _edges(lambda module, target: _group(module) == 'utils' and
                  _group(target) in ABOVE_GROUND)
  assert not upward, '\n'.join(upward)


def test_imports_never_go_up_a_floor():
  upward = _edges(lambda module, target: _floor(_group(target)) > _floor(
      _group(module)))
  assert not upward, '\n'.join(upward)


def _cycle(graph):
  """One cycle of {module: imported modules} (first == last), or None."""
  done, path, on_path = set(), [], set()

  def visit(module):
    path.append(module)
    on_path.add(module)
    for target in sorted(graph.get(module, ())):
      if target in on_path:
        return path[path.index(target):] + [target]
      if target not in done:
        cycle = visit(target)
        if cycle:
          return cycle
    on_path.discard(path.pop())
    done.add(module)
    return None

  for module in sorted(graph):
    if module not in done:
      cycle = visit(module)
      if cycle:
        return cycle
  return None


def test_no_import_cycles():
  cycle = _cycle(GRAPH)
  assert cycle is None, ' -> '.join(cycle)


def test_the_cycle_search_finds_a_cycle():
  assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a', 'd'}}) == [
      'a', 'b', 'c', 'a']
  assert _cycle({'a': {'b', 'c'}, 'b': {'c'}, 'c': set()}) is None


def test_no_lazy_module_attributes():
  """A module-level __getattr__ would hide imports (and their cycles)."""
  lazy = []
  for module, path in MODULES.items():
    with open(path) as source:
      tree = ast.parse(source.read(), path)
    for node in tree.body:
      names = ([node.name] if isinstance(node, ast.FunctionDef) else
               [target.id for target in getattr(node, 'targets', [])
                if isinstance(target, ast.Name)])
      if '__getattr__' in names:
        lazy.append(module)
  assert not lazy


def test_nothing_imports_the_compat_surfaces():
  """compat/ holds the original's re-export surfaces; the package's own
  modules import the homes they re-export."""
  inward = _edges(lambda module, target: _group(target) == 'compat' and
                  _group(module) != 'compat')
  assert not inward, '\n'.join(inward)


def test_at_most_a_dozen_modules_at_the_root():
  root = sorted(name for name in os.listdir(PACKAGE_DIR)
                if name.endswith('.py'))
  assert len(root) <= MAX_ROOT_MODULES, root


def test_the_parser_sees_every_kind_of_import(tmp_path):
  source = tmp_path / 'fake.py'
  source.write_text(
      'import os\n'
      'import od_estimator.core.box_list\n'
      'from od_estimator.core import shape_utils, standard_fields as f\n'
      'from od_estimator.core.box_coder import BoxCoder\n'
      'from . import matcher\n'
      'from ..utils import json_utils\n'
      'def later():\n'
      '  from od_estimator import errors\n')
  assert _imported('od_estimator.core.fake', str(source)) == {
      'od_estimator.core.box_list', 'od_estimator.core.shape_utils',
      'od_estimator.core.standard_fields', 'od_estimator.core.box_coder',
      'od_estimator.core.matcher', 'od_estimator.utils.json_utils',
      'od_estimator.errors'}
  assert _group('od_estimator.errors') == 'errors'
  assert _group('od_estimator.model_main') == ROOT
  assert _group('od_estimator.compat.ops') == 'compat'


# A function should read in one sitting: none of the model_fn's wing over
# 60 lines, and few anywhere over 80 (21 when issue 30 was filed; the nets/
# backbones, written layer by layer, are most of those left).
WING_MAX_LINES = ('estimator', 60)
LONG_FUNCTION_LINES = 80
MAX_LONG_FUNCTIONS = 10


def _function_lengths():
  """[(lines, 'module:function')] of every function and method."""
  lengths = []
  for module, path in MODULES.items():
    with open(path) as source:
      tree = ast.parse(source.read(), path)
    lengths += [(node.end_lineno - node.lineno + 1,
                 '%s:%s' % (module, node.name)) for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
  return lengths


def test_the_model_fn_wing_reads_in_one_sitting():
  group, limit = WING_MAX_LINES
  long = [(lines, name) for lines, name in _function_lengths()
          if _group(name.split(':')[0]) == group and lines > limit]
  assert not long, long


def test_few_functions_over_80_lines():
  long = sorted((lines, name) for lines, name in _function_lengths()
                if lines > LONG_FUNCTION_LINES)
  assert len(long) <= MAX_LONG_FUNCTIONS, long
