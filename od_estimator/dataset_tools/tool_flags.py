"""What the dataset tools share: the original's flag spellings and errors.

The original's tools were absl programs, so their documented command lines
carry absl's `--logtostderr` / `--alsologtostderr`; ours log to stderr
already and accept both. Bad input (a missing or unreadable image, an
annotation that does not fit) is one `error: ...` line and exit status 1. TensorFlow's own messages are
left out unless --tf_log asks for them.
"""
import argparse
import functools
import hashlib
import io
import json
import os
import sys

from PIL import Image
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.utils import dataset_util
from od_estimator.utils import interrupts
from od_estimator.utils import quiet_output


def parse_bool(text):
  """argparse type for the tf.flags boolean spellings (true/false, 1/0)."""
  value = text.strip().lower()
  if value in ('1', 'true', 't', 'yes', 'y'):
    return True
  if value in ('0', 'false', 'f', 'no', 'n'):
    return False
  raise argparse.ArgumentTypeError('expected true or false, got %r' % text)


def add_bool_flag(parser, name, help_text, default=False):
  """A boolean flag in the tf.flags spellings: --NAME[=true|false], --noNAME."""
  parser.add_argument('--' + name, type=parse_bool, nargs='?', const=True,
                      default=default, help=help_text)
  parser.add_argument('--no' + name, dest=name, action='store_false',
                      help=argparse.SUPPRESS)


_LOGGING_FLAGS = ('logtostderr', 'alsologtostderr', quiet_output.TF_LOG)


def add_logging_flags(parser):
  """Accepts absl's logging flags (messages go to stderr in any case), and
  --tf_log (TensorFlow's own messages, see utils/quiet_output.py)."""
  for name in _LOGGING_FLAGS:
    tf_log = name == quiet_output.TF_LOG
    parser.add_argument('--' + name, type=parse_bool, nargs='?', const=True,
                        default=not tf_log, help=(
                            quiet_output.TF_LOG_HELP if tf_log
                            else argparse.SUPPRESS))
    parser.add_argument('--no' + name, dest=name, action='store_false',
                        help=argparse.SUPPRESS)
  return parser


def tool_arguments(parser, argv):
  """The parsed flags as a dict, without the logging flags (see above)."""
  return known_tool_arguments(parser, argv, allow_others=False)[0]


def known_tool_arguments(parser, argv, allow_others=True):
  """(the tool's flags as a dict without the logging flags, the others).

  The Beam tools hand the flags they do not define (`--runner`, ...) to
  Beam as pipeline options; the other tools refuse them (allow_others).
  """
  if allow_others:
    parsed, others = parser.parse_known_args(argv)
  else:
    parsed, others = parser.parse_args(argv), []
  args = vars(parsed)
  for name in _LOGGING_FLAGS:
    del args[name]
  return args, others


def read_bytes(path, what='file'):
  """The contents of `path`; a missing or unreadable file is bad input.

  Args:
    path: the file.
    what: what the file is, for the message ('image', 'annotations file').

  Raises:
    errors.UserInputError: naming the file.
  """
  try:
    with tf.io.gfile.GFile(path, 'rb') as fid:
      return fid.read()
  except tf.errors.OpError as error:
    raise errors.UserInputError('cannot read %s %s: %s' % (
        what, path, error.message)) from None


def read_json(path, what='file'):
  """The parsed JSON object in `path`; unreadable or invalid JSON is bad input.

  Raises:
    errors.UserInputError: naming the file and, for invalid JSON, the line.
  """
  try:
    parsed = json.loads(read_bytes(path, what))
  except ValueError as error:
    if isinstance(error, errors.UserInputError):
      raise
    raise errors.UserInputError('%s %s is not valid JSON: %s' % (
        what, path, error)) from None
  if not isinstance(parsed, dict):
    raise errors.UserInputError('%s %s holds a JSON %s, not an object.' % (
        what, path, type(parsed).__name__))
  return parsed


def read_image(path):
  """Reads an image file; returns (encoded bytes, opened PIL image).

  Args:
    path: the image file.

  Raises:
    errors.UserInputError: naming the file, when it is missing, unreadable
      or not an image PIL can open.
  """
  encoded = read_bytes(path, 'image')
  try:
    image = Image.open(io.BytesIO(encoded))
  except (OSError, SyntaxError, ValueError) as error:
    # What PIL raises for unknown, truncated or corrupt data.
    raise errors.UserInputError('image %s is not a readable image: %s' % (
        path, error)) from None
  return encoded, image


def reporting_input_errors(main):
  """Decorates a tool's main(argv): bad input becomes one line, exit 1.

  TensorFlow errors the user can act on (command_line.describe_op_error)
  too. SIGTERM and Ctrl-C stop the tool after the record under way: one
  line says what was kept, and the exit status is 143 or 130.
  """

  @functools.wraps(main)
  def wrapper(argv=None):
    name = main.__module__.rsplit('.', 1)[-1]
    if name == '__main__':  # python -m ...
      name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    quiet_output.quiet(tf_log=quiet_output.tf_log_asked(
        sys.argv[1:] if argv is None else argv))
    try:
      with interrupts.stopping_on_signals(name):
        return main(argv)
    except interrupts.Interrupted as stop:
      print(stop.line(), file=sys.stderr)
      sys.exit(stop.exit_status)
    except errors.UserInputError as error:
      errors.fail(error)
    except tf.errors.OpError as error:
      # A full disk, a forbidden or misnamed path: one line; else a bug.
      described = command_line.describe_op_error(error)
      if not described:
        raise
      errors.fail(described)

  return wrapper


def image_features(encoded, image_format, height, width, filename,
                   source_id, ymin, xmin, ymax, xmax):
  """The original's image/* and image/object/bbox/* features of an example.

  Args:
    encoded: the encoded image bytes (image/key/sha256 is their digest).
    image_format: 'jpeg', 'png', ...
    height: image height in pixels.
    width: image width in pixels.
    filename: image/filename.
    source_id: image/source_id.
    ymin, xmin, ymax, xmax: per-object normalized box coordinates.

  Returns:
    dict feature key -> tf.train.Feature.
  """
  f = dataset_util
  return {
      'image/height': f.int64_feature(height),
      'image/width': f.int64_feature(width),
      'image/filename': f.bytes_feature(filename),
      'image/source_id': f.bytes_feature(source_id),
      'image/key/sha256': f.bytes_feature(hashlib.sha256(encoded).hexdigest()),
      'image/encoded': f.bytes_feature(encoded),
      'image/format': f.bytes_feature(image_format),
      'image/object/bbox/xmin': f.float_list_feature(xmin),
      'image/object/bbox/xmax': f.float_list_feature(xmax),
      'image/object/bbox/ymin': f.float_list_feature(ymin),
      'image/object/bbox/ymax': f.float_list_feature(ymax),
  }
