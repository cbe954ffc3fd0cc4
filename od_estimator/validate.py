"""Checks a pipeline config before launch: `od-estimator validate`.

Usage:
  od-estimator validate --pipeline_config_path=PATH [--config_override=TEXT]
      [--scan_records] [--check_tpu [--num_shards=8] [--model_dir=gs://...]
       [--allow_local_paths]]
  python -m od_estimator.validate --pipeline_config_path=PATH

Reports every problem it finds (file, line and field where it knows them)
and exits 0 when the config is ready to train, 1 when it is not. Besides
syntax, files and sizes, it builds the model, optimizer, augmentation steps
and input decoders (no training graph), so options this version cannot
honour are named before launch.
--scan_records also reads every input record (see record_scanner.scan).
--check_tpu also builds the TPU training step on CPU (see tpu_check).
"""
import argparse
import sys

import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.checks import config_check
from od_estimator.checks import tpu_check


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator validate',
      description='Check a pipeline.config before launch: syntax, referenced '
      'files, label map against num_classes, sizes, and options this '
      'version does not support. With --check_tpu, also build the TPU '
      'training step on CPU, as model_tpu_main would on each TPU core, and '
      'report what would fail on a Cloud TPU. Exit code 0 when valid, 1 '
      'when not.')
  parser.add_argument('--pipeline_config_path', required=True,
                      help='Path to a pipeline.config text proto.')
  parser.add_argument('--config_override', default='',
                      help='pipeline_pb2.TrainEvalPipelineConfig text proto '
                      'merged on top of the file.')
  parser.add_argument(
      '--scan_records', action='store_true',
      help='Also read every record of the train and eval inputs and list '
      'each bad one (at most %d) with its file, index and source_id: '
      'unreadable records, records that are not tf.Examples, images that do '
      'not decode, box coordinate lists of different lengths, inverted or '
      'non-finite boxes, per-object lists (class/label or class/text, '
      'weight, area, is_crowd, difficult, group_of) of another length than '
      'the boxes, and class ids of 0 or above num_classes. It decodes every '
      'image: about as long as one epoch of input reading.' %
      config_check.SCAN_LIMIT)
  tpu = parser.add_argument_group(
      'TPU', 'With --check_tpu the training step is built on CPU (per-shard '
      'batch, static shapes, CrossShardOptimizer) and converted by XLA; it '
      'takes as long as building the model for training. Each problem is '
      'a line: a tensor of unknown shape (infeed or step), an op XLA cannot '
      'compile, a batch size not divisible by --num_shards, a path that is '
      'not gs://, a fine_tune_checkpoint scaffold_fn cannot restore.')
  tpu.add_argument('--check_tpu', action='store_true',
                   help='Check that the config would train on a Cloud TPU.')
  tpu.add_argument('--num_shards', type=int, default=None,
                   help='TPU cores the train batch is split over (default '
                   '%d, as model_tpu_main).' % tpu_check.DEFAULT_NUM_SHARDS)
  tpu.add_argument('--model_dir', default=None,
                   help="The TPU job's --model_dir, checked to be gs://.")
  tpu.add_argument('--allow_local_paths', action='store_true',
                   help='Accept paths that are not gs:// (a dry run on local '
                   'files); each is then listed in a note.')
  return parser


def _tpu_options(args, parser):
  """TpuOptions from the flags, or None without --check_tpu."""
  given = [flag for flag, value in (
      ('--num_shards', args.num_shards), ('--model_dir', args.model_dir),
      ('--allow_local_paths', args.allow_local_paths or None))
           if value is not None]
  if not args.check_tpu:
    if given:
      parser.error('%s only applies with --check_tpu' % ', '.join(given))
    return None
  return tpu_check.TpuOptions(
      num_shards=(tpu_check.DEFAULT_NUM_SHARDS if args.num_shards is None
                  else args.num_shards),
      model_dir=args.model_dir or '',
      allow_local_paths=args.allow_local_paths)


def main(argv=None):
  parser = _parser()
  args = parser.parse_args(argv)
  tpu_options = _tpu_options(args, parser)
  try:
    report = config_check.validate(
        args.pipeline_config_path, args.config_override, tpu_options,
        scan_records=args.scan_records)
  except errors.UserInputError as error:
    report = _stopped(args.pipeline_config_path, error)
  except tf.errors.OpError as error:
    # A file the checks could not read (out of reach, forbidden, damaged).
    # Any other exception is a bug in a check: it keeps its traceback.
    problem = command_line.describe_op_error(error, args.pipeline_config_path)
    if problem is None:
      raise
    report = _stopped(args.pipeline_config_path, problem)
  print(report.text())
  return 1 if report.errors else 0


def _stopped(path, problem):
  """A Report of the one problem the checks of `path` stopped on."""
  report = config_check.Report(path)
  report.error(None, 'checking stopped: %s' % problem)
  return report


if __name__ == '__main__':
  sys.exit(main())
