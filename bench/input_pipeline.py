r"""Throughput of the training input pipeline against decoding and training.

Writes synthetic shapes records (300x300 JPEGs), then times, in images/s,
`inputs.train_input` with the SSD MobileNet v2 COCO sample config's input
settings (random_horizontal_flip + ssd_random_crop, 300x300
fixed_shape_resizer, batch 24, the real SSD model's preprocess, which only
resizes and scales) next to the decode-only rate (decoder + batch) under the
same parallelism, for three parallelism settings:

  as written  the sample's train_input_reader, which sets no parallelism
              field: our dataset_builder then maps with AUTOTUNE, and
              prefetches the proto default of 2 batches.
  8 / 2       num_parallel_batches: 8 (24 * 8 = 192 parallel map calls) and
              num_prefetch_batches: 2 set explicitly: the proto defaults,
              which the original always applied.
  AUTOTUNE    map parallelism and prefetch depth (-1) both left to tf.data.

With --with_train_step it also times full training steps (forward, loss,
backward, RMSProp update) of that SSD MobileNet v2 (depth 1.0) on one fixed
batch through model_lib's model_fn, so input cost is excluded there, and
prints input images/s over training images/s.

Rates are per wall second and per CPU second of this process (all its
threads): on a machine shared with other work the wall rate follows the CPU
share we get, while the CPU-second rate is what the work itself costs.

  .venv/bin/python bench/input_pipeline.py [--with_train_step]
"""
import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import tensorflow as tf

from od_estimator.input_pipeline import inputs
from od_estimator.estimator import model_lib
from od_estimator.builders import dataset_builder
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.config import config_util

# The parts of the original's samples/configs/ssd_mobilenet_v2_coco.config
# that the input pipeline and one training step depend on; input paths and
# the label map are filled in once the data is written.
# fine_tune_checkpoint is left out: training starts from random weights.
PIPELINE_TEXT = """
model {
  ssd {
    num_classes: 90
    box_coder { faster_rcnn_box_coder {
      y_scale: 10.0 x_scale: 10.0 height_scale: 5.0 width_scale: 5.0 } }
    matcher { argmax_matcher {
      matched_threshold: 0.5 unmatched_threshold: 0.5
      ignore_thresholds: false negatives_lower_than_unmatched: true
      force_match_for_each_row: true } }
    similarity_calculator { iou_similarity {} }
    anchor_generator { ssd_anchor_generator {
      num_layers: 6 min_scale: 0.2 max_scale: 0.95
      aspect_ratios: [1.0, 2.0, 0.5, 3.0, 0.3333] } }
    image_resizer { fixed_shape_resizer { height: 300 width: 300 } }
    box_predictor { convolutional_box_predictor {
      min_depth: 0 max_depth: 0 num_layers_before_predictor: 0
      use_dropout: false dropout_keep_probability: 0.8 kernel_size: 3
      box_code_size: 4 apply_sigmoid_to_scores: false
      conv_hyperparams {
        activation: RELU_6
        regularizer { l2_regularizer { weight: 0.00004 } }
        initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
        batch_norm { train: true scale: true center: true decay: 0.9997
                     epsilon: 0.001 }
      } } }
    feature_extractor {
      type: 'ssd_mobilenet_v2'
      min_depth: 16
      depth_multiplier: 1.0
      use_depthwise: true
      conv_hyperparams {
        activation: RELU_6
        regularizer { l2_regularizer { weight: 0.00004 } }
        initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
        batch_norm { train: true scale: true center: true decay: 0.9997
                     epsilon: 0.001 }
      }
      batch_norm_trainable: true
    }
    loss {
      classification_loss { weighted_sigmoid {} }
      localization_loss { weighted_smooth_l1 {} }
      hard_example_miner {
        num_hard_examples: 3000 iou_threshold: 0.99 loss_type: CLASSIFICATION
        max_negatives_per_positive: 3 min_negatives_per_image: 3 }
      classification_weight: 1.0
      localization_weight: 1.0
    }
    normalize_loss_by_num_matches: true
    post_processing {
      batch_non_max_suppression {
        score_threshold: 1e-8 iou_threshold: 0.6
        max_detections_per_class: 100 max_total_detections: 100 }
      score_converter: SIGMOID
    }
  }
}
train_config {
  batch_size: 24
  optimizer { rms_prop_optimizer {
    learning_rate { exponential_decay_learning_rate {
      initial_learning_rate: 0.004 decay_steps: 800720 decay_factor: 0.95 } }
    momentum_optimizer_value: 0.9 decay: 0.9 epsilon: 1.0 } }
  num_steps: 200000
  data_augmentation_options { random_horizontal_flip {} }
  data_augmentation_options { ssd_random_crop {} }
}
train_input_reader {
  tf_record_input_reader { input_path: "%(input_path)s" }
  label_map_path: "%(label_map_path)s"
}
"""

# (label, InputReader fields set on top of the config as written).
SETTINGS = (
    ('as written', {}),
    ('8 / 2', {'num_parallel_batches': 8, 'num_prefetch_batches': 2}),
    ('AUTOTUNE', {'num_prefetch_batches': -1}),
)


def _configs(data, batch_size=None):
  text = PIPELINE_TEXT % {
      'input_path': os.path.join(data['dir'], 'shapes_train.record-*'),
      'label_map_path': data['label_map']}
  configs = config_util.create_configs_from_pipeline_proto(
      config_util.parse_pipeline_text(text))
  if batch_size:
    configs['train_config'].batch_size = batch_size
  return configs


def _with_fields(input_config, overrides):
  config = type(input_config)()
  config.CopyFrom(input_config)
  for name, value in overrides.items():
    setattr(config, name, value)
  return config


def _decode_only_dataset(configs, input_config):
  """Decoder + batch: the images alone (box counts differ per image)."""
  return dataset_builder.build(
      input_config, batch_size=configs['train_config'].batch_size,
      transform_input_data_fn=lambda d: d[fields.InputDataFields.image])


def _augmented_dataset(configs, input_config):
  model = model_builder.build(configs['model'], is_training=True)
  return inputs.train_input(configs['train_config'], input_config,
                            configs['model'], model=model)


def _session():
  return tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
      allow_soft_placement=True))


class _Clock:
  """Wall and process CPU time (all threads) since construction."""

  def __init__(self):
    self._wall = time.perf_counter()
    self._cpu = time.process_time()

  def rates(self, images):
    """Returns (images per wall second, images per CPU second)."""
    return (images / (time.perf_counter() - self._wall),
            images / (time.process_time() - self._cpu))


def images_per_second(make_dataset, batch_size, warmup, num_batches):
  """Pulls batches without copying them out.

  Returns:
    (images per wall second, images per CPU second of this process).
  """
  with tf.Graph().as_default():
    iterator = dataset_builder.make_initializable_iterator(make_dataset())
    # Grouping runs the pipeline without fetching the tensors to numpy.
    step = tf.group(tf.nest.flatten(iterator.get_next()))
    with _session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      for _ in range(warmup):
        sess.run(step)
      clock = _Clock()
      for _ in range(num_batches):
        sess.run(step)
      return clock.rates(batch_size * num_batches)


def _one_batch(configs):
  """One augmented (features, labels) batch as numpy."""
  with tf.Graph().as_default():
    iterator = dataset_builder.make_initializable_iterator(
        _augmented_dataset(configs, configs['train_input_config']))
    with _session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      return sess.run(iterator.get_next())


def train_images_per_second(configs, warmup, num_steps):
  """Times model_fn's train op on one fixed batch.

  Returns:
    (images per wall second, images per CPU second of this process).
  """
  features, labels = _one_batch(configs)
  detection_model_fn = functools.partial(model_builder.build,
                                         model_config=configs['model'])
  model_fn = model_lib.create_model_fn(
      detection_model_fn, configs, hparams={'load_pretrained': False})
  with tf.Graph().as_default():
    batch = tf.compat.v1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensors((features, labels)).repeat()).get_next()
    spec = model_fn(batch[0], batch[1], tf.estimator.ModeKeys.TRAIN)
    with _session() as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      for _ in range(warmup):
        sess.run(spec.train_op)
      clock = _Clock()
      for _ in range(num_steps):
        sess.run(spec.train_op)
      return clock.rates(configs['train_config'].batch_size * num_steps)


def _parser():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--num_images', type=int, default=400)
  parser.add_argument('--num_shards', type=int, default=4)
  parser.add_argument('--image_size', type=int, default=300)
  parser.add_argument('--warmup_batches', type=int, default=5)
  parser.add_argument('--num_batches', type=int, default=20,
                      help='Timed batches per pipeline variant.')
  parser.add_argument('--repeats', type=int, default=3,
                      help='Rounds over all variants; the median is shown.')
  parser.add_argument('--with_train_step', action='store_true',
                      help='Also time SSD MobileNet v2 training steps.')
  parser.add_argument('--train_steps', type=int, default=3,
                      help='Timed training steps (after one warm-up step).')
  parser.add_argument('--batch', type=int, default=None,
                      help='Batch size (default: the sample config\'s 24).')
  parser.add_argument('--json', action='store_true',
                      help='End with a RESULT line for bench/run_all.py.')
  parser.add_argument('--data_dir', default=None,
                      help='Where to write the records (default: a temporary '
                      'directory, removed at the end).')
  return parser


def _write_data(args, directory):
  written = create_synthetic_tf_record.create_dataset(
      directory, num_train=args.num_images, num_val=0,
      image_size=args.image_size, num_train_shards=args.num_shards,
      num_val_shards=1, seed=0)
  return {'dir': directory, 'label_map': written['label_map']}


def measure_pipelines(configs, args):
  """Times every (setting, decode-only / augmented) variant.

  Rounds are interleaved so that a burst of load from other processes hits
  every variant rather than one of them.

  Returns:
    {(setting label, 'decode' or 'augmented'): [(wall rate, CPU rate)] one
    per round}.
  """
  measure = functools.partial(
      images_per_second, batch_size=configs['train_config'].batch_size,
      warmup=args.warmup_batches, num_batches=args.num_batches)
  rates = {}
  for _ in range(args.repeats):
    for label, overrides in SETTINGS:
      input_config = _with_fields(configs['train_input_config'], overrides)
      for kind, make in (('decode', _decode_only_dataset),
                         ('augmented', _augmented_dataset)):
        rates.setdefault((label, kind), []).append(
            measure(functools.partial(make, configs, input_config)))
  return rates


def print_pipeline_tables(rates, args, batch_size):
  """Prints the wall and CPU tables; returns {label: (wall, CPU) rate}."""
  def median(label, kind, which):
    return statistics.median(r[which] for r in rates[label, kind])

  header = ('setting', 'decode-only', 'augmented', 'aug / decode',
            'aug / as written')
  for which, unit in ((0, 'images/s'), (1, 'images per CPU-s')):
    print('\nbatch %d, median of %d rounds of %d timed batches after %d '
          'warm-up, %s:' % (batch_size, args.repeats, args.num_batches,
                            args.warmup_batches, unit))
    print('%-12s %12s %10s %13s %17s' % header)
    reference = median(SETTINGS[0][0], 'augmented', which)
    for label, _ in SETTINGS:
      decode = median(label, 'decode', which)
      augmented = median(label, 'augmented', which)
      print('%-12s %12.1f %10.1f %13.2f %17.2f' % (
          label, decode, augmented, augmented / decode,
          augmented / reference))
  print('\nper round, wall images/s (the spread shows the noise):')
  for (label, kind), values in rates.items():
    print('  %-10s %-9s %s' % (label, kind, '  '.join(
        '%7.1f' % wall for wall, _ in values)))
  return {label: (median(label, 'augmented', 0),
                  median(label, 'augmented', 1)) for label, _ in SETTINGS}


def _load():
  return ' '.join('%.2f' % l for l in os.getloadavg())


def run(args):
  """Writes the data, runs every measurement and prints the tables."""
  directory = args.data_dir or tempfile.mkdtemp(prefix='od_bench_')
  try:
    start = time.perf_counter()
    configs = _configs(_write_data(args, directory), args.batch)
    print('wrote %d %dx%d images in %d shards (%.1f s); %d cores, load '
          'average %s' % (args.num_images, args.image_size, args.image_size,
                          args.num_shards, time.perf_counter() - start,
                          os.cpu_count(), _load()))
    batch_size = configs['train_config'].batch_size
    augmented = print_pipeline_tables(measure_pipelines(configs, args), args,
                                      batch_size)
    if args.with_train_step:
      train, train_per_cpu = train_images_per_second(
          configs, warmup=1, num_steps=args.train_steps)
      print('\ntraining step (ssd_mobilenet_v2 1.0, 300x300, batch %d, one '
            'fixed batch, %d timed steps): %.2f images/s (%.1f s/step), '
            '%.2f images per CPU-s' % (batch_size, args.train_steps, train,
                                       batch_size / train, train_per_cpu))
      print('input / train   wall   per CPU-s')
      for label, (wall, per_cpu) in augmented.items():
        print('  %-10s %8.0f %11.0f' % (label, wall / train,
                                        per_cpu / train_per_cpu))
    print('load average at the end: %s' % _load())
    if args.json:
      wall, per_cpu = augmented[SETTINGS[0][0]]
      print('RESULT ' + json.dumps({'images_per_s': wall,
                                    'images_per_cpu_s': per_cpu}))
  finally:
    if not args.data_dir:
      shutil.rmtree(directory, ignore_errors=True)
  return 0


def main(argv=None):
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
  return run(_parser().parse_args(argv))


if __name__ == '__main__':
  sys.exit(main())
