r"""The peer's side of items 7-9: TF Model Garden training steps.

Runs in the peer environment (bench/.peer_venv, tf-models-official 2.15),
never in ours: builds a Model Garden experiment at the given size, batch and
class count on our synthetic shapes records (the original's tf.Example keys,
which Model Garden's decoder reads too), from random weights, and times its
compiled train_step after warm-up. Prints one `RESULT {json}` line.

--experiment=retinanet_resnetfpn_coco  RetinaNet (item 7).
--experiment=fasterrcnn_resnetfpn_coco Faster R-CNN: Model Garden's
    `maskrcnn` task with the mask head off (include_mask: False), with our
    config's proposal counts (300 proposals, 64 sampled per image) and no
    scale jitter (item 8).
--experiment=maskrcnn_resnetfpn_coco   Mask R-CNN: the same with the mask
    head on (its default: four 256-channel convolutions on 14x14 crops, a
    deconvolution to 28x28), on as many ROIs as ours (64 an image; item 9).

  bench/.peer_venv/bin/python bench/model_garden_step.py --data_dir=... \
      --size=256 --batch=8
"""
import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.core import exp_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.core import task_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.vision import registry_imports  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import


def _faster_rcnn(task_config):
  """Our Faster R-CNN config's proposal counts and augmentation."""
  model = task_config.model
  model.roi_generator.num_proposals = 300
  model.roi_sampler.num_sampled_rois = 64
  parser = task_config.train_data.parser
  parser.aug_rand_hflip = True
  parser.aug_scale_min = parser.aug_scale_max = 1.0


def _mask_rcnn(task_config):
  """_faster_rcnn, and masks for as many ROIs as ours predicts them on."""
  _faster_rcnn(task_config)
  task_config.model.mask_sampler.num_sampled_masks = 64


# Experiment -> changes on top of its Model Garden defaults.
EXPERIMENTS = {'retinanet_resnetfpn_coco': lambda task_config: None,
               'fasterrcnn_resnetfpn_coco': _faster_rcnn,
               'maskrcnn_resnetfpn_coco': _mask_rcnn}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data_dir', required=True)
  parser.add_argument('--experiment', choices=sorted(EXPERIMENTS),
                      default='retinanet_resnetfpn_coco')
  parser.add_argument('--size', type=int, default=256)
  parser.add_argument('--batch', type=int, default=8)
  parser.add_argument('--num_classes', type=int, default=3)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=5)
  args = parser.parse_args(argv)

  config = exp_factory.get_exp_config(args.experiment)
  task_config = config.task
  task_config.init_checkpoint = None
  task_config.annotation_file = None
  # Model Garden counts the background class in num_classes.
  task_config.model.num_classes = args.num_classes + 1
  task_config.model.input_size = [args.size, args.size, 3]
  data = task_config.train_data
  data.input_path = os.path.join(args.data_dir, 'shapes_train.record-*')
  data.global_batch_size = args.batch
  data.dtype = 'float32'
  data.shuffle_buffer_size = 64
  EXPERIMENTS[args.experiment](task_config)
  task = task_factory.get_task(task_config)
  model = task.build_model()
  dataset = task.build_inputs(data)
  optimizer = tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)

  @tf.function
  def step(inputs):
    return task.train_step(inputs, model, optimizer)

  iterator = iter(dataset)
  for _ in range(args.warmup):
    step(next(iterator))
  start = time.perf_counter()
  for _ in range(args.steps):
    logs = step(next(iterator))
  seconds = time.perf_counter() - start
  print('RESULT ' + json.dumps({
      'images_per_s': args.steps * args.batch / seconds,
      'loss': float(logs[task.loss]),
      'peak_rss_mb': resource.getrusage(
          resource.RUSAGE_SELF).ru_maxrss / 1024.0,
      'tf_version': tf.__version__}))
  return 0


if __name__ == '__main__':
  sys.exit(main())
