"""Importing several command modules into one test process, and running them.

Each command (model_main, model_tpu_main, export_inference_graph, ...)
defines the original's flags (--model_dir, --pipeline_config_path, ...) on
absl's global FLAGS, as the original did; a command runs alone, but pytest
imports every test module into each worker, and a second definition raises
DuplicateFlagError. `import_command` drops the clashing definitions first:
the later module's definition is used, and values are shared by name.

`run_command` runs a command as `python -m` would, in the test's process:
for tests of what a command does (exit status, error lines, files written)
without a new interpreter importing TensorFlow. Only tests of the process
boundary itself (signals, console scripts, `python -m`) start a process.
"""
import contextlib
import importlib
import inspect
import io
import re
import runpy
import subprocess
import sys

from absl import flags


# Each command module's own absl flags, as its import defined them: a later
# command defining a flag of the same name takes it over (see below), and
# the earlier command takes it back when it runs again.
_OWN_FLAGS = {}


def _reclaim_flags(name):
  """Registers `name`'s own flag objects again where another took them."""
  for flag in _OWN_FLAGS[name]:
    if flag.name in flags.FLAGS and flags.FLAGS[flag.name] is flag:
      continue
    if flag.name in flags.FLAGS:
      delattr(flags.FLAGS, flag.name)
    flags.FLAGS[flag.name] = flag
    flags.FLAGS.register_flag_by_module(name, flag)


def import_command(module_name):
  """Imports `od_estimator.<module_name>`, whatever commands came before;
  the command's flags are its own (its help lists them all)."""
  name = 'od_estimator.' + module_name
  if name in sys.modules and name in _OWN_FLAGS:
    _reclaim_flags(name)
    return sys.modules[name]
  for _ in range(100):
    try:
      module = importlib.import_module(name)
      _OWN_FLAGS[name] = list(
          flags.FLAGS.flags_by_module_dict().get(name, []))
      return module
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


def run_command(module_name, argv):
  """Runs `python -m od_estimator.<module_name> *argv` in this process.

  The function the module's `__main__` block calls (run() of the absl
  training commands, else main()) runs with sys.argv set as `python -m`
  sets it.

  Args:
    module_name: the module below od_estimator, e.g. 'model_main'.
    argv: the command's flags, without the program name.

  Returns:
    A subprocess.CompletedProcess, as subprocess.run(..., text=True) of
    that command line returns: args, returncode (0 when the entry returned
    None, as the interpreter's), stdout and stderr.
  """
  module = import_command(module_name)
  return _run_captured(_entry(module), [module.__file__] + list(argv))


def run_console_script(path, module_name, argv):
  """Runs an installed console script in this process, as __main__.

  Args:
    path: the script pip wrote (a wrapper calling a function of the module).
    module_name: the module below od_estimator whose function it calls,
      imported first (see import_command).
    argv: the flags, without the program name.

  Returns:
    A subprocess.CompletedProcess, as run_command.
  """
  import_command(module_name)
  return _run_captured(lambda: runpy.run_path(path, run_name='__main__'),
                       [path] + list(argv))


def _run_captured(entry, argv):
  """entry() with sys.argv = argv and its output captured.

  The absl flags start from their defaults, as in a new process: they are
  unparsed before and after, and the validators the command adds (required
  flags) are removed afterwards.
  """
  validators = {name: list(flags.FLAGS[name].validators)
                for name in flags.FLAGS}
  flags.FLAGS.unparse_flags()
  out, err = io.StringIO(), io.StringIO()
  argv_before = sys.argv
  sys.argv = list(argv)
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      try:
        status = entry()
      except SystemExit as stop:
        status = stop.code
  finally:
    sys.argv = argv_before
    for name, kept in validators.items():
      flags.FLAGS[name].validators[:] = kept
    flags.FLAGS.unparse_flags()
  return subprocess.CompletedProcess(argv, status or 0, out.getvalue(),
                                     err.getvalue())


def _entry(module):
  """run() when it takes no arguments (the absl commands' entry), else main."""
  run = getattr(module, 'run', None)
  if run is not None and all(
      parameter.default is not parameter.empty
      for parameter in inspect.signature(run).parameters.values()):
    return run
  return module.main
