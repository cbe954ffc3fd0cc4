"""How the `od-estimator` tools built on exported models end: their exit
status, bad input as one `od-estimator NAME: error: ...` line."""
import sys

from od_estimator import errors
from od_estimator.utils import interrupts


def run(name, work):
  """Runs work() under signal handling; returns the exit status.

  Args:
    name: the command's name (`od-estimator NAME`).
    work: fn() -> exit status, raising errors.UserInputError on bad input.

  Returns:
    work's status; 1 after bad input (one line on stderr); 130 or 143
    after Ctrl-C or SIGTERM (one line saying what was kept).
  """
  try:
    with interrupts.stopping_on_signals(name):
      return work()
  except interrupts.Interrupted as stop:
    print('od-estimator %s: %s' % (name, stop.line()), file=sys.stderr)
    return stop.exit_status
  except errors.UserInputError as error:
    print('od-estimator %s: error: %s' % (name, errors.one_line(error)),
          file=sys.stderr)
    return 1


def add_saved_model_dir_flag(parser):
  """The required --saved_model_dir of the commands that read an export."""
  parser.add_argument('--saved_model_dir', required=True,
                      help='the saved_model/ directory written by '
                           'export_inference_graph (or the export directory '
                           'holding it).')
