"""tests/fork_server.py: a command started through tests/plain_command runs
forked from the worker's warm interpreter, as if it were the process the
test started: same arguments, folder, environment, output, exit status,
signals; killed with it."""
import os
import signal
import subprocess
import time

import pytest

from tests import plain_command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = plain_command.command('tests.fork_probe')


def _start(*args, ignore=(), **environ):
  """The probe, started with Ctrl-C and SIGTERM as a shell starts them
  (those in `ignore` ignored), whatever this test process has set."""
  def dispositions():
    for signum in (signal.SIGINT, signal.SIGTERM):
      signal.signal(signum,
                    signal.SIG_IGN if signum in ignore else signal.SIG_DFL)
  return subprocess.Popen(
      PROBE + list(args), cwd=REPO, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=dict(os.environ, **environ),
      preexec_fn=dispositions)


def _first_line(process):
  """(the command's pid, its line's other fields)."""
  fields = process.stdout.readline().split()
  return int(fields[0]), fields[1:]


def _gone(pid, seconds=10):
  deadline = time.monotonic() + seconds
  while time.monotonic() < deadline:
    try:
      with open('/proc/%d/stat' % pid) as stat:
        if stat.read().split()[2] == 'Z':  # exited, not yet reaped
          return True
    except FileNotFoundError:
      return True
    time.sleep(0.05)
  return False


def test_forked_command_sees_its_arguments_folder_and_environment():
  # TF_XLA_FLAGS: TensorFlow reads it when it first compiles, not at import.
  process = _start('3', 'two words', PROBE='seen',
                   TF_XLA_FLAGS='--tf_xla_auto_jit=-1')
  pid, fields = _first_line(process)
  assert process.wait() == 3
  assert pid != process.pid  # forked by the server, not this interpreter
  assert fields == [REPO, 'seen', '3', 'two', 'words']


def test_tensorflow_settings_get_their_own_interpreter():
  """TF_* variables take effect at import: the command starts afresh."""
  process = _start('0', TF_CPP_MIN_LOG_LEVEL='3')
  pid, _ = _first_line(process)
  assert process.wait() == 0
  assert pid == process.pid


def test_signals_reach_the_command_and_its_status_comes_back():
  for signum, status in ((signal.SIGTERM, -signal.SIGTERM),
                         (signal.SIGINT, -signal.SIGINT)):
    process = _start('0', 'sleep')
    pid, _ = _first_line(process)
    process.send_signal(signum)
    assert process.wait(timeout=30) == status
    assert _gone(pid)
  # Ctrl-C's KeyboardInterrupt, on the command's stderr as Python writes it.
  assert process.stderr.read().rstrip().endswith('KeyboardInterrupt')


def test_a_signal_ignored_at_start_is_ignored_by_the_command():
  process = _start('0', 'sleep', ignore=(signal.SIGTERM,))
  pid, _ = _first_line(process)
  process.send_signal(signal.SIGTERM)
  with pytest.raises(subprocess.TimeoutExpired):
    process.wait(timeout=1)
  process.kill()
  assert process.wait() == -signal.SIGKILL
  assert _gone(pid)


def test_killing_the_started_process_kills_the_command():
  process = _start('0', 'sleep')
  pid, _ = _first_line(process)
  process.kill()
  assert process.wait() == -signal.SIGKILL
  assert _gone(pid)
