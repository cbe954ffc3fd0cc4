"""Checks a pipeline config before launch: `od-estimator validate`.

Usage:
  od-estimator validate --pipeline_config_path=PATH [--config_override=TEXT]
      [--check_tpu [--num_shards=8] [--model_dir=gs://...]
       [--allow_local_paths]]
  python -m od_estimator.validate --pipeline_config_path=PATH

Reports every problem it finds (file, line and field where it knows them)
and exits 0 when the config is ready to train, 1 when it is not.
--check_tpu also builds the TPU training step on CPU (see tpu_check).
"""
import argparse
import os
import sys

import tensorflow as tf

from od_estimator import tpu_check
from od_estimator.utils import config_util
from od_estimator.utils import label_map_util

# Meta-architectures that builders/model_builder can build today.
SUPPORTED_META_ARCHITECTURES = ('ssd',)
# eval_config.metrics_set values the evaluator registry accepts.
KNOWN_METRICS_SETS = (
    'coco_detection_metrics', 'coco_mask_metrics',
    'pascal_voc_detection_metrics', 'weighted_pascal_voc_detection_metrics',
    'pascal_voc_instance_segmentation_metrics',
    'weighted_pascal_voc_instance_segmentation_metrics',
    'precision_at_recall_detection_metrics', 'oid_V2_detection_metrics',
    'oid_challenge_detection_metrics', 'oid_challenge_segmentation_metrics',
    'coco_keypoint_metrics', 'lvis_mask_metrics')
FINE_TUNE_CHECKPOINT_TYPES = ('', 'classification', 'detection')
_PLACEHOLDER = 'PATH_TO_BE_CONFIGURED'
_REMOTE_PREFIXES = ('gs://', 's3://', 'hdfs://', 'http://', 'https://')


class Report:
  """Problems (which make the config unusable) and notes found in a config."""

  def __init__(self, path):
    self.path = path
    self.errors = []
    self.notes = []

  def error(self, field, problem, hint=None):
    self.errors.append(config_util.ConfigError(
        problem, path=self.path, field=field, hint=hint))

  def note(self, text):
    self.notes.append(text)

  def text(self):
    lines = ['error: %s' % e for e in self.errors]
    lines += ['note: %s' % n for n in self.notes]
    if self.errors:
      lines.append('%s: %d problem(s); fix them before training.' %
                   (self.path, len(self.errors)))
    else:
      lines.append('%s: OK' % self.path)
    return '\n'.join(lines)


def _is_remote(path):
  return path.startswith(_REMOTE_PREFIXES)


def _placeholder_hint(path):
  if _PLACEHOLDER in path:
    return 'replace %s with the real path' % _PLACEHOLDER
  return 'paths are relative to the directory you launch from (%s)' % (
      os.getcwd())


def _check_model(configs, report):
  meta_architecture = configs['model'].WhichOneof('model')
  if meta_architecture is None:
    report.error('model', 'no model is configured',
                 hint='add model { ssd { ... } }')
    return None
  if meta_architecture not in SUPPORTED_META_ARCHITECTURES:
    report.error('model.%s' % meta_architecture,
                 'meta-architecture %r is not supported yet' %
                 meta_architecture,
                 hint='supported: %s' % ', '.join(SUPPORTED_META_ARCHITECTURES))
  if meta_architecture not in ('ssd', 'faster_rcnn'):
    return None
  num_classes = config_util.get_number_of_classes(configs['model'])
  if num_classes < 1:
    report.error('model.%s.num_classes' % meta_architecture,
                 'must be at least 1, got %d' % num_classes)
  _check_image_resizer(configs['model'], meta_architecture, report)
  return num_classes


def _check_image_resizer(model_config, meta_architecture, report):
  resizer = config_util.get_image_resizer_config(model_config)
  kind = resizer.WhichOneof('image_resizer_oneof')
  field = 'model.%s.image_resizer' % meta_architecture
  if kind is None:
    report.error(field, 'no image resizer is configured',
                 hint='e.g. fixed_shape_resizer { height: 300 width: 300 }')
  elif kind == 'fixed_shape_resizer':
    fixed = resizer.fixed_shape_resizer
    if fixed.height < 1 or fixed.width < 1:
      report.error(field + '.fixed_shape_resizer',
                   'height and width must be positive, got %dx%d' %
                   (fixed.height, fixed.width))
  elif kind == 'keep_aspect_ratio_resizer':
    keep = resizer.keep_aspect_ratio_resizer
    if not 0 < keep.min_dimension <= keep.max_dimension:
      report.error(field + '.keep_aspect_ratio_resizer',
                   'need 0 < min_dimension <= max_dimension, got %d and %d' %
                   (keep.min_dimension, keep.max_dimension))


def _check_label_map(input_config, field, num_classes, report):
  path = input_config.label_map_path
  if not path:
    return
  if _is_remote(path):
    report.note('%s.label_map_path %s is remote; not checked here.' %
                (field, path))
    return
  if not tf.io.gfile.exists(path):
    report.error(field + '.label_map_path', 'label map %s not found' % path,
                 hint=_placeholder_hint(path))
    return
  try:
    label_map = label_map_util.load_labelmap(path)
  except label_map_util.LabelMapError as error:
    report.error(field + '.label_map_path', str(error))
    return
  if num_classes:
    too_big = [item for item in label_map.item if item.id > num_classes]
    if too_big:
      report.error(
          field + '.label_map_path',
          '%s has ids beyond num_classes=%d: %s' % (
              path, num_classes, ', '.join(
                  '%d (%s)' % (i.id, i.name or i.display_name)
                  for i in too_big[:5])),
          hint='raise num_classes to %d or renumber the label map' %
          max(i.id for i in too_big))


def _check_input_reader(input_config, field, num_classes, report):
  reader = input_config.WhichOneof('input_reader')
  if reader is None:
    report.error(field, 'no input is configured',
                 hint='add tf_record_input_reader { input_path: "..." }')
  elif reader != 'tf_record_input_reader':
    report.error('%s.%s' % (field, reader), 'input reader %r is not '
                 'supported' % reader, hint='use tf_record_input_reader')
  else:
    paths = input_config.tf_record_input_reader.input_path
    if not paths:
      report.error(field + '.tf_record_input_reader.input_path',
                   'no input_path is given')
    for pattern in paths:
      if _is_remote(pattern):
        report.note('%s input %s is remote; not checked here.' %
                    (field, pattern))
      elif not tf.io.gfile.glob(pattern):
        report.error(field + '.tf_record_input_reader.input_path',
                     'no file matches %s' % pattern,
                     hint=_placeholder_hint(pattern))
  if input_config.max_number_of_boxes < 1:
    report.error(field + '.max_number_of_boxes',
                 'must be at least 1, got %d' %
                 input_config.max_number_of_boxes)
  _check_label_map(input_config, field, num_classes, report)


def _check_train_config(train_config, report):
  if train_config.batch_size < 1:
    report.error('train_config.batch_size',
                 'must be at least 1, got %d' % train_config.batch_size)
  checkpoint = train_config.fine_tune_checkpoint
  kind = train_config.fine_tune_checkpoint_type
  if kind not in FINE_TUNE_CHECKPOINT_TYPES:
    report.error('train_config.fine_tune_checkpoint_type',
                 'unknown type %r' % kind,
                 hint='one of "classification", "detection"')
  if not checkpoint:
    return
  if _is_remote(checkpoint):
    report.note('fine_tune_checkpoint %s is remote; not checked here.' %
                checkpoint)
  elif not tf.io.gfile.exists(checkpoint + '.index'):
    hint = _placeholder_hint(checkpoint)
    if tf.io.gfile.isdir(checkpoint):
      hint = ('give the checkpoint prefix, e.g. %s' %
              os.path.join(checkpoint, 'model.ckpt'))
    elif checkpoint.endswith(('.index', '.meta')) or '.data-' in checkpoint:
      hint = 'give the prefix without the .index/.data/.meta suffix'
    report.error('train_config.fine_tune_checkpoint',
                 'no checkpoint at %s (%s.index not found)' %
                 (checkpoint, checkpoint), hint=hint)


def _check_eval_config(eval_config, report):
  for name in eval_config.metrics_set:
    if name not in KNOWN_METRICS_SETS:
      report.error('eval_config.metrics_set', 'unknown metrics set %r' % name,
                   hint='one of %s' % ', '.join(KNOWN_METRICS_SETS))


def validate(pipeline_config_path, config_override=None, tpu_options=None):
  """Checks a pipeline config; returns a Report (no exception on bad input).

  Args:
    pipeline_config_path: the pipeline.config file.
    config_override: text proto merged on top of it.
    tpu_options: a tpu_check.TpuOptions to also check the TPU training
      step, or None.
  """
  report = Report(pipeline_config_path)
  dropped = []
  try:
    configs = config_util.create_configs_from_pipeline_proto(
        config_util.read_pipeline_config(pipeline_config_path,
                                         config_override, dropped))
  except config_util.ConfigError as error:
    report.errors.append(error)
    return report
  for warning in dropped:
    report.note(warning)
  num_classes = _check_model(configs, report)
  _check_train_config(configs['train_config'], report)
  _check_input_reader(configs['train_input_config'], 'train_input_reader',
                      num_classes, report)
  if not configs['eval_input_configs']:
    report.note('no eval_input_reader: model_main will train without '
                'evaluating.')
  for index, eval_input in enumerate(configs['eval_input_configs']):
    _check_input_reader(eval_input, 'eval_input_reader[%d]' % index,
                        num_classes, report)
  _check_eval_config(configs['eval_config'], report)
  if tpu_options is not None:
    tpu_check.check(configs, tpu_options, report)
  return report


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
  report = validate(args.pipeline_config_path, args.config_override,
                    _tpu_options(args, parser))
  print(report.text())
  return 1 if report.errors else 0


if __name__ == '__main__':
  sys.exit(main())
