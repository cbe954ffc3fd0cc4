r"""Item 11c: an exported SavedModel with --bfloat16 against float32.

--arch's config (item 1's SSD MobileNetV2 at 300x300, or item 1c's Faster
R-CNN ResNet-50 at 320x320 with --proposals first-stage proposals) gets a
checkpoint of freshly initialized weights, which exporter_main_v2's
export_inference_graph exports twice (input_type image_tensor, each in a
process of its own): float32, and with --bfloat16 (export/
bfloat16_graph.py: the oneDNN bfloat16 rewrite baked into the graph). Both
SavedModels are then loaded in this process and called through
serving_default one validation image at a time, alternating call by call,
after warm-up (bench/orig_inference.alternate): images per second and per
CPU second of each, and their ratio. The weights are random, so
detections are not compared here: tests/export/test_bfloat16_export.py
does, on a tiny SSD.

  .venv/bin/python bench/bfloat16_inference.py --arch=faster_rcnn \
      --data_dir=bench/out/data320 --size=320
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import export_inference  # pylint: disable=g-import-not-at-top,wrong-import-position
import orig_inference  # pylint: disable=g-import-not-at-top,wrong-import-position
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.builders import model_builder  # pylint: disable=g-import-not-at-top,wrong-import-position
from od_estimator.config import config_util  # pylint: disable=g-import-not-at-top,wrong-import-position
from od_estimator.estimator import cpu_bfloat16  # pylint: disable=g-import-not-at-top,wrong-import-position
from od_estimator.export import exporter_v2  # pylint: disable=g-import-not-at-top,wrong-import-position

SIDES = ('float32', 'bfloat16')
_PROPOSALS = 'first_stage_max_proposals: %d'


def _random_checkpoint(pipeline, directory):
  """Saves the model's freshly initialized weights as model.ckpt-0."""
  os.makedirs(directory, exist_ok=True)
  with tf.Graph().as_default():
    model = model_builder.build(pipeline.model, is_training=False)
    model.predict(*model.preprocess(tf.zeros([1, 64, 64, 3])))
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(
          session, os.path.join(directory, 'model.ckpt'), global_step=0)


def export(pipeline_config_path, output_dir, side):
  """One side's export (and first the checkpoint): {'saved_model': path,
  'export_seconds': s}."""
  pipeline = config_util.read_pipeline_config(pipeline_config_path)
  checkpoint_dir = os.path.join(output_dir, 'train')
  if not os.path.isdir(checkpoint_dir):
    _random_checkpoint(pipeline, checkpoint_dir)
  start = time.perf_counter()
  exporter_v2.export_inference_graph(
      'image_tensor', pipeline, checkpoint_dir,
      os.path.join(output_dir, side), bfloat16=side == 'bfloat16')
  return {'saved_model': os.path.join(output_dir, side, 'saved_model'),
          'export_seconds': time.perf_counter() - start}


def _serving(path):
  serving = tf.saved_model.load(path).signatures['serving_default']
  return lambda images: {key: value.numpy() for key, value in serving(
      input_tensor=tf.constant(images)).items()}


def measure(args, directory):
  text = common.config_text(args)
  if args.arch == 'faster_rcnn':
    text = text.replace(_PROPOSALS % 300, _PROPOSALS % args.proposals)
  config_path = common.ssd_config_path(args, directory, text)
  configs = config_util.get_configs_from_pipeline_file(config_path)
  result = {'export_seconds': {}}
  paths = {}
  for side in SIDES:
    # A process each: building and freezing Faster R-CNN stays in its
    # memory (~3 GB).
    exported = peer_env.run_result([
        sys.executable, os.path.abspath(__file__), '--export_only=' + side,
        '--pipeline_config_path=' + config_path,
        '--output_dir=' + os.path.join(directory, 'exports'),
        '--data_dir=' + args.data_dir])
    paths[side] = exported['saved_model']
    result['export_seconds'][side] = exported['export_seconds']
  images = export_inference._val_images(  # pylint: disable=protected-access
      configs, args.warmup + args.images)
  runners = {side: _serving(paths[side]) for side in SIDES}
  rates = orig_inference.alternate(runners, images, args.warmup, args.rounds)
  for side, (wall, per_cpu) in rates.items():
    result[side + '_images_per_s'] = wall
    result[side + '_images_per_cpu_s'] = per_cpu
  result['ratio'] = rates['bfloat16'][0] / rates['float32'][0]
  result['cpu_ratio'] = rates['bfloat16'][1] / rates['float32'][1]
  result['peak_rss_mb'] = common.peak_rss_mb()
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--images', type=int, default=8,
                      help='Timed images, each round.')
  parser.add_argument('--warmup', type=int, default=2,
                      help='Images run by each side before timing.')
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--proposals', type=int, default=100,
                      help='Faster R-CNN\'s first_stage_max_proposals '
                           '(item 1c\'s config has 300): its second stage '
                           'on 300 proposals takes ~4 CPU s an image in '
                           'float32 and ~3 GB per loaded model.')
  parser.add_argument('--export_only', choices=SIDES,
                      help='(internal) that side\'s export, into '
                           '--output_dir, of a random checkpoint of '
                           '--pipeline_config_path (made once).')
  parser.add_argument('--pipeline_config_path')
  parser.add_argument('--output_dir')
  common.add_model_args(parser, batch=1)
  args = parser.parse_args(argv)
  common.quiet()
  if args.export_only:
    print('RESULT ' + json.dumps(export(args.pipeline_config_path,
                                        args.output_dir, args.export_only)))
    return 0
  if not cpu_bfloat16.cpu_has_bfloat16():
    result = {'skipped': 'this CPU has no bfloat16 instructions (%s)' %
                         ' or '.join(cpu_bfloat16.CPU_FLAGS)}
  else:
    try:
      with tempfile.TemporaryDirectory() as directory:
        result = measure(args, directory)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as error:
      result = {'skipped': 'could not run here: %s' % error}
  print('exported SavedModel --bfloat16 / float32 (%s, %dx%d, one image at '
        'a time):' % (args.arch, args.size, args.size))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
