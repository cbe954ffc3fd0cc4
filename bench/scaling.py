r"""How cost grows: training images/s by batch size, evaluation time by images.

  train  the SSD MobileNet v2 training step of bench/train_step.py
         (--mode=estimator) at batch sizes 1, 2, 4, 8, 16: images/s, and
         images per CPU second (steadier under load); one batch's figures
         may come from an earlier measurement (--measured_step).
  coco   our COCO box evaluation (bench/coco_eval.py's data: 100 detections
         an image, 80 classes) of 100 to 5,000 images: seconds (wall, and
         the process's CPU time, which the plot shows: steadier under
         load).

Both are drawn into bench/scaling.png (matplotlib): images/s against the
batch, and seconds against images on log-log axes with the line of
proportional growth through the middle point, so where cost stays linear
and where it bends shows.

  .venv/bin/python bench/scaling.py --data_dir=bench/out/data300
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_eval  # pylint: disable=g-import-not-at-top,wrong-import-position
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import train_step  # pylint: disable=g-import-not-at-top,wrong-import-position

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    'scaling.png')


def train_rates(args):
  """{batch: images/s} and {batch: images per CPU second} of the SSD
  training step (the latter steadier on a shared machine); a batch of
  --measured_step is not trained again."""
  measured = json.loads(args.measured_step) if args.measured_step else {}
  rates, cpu_rates = {}, {}
  for batch in args.batches:
    args.batch = batch
    rate = (measured if batch == args.measured_batch and measured else
            train_step.estimator_rates(args))
    rates[batch] = rate['images_per_s']
    cpu_rates[batch] = rate['images_per_cpu_s']
    print('  batch %2d: %.2f images/s, %.2f per CPU s' % (
        batch, rates[batch], cpu_rates[batch]), flush=True)
  return rates, cpu_rates


def eval_seconds(args, categories):
  """{images: seconds} of our COCO evaluation, fastest of --repeats: wall
  clock, and process CPU time (steadier on a shared machine)."""
  wall, cpu = {}, {}
  for count in args.eval_images:
    images = coco_eval.make_data(count, args.num_detections,
                                 args.num_classes)
    clocks = [coco_eval.ours(images, categories)[0]
              for _ in range(args.repeats)]
    wall[count] = min(clock.wall for clock in clocks)
    cpu[count] = min(clock.cpu for clock in clocks)
    print('  %5d images: %.2f s (CPU %.2f s)' % (count, wall[count],
                                                 cpu[count]), flush=True)
  return wall, cpu


def plot(args, rates, cpu_rates, seconds, path):
  """Two panels: images/s (wall and per CPU second) by batch, and
  evaluation CPU seconds by images."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, (left, right) = pyplot.subplots(1, 2, figsize=(11, 4.2))
  batches = sorted(rates)
  left.plot(batches, [rates[b] for b in batches], 'o-',
            label='images / s (wall clock)')
  left.plot(batches, [cpu_rates[b] for b in batches], 's--',
            label='images / CPU second (all threads)')
  left.legend()
  left.set_xscale('log', base=2)
  left.set_xticks(batches, [str(b) for b in batches])
  left.set_ylim(bottom=0)
  left.set_xlabel('batch size')
  left.set_ylabel('training images')
  left.set_title('SSD MobileNet v2 (depth %g, %dx%d) training step' % (
      args.depth, args.size, args.size))
  left.grid(alpha=0.3)
  counts = sorted(seconds)
  right.loglog(counts, [seconds[c] for c in counts], 'o-', label='measured')
  middle = counts[len(counts) // 2]
  per_image = seconds[middle] / middle
  right.loglog(counts, [per_image * c for c in counts], '--', color='grey',
               label='proportional growth (through %d images)' % middle)
  right.set_xlabel('images evaluated')
  right.set_ylabel('CPU seconds')
  right.set_title('COCO box evaluation (%d detections an image, %d classes)'
                  % (args.num_detections, args.num_classes))
  right.grid(alpha=0.3, which='both')
  right.legend()
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--batches', type=int, nargs='+',
                      default=[1, 2, 4, 8, 16])
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=2)
  parser.add_argument('--eval_images', type=int, nargs='+',
                      default=[100, 300, 1000, 3000, 5000])
  parser.add_argument('--num_detections', type=int, default=100)
  parser.add_argument('--num_classes', type=int, default=80)
  parser.add_argument('--repeats', type=int, default=1)
  parser.add_argument('--measured_step', default=None,
                      help='JSON figures of the training step at '
                           '--measured_batch (bench/train_step.py '
                           '--mode=estimator, same config), measured earlier '
                           'in the same run (make bench: item 1\'s step): '
                           'that batch is not trained again.')
  parser.add_argument('--measured_batch', type=int, default=8)
  parser.add_argument('--plot', default=PLOT)
  common.add_model_args(parser)
  args = parser.parse_args(argv)
  common.quiet()
  categories = [{'id': i, 'name': 'class_%d' % i}
                for i in range(1, args.num_classes + 1)]
  print('COCO evaluation time by images:')
  seconds, cpu_seconds = eval_seconds(args, categories)
  print('training step images/s by batch size:')
  rates, cpu_rates = train_rates(args)
  plot(args, rates, cpu_rates, cpu_seconds, args.plot)
  print('plot: %s' % args.plot)
  common.report({
      'train_images_per_s_by_batch': {str(b): r for b, r in rates.items()},
      'train_images_per_cpu_s_by_batch': {
          str(b): r for b, r in cpu_rates.items()},
      'eval_seconds_by_images': {str(c): s for c, s in seconds.items()},
      'eval_cpu_seconds_by_images': {
          str(c): s for c, s in cpu_seconds.items()},
      'plot': os.path.relpath(args.plot, os.path.dirname(PLOT))},
                args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
