r"""What groundtruth padding costs an SSD's loss, and that slicing it is exact.

Builds the loss part (target assignment, the classification and box losses
and their gradients with respect to the predictions) of an SSD config twice
on the same random predictions and groundtruth: with each image's boxes
padded to max_number_of_boxes (weight 0), as the config's
unpad_groundtruth_tensors: false feeds them, and sliced to the real boxes,
as model_fn now gives them in training when the losses ignore the padding
(SSDLoss.ignores_groundtruth_padding). Checks the losses and gradients are
bit for bit equal, then times the two alternately (CPU seconds a step).
Used for EfficientDet-D0 (bench/NOTES.md, items 1e / 10e).

  .venv/bin/python bench/padding_loss.py --data_dir=bench/out/data512 \
      --arch=efficientdet_d0 --size=512 --batch=4
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.builders import model_builder  # pylint: disable=g-import-not-at-top
from od_estimator.config import config_util  # pylint: disable=g-import-not-at-top


def _groundtruth(rng, batch, rows, num_classes, real):
  """Padded [batch, rows, ...] boxes, one-hot classes and weights."""
  boxes = np.zeros([batch, rows, 4], np.float32)
  classes = np.zeros([batch, rows, num_classes], np.float32)
  weights = np.zeros([batch, rows], np.float32)
  for image, count in enumerate(real):
    centers = rng.uniform(0.2, 0.8, [count, 2])
    sizes = rng.uniform(0.1, 0.4, [count, 2])
    boxes[image, :count] = np.concatenate(
        [centers - sizes / 2, centers + sizes / 2], axis=1)
    classes[image, np.arange(count), rng.integers(0, 3, count)] = 1.0
    weights[image, :count] = 1.0
  return boxes, classes, weights


def _loss_step(configs, args, groundtruth, real, pad):
  """(session, fetches): the losses' sum and its gradients with respect to
  the predictions (random, seeded: the same in every graph)."""
  graph = tf.Graph()
  with graph.as_default():
    model = model_builder.build(configs['model'], is_training=True)
    # predict() builds the anchors of the model's feature maps.
    prediction_dict = model.predict(*model.preprocess(
        tf.zeros([args.batch, args.size, args.size, 3])))
    rng = np.random.default_rng(1)
    codes, logits = (
        tf.Variable(rng.uniform(low, 1.0, prediction_dict[key].shape).astype(
            np.float32)) for key, low in (
                ('box_encodings', -1.0),
                ('class_predictions_with_background', -6.0)))
    lists = [[tf.compat.v1.placeholder_with_default(
        tensor[image] if pad else tensor[image, :count],
        [None] + list(tensor.shape[2:])) for image, count in enumerate(real)]
             for tensor in groundtruth]
    losses = model.loss_part.loss(codes, logits, model.anchors, lists[0],
                                  lists[1], groundtruth_weights_list=lists[2])
    total = tf.add_n(list(losses.values()))
    fetches = [total] + tf.gradients(total, [codes, logits])
    session = tf.compat.v1.Session(graph=graph)
    session.run(tf.compat.v1.global_variables_initializer())
  return session, fetches


def _cpu_seconds(session, fetches, runs=3):
  session.run(fetches)
  start = time.process_time()
  for _ in range(runs):
    session.run(fetches)
  return (time.process_time() - start) / runs


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  common.add_model_args(parser, size=512, batch=4)
  parser.add_argument('--rounds', type=int, default=4)
  args = parser.parse_args(argv)
  common.quiet()
  with tempfile.TemporaryDirectory() as directory:
    configs = config_util.get_configs_from_pipeline_file(
        common.ssd_config_path(args, directory))
  rng = np.random.default_rng(0)
  real = [int(count) for count in rng.integers(1, 5, args.batch)]
  groundtruth = _groundtruth(
      rng, args.batch, configs['train_config'].max_number_of_boxes or 100,
      configs['model'].ssd.num_classes, real)
  steps = {pad: _loss_step(configs, args, groundtruth, real, pad)
           for pad in (True, False)}
  values = {pad: session.run(fetches)
            for pad, (session, fetches) in steps.items()}
  seconds = {True: [], False: []}
  for _ in range(args.rounds):
    for pad, (session, fetches) in steps.items():
      seconds[pad].append(_cpu_seconds(session, fetches))
  result = {
      'identical': all(np.array_equal(a, b)
                       for a, b in zip(values[True], values[False])),
      'padded_cpu_s': statistics.median(seconds[True]),
      'sliced_cpu_s': statistics.median(seconds[False]),
      'real_boxes': real}
  print('the loss part of %s (%dx%d, batch %d), padded / sliced '
        'groundtruth, CPU s a step:' % (args.arch, args.size, args.size,
                                         args.batch))
  common.report(result, args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
