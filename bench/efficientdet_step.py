r"""Item 1e: the EfficientDet-D0 training step against its backbone ceiling.

Ours: bench/train_step.py's Estimator step (model_fn through
tf.estimator on the synthetic records, the original's D0 config as
bench/efficientdet.py sets it). The ceiling: EfficientNet-B0 alone as the
detector runs it (stem to stack_6/block_0, batch norm training,
drop-connect), forward, backward and momentum step on a constant batch of
the same size, in a plain session. Both in this one process, alternated
--rounds times, each side's graph built and its session closed in its
turn (the two sessions' memory together, ~9 GB at 512x512 batch 4, is more
than a shared machine may have); the ratios are medians over the rounds, by
wall clock and per CPU second (the process's CPU time over the timed steps,
which the load of other work disturbs less).

  .venv/bin/python bench/efficientdet_step.py --data_dir=bench/out/data512 \
      --size=512 --batch=4 --rounds=2
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import efficientdet  # pylint: disable=g-import-not-at-top,wrong-import-position
import train_step  # pylint: disable=g-import-not-at-top,wrong-import-position


class Ceiling(object):
  """EfficientNet-B0's training step alone in its own session."""

  def __init__(self, args):
    self._graph = tf.Graph()
    with self._graph.as_default():
      images = np.random.default_rng(0).uniform(
          -1, 1, [args.batch, args.size, args.size, 3]).astype(np.float32)
      loss, optimizer = efficientdet.efficientnet_body_loss(
          args, tf.constant(images))
      with tf.control_dependencies(
          tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
        self._train_op = optimizer.minimize(loss)
      self._session = tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
          allow_soft_placement=True))
      self._session.run(tf.compat.v1.global_variables_initializer())
    self._batch = args.batch

  def rates(self, warmup, steps):
    """{images_per_s, images_per_cpu_s} over `steps` after `warmup`; then
    closes the session."""
    for _ in range(warmup):
      self._session.run(self._train_op)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
      self._session.run(self._train_op)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    self._session.close()
    return {'images_per_s': steps * self._batch / seconds,
            'images_per_cpu_s': steps * self._batch / cpu_seconds}


def measure(args):
  """Alternates the ceiling and ours args.rounds times; medians."""
  rounds = []
  for _ in range(args.rounds):
    ceiling_figures = Ceiling(args).rates(args.warmup, args.steps)
    rounds.append({'ceiling': ceiling_figures,
                   'ours': train_step.estimator_rates(args)})
  result = {}
  for side in ('ours', 'ceiling'):
    for key in ('images_per_s', 'images_per_cpu_s'):
      result['%s_%s' % (side, key)] = statistics.median(
          r[side][key] for r in rounds)
  for name, key in (('ratio', 'images_per_s'),
                    ('cpu_ratio', 'images_per_cpu_s')):
    values = [r['ours'][key] / r['ceiling'][key] for r in rounds]
    result[name] = statistics.median(values)
    if len(rounds) > 1:
      result['round_' + name + 's'] = [round(v, 3) for v in values]
  # Item 10e's side of ours: the last round's Estimator step.
  result['images_per_s'] = rounds[-1]['ours']['images_per_s']
  result['images_per_cpu_s'] = rounds[-1]['ours']['images_per_cpu_s']
  result['summary'] = (
      'ours %.3g vs ceiling %.3g images/s: %.2f (per CPU second %.3g vs '
      '%.3g: %.2f)' % (result['ours_images_per_s'],
                       result['ceiling_images_per_s'], result['ratio'],
                       result['ours_images_per_cpu_s'],
                       result['ceiling_images_per_cpu_s'],
                       result['cpu_ratio']))
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  common.add_model_args(parser, size=512, batch=4)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=4)
  parser.add_argument('--rounds', type=int, default=1,
                      help='The ceiling then ours, this many times in turn.')
  args = parser.parse_args(argv)
  args.arch, args.bfloat16 = 'efficientdet_d0', False
  common.quiet()
  result = measure(args)
  print('EfficientDet-D0 step / EfficientNet-B0 ceiling, %dx%d, batch %d:' %
        (args.size, args.size, args.batch))
  common.report(dict(result, peak_rss_mb=common.peak_rss_mb()), args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
