r"""Exported SavedModel inference against the Estimator's predict().

A checkpoint of the SSD MobileNet v2 benchmark model (one training step) is
exported with export_inference_graph (input_type image_tensor); the same
validation images are then run one at a time through
  saved_model  tf.saved_model.load(...).signatures['serving_default'], and
  estimator    Estimator.predict() on the eval input_fn,
after warm-up, and images/s compared.

  .venv/bin/python bench/export_inference.py --data_dir=/tmp/d
"""
import argparse
import os
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator import exporter  # pylint: disable=g-import-not-at-top
from od_estimator import model_lib  # pylint: disable=g-import-not-at-top
from od_estimator.data_decoders import tf_example_decoder  # pylint: disable=g-import-not-at-top
from od_estimator.utils import config_util  # pylint: disable=g-import-not-at-top


def _val_images(configs, count):
  """The first `count` validation images, uint8 [1, H, W, 3] each."""
  paths = tf.io.gfile.glob(
      configs['eval_input_configs'][0].tf_record_input_reader.input_path[0])
  decoder = tf_example_decoder.TfExampleDecoder()
  images = []
  for record in tf.data.TFRecordDataset(sorted(paths)).take(count):
    images.append(decoder.decode(record)['image'][tf.newaxis].numpy())
  return images


def _rate(run_one, images, warmup):
  for image in images[:warmup]:
    run_one(image)
  start = time.perf_counter()
  for image in images[warmup:]:
    run_one(image)
  return (len(images) - warmup) / (time.perf_counter() - start)


def measure(args, directory):
  config_path = common.ssd_config_path(args, directory)
  configs = config_util.get_configs_from_pipeline_file(config_path)
  model_dir = os.path.join(directory, 'model')
  parts = model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(model_dir=model_dir),
      hparams={'load_pretrained': False}, pipeline_config_path=config_path)
  estimator = parts['estimator']
  estimator.train(parts['train_input_fn'], max_steps=1)
  export_dir = os.path.join(directory, 'exported')
  with tf.Graph().as_default():
    exporter.export_inference_graph(
        'image_tensor', config_util.create_pipeline_proto_from_configs(
            configs), model_dir, export_dir)

  images = _val_images(configs, args.images + args.warmup)
  serving = tf.saved_model.load(
      os.path.join(export_dir, 'saved_model')).signatures['serving_default']
  saved_model = _rate(lambda image: serving(inputs=tf.constant(image)),
                      images, args.warmup)

  predictions = estimator.predict(parts['eval_input_fns'][0],
                                  yield_single_examples=False)
  predict = _rate(lambda _: next(predictions), images, args.warmup)
  return {'saved_model_images_per_s': saved_model,
          'estimator_predict_images_per_s': predict,
          'ratio': saved_model / predict}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--images', type=int, default=24)
  parser.add_argument('--warmup', type=int, default=3)
  common.add_model_args(parser, batch=1)
  args = parser.parse_args(argv)
  common.quiet()
  with tempfile.TemporaryDirectory() as directory:
    result = measure(args, directory)
  print('inference, ssd_mobilenet_v2 depth %g, %dx%d, one image at a time:'
        % (args.depth, args.size, args.size))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
