"""`python -m tests.plain_command tests.fork_probe CODE [sleep]`: prints its
pid, working folder, $PROBE and arguments, then (with `sleep`) waits to be
signalled, or exits with CODE. For tests/test_fork_server.py."""
import os
import sys
import time

if __name__ == '__main__':
  print(os.getpid(), os.getcwd(), os.environ.get('PROBE', '-'),
        *sys.argv[1:], flush=True)
  if 'sleep' in sys.argv[2:]:
    time.sleep(120)
  sys.exit(int(sys.argv[1]))
