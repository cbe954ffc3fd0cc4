r"""Where the original's TF2 training step spends its time (item 10's peer).

Runs in the original's environment (as bench/orig_step.py, whose step it
times): traces a few steps of its eager_train_step under tf.function with
TensorFlow's profiler, reads the trace (the host plane of the .xplane.pb,
one event `<op name>:<op type>` per op run by the function's executor) and
sums the ops' times by top-level name scope ('gradient_tape/' kept apart)
and by op type: the original's side of bench/profile_train_step.py.

  bench/.orig_venv/bin/python bench/profile_orig_step.py \
      --pipeline_config_path=pipeline.config --warmup=2 --steps=2
"""
import argparse
import collections
import glob
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import orig_step  # pylint: disable=g-import-not-at-top,wrong-import-position

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top,wrong-import-position

# An op's event in the executor's threads: '<name>:<type>'.
_OP_EVENT = re.compile(r'^([^:\s]+):([A-Za-z_][A-Za-z0-9_]*)$')


def _scope(name):
  """'gradient_tape/a/b/...' -> 'gradient_tape/a'; 'a/b/...' -> 'a'."""
  parts = name.split('/')
  depth = 2 if parts[0] == 'gradient_tape' and len(parts) > 2 else 1
  return '/'.join(parts[:depth])


def op_times(xplane_path):
  """({scope: picoseconds}, {op type: picoseconds}) of a trace's ops."""
  space = xplane_pb2.XSpace()
  with open(xplane_path, 'rb') as f:
    space.ParseFromString(f.read())
  by_scope, by_type = collections.Counter(), collections.Counter()
  for plane in space.planes:
    if not plane.name.startswith('/host:'):
      continue
    for line in plane.lines:
      for event in line.events:
        match = _OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
        if match:
          by_scope[_scope(match.group(1))] += event.duration_ps
          by_type[match.group(2)] += event.duration_ps
  return by_scope, by_type


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--pipeline_config_path', required=True)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=2)
  parser.add_argument('--top', type=int, default=20)
  args = parser.parse_args(argv)
  step, iterator, _ = orig_step.build_step_from_file(
      args.pipeline_config_path)
  for _ in range(args.warmup):
    step(*next(iterator))
  with tempfile.TemporaryDirectory() as directory:
    tf.profiler.experimental.start(directory)
    for _ in range(args.steps):
      step(*next(iterator))
    tf.profiler.experimental.stop()
    by_scope, by_type = op_times(glob.glob(os.path.join(
        directory, 'plugins', 'profile', '*', '*.xplane.pb'))[0])
  everything = sum(by_scope.values())
  for title, totals in (('scope', by_scope), ('op type', by_type)):
    print('op time by %s (%d traced steps, the executor\'s ops):' % (
        title, args.steps))
    for key, picoseconds in totals.most_common(args.top):
      print('  %-60s %6.1f%%' % (key, 100.0 * picoseconds / everything))
  return 0


if __name__ == '__main__':
  sys.exit(main())
