r"""SSD MobileNet v2 training (and evaluation) against the backbone's ceiling.

--mode=estimator  our model_fn trained through tf.estimator.Estimator on
                  synthetic records with the SSD augmentations: images/s
                  over the timed steps, and the process's peak memory.
--mode=ceiling    the same MobileNet v2 body alone (forward, backward,
                  RMSProp step) on a constant batch of the same size, in a
                  plain session with the same threads: what the detector's
                  training step could at best reach on this machine.
--mode=eval       Estimator.evaluate with COCO metrics: images/s and peak
                  memory.

  .venv/bin/python bench/train_step.py --mode=estimator --data_dir=/tmp/d
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
import tf_slim as slim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator import model_lib  # pylint: disable=g-import-not-at-top
from od_estimator.nets import mobilenet_v2  # pylint: disable=g-import-not-at-top


def _estimator(args, model_dir):
  return model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(
          model_dir=model_dir, save_checkpoints_steps=None,
          save_checkpoints_secs=None, save_summary_steps=10 ** 9,
          log_step_count_steps=10 ** 9),
      hparams={'load_pretrained': False},
      pipeline_config_path=common.ssd_config_path(args, model_dir))


def estimator_rate(args):
  with tempfile.TemporaryDirectory() as model_dir:
    parts = _estimator(args, model_dir)
    timer = common.StepTimer(args.warmup)
    parts['estimator'].train(parts['train_input_fn'], hooks=[timer],
                             max_steps=args.warmup + args.steps)
  return timer.timed_steps * args.batch / timer.seconds


def ceiling_rate(args):
  if args.arch != 'ssd_mobilenet_v2':
    raise ValueError('--mode=ceiling measures the MobileNet v2 body only')
  with tf.Graph().as_default():
    images = np.random.default_rng(0).uniform(
        -1, 1, [args.batch, args.size, args.size, 3]).astype(np.float32)
    with slim.arg_scope(mobilenet_v2.training_scope(is_training=True,
                                                    bn_decay=0.9997)):
      features, _ = mobilenet_v2.mobilenet_base(
          tf.constant(images), final_endpoint='layer_19',
          depth_multiplier=args.depth, min_depth=16)
    loss = tf.reduce_mean(tf.square(features))
    optimizer = tf.compat.v1.train.RMSPropOptimizer(
        0.004, decay=0.9, momentum=0.9, epsilon=1.0)
    with tf.control_dependencies(
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
      train_op = optimizer.minimize(loss)
    with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
        allow_soft_placement=True)) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(args.warmup):
        sess.run(train_op)
      start = time.perf_counter()
      for _ in range(args.steps):
        sess.run(train_op)
      return args.steps * args.batch / (time.perf_counter() - start)


def eval_rate(args):
  with tempfile.TemporaryDirectory() as model_dir:
    parts = _estimator(args, model_dir)
    parts['estimator'].train(parts['train_input_fn'], max_steps=1)
    start = time.perf_counter()
    metrics = parts['estimator'].evaluate(parts['eval_input_fns'][0],
                                          steps=args.eval_images)
    seconds = time.perf_counter() - start
  assert 'DetectionBoxes_Precision/mAP' in metrics, sorted(metrics)
  return args.eval_images / seconds


MODES = {'estimator': estimator_rate, 'ceiling': ceiling_rate,
         'eval': eval_rate}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--mode', choices=sorted(MODES), required=True)
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument('--steps', type=int, default=10)
  parser.add_argument('--eval_images', type=int, default=32,
                      help='--mode=eval: images evaluated (batch 1).')
  common.add_model_args(parser)
  args = parser.parse_args(argv)
  common.quiet()
  rate = MODES[args.mode](args)
  print('%s, %s depth %g, %dx%d, batch %d:' % (
      args.mode, args.arch, args.depth, args.size, args.size, args.batch))
  common.report({'images_per_s': rate, 'peak_rss_mb': common.peak_rss_mb()},
                args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
