r"""An automl EfficientDet checkpoint as ours: `od-estimator convert_automl`.

Usage:
  od-estimator convert_automl --model_name=efficientdet-d0 \
      --ckpt=efficientdet-d0/model --hparams=num_classes=20,label_map=voc \
      --output_dir=converted [--no_moving_averages] [--train_batch_size=64] \
      [--num_examples_per_epoch=120000] [--training_file_pattern=...] \
      [--validation_file_pattern=...]
  python -m od_estimator.compat.convert_automl ...   (same flags)

--ckpt is an automl checkpoint prefix or folder (its latest checkpoint);
--hparams is what automl's main.py took: comma-separated key=value pairs
(dotted keys for nested ones, e.g. nms_configs.method=hard) or a .yaml
file. The output folder gets:

  pipeline.config   our config of the same network (ssd,
                    ssd_efficientnet-b0_bifpn_keras, BiFPN, weight-shared
                    box predictor, multiscale anchors, focal loss), its
                    train_config fine-tuning from model.ckpt ("full")
  model.ckpt        every variable of that model, from automl's
                    `/ExponentialMovingAverage` copies where the checkpoint
                    holds them (unless --no_moving_averages)
  label_map.pbtxt   automl's label_map (coco by default)

so `export_inference_graph --trained_checkpoint_prefix=OUT/model.ckpt`
exports it and `model_main` fine-tunes it. On an image already at
image_size, its detections are automl's (see the README, EfficientDet,
automl lineage, for what differs elsewhere and what has no counterpart).

exit status: 0 when written; 1 with a one-line error when an hparam has no
counterpart, the model is not efficientdet-d0, or the checkpoint does not
hold that network.
"""
import argparse
import os
import sys

import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.compat import automl_checkpoint
from od_estimator.compat import automl_config
from od_estimator.compat import automl_hparams
from od_estimator.config import config_util
from od_estimator.inference import command_runs
from od_estimator.utils import file_safety
from od_estimator.utils import flag_checks

_NAME = 'convert_automl'
PIPELINE_CONFIG = 'pipeline.config'
CHECKPOINT = 'model.ckpt'
LABEL_MAP = 'label_map.pbtxt'


def _model_variables(model_config, size):
  """{name: shape} of our model's variables (graph built, not run)."""
  with tf.Graph().as_default() as graph:
    model = model_builder.build(model_config, is_training=False)
    images = tf.compat.v1.placeholder(tf.float32, [1, size, size, 3])
    model.predict(*model.preprocess(images))
    return {v.op.name: v.shape.as_list() for v in graph.get_collection(
        tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}


def _geometry(hparams, model_name):
  return automl_checkpoint.Geometry(
      model_name=hparams['backbone_name'], min_level=hparams['min_level'],
      max_level=hparams['max_level'],
      num_iterations=hparams['fpn_cell_repeats'],
      num_scales=hparams['num_scales'],
      num_aspect_ratios=len(hparams['aspect_ratios']),
      num_classes=hparams['num_classes'])


def _resolve_checkpoint(path):
  """The checkpoint prefix of a prefix or a folder."""
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    # A folder without a `checkpoint` file: its only checkpoint.
    indexes = tf.io.gfile.glob(os.path.join(path, '*.index'))
    if len(indexes) == 1:
      return indexes[0][:-len('.index')]
  if tf.io.gfile.exists(path + '.index'):
    return path
  raise errors.UserInputError('--ckpt=%s: no checkpoint there (give a '
                              'prefix such as efficientdet-d0/model, or its '
                              'folder).' % path)


def convert(model_name, ckpt, hparams, output_dir, use_moving_averages=True,
            **training):
  """Writes pipeline.config, model.ckpt and label_map.pbtxt to output_dir.

  Args:
    model_name: automl's model name ('efficientdet-d0').
    ckpt: automl checkpoint prefix or folder.
    hparams: automl's --hparams text ('k=v,...' or a .yaml path) or a dict.
    output_dir: folder to write into.
    use_moving_averages: take the checkpoint's moving averages.
    **training: batch_size, examples_per_epoch, training_file_pattern,
      validation_file_pattern of automl_config.pipeline_text.

  Returns:
    dict of the paths written, 'variables' and 'averaged' counts.

  Raises:
    errors.UserInputError: see the module doc.
  """
  overrides = hparams if isinstance(hparams, dict) else automl_hparams.parse(
      hparams)
  resolved = automl_hparams.resolve(model_name, overrides)
  prefix = _resolve_checkpoint(ckpt)
  paths = {key: os.path.join(output_dir, name) for key, name in (
      ('pipeline_config', PIPELINE_CONFIG), ('checkpoint', CHECKPOINT),
      ('label_map', LABEL_MAP))}
  items = automl_hparams.label_map_items(resolved['label_map'])

  def text(freeze=()):
    return automl_config.pipeline_text(
        resolved, os.path.abspath(paths['checkpoint']),
        os.path.abspath(paths['label_map']), freeze, **training)
  model_config = config_util.parse_pipeline_text(text()).model
  shapes = _model_variables(model_config, resolved['image_size'])
  geometry = _geometry(resolved, model_name)
  values, averaged = automl_checkpoint.converted_values(
      prefix, shapes, geometry, use_moving_averages)
  freeze = automl_checkpoint.freeze_expressions(
      automl_checkpoint.frozen_names(resolved['var_freeze_expr'],
                                     list(shapes), geometry), list(shapes))
  config_text = text(freeze)
  config_util.parse_pipeline_text(config_text)
  tf.io.gfile.makedirs(output_dir)
  automl_checkpoint.write(paths['checkpoint'], values)
  file_safety.write_file(paths['pipeline_config'], config_text)
  file_safety.write_file(paths['label_map'],
                         automl_config.label_map_text(items))
  return dict(paths, variables=len(values), averaged=averaged)


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator ' + _NAME,
      description=__doc__.split('\n\n', 2)[2],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--model_name', required=True,
                      help='automl model name; efficientdet-d0 is supported.')
  parser.add_argument('--ckpt', required=True,
                      help='automl checkpoint prefix or folder.')
  parser.add_argument('--hparams', default='',
                      help='automl --hparams: k=v,k2=v2 or a .yaml file.')
  parser.add_argument('--output_dir', required=True,
                      help='folder for pipeline.config, model.ckpt and '
                      'label_map.pbtxt.')
  parser.add_argument('--no_moving_averages', action='store_true',
                      help='take the trained values, not their '
                      'ExponentialMovingAverage copies.')
  parser.add_argument('--train_batch_size', type=flag_checks.at_least(1),
                      default=automl_hparams.TRAIN_BATCH_SIZE,
                      help='automl\'s --train_batch_size: our batch_size; '
                      'scales the learning rate as automl does (default '
                      '%(default)s).')
  parser.add_argument('--num_examples_per_epoch',
                      type=flag_checks.at_least(1),
                      default=automl_hparams.NUM_EXAMPLES_PER_EPOCH,
                      help='automl\'s --num_examples_per_epoch: turns its '
                      'epochs into steps (default %(default)s).')
  parser.add_argument('--training_file_pattern',
                      default=automl_config.PATH_TO_BE_CONFIGURED,
                      help='TFRecords of train_input_reader.')
  parser.add_argument('--validation_file_pattern',
                      default=automl_config.PATH_TO_BE_CONFIGURED,
                      help='TFRecords of eval_input_reader.')
  return parser


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

  def work():
    file_safety.check_directory_destination(args.output_dir, '--output_dir')
    written = convert(
        args.model_name, args.ckpt, args.hparams, args.output_dir,
        use_moving_averages=not args.no_moving_averages,
        batch_size=args.train_batch_size,
        examples_per_epoch=args.num_examples_per_epoch,
        training_file_pattern=args.training_file_pattern,
        validation_file_pattern=args.validation_file_pattern)
    print('od-estimator %s: %s -> %s, %s (%d variables; %d automl values '
          'read from their moving averages), %s' % (
              _NAME, args.ckpt, written['pipeline_config'],
              written['checkpoint'], written['variables'],
              written['averaged'], written['label_map']))
    return 0
  return command_runs.run(_NAME, work)


if __name__ == '__main__':
  sys.exit(main())
