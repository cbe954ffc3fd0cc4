"""Runs scripts written for the original without editing their imports.

`install_alias()` (or `python -m od_estimator.compat run script.py ...`)
makes `import object_detection...` load od_estimator's counterpart: the
module of the same path (`from object_detection.utils import
label_map_util` gives od_estimator.utils.label_map_util) unless COUNTERPARTS
names another (object_detection.exporter is od_estimator.export.exporter).
Opt-in only, and never over the real thing: when the original's
object_detection package can be imported, the alias refuses to install, and
its finder steps aside whenever the ordinary finders find a real
object_detection later (it then serves nothing).

This package's modules keep the original's names that od_estimator itself
does not use, and nothing in od_estimator imports them: ops (the original's
utils.ops, with groundtruth_filters), visualization_utils (its
utils.visualization_utils: od_estimator.utils.visualization_utils' drawing
plus visualization_tensors and visualization_maps) and coco_tools (its
metrics.coco_tools: coco_wrappers and coco_export). It also holds
export_tflite_graph_tf2, the original's TF2 TFLite command (`od-estimator
export_tflite_graph_tf2`), kept out of the package root.
"""
import importlib
import importlib.abc
import importlib.util
import runpy
import sys
import types

from od_estimator import errors

ORIGINAL = 'object_detection'
OURS = 'od_estimator'

# The original's modules that live at another path here. Every other
# object_detection.X is od_estimator.X (when od_estimator has an X).
COUNTERPARTS = {
    'object_detection.eval_util': 'od_estimator.metrics.eval_util',
    'object_detection.export_tflite_graph_lib_tf2':
        'od_estimator.export.export_tflite_graph_lib_tf2',
    'object_detection.export_tflite_graph_tf2':
        'od_estimator.compat.export_tflite_graph_tf2',
    'object_detection.export_tflite_ssd_graph_lib':
        'od_estimator.export.export_tflite_ssd_graph_lib',
    'object_detection.exporter': 'od_estimator.export.exporter',
    'object_detection.inputs': 'od_estimator.input_pipeline.inputs',
    'object_detection.metrics.coco_export': 'od_estimator.compat.coco_export',
    'object_detection.metrics.coco_tools': 'od_estimator.compat.coco_tools',
    'object_detection.metrics.coco_wrappers':
        'od_estimator.compat.coco_wrappers',
    'object_detection.model_hparams': 'od_estimator.estimator.model_hparams',
    'object_detection.model_lib': 'od_estimator.estimator.model_lib',
    'object_detection.utils.config_util': 'od_estimator.config.config_util',
    'object_detection.utils.ops': 'od_estimator.compat.ops',
    'object_detection.utils.shape_utils': 'od_estimator.core.shape_utils',
    'object_detection.utils.spatial_transform_ops':
        'od_estimator.core.spatial_transform_ops',
    'object_detection.utils.visualization_maps':
        'od_estimator.compat.visualization_maps',
    'object_detection.utils.visualization_tensors':
        'od_estimator.compat.visualization_tensors',
    'object_detection.utils.visualization_utils':
        'od_estimator.compat.visualization_utils',
}


def counterpart(original_module_name):
  """od_estimator's module name for one of the original's, or None."""
  name = COUNTERPARTS.get(original_module_name)
  if name is None:
    if original_module_name != ORIGINAL and not original_module_name.startswith(
        ORIGINAL + '.'):
      return None
    name = OURS + original_module_name[len(ORIGINAL):]
  try:
    found = importlib.util.find_spec(name)
  except ModuleNotFoundError:  # A parent package is missing.
    found = None
  return None if found is None else name


class _AliasPackage(types.ModuleType):
  """object_detection[.pkg] while aliased: a package of the original's name.

  `from object_detection.utils import ops` looks `ops` up on this module and
  then imports `<its __name__>.ops`: through the finder, so the original's
  path gets its counterpart (od_estimator.compat.ops), even where
  od_estimator's own package of that path holds another module (its home).
  Attributes that are not submodules come from od_estimator's package.
  """

  def __init__(self, name, package):
    super().__init__(name, package.__doc__)
    self.__path__ = []  # Submodules are found by the alias finder only.
    self.__wrapped__ = package

  def __getattr__(self, name):
    original = '%s.%s' % (self.__name__, name)
    if not name.startswith('__') and counterpart(original) is not None:
      return importlib.import_module(original)
    return getattr(self.__wrapped__, name)


def _aliased():
  """Whether `object_detection` is our alias package (not a real one)."""
  return isinstance(sys.modules.get(ORIGINAL), _AliasPackage)


class _AliasLoader(importlib.abc.Loader):
  """Hands out the module it was given."""

  def __init__(self, module):
    self._module = module

  def create_module(self, spec):
    return self._module

  def exec_module(self, module):
    pass


def _found_elsewhere(alias_finder, fullname):
  """Whether a finder other than ours finds the top-level `fullname`."""
  for finder in sys.meta_path:
    if finder is not alias_finder and hasattr(finder, 'find_spec'):
      if finder.find_spec(fullname, None) is not None:
        return True
  return False


class _AliasFinder(importlib.abc.MetaPathFinder):
  """object_detection[.x.y] → counterpart(...): the same module object, in
  an _AliasPackage of the original's name for a package."""

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname == ORIGINAL:
      if _found_elsewhere(self, fullname):
        return None  # A real installation wins.
    elif not fullname.startswith(ORIGINAL + '.') or not _aliased():
      return None  # Not ours, or below the real package.
    name = counterpart(fullname)
    if name is None:
      raise ModuleNotFoundError(
          '%s has no od_estimator counterpart; see README "Coming from the '
          'original".' % fullname, name=fullname)
    module = importlib.import_module(name)
    is_package = hasattr(module, '__path__')
    if is_package:
      module = _AliasPackage(fullname, module)
    return importlib.util.spec_from_loader(
        fullname, _AliasLoader(module), is_package=is_package)


def _real_original():
  """Where an importable non-alias object_detection lives, else None."""
  module = sys.modules.get(ORIGINAL)
  if module is not None:
    if isinstance(module, _AliasPackage):
      return None
    return getattr(module, '__file__', None) or ORIGINAL
  if any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    return None
  spec = importlib.util.find_spec(ORIGINAL)
  return None if spec is None else (spec.origin or
                                    list(spec.submodule_search_locations or
                                         []) or ORIGINAL)


def install_alias():
  """Lets `object_detection` imports load od_estimator's modules.

  Idempotent.

  Raises:
    errors.UserInputError: if the original object_detection is importable
      in this environment (it is used as it is, never shadowed).
  """
  real = _real_original()
  if real is not None:
    raise errors.UserInputError(
        'The original object_detection is installed here (%s); the '
        'object_detection alias would shadow it, so it is not installed. '
        'Run the script in an environment without it, or import '
        'od_estimator in the script.' % (real,))
  if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    # First, so the ordinary finders do not load od_estimator's files a
    # second time under object_detection names (through the alias packages'
    # __path__); it steps aside for a real object_detection all the same.
    sys.meta_path.insert(0, _AliasFinder())


def run(script, args=()):
  """Runs `script` as __main__ with sys.argv [script, *args], aliased."""
  install_alias()
  sys.argv = [script] + list(args)
  runpy.run_path(script, run_name='__main__')


_USAGE = ('usage: python -m od_estimator.compat run SCRIPT.py [ARGS...]\n'
          'Runs a script written for the original TF Object Detection API, '
          'its object_detection imports served by od_estimator.')


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  if len(argv) < 2 or argv[0] != 'run':
    print(_USAGE, file=sys.stderr)
    return 2
  try:
    run(argv[1], argv[2:])
  except errors.UserInputError as error:
    errors.fail(error)
  return 0

