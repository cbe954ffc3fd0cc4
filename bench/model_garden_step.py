r"""The peer's side of items 7-9: TF Model Garden training steps.

Runs in the peer environment (bench/.peer_venv, tf-models-official 2.15),
never in ours: builds a Model Garden experiment at the given size, batch and
class count on our synthetic shapes records (the original's tf.Example keys,
which Model Garden's decoder reads too), from random weights, and times its
compiled train_step after warm-up. Prints one `RESULT {json}` line.

--experiment=retinanet_resnetfpn_coco  RetinaNet (item 7), with our config's
    anchors (2 scales an octave) and flips without scale jitter.
--experiment=fasterrcnn_resnetfpn_coco Faster R-CNN: Model Garden's
    `maskrcnn` task with the mask head off (include_mask: False), with our
    config's proposal counts (300 proposals, 64 sampled per image) and no
    scale jitter (item 8).
--experiment=maskrcnn_resnetfpn_coco   Mask R-CNN: the same with the mask
    head on (its default: four 256-channel convolutions on 14x14 crops, a
    deconvolution to 28x28), on its default share of the sampled ROIs
    (a quarter: 16 of 64, the most that can be positive; ours runs its mask
    head on the positives; item 9).

  bench/.peer_venv/bin/python bench/model_garden_step.py --data_dir=... \
      --size=256 --batch=8
"""
import argparse
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.core import exp_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.core import task_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.vision import registry_imports  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position


def _retinanet(task_config):
  """Our RetinaNet config's anchors and augmentation.

  Two scales an octave (6 anchors a location, as the original's config;
  Model Garden's default is 3, i.e. 9) and horizontal flips without its
  default 0.8-1.2 scale jitter, which ours does not do.
  """
  task_config.model.anchor.num_scales = 2
  parser = task_config.train_data.parser
  parser.aug_rand_hflip = True
  parser.aug_scale_min = parser.aug_scale_max = 1.0


def _faster_rcnn(task_config):
  """Our Faster R-CNN config's proposal counts and augmentation."""
  model = task_config.model
  model.roi_generator.num_proposals = 300
  model.roi_sampler.num_sampled_rois = 64
  parser = task_config.train_data.parser
  parser.aug_rand_hflip = True
  parser.aug_scale_min = parser.aug_scale_max = 1.0


def _mask_rcnn(task_config):
  """_faster_rcnn, with masks on as many ROIs as can be positive.

  Model Garden runs its mask head on num_sampled_masks ROIs, positives
  first; its default, 128 of 512 sampled ROIs, is the most positives the
  sampler keeps (foreground_fraction 0.25). Scaled to our 64 sampled ROIs:
  16, the most positives of ours, which ours runs its mask head on.
  """
  _faster_rcnn(task_config)
  model = task_config.model
  model.mask_sampler.num_sampled_masks = int(
      model.roi_sampler.num_sampled_rois *
      model.roi_sampler.foreground_fraction)


# Experiment -> changes on top of its Model Garden defaults.
EXPERIMENTS = {'retinanet_resnetfpn_coco': _retinanet,
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
  logs, result = peer_env.time_steps(lambda: step(next(iterator)),
                                     args.warmup, args.steps, args.batch)
  print('RESULT ' + json.dumps(dict(result, loss=float(logs[task.loss]),
                                    tf_version=tf.__version__)))
  return 0


if __name__ == '__main__':
  sys.exit(main())
