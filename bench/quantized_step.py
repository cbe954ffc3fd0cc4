r"""Quantization-aware training's cost, and uint8 against float TFLite.

The same SSD MobileNet v2 config twice in this one process: as written
(float) and with `graph_rewriter { quantization { delay: 0 } }` (FakeQuant
active from the first step). For each:

  training   the Estimator's training step on synthetic records: images
             per CPU second (all threads; less disturbed by other load
             than wall time) and per second;
  TFLite     export_tflite_ssd_graph of the trained checkpoint converted
             (float, or fully quantized uint8), then its file size and
             per-image latency in tf.lite.Interpreter on one CPU thread
             (median of --latency_runs invocations after a warm-up one).

  .venv/bin/python bench/quantized_step.py --data_dir=/tmp/d160 --size=160
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator import export_tflite_ssd_graph_lib  # pylint: disable=g-import-not-at-top
from od_estimator import model_lib  # pylint: disable=g-import-not-at-top
from od_estimator import tflite_conversion  # pylint: disable=g-import-not-at-top
from od_estimator.utils import config_util  # pylint: disable=g-import-not-at-top

QUANTIZATION = '\ngraph_rewriter { quantization { delay: 0 } }\n'


def _train(args, directory, quantized):
  """Trains warmup + steps; returns (figures, config path, checkpoint)."""
  path = common.ssd_config_path(args, directory)
  if quantized:
    with open(path, 'a') as f:
      f.write(QUANTIZATION)
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
  args = parser.parse_args()
  common.quiet()
  result = {}
  for name, quantized in (('float', False), ('uint8', True)):
    with tempfile.TemporaryDirectory() as directory:
      figures, path, checkpoint = _train(args, directory, quantized)
      figures.update(_tflite(args, directory, path, checkpoint))
    for key, value in figures.items():
      result['%s_%s' % (name, key)] = value
  # Cost of a quantized step relative to the float one (CPU time).
  result['step_cost_ratio'] = (result['float_images_per_cpu_s'] /
                               result['uint8_images_per_cpu_s'])
  result['size_ratio'] = result['uint8_tflite_kib'] / result['float_tflite_kib']
  result['latency_speedup'] = (result['float_latency_ms'] /
                               result['uint8_latency_ms'])
  common.report(result, args.json)


if __name__ == '__main__':
  main()
