"""SIGTERM and Ctrl-C for long-running commands: stop soon, say what is kept.

`stopping_on_signals(work)` installs handlers that turn the first SIGTERM
or SIGINT into an `Interrupted` exception, raised in the main thread as
soon as the running Python code gets control back (after the TensorFlow
step, image or record under way). The code it unwinds through cleans up
and adds to the exception what it kept (`Interrupted.add`); the command
boundary prints `Interrupted.line()` and exits with `exit_status`. A
second signal, while that cleanup runs, raises KeyboardInterrupt at once.
Code that must not be cut in the middle (a file being completed) runs
inside `scope.deferred()`; a signal arriving there is raised at its end.
"""
import contextlib
import logging
import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT)

# A shell's convention: 128 + the signal number.
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


class Interrupted(KeyboardInterrupt):
  """A command's work stopped on SIGTERM or SIGINT.

  Attributes:
    signal_name: 'SIGTERM' or 'SIGINT'.
    exit_status: the status the command exits with.
    work: what was stopped, e.g. 'the export'.
    kept: what was kept or cleaned up, innermost first (see `add`).
  """

  def __init__(self, signal_name, exit_status, work):
    super().__init__('%s: %s stopped' % (signal_name, work))
    self.signal_name = signal_name
    self.exit_status = exit_status
    self.work = work
    self.kept = []

  def add(self, text):
    """Records what was kept or cleaned up; returns self (to re-raise)."""
    if text:
      self.kept.append(text)
    return self

  def line(self):
    """One line: who stopped it, what was stopped, what was kept."""
    who = 'Ctrl-C' if self.signal_name == 'SIGINT' else self.signal_name
    return '%s: %s' % (who, '; '.join([self.work + ' stopped'] + self.kept))


def exit_status(signal_name, sigterm_status=EXIT_SIGTERM):
  """130 after Ctrl-C; `sigterm_status` after SIGTERM."""
  return EXIT_SIGINT if signal_name == 'SIGINT' else sigterm_status


def interrupt(signum, work, sigterm_status=EXIT_SIGTERM, kept=None):
  """Raises Interrupted for `signum`; a further signal raises at once.

  For signal handlers: called in the main thread.

  Args:
    signum: the signal received.
    work: what is stopped.
    sigterm_status: the exit status after SIGTERM.
    kept: optional callable returning what was kept, for the exception.
  """
  for each in SIGNALS:
    signal.signal(each, signal.default_int_handler)
  name = signal.Signals(signum).name
  stop = Interrupted(name, exit_status(name, sigterm_status), work)
  raise stop.add(kept() if kept else None)


def in_main_thread():
  return threading.current_thread() is threading.main_thread()


def end_process_on_signals():
  """SIGTERM and Ctrl-C end this process at once, as without handlers.

  For a parameter server task: it serves from TensorFlow's server.join(),
  which never gives the main thread back to Python, so a Python handler
  would never run and the task would ignore both signals until killed.
  It holds nothing to save (the chief checkpoints the variables). Only
  the main thread can change handlers; elsewhere this does nothing.
  """
  if in_main_thread():
    for signum in SIGNALS:
      signal.signal(signum, signal.SIG_DFL)


class SignalScope:
  """SIGTERM / SIGINT handlers raising Interrupted for one piece of work.

  Attributes:
    work: what runs, for the message ('evaluation', 'the export').
  """

  def __init__(self, work, sigterm_status=EXIT_SIGTERM, kept=None):
    """Creates the scope; see `interrupt` for the arguments."""
    self.work = work
    self._sigterm_status = sigterm_status
    self._kept = kept
    self._previous = {}
    self._deferring = 0
    self._pending = None

  def install(self):
    """Installs the handlers; in another thread only logs that it cannot."""
    if not in_main_thread():
      logging.warning('%s runs outside the main thread: SIGTERM and Ctrl-C '
                      'will not stop it cleanly.', self.work)
      return
    for signum in SIGNALS:
      self._previous[signum] = signal.signal(signum, self._handle)

  def restore(self):
    """Puts back the handlers found at install()."""
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}

  def _handle(self, signum, frame):
    del frame  # Unused.
    if self._deferring:
      self._pending = self._pending or signum
      return
    interrupt(signum, self.work, self._sigterm_status, self._kept)

  @contextlib.contextmanager
  def deferred(self):
    """A block a signal does not cut: it is raised when the block ends."""
    self._deferring += 1
    try:
      yield
    finally:
      self._deferring -= 1
    if self._pending and not self._deferring:
      signum, self._pending = self._pending, None
      interrupt(signum, self.work, self._sigterm_status, self._kept)


@contextlib.contextmanager
def stopping_on_signals(work, sigterm_status=EXIT_SIGTERM):
  """Yields a SignalScope for `work` whose handlers are installed meanwhile.

  Args:
    work: what runs, named in the exception's line ('the export').
    sigterm_status: the exit status after SIGTERM (130 after Ctrl-C).
  """
  scope = SignalScope(work, sigterm_status)
  scope.install()
  try:
    yield scope
  finally:
    scope.restore()
