"""Command processes forked from a Python that has imported TensorFlow once.

The tests that need a command's own process (signals, exit statuses,
clusters, crashes) start `python -m tests.plain_command MODULE FLAGS...`
(tests/plain_command.py). A new interpreter pays ~2.5 CPU seconds importing
TensorFlow and od_estimator before it does anything; this server pays it
once per pytest worker. conftest.py starts it and names its socket in
$OD_TEST_FORK_SERVER; plain_command's process (which then imports no
TensorFlow) hands its argv, environment, working folder and stdin/stdout/
stderr to the server, which forks the command from its warm interpreter:

  test --starts--> plain_command (client) <--socket--> manager --> command
                                                          ^ forked by the server

The command is a real process of its own (pid, files, exit status); the
client stands for it: it forwards the signals it gets to the command and
exits as the command did (its code, or killed by the same signal), and if
the client dies (SIGKILL), the manager kills the command. Without the
server, or for an environment whose TensorFlow settings differ from the
server's (they take effect at import), plain_command runs the command in
its own process as before.
"""
import atexit
import contextlib
import io
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback

# Environment variables read when Python or TensorFlow start (the linker,
# TensorFlow's logging and oneDNN, OpenMP): a command asking for other
# values than the server's gets a fresh interpreter. TensorFlow reads the
# others when first used (TF_CONFIG, TF_XLA_FLAGS, the graph rewrites'
# lists, which od_estimator itself sets at run time): the command has them.
_IMPORT_TIME_PREFIXES = ('PYTHON', 'LD_', 'TF_CPP_', 'TF_ENABLE_ONEDNN_OPTS',
                         'OMP_', 'KMP_', 'MKL_')
# ...except output settings, which the forked command applies itself.
_RUN_TIME = ('PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED')
# Signals the client forwards to the command.
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
              signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)
# What the server imports before forking: what every command imports, and
# none of the command modules (run as __main__, they define their flags).
_WARM_MODULES = ('tensorflow', 'od_estimator.estimator.model_lib',
                 'od_estimator.export.exporter', 'od_estimator.command_line',
                 'tests.plain_session', 'tests.fakes')
ENV = 'OD_TEST_FORK_SERVER'
_STATUS = struct.Struct('ii')  # (exit code, killing signal or 0)
_SIGNUM = struct.Struct('i')


def _import_time_environment(environ):
  return {key: value for key, value in environ.items()
          if key.startswith(_IMPORT_TIME_PREFIXES) and key not in _RUN_TIME}


# The client: plain_command's process.


def run_forked(argv):
  """Runs `argv` (MODULE FLAGS...) forked by the server named in the
  environment; exits as the command does. Returns if there is no server
  this process can use (the caller then runs the command itself)."""
  address = os.environ.get(ENV)
  if not address or not _wait_ready(address):
    return
  with open(address + '.env') as saved:
    if json.load(saved) != _import_time_environment(os.environ):
      return
  connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  connection.connect(address)
  # Signals this process was started with ignored, the command ignores.
  ignored = [signum for signum in _FORWARDED
             if signal.getsignal(signum) == signal.SIG_IGN]
  request = json.dumps({'argv': argv, 'cwd': os.getcwd(),
                        'env': dict(os.environ), 'ignored': ignored}).encode()
  socket.send_fds(connection, [struct.pack('q', len(request))], [0, 1, 2])
  connection.sendall(request)
  for signum in _FORWARDED:
    signal.signal(signum, lambda number, _: connection.sendall(
        _SIGNUM.pack(number)))
  status = _receive(connection, _STATUS.size)
  code, killed_by = _STATUS.unpack(status)
  if killed_by:
    signal.signal(killed_by, signal.SIG_DFL)
    os.kill(os.getpid(), killed_by)
  os._exit(code)  # pylint: disable=protected-access


def _wait_ready(address, seconds=300):
  """Whether the server is (or becomes) ready; False if it failed."""
  deadline = time.monotonic() + seconds
  while time.monotonic() < deadline:
    if os.path.exists(address + '.env'):
      return True
    if os.path.exists(address + '.failed'):
      return False
    time.sleep(0.05)
  return False


def _receive(connection, size):
  data = b''
  while len(data) < size:
    chunk = connection.recv(size - len(data))
    if not chunk:
      raise ConnectionError('the fork server closed the connection')
    data += chunk
  return data


# The server: one per pytest worker.


@contextlib.contextmanager
def serving():
  """Context: a server for the commands this process starts, its address
  in $OD_TEST_FORK_SERVER."""
  import subprocess  # pylint: disable=g-import-not-at-top
  folder = tempfile.mkdtemp(prefix='od-forks-')  # A socket's path is short.
  address = os.path.join(folder, 's')
  with open(os.path.join(folder, 'log'), 'w') as log:
    server = subprocess.Popen([sys.executable, '-m', __name__, address],
                              stdin=subprocess.PIPE, stdout=log, stderr=log)
  os.environ[ENV] = address
  try:
    yield
  finally:
    del os.environ[ENV]
    server.stdin.close()
    server.wait()
    shutil.rmtree(folder, ignore_errors=True)


def _serve(address):
  try:
    listener = _listen(address)
  except Exception:  # pylint: disable=broad-except
    traceback.print_exc()  # Into the log; the clients run their commands.
    open(address + '.failed', 'w').close()
    return
  # Ready: the environment it imported with, written whole in one step.
  with open(address + '.env.partial', 'w') as saved:
    json.dump(_import_time_environment(os.environ), saved)
  os.replace(address + '.env.partial', address + '.env')
  managers = set()
  while True:
    ready, _, _ = select.select([listener, sys.stdin], [], [], 1)
    # Waited for, so that their CPU time counts as the run's.
    managers = {pid for pid in managers
                if os.waitpid(pid, os.WNOHANG)[0] == 0}
    if sys.stdin in ready:  # The pytest worker is done (or gone).
      for pid in managers:  # A command still running: its test left it.
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
      return
    if listener in ready:
      connection, _ = listener.accept()
      pid = os.fork()
      if pid == 0:
        listener.close()
        _manage(connection)
      managers.add(pid)
      connection.close()


def _listen(address):
  """Imports what the commands import; the socket the clients connect to."""
  for name in _WARM_MODULES:
    __import__(name)
  from od_estimator.utils import gc_tuning  # pylint: disable=g-import-not-at-top
  gc_tuning.for_graph_building()  # The commands inherit it.
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(address)
  listener.listen(16)
  return listener


def _manage(connection):
  """The manager of one command: forks it, relays signals and status."""
  os.setpgid(0, 0)  # The server stops the group if it outlives the run.
  header, fds, _, _ = socket.recv_fds(connection, 8, 3)
  request = json.loads(_receive(connection, struct.unpack('q', header)[0]))
  pid = os.fork()
  if pid == 0:
    connection.close()
    _run_command(request, fds)
  for fd in fds:
    os.close(fd)
  exited = os.pidfd_open(pid)
  while True:
    ready, _, _ = select.select([connection, exited], [], [])
    if exited in ready:
      _, status = os.waitpid(pid, 0)
      killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
      code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0
      connection.sendall(_STATUS.pack(code, killed_by))
      os._exit(0)  # pylint: disable=protected-access
    message = connection.recv(_SIGNUM.size)
    if not message:  # The client died: so does its command.
      os.kill(pid, signal.SIGKILL)
      os.waitpid(pid, 0)
      os._exit(0)  # pylint: disable=protected-access
    os.kill(pid, _SIGNUM.unpack(message)[0])


def _run_command(request, fds):
  """In the forked command: becomes `python -m tests.plain_command ARGV`
  started by the client, then exits as that interpreter would."""
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
    os.close(fd)
  _reopen_standard_streams(bool(request['env'].get('PYTHONUNBUFFERED')))
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  sys.path[0] = request['cwd']
  for signum in _FORWARDED:  # As a new interpreter would set them.
    if signum in request['ignored']:
      signal.signal(signum, signal.SIG_IGN)
    elif signum == signal.SIGINT:
      signal.signal(signum, signal.default_int_handler)
    else:
      signal.signal(signum, signal.SIG_DFL)
  random.seed()
  import numpy as np  # pylint: disable=g-import-not-at-top
  np.random.seed()
  from tests import plain_command  # pylint: disable=g-import-not-at-top
  code = 0
  try:
    plain_command.run_here(request['argv'])
  except SystemExit as exit_:
    code = _exit_code(exit_.code)
  except KeyboardInterrupt:
    traceback.print_exc()
    _flush_and_run_atexit()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  _flush_and_run_atexit()
  os._exit(code)  # pylint: disable=protected-access


def _reopen_standard_streams(unbuffered):
  """sys.stdin/stdout/stderr on the client's, buffered as Python does."""
  sys.stdin = open(0, closefd=False)
  for fd, name in ((1, 'stdout'), (2, 'stderr')):
    if unbuffered or fd == 2:
      stream = io.TextIOWrapper(open(fd, 'wb', buffering=0, closefd=False),
                                write_through=True, line_buffering=fd == 2)
    else:
      stream = open(fd, 'w', closefd=False)
    setattr(sys, name, stream)


def _exit_code(code):
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  print(code, file=sys.stderr)
  return 1


def _flush_and_run_atexit():
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass


if __name__ == '__main__':
  _serve(sys.argv[1])
