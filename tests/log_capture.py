"""Collecting what od_estimator logs, for tests that check messages."""
import contextlib
import logging


@contextlib.contextmanager
def absl_messages():
  """Yields a list that collects the messages logged through absl."""
  messages = []
  handler = logging.Handler(logging.INFO)
  handler.emit = lambda record: messages.append(record.getMessage())
  logger = logging.getLogger('absl')
  level = logger.level
  logger.setLevel(logging.INFO)
  logger.addHandler(handler)
  try:
    yield messages
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
