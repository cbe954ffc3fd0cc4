"""Free localhost ports for the test clusters' TensorFlow servers."""
import contextlib
import fcntl
import os
import socket
import tempfile


def _ephemeral_range_start():
  try:
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
      return int(f.read().split()[0])
  except (OSError, ValueError, IndexError):
    return 32768  # Linux's default


def _is_free(port):
  with socket.socket() as sock:
    try:
      sock.bind(('localhost', port))
    except OSError:
      return False
  return True


@contextlib.contextmanager
def reserved(count):
  """Yields `count` free localhost ports, reserved until the block ends.

  TensorFlow's gRPC servers bind their ports themselves and refuse a port
  another socket holds, so a port cannot be handed over bound. Ports from
  bind(0) come from the kernel's ephemeral range, where any process's
  outgoing connection or bind(0) may take one before the servers bind it.
  These come from below that range, which the kernel never hands out on
  its own, and a lock file per port keeps concurrent runs of this test off
  each other's ports.
  """
  stop = _ephemeral_range_start()
  start = max(1024, stop - 8000)
  first = start + os.getpid() % (stop - start)
  locks = os.path.join(tempfile.gettempdir(), 'od_estimator_test_ports')
  os.makedirs(locks, exist_ok=True)
  ports = []
  with contextlib.ExitStack() as stack:
    for offset in range(stop - start):
      port = start + (first - start + offset) % (stop - start)
      lock = stack.enter_context(
          open(os.path.join(locks, '%d.lock' % port), 'w'))
      try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError:
        continue  # reserved by a concurrent run
      if _is_free(port):
        ports.append(port)
        if len(ports) == count:
          yield ports
          return
    raise RuntimeError('no %d free ports in [%d, %d)' % (count, start, stop))
