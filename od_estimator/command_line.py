"""What the original's commands share: absl flags, and bad input reported as
one `error: ...` line on stderr with exit status 1 instead of a traceback.

Bad input is an errors.UserInputError (errors.ConfigError is one), an
unusable --model_dir, or a bad input record (see record_scanner).
TensorFlow's errors are told apart by kind (`describe_op_error`): memory
or disk exhausted, a path missing, forbidden, out of reach or of an
unknown scheme, a cluster task out of reach, a damaged file: one line
each. Any other exception is a bug in od_estimator: it keeps its
traceback, followed by one line asking for a report. SIGTERM and Ctrl-C
stop the command (see utils/interrupts): one line says what was kept, and
the exit status is 130 after Ctrl-C, 143 after SIGTERM (0 for a training
that saved its checkpoint). TensorFlow's own messages are left out unless
--verbosity or --tf_log ask for them (utils/quiet_output.py).
"""
import json
import os
import re
import sys
import traceback

from absl import app
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import graph_text
from od_estimator.estimator import model_lib
from od_estimator.checks import record_scanner
from od_estimator.config import config_util
from od_estimator.utils import file_safety
from od_estimator.utils import gc_tuning
from od_estimator.utils import interrupts
from od_estimator.utils import disk_full
from od_estimator.utils import progress_bar
from od_estimator.utils import quiet_output

# The flags of the training commands that name a remote cluster or TPU.
_CLUSTER_FLAGS = ('master', 'tpu_name')
# A file system scheme TensorFlow has no support for (s3:// in TF 2.15).
_SCHEME = 'File system scheme'
# A remote file system whose host could not be reached (gs:// offline).
_UNREACHABLE_HOST = re.compile(
    r"Couldn't resolve host|Could not resolve host|Couldn't connect|"
    r'Connection timed out|Failed to connect', re.IGNORECASE)

app.flags.DEFINE_boolean(quiet_output.TF_LOG, False, quiet_output.TF_LOG_HELP)

_BUG_REPORT = ('error: this is a bug in od_estimator, not in your input. '
               'Please report it with the command line above and your '
               'pipeline.config.')


# `error: ...` lines and exit 1 (one line per problem of a UserInputErrors).
fail = errors.fail


def run_training(main, model_dir, doc, module_name, check_cluster=None):
  """Runs a training command's absl `main`, or prints its --help.

  Args:
    main: the command's main(argv), run by absl.app.
    model_dir: callable returning the --model_dir flag once flags are parsed;
      a non-finite loss names its last good checkpoint.
    doc: the module docstring, printed first by --help.
    module_name: the module whose flags --help lists.
    check_cluster: fn() raising UserInputError when TF_CONFIG cannot be
      used, once the flags are parsed (default check_tf_config).

  Returns:
    0 after --help; otherwise absl exits with main's status, or with 1: one
    line on bad input, the traceback and a request for a report on a bug.
  """
  if _help_requested(sys.argv[1:]):
    return _print_help(doc, module_name)

  def checked_main(argv):
    quiet_output.quiet_from_flags(app.flags.FLAGS)
    (check_cluster or check_tf_config)()
    file_safety.check_directory_destination(model_dir(), '--model_dir')
    # A full disk: one line (disk_full.describe), the failed save removed.
    with disk_full.reported(model_dir()):
      return main(argv)

  program = os.path.splitext(os.path.basename(sys.argv[0]))[0]
  _run_at_boundary(lambda: app.run(checked_main, flags_parser=_parse_flags),
                   program, model_dir)


def _parse_flags(argv):
  """absl's parse, a bad flag (unknown, or a wrong value) one error line."""
  try:
    return app.flags.FLAGS(argv)
  except app.flags.Error as error:
    raise errors.UserInputError('%s (--help lists the flags)' % error)


def check_tf_config():
  """Raises UserInputError when the TF_CONFIG cluster cannot be used.

  Every training command's RunConfig reads it; malformed JSON, a value
  that is not an object or a task missing from its cluster is one line
  naming TF_CONFIG, before anything is built.
  """
  if parsed_tf_config() is None:
    return
  try:
    tf.estimator.RunConfig()
  except ValueError as error:
    raise errors.UserInputError('TF_CONFIG does not describe a usable task: '
                                '%s (TF_CONFIG=%s)' % (
                                    error, os.environ['TF_CONFIG']))


def parsed_tf_config():
  """TF_CONFIG as a dict, or None when unset or empty.

  Raises:
    errors.UserInputError: malformed JSON, or a value that is not an object.
  """
  text = os.environ.get('TF_CONFIG')
  if not text:
    return None
  try:
    parsed = json.loads(text)
  except ValueError as error:
    raise errors.UserInputError(
        'TF_CONFIG is not valid JSON (%s): %s. Fix the environment variable '
        'or unset it to train on this machine alone.' % (error, text))
  if not isinstance(parsed, dict):
    raise errors.UserInputError(
        'TF_CONFIG must be a JSON object with "cluster" and "task", got: %s'
        % text)
  return parsed


def _run_at_boundary(command, name, model_dir=lambda: None):
  """Runs command() under signal handling; reports what stopped it.

  Args:
    command: runs the command (absl's app.run, which exits).
    name: the command's name, for the line after a signal.
    model_dir: callable returning the training folder, if any.
  """
  # Graphs built and written faster, the same graphs.
  gc_tuning.for_graph_building()
  graph_text.install()
  try:
    # A progress bar on the terminal ends its line before any other output.
    with interrupts.stopping_on_signals(name), progress_bar.kept_on_exit():
      command()
  except interrupts.Interrupted as stop:
    print(stop.line(), file=sys.stderr)
    sys.exit(stop.exit_status)
  except KeyboardInterrupt:
    # Ctrl-C without a scope, or a second signal during the first's cleanup.
    print('interrupted: stopped at once; what was being written may be '
          'incomplete.', file=sys.stderr)
    sys.exit(interrupts.EXIT_SIGINT)
  except errors.UserInputError as error:
    fail(error)
  except tf.compat.v1.train.NanLossDuringTrainingError as error:
    _fail_non_finite_loss(error, model_dir())
  except tf.errors.OpError as error:
    if model_lib.NON_FINITE_LOSS in str(error):
      _fail_non_finite_loss(error, model_dir())
    if record_scanner.is_data_error(error):
      fail(record_scanner.describe(error, _flag('pipeline_config_path')))
    described = describe_op_error(
        error, _flag('pipeline_config_path'),
        cluster_flags={'--' + name: _flag(name) for name in _CLUSTER_FLAGS})
    if described:
      fail(described)
    report_bug()
  except Exception:  # pylint: disable=broad-except
    report_bug()


def describe_op_error(error, pipeline_config_path=None, environ=None,
                      cluster_flags=None):
  """One line for a TensorFlow error the user can act on, else None (a bug).

  Args:
    error: a tf.errors.OpError.
    pipeline_config_path: the command's pipeline config, for the batch
      size and image size to lower when memory runs out.
    environ: the environment (default os.environ), for TF_CONFIG.
    cluster_flags: {'--flag': value} of the flags naming the cluster or TPU
      the command runs on (unset ones None), for a task that did not answer.

  Returns:
    The message, or None when the error is not one of the kinds below.
  """
  message = errors.op_error_words(error)
  path = _path_in(message)
  if isinstance(error, tf.errors.ResourceExhaustedError):
    if 'no space left' in message.lower():
      return ('no space left on the device%s (%s). Free some space or write '
              'to another disk.' % (' holding ' + path if path else '',
                                    message))
    if re.search(r'\bOOM\b|memory', message, re.IGNORECASE):
      return ('out of memory (%s). Lower %s.' % (
          _first_sentence(message), _memory_settings(pipeline_config_path)))
    return 'a resource ran out: %s' % message
  if isinstance(error, tf.errors.UnimplementedError) and _SCHEME in message:
    return ('%s: this TensorFlow has no file system for that scheme (%s). '
            'Use a local path or gs://.' % (path, message))
  if path and _UNREACHABLE_HOST.search(message):
    return ('%s cannot be reached from here (%s). Check the network, the '
            'bucket name and the credentials.' % (path, message))
  if isinstance(error, tf.errors.PermissionDeniedError):
    return ('permission denied: %s. Make it readable (and its folder '
            'writable) by this user, or choose another path.' % (
                path or message))
  if isinstance(error, tf.errors.NotFoundError):
    if 'not found in checkpoint' in message:
      return ('%s: the checkpoint was written by another model than the '
              'pipeline config builds.' % message)
    return ('%s was not found (%s). Check the paths in the flags and the '
            'pipeline config.' % (path, message) if path else
            '%s. Check the paths in the flags and the pipeline config.' %
            message)
  if isinstance(error, (tf.errors.UnavailableError,
                        tf.errors.DeadlineExceededError)):
    return _describe_unreachable(message, environ, cluster_flags)
  if isinstance(error, tf.errors.FailedPreconditionError) and re.search(
      r'\bis (not )?a directory\b', message):
    return ('%s. Check the paths in the flags and the pipeline config.' %
            message)
  if isinstance(error, tf.errors.DataLossError):
    return ('%s is damaged or truncated (%s). Recreate or re-download it.' %
            (path, message) if path else
            'a file is damaged or truncated: %s' % message)
  return None


def _path_in(message):
  """The first file path (absolute or a URL) in a TensorFlow message."""
  match = re.search(r'(?<![\w.-])(?:[a-z][a-z0-9+.-]*://|/)[^\s;,\'"()]+',
                    message)
  return match.group(0).rstrip('.:') if match else None


def _first_sentence(message):
  return re.split(r'(?<=[.;])\s', message, maxsplit=1)[0].rstrip('.;')


def _memory_settings(pipeline_config_path):
  """'the batch size (train_config.batch_size, now 8; ...) ... in PATH'."""
  what = ('the batch size (train_config.batch_size; eval_config.batch_size '
          'in evaluation), then the image size (model.*.image_resizer)')
  if not pipeline_config_path:
    return what
  try:
    configs = config_util.get_configs_from_pipeline_file(
        pipeline_config_path)
  except (errors.UserInputError, tf.errors.OpError):
    return '%s in %s' % (what, pipeline_config_path)
  model = configs['model']
  kind = model.WhichOneof('model')
  resizer = getattr(getattr(model, kind or '', None), 'image_resizer', None)
  size = ''
  if resizer is not None and resizer.WhichOneof('image_resizer_oneof'):
    resize = resizer.WhichOneof('image_resizer_oneof')
    size = ' %s { %s }' % (resize, ' '.join(
        '%s: %s' % (field.name, value)
        for field, value in getattr(resizer, resize).ListFields()
        if field.type != field.TYPE_MESSAGE))
  return ('the batch size (train_config.batch_size, now %d; '
          'eval_config.batch_size, now %d, in evaluation), then the image '
          'size (model.%s.image_resizer%s) in %s' % (
              configs['train_config'].batch_size,
              configs['eval_config'].batch_size, kind or '*', size,
              pipeline_config_path))


def _describe_unreachable(message, environ=None, cluster_flags=None):
  """Names the cluster (TF_CONFIG, --master, --tpu_name) that did not answer."""
  environ = os.environ if environ is None else environ
  try:
    tf_config = json.loads(environ.get('TF_CONFIG') or '{}')
  except ValueError:
    tf_config = {}
  cluster = tf_config.get('cluster') if isinstance(tf_config, dict) else None
  given = ['%s=%s' % (flag, value) for flag, value in
           sorted((cluster_flags or {}).items()) if value]
  if not cluster and given:
    return ('the cluster of %s did not answer (%s). Check that it is running '
            'and reachable from here.' % (', '.join(given), message))
  if not cluster:
    return ('a service did not answer in time (%s). Check the network and '
            'retry.' % message)
  task = tf_config.get('task') or {}
  addresses = ', '.join('%s %s' % (kind, ' '.join(hosts if isinstance(
      hosts, list) else [str(hosts)])) for kind, hosts in sorted(
          cluster.items()))
  return ('a task of the TF_CONFIG cluster did not answer (%s). This task '
          'is %s %s of the cluster %s: check that every task is running '
          'and these addresses are reachable from here.' % (
              message, task.get('type', '?'), task.get('index', 0),
              addresses))


def report_bug():
  """Prints the handled exception's traceback and a report request; exits 1."""
  traceback.print_exc()
  print(_BUG_REPORT, file=sys.stderr)
  sys.exit(1)


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


def read_export_config(flag_values, required):
  """An export command's pipeline config, its required flags checked.

  Args:
    flag_values: absl FLAGS with pipeline_config_path and config_override.
    required: names of the flags that must be given.

  Returns:
    pipeline_pb2.TrainEvalPipelineConfig with --config_override merged.

  Raises:
    errors.UserInputError: naming every required flag missing.
  """
  missing = [name for name in required if not getattr(flag_values, name)]
  if missing:
    raise errors.UserInputError('missing required flag(s): %s' % ', '.join(
        '--' + name for name in missing))
  return config_util.read_pipeline_config(
      flag_values.pipeline_config_path, flag_values.config_override or None)


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

  def quiet_export(argv):
    quiet_output.quiet_from_flags(app.flags.FLAGS)
    return export(argv)

  _run_at_boundary(lambda: app.run(quiet_export, argv=[prog] + argv), prog)
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
  print(quiet_output.HELP)
  return 0
