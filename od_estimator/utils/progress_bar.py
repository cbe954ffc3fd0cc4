"""A task's progress: one line redrawn in place on a terminal, else log lines.

When stderr is a terminal, a Bar redraws one line (a carriage return, at
most 10 times a second, cut to the terminal's width); a log line written
meanwhile clears it first, and the bar comes back at its next redraw.
Elsewhere (CI, files, Cloud logs) a Bar draws nothing: its owner logs the
same facts as plain lines (`log`), with no carriage return.
"""
import contextlib
import logging
import shutil
import sys
import threading
import time

from absl import logging as absl_logging

_REDRAW_SECS = 0.1
_BAR_WIDTH = 20
_CLEAR = '\r\x1b[K'

_lock = threading.Lock()
_drawn = []  # The Bar whose line is on the terminal now (at most one).


def on_terminal(stream):
  """Whether `stream` writes to a terminal."""
  try:
    return stream.isatty()
  except (AttributeError, ValueError):  # No such method, or closed.
    return False


def log(line):
  """A plain line of ours in the log (INFO)."""
  absl_logging.info(line)


def bar_text(text, fraction=None):
  """'[#####...............]  25% text', or text when fraction is None."""
  if fraction is None:
    return text
  fraction = min(max(fraction, 0.0), 1.0)
  done = int(round(fraction * _BAR_WIDTH))
  return '[%s%s] %3d%% %s' % ('#' * done, '.' * (_BAR_WIDTH - done),
                              int(fraction * 100), text)


class Bar:
  """One line redrawn in place on a terminal; nothing elsewhere.

  Attributes:
    on_terminal: whether it draws (stderr was a terminal when created).
  """

  def __init__(self, stream=None):
    self._stream = stream or sys.stderr
    self.on_terminal = on_terminal(self._stream)
    self._last_draw = None

  def draw(self, text, fraction=None, now=False):
    """Shows `text` (after a bar when fraction, 0..1, is given).

    Args:
      text: the facts, on one line.
      fraction: how much of the task is done, or None when unknown.
      now: draw even if the last redraw was under 0.1 s ago.
    """
    if not self.on_terminal:
      return
    moment = time.monotonic()
    if not now and self._last_draw is not None and (
        moment - self._last_draw < _REDRAW_SECS):
      return
    self._last_draw = moment
    width = max(shutil.get_terminal_size().columns - 1, 10)
    _clear_before_log_lines()
    with _lock:
      self._stream.write('\r' + bar_text(text, fraction)[:width] + '\x1b[K')
      self._stream.flush()
      _drawn[:] = [self]

  def keep(self):
    """Ends the bar's line where it is (it stays on screen as it was)."""
    with _lock:
      if _drawn and _drawn[0] is self:
        self._stream.write('\n')
        self._stream.flush()
        del _drawn[:]


def clear():
  """Removes the bar drawn on the terminal, if any (before other output)."""
  with _lock:
    if _drawn:
      _drawn[0]._stream.write(_CLEAR)  # pylint: disable=protected-access
      _drawn[0]._stream.flush()  # pylint: disable=protected-access
      del _drawn[:]


def keep():
  """Ends the line of the bar drawn on the terminal, if any, where it is."""
  if _drawn:
    _drawn[0].keep()


class Count:
  """'On image I of N': a bar on a terminal, else a line every N items.

  For loops over a known number of items (the dataset tools' images).
  """

  def __init__(self, total, every_n, text='On image %d of %d', log_line=log):
    """Creates it.

    Args:
      total: how many items the loop goes through.
      every_n: log a line every this many items (when not on a terminal).
      text: the line's format, of (item index, total).
      log_line: fn(line) writing a plain line (default: absl's INFO).
    """
    self._total, self._every_n = total, max(int(every_n), 1)
    self._text, self._log_line = text, log_line
    self._bar = Bar()

  def update(self, index):
    """Item `index` (0-based) is starting."""
    line = self._text % (index, self._total)
    if self._bar.on_terminal:
      self._bar.draw(line, index / self._total if self._total else None,
                     now=index + 1 == self._total)
    elif index % self._every_n == 0:
      self._log_line(line)

  def end(self):
    """Ends the bar's line on a terminal (its last state stays shown)."""
    self._bar.keep()


@contextlib.contextmanager
def kept_on_exit():
  """Context: a bar still on the terminal at its exit ends its line there
  (a command stopped by an error or a signal shows where it was)."""
  try:
    yield
  finally:
    keep()


class _ClearBar(logging.Filter):
  """On a log handler: the bar is cleared before each line it writes."""

  def filter(self, record):
    clear()
    return True


_CLEAR_FILTER = _ClearBar()


def _clear_before_log_lines():
  """Puts _ClearBar on the handlers that write log lines (once each)."""
  for logger in (logging.getLogger(), logging.getLogger('tensorflow')):
    for handler in logger.handlers:
      if _CLEAR_FILTER not in handler.filters:
        handler.addFilter(_CLEAR_FILTER)
