"""What the original's commands share: absl flags, and bad input reported as
one `error: ...` line on stderr with exit status 1 instead of a traceback.

Errors outside those named here are bugs and keep their traceback.
"""
import re
import sys

from absl import app
import tensorflow as tf

from od_estimator import model_lib
from od_estimator.utils import config_util


def fail(message):
  """Prints `error: message` on one line to stderr and exits with 1.

  An errors.UserInputErrors prints one such line per problem.
  """
  for problem in getattr(message, 'problems', None) or [message]:
    print('error: %s' % ' '.join(str(problem).split()), file=sys.stderr)
  sys.exit(1)


def run_training(main, model_dir, doc, module_name):
  """Runs a training command's absl `main`, or prints its --help.

  Args:
    main: the command's main(argv), run by absl.app.
    model_dir: callable returning the --model_dir flag once flags are parsed;
      a non-finite loss names its last good checkpoint.
    doc: the module docstring, printed first by --help.
    module_name: the module whose flags --help lists.

  Returns:
    0 after --help; otherwise absl exits with main's status, or with 1 and
    one line on bad input.
  """
  if _help_requested(sys.argv[1:]):
    return _print_help(doc, module_name)
  try:
    app.run(main)
  except (config_util.ConfigError, ValueError, TypeError) as error:
    fail(error)
  except tf.compat.v1.train.NanLossDuringTrainingError as error:
    _fail_non_finite_loss(error, model_dir())
  except tf.errors.InvalidArgumentError as error:
    if model_lib.NON_FINITE_LOSS not in str(error):
      raise
    _fail_non_finite_loss(error, model_dir())


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
    checkpoint.
  """
  argv = sys.argv[1:] if argv is None else list(argv)
  if _help_requested(argv):
    return _print_help(doc, module_name)
  try:
    app.run(export, argv=[prog] + argv)
  except (ValueError, TypeError, tf.errors.OpError) as error:
    fail(getattr(error, 'message', None) or error)
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
