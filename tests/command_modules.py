"""Importing several command modules into one test process.

Each command (model_main, model_tpu_main, export_inference_graph, ...)
defines the original's flags (--model_dir, --pipeline_config_path, ...) on
absl's global FLAGS, as the original did; a command runs alone, but pytest
imports every test module into each worker, and a second definition raises
DuplicateFlagError. `import_command` drops the clashing definitions first:
the later module's definition is used, and values are shared by name.
"""
import importlib
import re
import sys

from absl import flags


def import_command(module_name):
  """Imports `od_estimator.<module_name>`, whatever commands came before."""
  name = 'od_estimator.' + module_name
  for _ in range(100):
    try:
      return importlib.import_module(name)
    except flags.DuplicateFlagError as error:
      sys.modules.pop(name, None)
      clash = re.search(r"flag '([^']+)' is defined twice", str(error))
      if not clash:
        raise
      # The failed attempt's own flags go too: absl would count them as
      # clashes of the retry, one at a time.
      partial = flags.FLAGS.flags_by_module_dict().get(name, [])
      for flag_name in {clash.group(1)} | {flag.name for flag in partial}:
        if flag_name in flags.FLAGS:
          delattr(flags.FLAGS, flag_name)
  raise RuntimeError('%s: too many clashing flags' % name)
