"""What the original's commands share: absl flags, and bad input reported as
one `error: ...` line on stderr with exit status 1 instead of a traceback.

Bad input is an errors.UserInputError (config_util.ConfigError is one), an
unusable --model_dir, or a bad input record (see record_scanner). Any other
exception is a bug in od_estimator: it keeps its traceback, followed by one
line asking for a report.
"""
import os
import re
import sys
import traceback

from absl import app
import tensorflow as tf

from od_estimator import errors
from od_estimator import model_lib
from od_estimator import record_scanner
from od_estimator.utils import disk_full

_BUG_REPORT = ('error: this is a bug in od_estimator, not in your input. '
               'Please report it with the command line above and your '
               'pipeline.config.')


# `error: ...` lines and exit 1 (one line per problem of a UserInputErrors).
fail = errors.fail


def run_training(main, model_dir, doc, module_name):
  """Runs a training command's absl `main`, or prints its --help.

  Args:
    main: the command's main(argv), run by absl.app.
    model_dir: callable returning the --model_dir flag once flags are parsed;
      a non-finite loss names its last good checkpoint.
    doc: the module docstring, printed first by --help.
    module_name: the module whose flags --help lists.

  Returns:
    0 after --help; otherwise absl exits with main's status, or with 1: one
    line on bad input, the traceback and a request for a report on a bug.
  """
  if _help_requested(sys.argv[1:]):
    return _print_help(doc, module_name)

  def checked_main(argv):
    check_output_dir(model_dir(), '--model_dir')
    # A full disk: one line (disk_full.describe), the failed save removed.
    with disk_full.reported(model_dir()):
      return main(argv)

  try:
    app.run(checked_main)
  except errors.UserInputError as error:
    fail(error)
  except tf.compat.v1.train.NanLossDuringTrainingError as error:
    _fail_non_finite_loss(error, model_dir())
  except tf.errors.OpError as error:
    if model_lib.NON_FINITE_LOSS in str(error):
      _fail_non_finite_loss(error, model_dir())
    if record_scanner.is_data_error(error):
      fail(record_scanner.describe(error, _flag('pipeline_config_path')))
    report_bug()
  except Exception:  # pylint: disable=broad-except
    report_bug()


def report_bug():
  """Prints the handled exception's traceback and a report request; exits 1."""
  traceback.print_exc()
  print(_BUG_REPORT, file=sys.stderr)
  sys.exit(1)


def check_output_dir(path, flag):
  """Raises UserInputError unless `path` is, or can become, a writable dir.

  Args:
    path: a local directory path; None or a URL (gs://...) is not checked.
    flag: the flag that named it, for the message.

  Raises:
    errors.UserInputError: the path or one of its parents is a file, or the
      nearest existing directory is not writable.
  """
  if not path or '://' in path:
    return
  existing = os.path.abspath(path)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise errors.UserInputError(
        '%s=%s: %s is a file, not a directory. Choose another directory.' % (
            flag, path, existing))
  if not os.access(existing, os.W_OK | os.X_OK):
    raise errors.UserInputError(
        '%s=%s: %s is not writable by this user. Choose a writable '
        'directory.' % (flag, path, existing))


def _flag(name):
  """The value of flag `name`, or None when the command has no such flag."""
  return getattr(app.flags.FLAGS, name, None)


def _fail_non_finite_loss(error, model_dir):
  """Exits naming the failing step and the last good checkpoint."""
  # The training step's Assert prints its data as `[at step] [N]`.
  step = re.search(r'\[at step\] \[(\d+)\]', str(error))
  checkpoint = tf.train.latest_checkpoint(model_dir or '')
  fail('training stopped because the loss became NaN or Inf%s. The last good '
       'checkpoint is %s. Lower the learning rate, check the data for invalid '
       'boxes, or set gradient_clipping_by_norm.' % (
           ' at step %s' % step.group(1) if step else '',
           checkpoint or '(none was written)'))


def run_export(export, prog, doc, module_name, argv=None):
  """Runs an export command: --help, or `export` with bad input as one line.

  Args:
    export: the command's main(argv), run by absl.app.
    prog: the program name absl sees as argv[0].
    doc: the module docstring, printed first by --help.
    module_name: the module whose flags --help lists.
    argv: flags without the program name; None reads sys.argv.

  Returns:
    0 after --help or a finished export; exits with 1 on bad flags, config or
    checkpoint (one line), and on a bug (with its traceback).
  """
  argv = sys.argv[1:] if argv is None else list(argv)
  if _help_requested(argv):
    return _print_help(doc, module_name)
  try:
    app.run(export, argv=[prog] + argv)
  except errors.UserInputError as error:
    fail(error)
  except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as error:
    # A file the flags named is missing or unreadable.
    fail(error.message)
  except Exception:  # pylint: disable=broad-except
    report_bug()
  return 0


def _help_requested(argv):
  return any(arg in ('-h', '--help', '-help', '--helpshort') for arg in argv)


def _print_help(doc, module_name):
  """Prints the docstring and the module's flags; returns exit status 0.

  absl's own --help lists only the flags of the script file, which for a
  console script is a wrapper with none.
  """
  print(doc)
  print('flags:')
  print(app.flags.FLAGS.module_help(sys.modules[module_name]))
  return 0
