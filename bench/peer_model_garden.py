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
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position

BENCH = os.path.dirname(os.path.abspath(__file__))
PEER_VENV = os.path.join(BENCH, '.peer_venv')
PEER_PACKAGES = ['tf-models-official==2.15.0', 'tensorflow==2.15.1']
# --arch -> (Model Garden experiment, what it is).
ARCHS = {'retinanet': ('retinanet_resnetfpn_coco', 'RetinaNet ResNet50 FPN'),
         'faster_rcnn': ('fasterrcnn_resnetfpn_coco',
                         'Faster R-CNN, ResNet-50 FPN vs ours ResNet-50'),
         'mask_rcnn': ('maskrcnn_resnetfpn_coco',
                       'Mask R-CNN, ResNet-50 FPN vs ours ResNet-50')}


def _round(args, peer_py, experiment, shape):
  """One peer run, then one of ours: their rates and peak memory."""
  peer = peer_env.run_result(
      [peer_py, os.path.join(BENCH, 'model_garden_step.py'),
       '--experiment=' + experiment, '--steps=%d' % args.steps] + shape)
  ours = json.loads(args.ours) if args.ours else peer_env.run_result(
      [sys.executable, os.path.join(BENCH, 'train_step.py'), '--json',
       '--arch=' + args.arch, '--mode=estimator', '--warmup=2',
       '--steps=%d' % args.steps] + shape)
  return peer_env.paired(peer, ours)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data_dir', required=True)
  parser.add_argument('--arch', choices=sorted(ARCHS), default='retinanet')
  parser.add_argument('--size', type=int, default=256)
  parser.add_argument('--batch', type=int, default=8)
  peer_env.add_round_args(parser, steps=5)
  parser.add_argument('--json', action='store_true')
  args = parser.parse_args(argv)
  common.write_records(args.data_dir, args.size)
  shape = ['--data_dir=' + args.data_dir, '--size=%d' % args.size,
           '--batch=%d' % args.batch]
  experiment, what = ARCHS[args.arch]
  result = {}
  try:
    peer_py = peer_env.ensure_venv(
        PEER_VENV, [PEER_PACKAGES], 'import official.vision, tensorflow')
    rounds = [_round(args, peer_py, experiment, shape)
              for _ in range(args.rounds)]
    result = peer_env.medians(rounds, 'Model Garden')
  except (RuntimeError, subprocess.CalledProcessError, OSError) as error:
    result = {'summary': 'could not run here: %s' % error}
  print('peer (%s, %dx%d, batch %d):' % (what, args.size, args.size,
                                          args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
