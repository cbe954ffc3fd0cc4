r"""Quantization-aware training's cost, and uint8 against float TFLite.

The same SSD MobileNet v2 config as written (float) and with
`graph_rewriter { quantization { delay: 0 } }` (FakeQuant active from the
first step):

  training   the Estimator's training step on synthetic records: images
             per CPU second (all threads; less disturbed by other load
             than wall time) and per second. The float step is trained
             here too unless --float_step gives its figures, measured
             earlier in the same run (make bench: item 1b's step);
  TFLite     export_tflite_ssd_graph of the quantization-aware checkpoint,
             converted fully quantized (uint8) and, from the same
             checkpoint's float variables, as float; then each file's size
             and per-image latency in tf.lite.Interpreter on one CPU thread
             (median of --latency_runs invocations after a warm-up one).

  .venv/bin/python bench/quantized_step.py --data_dir=/tmp/d160 --size=160
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.estimator import model_lib
from od_estimator.export import tflite_conversion
from od_estimator.config import config_util

QUANTIZATION = '\ngraph_rewriter { quantization { delay: 0 } }\n'


def _config(args, directory, quantized):
  """The config's path in `directory`, quantized or not."""
  path = common.ssd_config_path(args, directory)
  if quantized:
    with open(path, 'a') as f:
      f.write(QUANTIZATION)
  return path


def _train(args, directory, quantized):
  """Trains warmup + steps; returns (figures, config path, checkpoint)."""
  path = _config(args, directory, quantized)
  model_dir = os.path.join(directory, 'model')
  parts = model_lib.create_estimator_and_inputs(
      # Checkpoints at the start (before the timed steps) and the end only.
      run_config=tf.estimator.RunConfig(
          model_dir=model_dir, save_checkpoints_steps=10 ** 9,
          save_checkpoints_secs=None, save_summary_steps=10 ** 9,
          log_step_count_steps=10 ** 9),
      hparams={'load_pretrained': False}, pipeline_config_path=path)
  timer = common.StepTimer(args.warmup)
  parts['estimator'].train(parts['train_input_fn'], hooks=[timer],
                           max_steps=args.warmup + args.steps)
  images = timer.timed_steps * args.batch
  figures = {'images_per_s': images / timer.seconds,
             'images_per_cpu_s': images / timer.cpu_seconds}
  return figures, path, tf.train.latest_checkpoint(model_dir)


def _tflite(args, directory, path, checkpoint):
  """Exports and converts; returns size (KiB) and latency (ms)."""
  pipeline_config = config_util.read_pipeline_config(path)
  out = os.path.join(directory, 'tflite')
  export_tflite_ssd_graph_lib.export_tflite_graph(
      pipeline_config, checkpoint, out, add_postprocessing_op=True,
      max_detections=10, max_classes_per_detection=1)
  model_path = tflite_conversion.write_tflite(out, pipeline_config)
  interpreter = tf.lite.Interpreter(model_path=model_path, num_threads=1)
  interpreter.allocate_tensors()
  detail = interpreter.get_input_details()[0]
  image = np.random.default_rng(0).integers(
      0, 256, detail['shape'], dtype=np.uint8)
  if detail['dtype'] == np.float32:
    image = image.astype(np.float32) / 128.0 - 1.0
  interpreter.set_tensor(detail['index'], image)
  interpreter.invoke()  # warm-up
  times = []
  for _ in range(args.latency_runs):
    start = time.perf_counter()
    interpreter.invoke()
    times.append(time.perf_counter() - start)
  return {'tflite_kib': os.path.getsize(model_path) / 1024.0,
          'latency_ms': 1000.0 * float(np.median(times))}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  common.add_model_args(parser, size=160, depth=0.35, batch=8)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=6)
  parser.add_argument('--latency_runs', type=int, default=20)
  parser.add_argument('--float_step', default=None,
                      help='JSON figures of the float training step '
                           '(bench/train_step.py --mode=estimator, same '
                           'config and batch): it is not trained again.')
  args = parser.parse_args()
  common.quiet()
  result = {}
  with tempfile.TemporaryDirectory() as directory:
    figures, path, checkpoint = _train(args, directory, quantized=True)
    figures.update(_tflite(args, directory, path, checkpoint))
    result.update(('uint8_' + key, value) for key, value in figures.items())
    if args.float_step:
      figures = json.loads(args.float_step)
    else:
      with tempfile.TemporaryDirectory() as float_directory:
        figures = _train(args, float_directory, quantized=False)[0]
    # The float graph's variables are the quantized one's without the
    # ranges: size and latency do not depend on the weights' values.
    float_directory = os.path.join(directory, 'float')
    os.makedirs(float_directory)
    figures.update(_tflite(args, float_directory,
                           _config(args, float_directory, quantized=False),
                           checkpoint))
    result.update(('float_' + key, value) for key, value in figures.items()
                  if key != 'peak_rss_mb')
  # Cost of a quantized step relative to the float one (CPU time).
  result['step_cost_ratio'] = (result['float_images_per_cpu_s'] /
                               result['uint8_images_per_cpu_s'])
  result['size_ratio'] = result['uint8_tflite_kib'] / result['float_tflite_kib']
  result['latency_speedup'] = (result['float_latency_ms'] /
                               result['uint8_latency_ms'])
  common.report(result, args.json)


if __name__ == '__main__':
  main()
