r"""Item 1b: our training step and its backbone ceiling, interleaved.

Run one after the other, the two figures of item 1b came minutes apart,
and the ceiling's short steps moved by +-20% from run to run on an idle
machine. Here both sides are built first, each in its own process (as
bench/train_step.py builds them: --mode=estimator through our Estimator,
--mode=ceiling the MobileNet v2 body alone), then run in turns of --block
steps, --blocks turns each, the side that starts alternating from turn to
turn; a side waits, idle, while the other runs. Each side's images/s is
over its timed turns, its images per CPU second over all CPU time its
process used from its first turn to its last (waits included, so work its
input pipeline does while the other side runs is counted); the ratio of
each pair of turns is kept too, and their median is the verdict's figure
(`median_ratio`), so one hiccup of the machine moves one pair only.

  .venv/bin/python bench/interleaved_ceiling.py --data_dir=bench/out/data160 \
      --size=160 --depth=0.35 --batch=16
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import train_step  # pylint: disable=g-import-not-at-top,wrong-import-position

SIDES = ('estimator', 'ceiling')


class _Turns:
  """A worker's side of the protocol: READY, then one BLOCK line a turn.

  wait() blocks until the driver says `go` (True) or `stop` (False).
  """

  def __init__(self, block):
    self.block = block
    self._start = None
    self._cpu_start = None
    self.seconds = []

  def wait(self):
    command = sys.stdin.readline().strip()
    if self._cpu_start is None:
      self._cpu_start = time.process_time()
    self._start = time.perf_counter()
    return command == 'go'

  def ready(self):
    print('READY', flush=True)
    return self.wait()

  def turn_done(self):
    self.seconds.append(time.perf_counter() - self._start)
    self.cpu_seconds = time.process_time() - self._cpu_start
    print('BLOCK %r' % self.seconds[-1], flush=True)
    return self.wait()


class _EstimatorTurns(tf.compat.v1.train.SessionRunHook):
  """Runs the Estimator's steps in turns of `turns.block` after warm-up."""

  def __init__(self, turns, warmup):
    self._turns = turns
    self._warmup = warmup
    self._steps = 0

  def after_run(self, run_context, run_values):
    self._steps += 1
    timed = self._steps - self._warmup
    going = True
    if timed == 0:
      going = self._turns.ready()
    elif timed > 0 and timed % self._turns.block == 0:
      going = self._turns.turn_done()
    if not going:
      run_context.request_stop()


def _estimator_worker(args, turns):
  with tempfile.TemporaryDirectory() as model_dir:
    parts = train_step._estimator(args, model_dir)  # pylint: disable=protected-access
    parts['estimator'].train(
        parts['train_input_fn'], hooks=[_EstimatorTurns(turns, args.warmup)],
        max_steps=args.warmup + args.blocks * args.block + 1)


def _ceiling_worker(args, turns):
  with tf.Graph().as_default():
    train_op = train_step.ceiling_train_op(args)
    with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
        allow_soft_placement=True)) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(args.warmup):
        sess.run(train_op)
      going = turns.ready()
      while going:
        for _ in range(args.block):
          sess.run(train_op)
        going = turns.turn_done()


def worker(args):
  """One side: builds, warms up, then runs turns as the driver says."""
  turns = _Turns(args.block)
  {'estimator': _estimator_worker, 'ceiling': _ceiling_worker}[args.worker](
      args, turns)
  images = len(turns.seconds) * args.block * args.batch
  print('RESULT ' + json.dumps({
      'images_per_s': images / sum(turns.seconds),
      'images_per_cpu_s': images / turns.cpu_seconds,
      'turn_seconds': turns.seconds,
      'peak_rss_mb': common.peak_rss_mb()}), flush=True)


class _Worker:
  """A worker process and its lines."""

  def __init__(self, side, argv):
    self.process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), '--worker=' + side] +
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

  def expect(self, word):
    for line in self.process.stdout:
      if line.startswith(word):
        return line[len(word):].strip()
    raise RuntimeError('a worker ended before %s (exit %s)' % (
        word, self.process.wait()))

  def say(self, command):
    self.process.stdin.write(command + '\n')
    self.process.stdin.flush()


def drive(args, argv):
  """Both workers, their turns alternating; the result's figures."""
  common.write_records(args.data_dir, args.size)
  workers = {side: _Worker(side, argv) for side in SIDES}
  try:
    for side in SIDES:
      workers[side].expect('READY')
    for turn in range(args.blocks):
      for side in SIDES[::1 if turn % 2 == 0 else -1]:
        workers[side].say('go')
        workers[side].expect('BLOCK')
    figures = {}
    for side in SIDES:
      workers[side].say('stop')
      figures[side] = json.loads(workers[side].expect('RESULT'))
      workers[side].process.wait()
  finally:
    for one in workers.values():
      if one.process.poll() is None:
        one.process.kill()
  ours, ceiling = figures['estimator'], figures['ceiling']
  pair_ratios = [c / o for o, c in zip(ours['turn_seconds'],
                                       ceiling['turn_seconds'])]
  return {
      'ours': {key: ours[key] for key in (
          'images_per_s', 'images_per_cpu_s', 'peak_rss_mb')},
      'ceiling': {key: ceiling[key] for key in (
          'images_per_s', 'images_per_cpu_s', 'peak_rss_mb')},
      'ratio': ours['images_per_s'] / ceiling['images_per_s'],
      'cpu_ratio': ours['images_per_cpu_s'] / ceiling['images_per_cpu_s'],
      'median_ratio': statistics.median(pair_ratios),
      'pair_ratios': [round(r, 3) for r in pair_ratios],
      'turns': args.blocks, 'steps_a_turn': args.block}


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--worker', choices=SIDES, default=None,
                      help='(internal) run one side, driven on stdin.')
  # Our side's first turn after 3 warm-up steps still ran at ~0.6 of the
  # later ones (2026-11-30): 5.
  parser.add_argument('--warmup', type=int, default=5)
  parser.add_argument('--block', type=int, default=10,
                      help='Steps a turn.')
  parser.add_argument('--blocks', type=int, default=8,
                      help='Turns each side.')
  common.add_model_args(parser)
  args = parser.parse_args(argv)
  common.quiet()
  if args.worker:
    worker(args)
    return 0
  result = drive(args, [a for a in argv if a != '--json'])
  print('%s depth %g, %dx%d, batch %d: training step / ceiling, '
        'interleaved:' % (args.arch, args.depth, args.size, args.size,
                          args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
