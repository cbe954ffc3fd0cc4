"""Collecting what od_estimator logs, for tests that check messages."""
import contextlib
import logging


@contextlib.contextmanager
def _collected(logger_name, messages):
  """Appends the messages of that logger (INFO and up) to `messages`."""
  handler = logging.Handler(logging.INFO)
  handler.emit = lambda record: messages.append(record.getMessage())
  logger = logging.getLogger(logger_name)
  level = logger.level
  logger.setLevel(logging.INFO)
  logger.addHandler(handler)
  try:
    yield messages
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)


@contextlib.contextmanager
def absl_messages():
  """Yields a list that collects the messages logged through absl."""
  with _collected('absl', []) as messages:
    yield messages


@contextlib.contextmanager
def command_log():
  """Yields a list collecting what absl and TensorFlow log (INFO and up):
  the log lines of a command run in this process (run_command) that its
  process would write to stderr, e.g. 'Restoring parameters from ...'."""
  with _collected('absl', []) as messages, _collected('tensorflow',
                                                      messages):
    yield messages
