r"""Exported SavedModel inference against the Estimator's predict().

A checkpoint of the SSD MobileNet v2 benchmark model (one training step) is
exported with export_inference_graph (input_type image_tensor); the same
validation images are then run one at a time, and in batches of --batch,
through
  saved_model  tf.saved_model.load(...).signatures['serving_default'], and
  estimator    Estimator.predict() on the eval input_fn (eval_config
               batch_size 1, or --batch),
after warm-up, and images/s compared. The two alternate for --rounds rounds
and each keeps its fastest round, so a load change on a shared machine
does not land on one side only.

  .venv/bin/python bench/export_inference.py --data_dir=/tmp/d
"""
import argparse
from concurrent import futures
import os
import sys
import tempfile
import time

import numpy as np

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.export import exporter
from od_estimator.estimator import model_lib
from od_estimator.data_decoders import tf_example_decoder  # pylint: disable=g-import-not-at-top
from od_estimator.config import config_util


def _val_images(configs, count):
  """The first `count` validation images, uint8 [1, H, W, 3] each."""
  paths = tf.io.gfile.glob(
      configs['eval_input_configs'][0].tf_record_input_reader.input_path[0])
  decoder = tf_example_decoder.TfExampleDecoder()
  images = []
  for record in tf.data.TFRecordDataset(sorted(paths)).take(count):
    images.append(decoder.decode(record)['image'][tf.newaxis].numpy())
  return images


def _rate(run_one, batches, warmup):
  """Images/s of run_one over batches[warmup:] (each [n, H, W, 3])."""
  for batch in batches[:warmup]:
    run_one(batch)
  start = time.perf_counter()
  for batch in batches[warmup:]:
    run_one(batch)
  return sum(len(b) for b in batches[warmup:]) / (
      time.perf_counter() - start)


def _estimator(config_path, model_dir, batch):
  """The Estimator and its eval input_fn, predicting `batch` images a call."""
  parts = model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(model_dir=model_dir),
      hparams={'load_pretrained': False},
      pipeline_config_path=config_path,
      config_override='eval_config { batch_size: %d }' % batch)
  return parts['estimator'], parts['eval_input_fns'][0]


def _predict_rate(estimator, input_fn, batches, warmup):
  predictions = estimator.predict(input_fn, yield_single_examples=False)
  try:
    return _rate(lambda _: next(predictions), batches, warmup)
  finally:
    predictions.close()


def measure(args, directory):
  config_path = common.ssd_config_path(args, directory)
  configs = config_util.get_configs_from_pipeline_file(config_path)
  model_dir = os.path.join(directory, 'model')
  parts = model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(model_dir=model_dir),
      hparams={'load_pretrained': False}, pipeline_config_path=config_path)
  parts['estimator'].train(parts['train_input_fn'], max_steps=1)
  export_dir = os.path.join(directory, 'exported')
  with tf.Graph().as_default():
    exporter.export_inference_graph(
        'image_tensor', config_util.create_pipeline_proto_from_configs(
            configs), model_dir, export_dir)

  # predict() reads the validation records once (32 of them by default):
  # batches are warmed up by one call.
  images = _val_images(configs, args.images + args.warmup)
  batched = [np.concatenate(images[i:i + args.batch])
             for i in range(0, len(images) - args.batch + 1, args.batch)]
  serving = tf.saved_model.load(
      os.path.join(export_dir, 'saved_model')).signatures['serving_default']
  # The Estimator's suspended predict() generator keeps its graph the
  # default of the thread that iterates it: serve from another thread.
  thread = futures.ThreadPoolExecutor(1)

  def serve(batch):
    return thread.submit(lambda: serving(inputs=tf.constant(batch))).result()
  result = {'batch': args.batch}
  for name, batches, size, warmup in (
      ('', images, 1, args.warmup),
      ('batched_', batched, args.batch, 1)):
    estimator, input_fn = _estimator(config_path, model_dir, size)
    best_saved, best_predict = 0.0, 0.0
    for _ in range(args.rounds):
      best_saved = max(best_saved, _rate(serve, batches, warmup))
      best_predict = max(best_predict, _predict_rate(
          estimator, input_fn, batches, warmup))
    result.update({name + 'saved_model_images_per_s': best_saved,
                   name + 'estimator_predict_images_per_s': best_predict,
                   name + 'ratio': best_saved / best_predict})
  thread.shutdown()
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--images', type=int, default=24)
  parser.add_argument('--warmup', type=int, default=3,
                      help='Calls before timing, in each round.')
  parser.add_argument('--rounds', type=int, default=2)
  common.add_model_args(parser, batch=8)
  args = parser.parse_args(argv)
  common.quiet()
  with tempfile.TemporaryDirectory() as directory:
    result = measure(args, directory)
  print('inference, ssd_mobilenet_v2 depth %g, %dx%d, one image at a time '
        'and in batches of %d:' % (args.depth, args.size, args.size,
                                   args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
