r"""Item 10: the original's own TF2 trainer next to ours, same records.

The original (object_detection 2.8.0.post1 on TensorFlow 2.15.1) trains the
same networks as ours with model_lib_v2: Keras models, eager_train_step
under tf.function. It lives in its own virtual environment, bench/.orig_venv,
made here on first use (ORIG_INSTALLS below: ~2 GB and several minutes the
first time; never a project dependency), or is the interpreter given by
--orig_python / $OD_BENCH_ORIG_PYTHON. On the same synthetic records, size,
batch and classes it times, alternating --rounds times:
  peer  bench/orig_step.py in the original's environment, and
  ours  bench/train_step.py --mode=estimator through our Estimator model_fn.
--row (ROWS below: our config, and what the original's side changes in it):
  ssd_mobilenet_v2     our TF1 SSD MobileNetV2 config; the original builds
                       the same config with its Keras extractor
                       (ssd_mobilenet_v2_keras), the one TF2 can train.
  faster_rcnn          our TF1 Faster R-CNN ResNet-50 config; the original
                       with faster_rcnn_resnet50_keras as shipped: its
                       Keras ResNet's conv5 starts with stride 2, so on the
                       same 7x7 crops block4 runs at 4x4.
  faster_rcnn_matched  the same, the work matched: the original's crops
                       are not max-pooled (maxpool 1x1, stride 1), so its
                       conv5 gets 14x14 crops and its stride 2 brings them
                       to 7x7, the size ours runs block4 at; every conv5
                       convolution then has ours' shapes.
  faster_rcnn_keras    the original's TF2 faster_rcnn_resnet50_v1_640x640
                       config on both sides, unchanged but for classes,
                       size, batch and inputs (common.FASTER_RCNN_KERAS_
                       CONFIG); skipped while ours lacks the extractor.
  efficientdet_d0      the original's TF2 ssd_efficientdet_d0_512x512
                       config on both sides, unchanged but for size, batch
                       and inputs (bench/efficientdet.py).

--disable_thread_spinning is passed to our side (bench/train_step.py).

  .venv/bin/python bench/peer_original.py --row=ssd_mobilenet_v2 \
      --data_dir=bench/out/data300 --size=300 --batch=8 --rounds=3
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.models import faster_rcnn_feature_extractor_registry  # pylint: disable=g-import-not-at-top,wrong-import-position

BENCH = os.path.dirname(os.path.abspath(__file__))
ORIG_VENV = os.path.join(BENCH, '.orig_venv')
# What the original's imports need (its package itself without its pinned
# dependencies, which predate TF 2.15), numpy below 2 for TF 2.15.
ORIG_INSTALLS = [
    ['tensorflow==2.15.1', 'tf-models-official==2.15.0', 'tf-slim==1.1.0',
     'lvis', 'tensorflow-io', 'pycocotools', 'scipy', 'gin-config', 'PyYAML',
     'opencv-python-headless', 'pillow', 'matplotlib', 'numpy<2'],
    ['--no-deps', 'tf-models-research-object-detection==2.8.0.post1']]
ORIG_CHECK = 'import object_detection, official, tf_slim, tensorflow'

_SHIPPED = {"type: 'faster_rcnn_resnet50' ":
                "type: 'faster_rcnn_resnet50_keras' "}
# --arch -> (our bench config, {text: replacement} in it for the original's
# side, what is compared).
ROWS = {
    'ssd_mobilenet_v2': (
        'ssd_mobilenet_v2',
        {"type: 'ssd_mobilenet_v2' ": "type: 'ssd_mobilenet_v2_keras' "},
        'SSD MobileNetV2: ours TF1 extractor, the original\'s Keras one'),
    'faster_rcnn': ('faster_rcnn', _SHIPPED,
                    'Faster R-CNN ResNet-50: ours TF1, the original\'s '
                    'Keras as shipped (conv5 stride 2)'),
    'faster_rcnn_matched': (
        'faster_rcnn',
        dict(_SHIPPED, **{'maxpool_kernel_size: 2 maxpool_stride: 2':
                          'maxpool_kernel_size: 1 maxpool_stride: 1'}),
        'Faster R-CNN ResNet-50: ours TF1, the original\'s Keras with '
        'conv5 on 14x14 crops (same conv5 work)'),
    'faster_rcnn_keras': ('faster_rcnn_keras', {},
                          'the TF2 Faster R-CNN ResNet-50 Keras config '
                          'unchanged on both sides'),
    'efficientdet_d0': ('efficientdet_d0', {},
                        'the TF2 EfficientDet-D0 config unchanged on both '
                        'sides (bench/efficientdet.py)'),
}
# Feature extractor types our side must build for --arch.
_OURS_NEEDS = {'faster_rcnn_keras': 'faster_rcnn_resnet50_keras'}


def original_config(args):
  """The original's side's config text: ours with ROWS' replacements."""
  text = common.config_text(args)
  for old, new in ROWS[args.row][1].items():
    assert text.count(old) == 1, old
    text = text.replace(old, new)
  return text


def _round(args, orig_py, shape):
  """The original's step, then ours: their rates and peak memory."""
  with tempfile.TemporaryDirectory() as directory:
    path = common.ssd_config_path(args, directory, original_config(args))
    peer = peer_env.run_result(
        [orig_py, os.path.join(BENCH, 'orig_step.py'),
         '--pipeline_config_path=' + path, '--warmup=%d' % args.warmup,
         '--steps=%d' % args.steps],
        env=dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION='python'))
  ours = json.loads(args.ours) if args.ours else peer_env.run_result(
      [sys.executable, os.path.join(BENCH, 'train_step.py'), '--json',
       '--arch=' + args.arch, '--mode=estimator',
       '--warmup=%d' % args.warmup, '--steps=%d' % args.steps] + shape +
      ['--disable_thread_spinning'] * args.disable_thread_spinning)
  return dict(peer_env.paired(peer, ours), peer_loss=peer['loss'])


def _unavailable(args):
  """Why our side cannot run args.arch here, or None."""
  needed = _OURS_NEEDS.get(args.row)
  known = faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS
  if needed and needed not in known:
    return 'not available: our side has no %s extractor yet' % needed
  return None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  common.add_model_args(parser)
  parser.add_argument('--row', choices=sorted(ROWS), default=None,
                      help='What is compared (ROWS); default: --arch.')
  parser.add_argument('--warmup', type=int, default=2)
  peer_env.add_round_args(parser, steps=10)
  parser.add_argument('--orig_python',
                      default=os.environ.get('OD_BENCH_ORIG_PYTHON'),
                      help='The original\'s interpreter (TF 2.15.1 with '
                           'object_detection 2.8.0.post1); default: '
                           'bench/.orig_venv, made on first use.')
  args = parser.parse_args(argv)
  args.row = args.row or args.arch
  if args.row not in ROWS:
    parser.error('--row: one of %s' % ', '.join(sorted(ROWS)))
  args.arch = ROWS[args.row][0]
  shape = ['--data_dir=' + args.data_dir, '--size=%d' % args.size,
           '--depth=%g' % args.depth, '--batch=%d' % args.batch]
  result = {'skipped': _unavailable(args)}
  if not result['skipped']:
    try:
      orig_py = args.orig_python or peer_env.ensure_venv(
          ORIG_VENV, ORIG_INSTALLS, ORIG_CHECK)
      rounds = [_round(args, orig_py, shape) for _ in range(args.rounds)]
      result = peer_env.medians(rounds, 'the original')
    except (RuntimeError, subprocess.CalledProcessError, OSError) as error:
      result = {'summary': 'could not run here: %s' % error}
  else:
    result['summary'] = result['skipped']
  print('the original\'s TF2 trainer (%s, %dx%d, batch %d):' % (
      ROWS[args.row][2], args.size, args.size, args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
