"""TensorFlow's own messages kept out of the commands' output unless asked.

A training run used to print about 270 lines of TensorFlow's (C++ startup
lines, deprecation notices, Estimator chatter) around 30 of ours. By
default the commands show only what od_estimator logs, TensorFlow's errors
and its lines saying which checkpoint it restores, each checkpoint it saves
and the final loss. Two
flags bring the rest back:

  --verbosity=N  (absl's flag) TensorFlow's Python-side INFO and WARNING
                 lines, at that verbosity, as before.
  --tf_log       TensorFlow's C++ log (TF_CPP_MIN_LOG_LEVEL left as it is)
                 and its deprecation warnings.

TensorFlow reads TF_CPP_MIN_LOG_LEVEL when it is imported, which
od_estimator/__init__.py does: `before_tensorflow` raises it there (unless
--tf_log is on the command line or the variable is already set), the rest
is applied once the flags are parsed (`quiet`).
"""
import logging
import os
import sys
import warnings

CPP_LEVEL = 'TF_CPP_MIN_LOG_LEVEL'
# C++ INFO and WARNING lines hidden; errors shown.
_QUIET_CPP_LEVEL = '2'
TF_LOG = 'tf_log'
TF_LOG_HELP = ("Show TensorFlow's C++ log and its deprecation warnings "
               '(hidden by default; TF_CPP_MIN_LOG_LEVEL, when set, is '
               'respected).')
# What --help says about both flags.
HELP = '\n'.join([
    'output: only our lines by default, with progress bars on a terminal',
    '  and plain lines elsewhere.',
    "  --verbosity: TensorFlow's Python-side lines too, at that level",
    '    (0: INFO, -1: WARNING; absl\'s flag).',
    "  --[no]tf_log: TensorFlow's C++ log and deprecation warnings too",
    '    (TF_CPP_MIN_LOG_LEVEL, when set, is respected).',
    "    (default: 'false')"])
# TensorFlow's lines that tell a fact the user needs (what is restored,
# each checkpoint saved, the final training loss): always shown.
_TF_FACTS = ('Restoring parameters from ', 'Saving checkpoints for ',
             'Loss for final step: ')
# Packages whose Python warnings (deprecations) are noise to our users.
_NOISY_MODULES = r'(tensorflow|tf_keras|keras|tf_slim|tensorflow_estimator)\b'
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TRUE = ('', '=true', '=t', '=1', '=yes', '=y')


def tf_log_asked(argv):
  """Whether --tf_log is on the command line `argv` (its last spelling wins).

  Read before absl parses the flags (a --flagfile is not looked into).
  """
  asked = False
  for arg in argv:
    name, _, _ = arg.partition('=')
    if name in ('--tf_log', '-tf_log'):
      asked = arg[len(name):].lower() in _TRUE
    elif name in ('--notf_log', '-notf_log'):
      asked = False
  return asked


def before_tensorflow(environ=None, argv=None):
  """Raises TensorFlow's C++ log threshold, before TensorFlow is imported.

  Args:
    environ: the environment to set (default os.environ); a value already
      there is kept.
    argv: the command line (default sys.argv); --tf_log keeps the default.
  """
  environ = os.environ if environ is None else environ
  argv = sys.argv if argv is None else argv
  if CPP_LEVEL not in environ and not tf_log_asked(argv):
    environ[CPP_LEVEL] = _QUIET_CPP_LEVEL


def is_ours(record):
  """Whether a log record comes from od_estimator's code."""
  return os.path.abspath(record.pathname).startswith(_PACKAGE_DIR + os.sep)


class _OursOnly(logging.Filter):
  """Lets through od_estimator's records, errors and TensorFlow's facts
  (and its deprecation warnings when `deprecations`)."""

  def __init__(self):
    super().__init__()
    self.facts = _TF_FACTS
    self.deprecations = False

  def filter(self, record):
    return (record.levelno >= logging.ERROR or is_ours(record) or
            (self.deprecations and record.module == 'deprecation') or
            record.getMessage().startswith(self.facts))


_FILTER = _OursOnly()


def keep_tf_lines(*prefixes):
  """Also shows TensorFlow's lines starting with one of `prefixes`.

  For a command whose facts only TensorFlow tells (TPUEstimator's training
  logs its own loss and speed).
  """
  _FILTER.facts = tuple(sorted(set(_FILTER.facts) | set(prefixes)))


def quiet(python_side=True, tf_log=False):
  """Keeps TensorFlow's Python-side messages out of the output.

  Args:
    python_side: hide TensorFlow's INFO and WARNING lines (not given
      --verbosity), and its logger's second copy of each line.
    tf_log: --tf_log: keep its deprecation warnings (and those of Keras,
      tf-slim and the Estimator, Python warnings).
  """
  # pylint: disable=g-import-not-at-top,protected-access
  from tensorflow.python.util import deprecation
  deprecation._PRINT_DEPRECATION_WARNINGS = tf_log
  # pylint: enable=g-import-not-at-top,protected-access
  if not tf_log:
    warnings.filterwarnings('ignore', module=_NOISY_MODULES)
  _FILTER.deprecations = tf_log
  logger = logging.getLogger('tensorflow')
  if not python_side:
    logger.removeFilter(_FILTER)
    return
  logger.addFilter(_FILTER)
  if logging.getLogger().handlers:
    # TensorFlow's own handler, added when the root logger had none yet:
    # absl's handler on the root logger prints the same lines.
    for handler in list(logger.handlers):
      # pylint: disable-next=unidiomatic-typecheck
      if type(handler) is logging.StreamHandler:
        logger.removeHandler(handler)


def quiet_from_flags(flag_values):
  """quiet() as an absl command's parsed flags (--verbosity, --tf_log) ask."""
  quiet(python_side=not flag_values['verbosity'].present,
        tf_log=bool(getattr(flag_values, TF_LOG, False)))
