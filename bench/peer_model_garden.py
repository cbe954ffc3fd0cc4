r"""Items 7-9: TF Model Garden's trainers next to ours, same records.

Model Garden (tf-models-official 2.15, Keras, eager/tf.function) lives in
its own virtual environment, bench/.peer_venv, made here on first use
(`pip install tf-models-official==2.15.0 tensorflow==2.15.1`; a few minutes
and ~1.5 GB the first time; never a project dependency). On the same
synthetic records, same size, batch and classes, it times:
  peer  bench/model_garden_step.py in the peer environment, and
  ours  bench/train_step.py --mode=estimator through our Estimator model_fn.
--arch=retinanet    Model Garden's retinanet_resnetfpn_coco next to our
                    ResNet50 FPN RetinaNet (item 7).
--arch=faster_rcnn  Model Garden's Faster R-CNN (fasterrcnn_resnetfpn_coco:
                    its maskrcnn task, include_mask False; ResNet-50 FPN)
                    next to our Faster R-CNN ResNet-50 (item 8). The
                    architectures differ as the two libraries ship them:
                    Model Garden's box head is four 256-channel 3x3
                    convolutions and one fully connected layer on 7x7 FPN
                    crops, the original's (ours) is ResNet block4 (2048
                    channels) on every sampled proposal, ~6x the work.
--arch=mask_rcnn    Model Garden's maskrcnn_resnetfpn_coco (the same with
                    its mask head) next to our Mask R-CNN ResNet-50 (item
                    8's with the original's mask head), on the records'
                    masks (item 9).

Both sides report images per second and per CPU second (the process's CPU
time over the timed steps, which other load on the machine disturbs less);
--rounds=N alternates the two N times and reports medians.

  .venv/bin/python bench/peer_model_garden.py --data_dir=bench/out/data256
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

BENCH = os.path.dirname(os.path.abspath(__file__))
PEER_VENV = os.path.join(BENCH, '.peer_venv')
PEER_PY = os.path.join(PEER_VENV, 'bin', 'python')
PEER_PACKAGES = ['tf-models-official==2.15.0', 'tensorflow==2.15.1']
# --arch -> (Model Garden experiment, what it is).
ARCHS = {'retinanet': ('retinanet_resnetfpn_coco', 'RetinaNet ResNet50 FPN'),
         'faster_rcnn': ('fasterrcnn_resnetfpn_coco',
                         'Faster R-CNN, ResNet-50 FPN vs ours ResNet-50'),
         'mask_rcnn': ('maskrcnn_resnetfpn_coco',
                       'Mask R-CNN, ResNet-50 FPN vs ours ResNet-50')}


def _result(command):
  out = subprocess.run(command, capture_output=True, text=True, check=False)
  lines = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
  if out.returncode or not lines:
    raise RuntimeError('%s failed: %s' % (
        os.path.basename(command[1]),
        ' | '.join(out.stderr.strip().splitlines()[-3:])))
  return json.loads(lines[-1][len('RESULT '):])


def ensure_peer_env():
  """Creates the peer environment once; raises if it cannot be installed."""
  check = [PEER_PY, '-c', 'import official.vision, tensorflow']
  if os.path.exists(PEER_PY) and subprocess.run(
      check, capture_output=True, check=False).returncode == 0:
    return
  print('installing the peer environment (%s) in %s' % (
      ' '.join(PEER_PACKAGES), PEER_VENV), flush=True)
  subprocess.run([sys.executable, '-m', 'venv', '--clear', PEER_VENV],
                 check=True)
  install = subprocess.run(
      [PEER_PY, '-m', 'pip', 'install', '-q'] + PEER_PACKAGES,
      capture_output=True, text=True, check=False)
  if install.returncode:
    raise RuntimeError('pip install %s failed: %s' % (
        ' '.join(PEER_PACKAGES), install.stderr.strip()[-500:]))


def _round(args, experiment, shape):
  """One peer run, then one of ours: their rates and peak memory."""
  peer = _result([PEER_PY, os.path.join(BENCH, 'model_garden_step.py'),
                  '--experiment=' + experiment,
                  '--steps=%d' % args.steps] + shape)
  ours = json.loads(args.ours) if args.ours else _result(
      [sys.executable, os.path.join(BENCH, 'train_step.py'), '--json',
       '--arch=' + args.arch, '--mode=estimator', '--warmup=2',
       '--steps=%d' % args.steps] + shape)
  return {'%s_%s' % (side, key): figures[key]
          for side, figures in (('peer', peer), ('ours', ours))
          for key in ('images_per_s', 'images_per_cpu_s', 'peak_rss_mb')}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data_dir', required=True)
  parser.add_argument('--arch', choices=sorted(ARCHS), default='retinanet')
  parser.add_argument('--size', type=int, default=256)
  parser.add_argument('--batch', type=int, default=8)
  parser.add_argument('--steps', type=int, default=5)
  parser.add_argument('--rounds', type=int, default=1,
                      help='Peer then ours, this many times in turn: the '
                           'ratios are medians over the rounds.')
  parser.add_argument('--ours', default=None,
                      help='Our side as measured earlier in the same run '
                           '(JSON of bench/train_step.py --mode=estimator '
                           'with this --arch, records, size and batch): '
                           'only the peer is run.')
  parser.add_argument('--json', action='store_true')
  args = parser.parse_args(argv)
  common.write_records(args.data_dir, args.size)
  shape = ['--data_dir=' + args.data_dir, '--size=%d' % args.size,
           '--batch=%d' % args.batch]
  experiment, what = ARCHS[args.arch]
  result = {}
  try:
    ensure_peer_env()
    rounds = [_round(args, experiment, shape) for _ in range(args.rounds)]
    result = {key: statistics.median(r[key] for r in rounds)
              for key in rounds[0]}
    result['ratio'] = statistics.median(
        r['ours_images_per_s'] / r['peer_images_per_s'] for r in rounds)
    result['cpu_ratio'] = statistics.median(
        r['ours_images_per_cpu_s'] / r['peer_images_per_cpu_s']
        for r in rounds)
    if args.rounds > 1:
      result['round_ratios'] = [
          round(r['ours_images_per_s'] / r['peer_images_per_s'], 3)
          for r in rounds]
    result['summary'] = (
        'ours %.3g vs Model Garden %.3g images/s: %.2fx (per CPU second '
        '%.2fx)' % (result['ours_images_per_s'], result['peer_images_per_s'],
                     result['ratio'], result['cpu_ratio']))
  except (RuntimeError, subprocess.CalledProcessError, OSError) as error:
    result = {'summary': 'could not run here: %s' % error}
  print('peer (%s, %dx%d, batch %d):' % (what, args.size, args.size,
                                          args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
