r"""Item 12: our exported models against the original's TF2 exports.

One network, one set of weights: the original (object_detection 2.8.0.post1
in bench/.orig_venv, see bench/peer_original.py) builds the model of --row's
config, saves its freshly initialized variables as a TF2 checkpoint and
exports it with its own exporter_lib_v2 (bench/orig_export.py); ours exports
the same checkpoint from the same config with
  ours  our exporter_main_v2 (export/exporter_v2.py: a TF2 SavedModel, the
        original's signature), and
  tf1   our export_inference_graph (frozen_inference_graph.pb), run in a
        TF1 session.
The original's export is cached in bench/out/orig_exports (keyed by the
config and orig_export.py; its one-time cost is reported apart as
`orig_export_seconds`), ours is made on every run. All three are then
timed in this process (TensorFlow 2.15.1, the version of both), alternating
call by call in a rotating order, on the same validation images:
  one image at a time  input_type image_tensor (uint8 [1, H, W, 3], the
                       original's only shape for it)
  batched              float_image_tensor (float32 [--batch, H, W, 3]) for
                       both SavedModels; the TF1 graph's image_tensor takes
                       the same batch as uint8
Images per second and per CPU second for each; ratios ours / original and
tf1 / original; the largest difference between our detections and the
original's on the first image (the same weights give the same detections).

--row:
  ssd_mobilenet_v2   item 1's SSD MobileNetV2 config (300x300) with the
                     ssd_mobilenet_v2_keras extractor on both sides (the
                     original's TF2 exporter exports Keras models only)
  faster_rcnn_keras  the original's TF2 faster_rcnn_resnet50_v1_640x640
                     config at 320x320 (common.FASTER_RCNN_KERAS_CONFIG),
                     on both sides

  .venv/bin/python bench/orig_inference.py --row=ssd_mobilenet_v2 \
      --data_dir=bench/out/data300 --size=300
"""
import argparse
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import export_inference  # pylint: disable=g-import-not-at-top,wrong-import-position
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position
import peer_original  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.config import config_util  # pylint: disable=g-import-not-at-top,wrong-import-position
from od_estimator.export import exporter  # pylint: disable=g-import-not-at-top,wrong-import-position
from od_estimator.export import exporter_v2  # pylint: disable=g-import-not-at-top,wrong-import-position

BENCH = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(BENCH, 'out', 'orig_exports')
# --row -> (common.ARCHS key, {text: replacement} in its config).
ROWS = {
    'ssd_mobilenet_v2': ('ssd_mobilenet_v2', {
        "type: 'ssd_mobilenet_v2' ": "type: 'ssd_mobilenet_v2_keras' "}),
    'faster_rcnn_keras': ('faster_rcnn_keras', {}),
}
SIDES = ('ours', 'orig', 'tf1')
_DETECTIONS = ('detection_boxes', 'detection_scores', 'detection_classes',
               'num_detections')


def config_text(args, **changes):
  """--row's config at args' size, depth, batch and records (each
  overridden by changes)."""
  text = common.config_text(argparse.Namespace(**dict(vars(args),
                                                      **changes)))
  for old, new in ROWS[args.row][1].items():
    assert text.count(old) == 1, old
    text = text.replace(old, new)
  return text


def original_exports(args, config_path):
  """The original's exports of the config (cached, whatever its records
  and training batch): their RESULT dict."""
  with open(os.path.join(BENCH, 'orig_export.py'), 'rb') as f:
    key = hashlib.sha256(config_text(args, data_dir='', batch=1).encode() +
                         f.read()).hexdigest()[:16]
  directory = os.path.join(CACHE, '%s-%d-%s' % (args.row, args.size, key))
  done = os.path.join(directory, 'result.json')
  if os.path.exists(done):
    with open(done) as f:
      result = json.load(f)
    return dict(result, orig_export_seconds=0.0,  # (cached)
                checkpoint_dir=_in_cache(result['checkpoint_dir'], directory),
                saved_models={
                    key: _in_cache(path, directory)
                    for key, path in result['saved_models'].items()})
  orig_py = args.orig_python or peer_env.ensure_venv(
      peer_original.ORIG_VENV, peer_original.ORIG_INSTALLS,
      peer_original.ORIG_CHECK)
  shutil.rmtree(directory, ignore_errors=True)
  start = time.perf_counter()
  result = peer_env.run_result(
      [orig_py, os.path.join(BENCH, 'orig_export.py'),
       '--pipeline_config_path=' + config_path, '--output_dir=' + directory,
       '--size=%d' % args.size])
  result['orig_export_once_seconds'] = time.perf_counter() - start
  with open(done, 'w') as f:
    json.dump(result, f)
  return dict(result, orig_export_seconds=result['orig_export_once_seconds'])


def _in_cache(path, directory):
  """A path a cached result.json names, under `directory` wherever the cache
  was written (bench/out may have been copied from another checkout)."""
  head, sep, tail = path.partition(os.sep + os.path.basename(directory) +
                                   os.sep)
  return os.path.join(directory, tail) if sep else path


def our_exports(pipeline, checkpoint_dir, directory):
  """Our exports of the same checkpoint: {input type or 'tf1': path}."""
  paths = {}
  for input_type in ('image_tensor', 'float_image_tensor'):
    exporter_v2.export_inference_graph(
        input_type, pipeline, checkpoint_dir,
        os.path.join(directory, input_type))
    paths[input_type] = os.path.join(directory, input_type, 'saved_model')
  exporter.export_inference_graph('image_tensor', pipeline, checkpoint_dir,
                                  os.path.join(directory, 'tf1'))
  paths['tf1'] = os.path.join(directory, 'tf1',
                              'frozen_inference_graph.pb')
  return paths


def _numpy(outputs):
  return {key: np.asarray(outputs[key]) for key in _DETECTIONS}


def _signature(path):
  serving = tf.saved_model.load(path).signatures['serving_default']
  return lambda images: _numpy(serving(input_tensor=tf.constant(images)))


class _FrozenGraph:
  """frozen_inference_graph.pb in a TF1 session, fed uint8 images."""

  def __init__(self, path):
    self._graph = tf.Graph()
    graph_def = tf.compat.v1.GraphDef()
    with open(path, 'rb') as f:
      graph_def.ParseFromString(f.read())
    with self._graph.as_default():
      tf.compat.v1.import_graph_def(graph_def, name='')
    self.session = tf.compat.v1.Session(graph=self._graph)
    self._fetches = {key: key + ':0' for key in _DETECTIONS}

  def __call__(self, images):
    return self.session.run(self._fetches, {
        'image_tensor:0': np.asarray(images).astype(np.uint8)})


def largest_difference(ours, orig):
  """The largest |ours - orig| over the kept boxes and scores."""
  count = int(orig['num_detections'][0])
  if int(ours['num_detections'][0]) != count:
    return float('inf')
  return float(max(
      np.abs(ours[key][0, :count] - orig[key][0, :count]).max(initial=0.0)
      for key in ('detection_boxes', 'detection_scores')))


def alternate(runners, batches, warmup, rounds):
  """Each side's images/s and per CPU s, calls alternating in turn."""
  for batch in batches[:warmup]:
    for run in runners.values():
      run(batch)
  seconds = dict.fromkeys(runners, 0.0)
  cpu = dict.fromkeys(runners, 0.0)
  names = list(runners)
  calls = 0
  for _ in range(rounds):
    for batch in batches[warmup:]:
      order = names[calls % len(names):] + names[:calls % len(names)]
      calls += 1
      for name in order:
        start, cpu_start = time.perf_counter(), time.process_time()
        runners[name](batch)
        seconds[name] += time.perf_counter() - start
        cpu[name] += time.process_time() - cpu_start
  images = rounds * sum(len(batch) for batch in batches[warmup:])
  return {name: (images / seconds[name], images / cpu[name])
          for name in names}


def _figures(prefix, rates):
  result = {}
  for side, (wall, per_cpu) in rates.items():
    result['%s%s_images_per_s' % (prefix, side)] = wall
    result['%s%s_images_per_cpu_s' % (prefix, side)] = per_cpu
  for side in ('ours', 'tf1'):
    result['%s%s_ratio' % (prefix, side)] = rates[side][0] / rates['orig'][0]
    result['%s%s_cpu_ratio' % (prefix, side)] = (
        rates[side][1] / rates['orig'][1])
  return result


def measure(args, directory):
  text = config_text(args)
  config_path = common.ssd_config_path(args, directory, text)
  configs = config_util.get_configs_from_pipeline_file(config_path)
  orig = original_exports(args, config_path)
  start = time.perf_counter()
  # In a process of its own: building and freezing the graphs would stay
  # in this process's memory (3.3 GB for Faster R-CNN).
  ours = peer_env.run_result([
      sys.executable, os.path.abspath(__file__), '--export_only',
      '--pipeline_config_path=' + config_path,
      '--checkpoint_dir=' + orig['checkpoint_dir'],
      '--output_dir=' + os.path.join(directory, 'ours'),
      '--data_dir=' + args.data_dir])
  result = {'orig_export_seconds': orig['orig_export_seconds'],
            'orig_export_once_seconds': orig['orig_export_once_seconds'],
            'our_export_seconds': time.perf_counter() - start,
            'batch': args.batch}
  images = export_inference._val_images(  # pylint: disable=protected-access
      configs, args.images + max(args.warmup, args.batch))
  frozen = _FrozenGraph(ours['tf1'])
  single = {'ours': _signature(ours['image_tensor']),
            'orig': _signature(orig['saved_models']['image_tensor']),
            'tf1': frozen}
  first = {side: run(images[0]) for side, run in single.items()}
  result['largest_difference'] = largest_difference(first['ours'],
                                                    first['orig'])
  result['tf1_largest_difference'] = largest_difference(first['tf1'],
                                                        first['orig'])
  result.update(_figures('', alternate(
      single, images[:args.warmup + args.images], args.warmup,
      args.rounds)))
  del single, first  # (their SavedModels' memory, before the batched ones)
  gc.collect()
  # One batch of warm-up, then args.images (whole batches).
  floats = [np.concatenate(images[i:i + args.batch]).astype(np.float32)
            for i in range(0, args.images + 1, args.batch)]
  batched = {'ours': _signature(ours['float_image_tensor']),
             'orig': _signature(orig['saved_models']['float_image_tensor']),
             'tf1': frozen}
  result.update(_figures('batched_', alternate(batched, floats, 1,
                                               args.rounds)))
  frozen.session.close()
  return result


def summary(result):
  """One line for RESULTS.md."""
  def line(prefix, label):
    return ('%s: ours %.3g vs the original %.3g images/s: %.2fx (per CPU '
            'second %.2fx); our frozen graph in a TF1 session %.3g: %.2fx '
            '(%.2fx)' % (
                label, result[prefix + 'ours_images_per_s'],
                result[prefix + 'orig_images_per_s'],
                result[prefix + 'ours_ratio'],
                result[prefix + 'ours_cpu_ratio'],
                result[prefix + 'tf1_images_per_s'],
                result[prefix + 'tf1_ratio'], result[prefix + 'tf1_cpu_ratio']))
  return '%s; %s; detections\' largest difference %.2g' % (
      line('', 'one image at a time'),
      line('batched_', 'batches of %d' % result['batch']),
      result['largest_difference'])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--row', choices=sorted(ROWS),
                      default='ssd_mobilenet_v2',
                      help='What is served (it sets --arch).')
  parser.add_argument('--images', type=int, default=16,
                      help='Timed images (a multiple of --batch), each '
                           'round.')
  parser.add_argument('--warmup', type=int, default=2,
                      help='Images run before timing (one batch when '
                           'batched).')
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--orig_python',
                      default=os.environ.get('OD_BENCH_ORIG_PYTHON'),
                      help='The original\'s interpreter; default: '
                           'bench/.orig_venv, made on first use.')
  parser.add_argument('--export_only', action='store_true',
                      help='(internal) our exports of --checkpoint_dir '
                           'from --pipeline_config_path into --output_dir.')
  parser.add_argument('--pipeline_config_path')
  parser.add_argument('--checkpoint_dir')
  parser.add_argument('--output_dir')
  common.add_model_args(parser, batch=4)
  args = parser.parse_args(argv)
  args.arch = ROWS[args.row][0]
  common.quiet()
  if args.export_only:
    pipeline = config_util.create_pipeline_proto_from_configs(
        config_util.get_configs_from_pipeline_file(args.pipeline_config_path))
    print('RESULT ' + json.dumps(our_exports(pipeline, args.checkpoint_dir,
                                             args.output_dir)))
    return 0
  try:
    with tempfile.TemporaryDirectory() as directory:
      result = measure(args, directory)
    result['summary'] = summary(result)
  except (RuntimeError, subprocess.CalledProcessError, OSError) as error:
    result = {'summary': 'could not run here: %s' % error}
  print('inference next to the original\'s TF2 exports (%s, %dx%d):' % (
      args.row, args.size, args.size))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
