r"""Detector training (and evaluation) against the backbone's ceiling.

--mode=estimator  our model_fn trained through tf.estimator.Estimator on
                  synthetic records with the config's augmentations: images/s
                  over the timed steps, and the process's peak memory.
--mode=ceiling    the same backbone alone (forward, backward, the
                  config's optimizer step) on a constant batch of the same
                  size, in a plain session with the same threads: what the
                  detector's training step could at best reach on this
                  machine, images/s and per CPU second as the estimator
                  mode. --arch=ssd_mobilenet_v2: the MobileNet v2 body;
                  --arch=faster_rcnn: ResNet-50 as Faster R-CNN runs it,
                  to block3 on the images and block4 on 64 crops an image;
                  --arch=rfcn: ResNet-50 as R-FCN runs it, block4 once on
                  the whole block3 map; --arch=efficientdet_d0:
                  EfficientNet-B0 to its level-5 block (bench/
                  efficientdet.py).
--mode=eval       Estimator.evaluate with COCO metrics: images/s and peak
                  memory.
--bfloat16        estimator and eval modes: as model_main --bfloat16 (the
                  oneDNN bfloat16 rewrite where the CPU has it).
--disable_thread_spinning  estimator and eval modes: the session's thread
                  pools sleep at once when idle instead of spinning first
                  (ConfigProto.experimental; same graph, same numbers), to
                  compare CPU per step with the default (bench/NOTES.md).

  .venv/bin/python bench/train_step.py --mode=estimator --data_dir=/tmp/d
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from tensorflow_estimator.python.estimator import run_config as rc_lib
import tf_slim as slim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import efficientdet  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.estimator import model_lib
from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor as frcnn_resnet  # pylint: disable=g-import-not-at-top
from od_estimator.nets import mobilenet_v2  # pylint: disable=g-import-not-at-top


def _estimator(args, model_dir):
  session_config = rc_lib.get_default_session_config()
  session_config.experimental.disable_thread_spinning = (
      args.disable_thread_spinning)
  return model_lib.create_estimator_and_inputs(
      run_config=tf.estimator.RunConfig(
          model_dir=model_dir, save_checkpoints_steps=None,
          save_checkpoints_secs=None, save_summary_steps=10 ** 9,
          log_step_count_steps=10 ** 9, session_config=session_config),
      hparams={'load_pretrained': False},
      pipeline_config_path=common.ssd_config_path(args, model_dir),
      bfloat16=args.bfloat16)


def estimator_rates(args):
  """Images per second and per CPU second (all the process's threads)."""
  with tempfile.TemporaryDirectory() as model_dir:
    parts = _estimator(args, model_dir)
    timer = common.StepTimer(args.warmup)
    parts['estimator'].train(parts['train_input_fn'], hooks=[timer],
                             max_steps=args.warmup + args.steps)
  images = timer.timed_steps * args.batch
  return {'images_per_s': images / timer.seconds,
          'images_per_cpu_s': images / timer.cpu_seconds}


def estimator_rate(args):
  return estimator_rates(args)['images_per_s']


def _mobilenet_v2_body_loss(args, images):
  """Loss over the SSD MobileNet v2 body's last layer; its optimizer."""
  with slim.arg_scope(mobilenet_v2.training_scope(is_training=True,
                                                  bn_decay=0.9997)):
    features, _ = mobilenet_v2.mobilenet_base(
        images, final_endpoint='layer_19', depth_multiplier=args.depth,
        min_depth=16)
  return tf.reduce_mean(tf.square(features)), (
      tf.compat.v1.train.RMSPropOptimizer(0.004, decay=0.9, momentum=0.9,
                                          epsilon=1.0))


# Proposals the Faster R-CNN config's second stage trains on per image
# (second_stage_batch_size), and its crop before max pooling.
_FASTER_RCNN_PROPOSALS = 64
_FASTER_RCNN_CROP = 14


def _resnet50_body_loss(images, second_stage_input):
  """Loss over Faster R-CNN ResNet-50's body alone; its optimizer.

  The detector's own extractor (frozen batch norm, as in the config):
  block3 on the images, then block4 on second_stage_input(block3). No
  anchors, proposals, sampling, targets or losses.
  """
  extractor = frcnn_resnet.FasterRCNNResnet50FeatureExtractor(
      is_training=True, first_stage_features_stride=16)
  block3, _ = extractor.extract_proposal_features(
      extractor.preprocess(images), scope='FirstStageFeatureExtractor')
  features = extractor.extract_box_classifier_features(
      second_stage_input(block3), scope='SecondStageFeatureExtractor')
  return tf.reduce_mean(tf.square(features)), (
      tf.compat.v1.train.MomentumOptimizer(0.0003, momentum=0.9))


def _faster_rcnn_body_loss(args, images):
  """Block4 on fixed crops of block3, 14x14 max-pooled to 7x7 as the box
  classifier does."""
  # Proposal-sized boxes spread over the image, the same every step.
  corners = np.random.default_rng(1).uniform(
      0.0, 0.6, [args.batch * _FASTER_RCNN_PROPOSALS, 2])
  boxes = np.concatenate([corners, corners + 0.4], axis=1).astype(np.float32)

  def crops(block3):
    cropped = tf.image.crop_and_resize(
        block3, boxes, np.repeat(np.arange(args.batch, dtype=np.int32),
                                 _FASTER_RCNN_PROPOSALS),
        [_FASTER_RCNN_CROP, _FASTER_RCNN_CROP])
    return slim.max_pool2d(cropped, [2, 2], stride=2)
  return _resnet50_body_loss(images, crops)


def _rfcn_body_loss(args, images):
  """Block4 once on the whole block3 map, as R-FCN's second stage runs it."""
  del args  # The batch is the images'.
  return _resnet50_body_loss(images, lambda block3: block3)


CEILING_BODIES = {'ssd_mobilenet_v2': _mobilenet_v2_body_loss,
                  'faster_rcnn': _faster_rcnn_body_loss,
                  'rfcn': _rfcn_body_loss,
                  'efficientdet_d0': efficientdet.efficientnet_body_loss}


def ceiling_train_op(args):
  """The ceiling's training step on a fixed random batch, in the default
  graph."""
  if args.arch not in CEILING_BODIES:
    raise ValueError('--mode=ceiling measures %s only' %
                     ', '.join(sorted(CEILING_BODIES)))
  images = np.random.default_rng(0).uniform(
      -1, 1, [args.batch, args.size, args.size, 3]).astype(np.float32)
  loss, optimizer = CEILING_BODIES[args.arch](args, tf.constant(images))
  with tf.control_dependencies(
      tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
    return optimizer.minimize(loss)


def ceiling_rates(args):
  """Images per second and per CPU second (all the process's threads), as
  estimator_rates, so the ratio can be formed either way."""
  with tf.Graph().as_default():
    train_op = ceiling_train_op(args)
    with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
        allow_soft_placement=True)) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(args.warmup):
        sess.run(train_op)
      start, start_cpu = time.perf_counter(), time.process_time()
      for _ in range(args.steps):
        sess.run(train_op)
      seconds = time.perf_counter() - start
      cpu_seconds = time.process_time() - start_cpu
  images = args.steps * args.batch
  return {'images_per_s': images / seconds,
          'images_per_cpu_s': images / cpu_seconds}


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


MODES = {'estimator': estimator_rates, 'ceiling': ceiling_rates,
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
  result = rate if isinstance(rate, dict) else {'images_per_s': rate}
  print('%s, %s depth %g, %dx%d, batch %d:' % (
      args.mode, args.arch, args.depth, args.size, args.size, args.batch))
  common.report(dict(result, peak_rss_mb=common.peak_rss_mb()), args.json)
  return 0


if __name__ == '__main__':
  sys.exit(main())
