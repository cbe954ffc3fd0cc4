"""The checks behind `od-estimator validate` (see od_estimator/validate.py).

Reports every problem it finds (file, line and field where it knows them).
Besides syntax, files and sizes, it builds the model, optimizer,
augmentation steps and input decoders (no training graph), so options this
version cannot honour are named before launch. scan_records also reads
every input record (see record_scanner.scan); tpu_options also builds the
TPU training step on CPU (see tpu_check).
"""
import math
import os

import tensorflow as tf

from od_estimator.checks import config_notes
from od_estimator import errors
from od_estimator.metrics import eval_util
from od_estimator.metrics import metric_sets
from od_estimator.input_pipeline import inputs
from od_estimator.checks import record_scanner
from od_estimator.checks import tpu_check
from od_estimator.estimator import object_checkpoint
from od_estimator.builders import dataset_builder
from od_estimator.builders import decoder_builder
from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.builders import optimizer_builder
from od_estimator.builders import preprocessor_builder
from od_estimator.utils import checkpoint_health
from od_estimator.config import config_util
from od_estimator.utils import label_map_util
from od_estimator.protos import input_reader_pb2

FINE_TUNE_CHECKPOINT_TYPES = ('',) + tuple(sorted(object_checkpoint.PARTS))
_PLACEHOLDER = 'PATH_TO_BE_CONFIGURED'
_REMOTE_PREFIXES = ('gs://', 's3://', 'hdfs://', 'http://', 'https://')
# Bad records --scan_records lists before it stops.
SCAN_LIMIT = 20


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
    lines = ['error: %s' % errors.one_line(e) for e in self.errors]
    lines += ['note: %s' % n for n in self.notes]
    if self.errors:
      lines.append('%s: %d problem(s); fix them before training.' %
                   (self.path, len(self.errors)))
    else:
      lines.append('%s: OK' % self.path)
    return '\n'.join(lines)


def _is_remote(path):
  return path.startswith(_REMOTE_PREFIXES)


def _placeholder_hint(path, report):
  if _PLACEHOLDER in path:
    return 'replace %s with the real path' % _PLACEHOLDER
  launch_dir = 'paths are relative to the directory you launch from (%s)' % (
      os.getcwd())
  beside_config = os.path.join(os.path.dirname(report.path), path)
  if not os.path.isabs(path) and tf.io.gfile.glob(beside_config):
    return '%s exists next to the config, but %s: write %s' % (
        path, launch_dir, os.path.abspath(beside_config))
  return launch_dir


def _check_model(configs, report):
  meta_architecture = configs['model'].WhichOneof('model')
  if meta_architecture is None:
    report.error('model', 'no model is configured',
                 hint='add model { ssd { ... } }')
    return None
  supported = model_builder.supported_meta_architectures()
  if meta_architecture not in supported:
    report.error('model.%s' % meta_architecture,
                 'meta-architecture %r is not supported yet' %
                 meta_architecture,
                 hint='supported: %s' % ', '.join(supported))
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
                 hint=_placeholder_hint(path, report))
    return
  try:
    label_map = label_map_util.load_labelmap(path)
  except label_map_util.LabelMapError as error:
    report.error(field + '.label_map_path', str(error))
    return
  if not label_map.item:
    report.error(field + '.label_map_path', 'label map %s has no items' % path,
                 hint="add item { id: 1 name: '...' } per class")
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


def _check_input_pattern(pattern, field, report):
  matches = tf.io.gfile.glob(pattern)
  field += '.tf_record_input_reader.input_path'
  if not matches:
    report.error(field, 'no file matches %s' % pattern,
                 hint=_placeholder_hint(pattern, report))
  elif all(tf.io.gfile.isdir(match) for match in matches):
    report.error(field, '%s matches only directories, no TFRecord files' %
                 pattern, hint='give a file pattern such as %s' %
                 os.path.join(matches[0], '*.record*'))
  else:
    files = sorted(match for match in matches
                   if not tf.io.gfile.isdir(match))
    try:
      problem = dataset_builder.no_records_problem(
          repr(pattern), files, dataset_builder.file_sizes(files))
    except errors.UserInputError as error:
      problem = str(error)
    if problem:
      report.error(field, problem)


def _check_input_reader(input_config, field, num_classes, report,
                        train_config=None, check_paths=True,
                        model_config=None, metrics_sets=()):
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
    errors_before = len(report.errors)
    for pattern in paths if check_paths else ():
      if _is_remote(pattern):
        report.note('%s input %s is remote; not checked here.' %
                    (field, pattern))
      else:
        _check_input_pattern(pattern, field, report)
    if (check_paths and len(report.errors) == errors_before and
        not any(_is_remote(pattern) for pattern in paths)):
      _check_mask_type(input_config, field, report)
    _check_decoder_builds(input_config, field, report)
  try:
    inputs.check_input_options(input_config, field, train_config,
                               model_config=model_config,
                               metrics_sets=metrics_sets)
  except config_util.ConfigError as error:
    report.error(error.field, error.problem, hint=error.hint)
  if input_config.max_number_of_boxes < 1:
    report.error(field + '.max_number_of_boxes',
                 'must be at least 1, got %d' %
                 input_config.max_number_of_boxes)
  if check_paths:
    _check_label_map(input_config, field, num_classes, report)


def _check_mask_type(input_config, field, report):
  """An error when the first record's masks are not of mask_type's kind."""
  problem = record_scanner.mask_type_problem(input_config, field)
  if problem:
    report.error(field + '.mask_type', problem[0], hint=problem[1])


# Learning-rate schedule -> (rates that must be > 0, rates that must be
# >= 0, where 0 means "none" or "start from zero").
_SCHEDULE_RATES = {
    'constant_learning_rate': (('learning_rate',), ()),
    'exponential_decay_learning_rate': (
        ('initial_learning_rate',),
        ('burnin_learning_rate', 'min_learning_rate')),
    'manual_step_learning_rate': (('initial_learning_rate',), ()),
    'cosine_decay_learning_rate': (
        ('learning_rate_base',), ('warmup_learning_rate',)),
}


def _check_learning_rate(optimizer_config, report):
  """Refuses zero or negative rates in the optimizer's schedule."""
  kind = optimizer_config.WhichOneof('optimizer')
  if kind is None:
    return
  optimizer = getattr(optimizer_config, kind)
  if not optimizer.HasField('learning_rate'):
    return
  schedule_kind = optimizer.learning_rate.WhichOneof('learning_rate')
  if schedule_kind not in _SCHEDULE_RATES:
    return
  schedule = getattr(optimizer.learning_rate, schedule_kind)
  prefix = 'train_config.optimizer.%s.learning_rate.%s' % (kind, schedule_kind)
  positive, non_negative = _SCHEDULE_RATES[schedule_kind]
  if schedule_kind == 'manual_step_learning_rate' and (
      schedule.warmup or (schedule.schedule and
                          schedule.schedule[0].step == 0)):
    # A warm-up ramps from the initial rate (0 is a ramp from zero); a
    # first step of 0 replaces it before it is used.
    positive, non_negative = (), ('initial_learning_rate',)
  rates = [(name, getattr(schedule, name), True) for name in positive]
  rates += [(name, getattr(schedule, name), False) for name in non_negative]
  if schedule_kind == 'manual_step_learning_rate':
    rates += [('schedule[%d].learning_rate' % index, step.learning_rate, True)
              for index, step in enumerate(schedule.schedule)]
  for name, rate, must_be_positive in rates:
    # NaN or inf would make every loss non-finite from the first step.
    if not math.isfinite(rate) or rate < 0 or (must_be_positive and
                                               rate == 0):
      report.error('%s.%s' % (prefix, name), 'a learning rate must be %s, '
                   'got %g' % ('positive' if must_be_positive else
                               'zero or positive', rate),
                   hint='typical SSD rates are 0.001 to 0.1')


def _check_graph_rewriter(configs, report):
  """Reports what the quantization rewrite will do, or why it cannot."""
  graph_rewriter = configs.get('graph_rewriter_config')
  if graph_rewriter is None:
    return
  try:
    graph_rewriter_builder.build(graph_rewriter, is_training=True)
  except errors.UserInputError as error:
    report.error(None, str(error))  # the message names the field
    return
  quantization = graph_rewriter.quantization
  report.note(
      'graph_rewriter: quantization-aware training, batch norms folded into '
      'the convolutions, weights and activations fake-quantized to %d/%d '
      'bits (ranges learned from step 0, applied from step %d: '
      'quantization.delay); evaluation and exports use the learned ranges, '
      'export_tflite_ssd_graph --convert writes a uint8 .tflite.' % (
          quantization.weight_bits, quantization.activation_bits,
          quantization.delay))


def _check_train_config(train_config, report, check_paths=True):
  if train_config.batch_size < 1:
    report.error('train_config.batch_size',
                 'must be at least 1, got %d' % train_config.batch_size)
  _check_train_builds(train_config, report)
  if train_config.HasField('optimizer'):
    _check_learning_rate(train_config.optimizer, report)
  checkpoint = train_config.fine_tune_checkpoint
  kind = train_config.fine_tune_checkpoint_type
  if kind not in FINE_TUNE_CHECKPOINT_TYPES:
    report.error('train_config.fine_tune_checkpoint_type',
                 'unknown type %r' % kind,
                 hint='one of "classification", "detection", "full"')
  if not checkpoint or not check_paths:
    return
  if _is_remote(checkpoint):
    report.note('fine_tune_checkpoint %s is remote; not checked here.' %
                checkpoint)
    return
  if tf.io.gfile.isdir(checkpoint) and tf.train.latest_checkpoint(checkpoint):
    # A folder: fine-tuning reads its latest checkpoint.
    checkpoint = tf.train.latest_checkpoint(checkpoint)
  if not tf.io.gfile.exists(checkpoint + '.index'):
    hint = _placeholder_hint(checkpoint, report)
    if _PLACEHOLDER in checkpoint:
      hint += (', or train from scratch: --hparams_overrides='
               'train_config.fine_tune_checkpoint=""')
    if tf.io.gfile.isdir(checkpoint):
      hint = ('give the checkpoint prefix, e.g. %s' %
              os.path.join(checkpoint, 'model.ckpt'))
    elif checkpoint.endswith(('.index', '.meta')) or '.data-' in checkpoint:
      hint = 'give the prefix without the .index/.data/.meta suffix'
    report.error('train_config.fine_tune_checkpoint',
                 'no checkpoint at %s (%s.index not found)' %
                 (checkpoint, checkpoint), hint=hint)
  elif checkpoint_health.problem(checkpoint):
    report.error('train_config.fine_tune_checkpoint',
                 'checkpoint %s is damaged: %s' % (
                     checkpoint, checkpoint_health.problem(checkpoint)),
                 hint='download or copy it again')


# What builders raise for an option they cannot honour: a UserInputError,
# or the ValueError of a constructor refusing a value (an unknown feature
# extractor type, a learning rate below its warm-up rate). A TypeError or
# KeyError is a bug in a builder and keeps its traceback.
_BUILD_ERRORS = (ValueError,)


def _check_builds(field, build, report):
  """Reports, under `field`, the error `build()` raises, if any."""
  try:
    with tf.Graph().as_default():
      build()
  except _BUILD_ERRORS as error:
    report.error(field, 'cannot be built: %s' % error)


def _check_model_builds(model_config, report):
  """Builds the detection model object, naming unsupported options."""
  _check_builds('model', lambda: model_builder.build(
      model_config, is_training=True), report)


def _check_train_builds(train_config, report):
  """Builds the optimizer and augmentation steps of a TrainConfig."""
  if train_config.HasField('optimizer'):
    _check_builds('train_config.optimizer', lambda: optimizer_builder.build(
        train_config.optimizer), report)
  for index, step in enumerate(train_config.data_augmentation_options):
    _check_builds('train_config.data_augmentation_options[%d]' % index,
                  lambda step=step: preprocessor_builder.build(step), report)


def _check_decoder_builds(input_config, field, report):
  """Builds an input's decoder (its label map file is checked apart).

  A tf.Example decoder is built without the label map. A tf.SequenceExample
  decoder needs one, so it is built only when the label map is readable
  here: a missing or remote one is _check_label_map's to report.
  """
  config = type(input_config)()
  config.CopyFrom(input_config)
  if config.input_type != input_reader_pb2.TF_SEQUENCE_EXAMPLE:
    config.ClearField('label_map_path')
  elif config.label_map_path and (_is_remote(config.label_map_path) or
                                  not tf.io.gfile.exists(
                                      config.label_map_path)):
    return
  _check_builds(field, lambda: decoder_builder.build(config), report)


def _check_eval_config(eval_config, report):
  if eval_config.batch_size < 1:
    report.error('eval_config.batch_size',
                 'must be at least 1, got %d' % eval_config.batch_size)
  for name in eval_config.metrics_set:
    try:
      metric_sets.check_metrics_set(name)
    except config_util.ConfigError as error:
      report.error(error.field, error.problem, hint=error.hint)
  for error in eval_util.eval_config_errors(eval_config):
    report.error(error.field, error.problem, hint=error.hint)


def validate(pipeline_config_path, config_override=None, tpu_options=None,
             scan_records=False):
  """Checks a pipeline config; returns a Report (no exception on bad input).

  Args:
    pipeline_config_path: the pipeline.config file.
    config_override: text proto merged on top of it.
    tpu_options: a tpu_check.TpuOptions to also check the TPU training
      step, or None.
    scan_records: also read every input record (see _scan_records).
  """
  report = Report(pipeline_config_path)
  dropped = []
  try:
    pipeline_config = config_util.read_pipeline_config(
        pipeline_config_path, config_override, dropped)
  except config_util.ConfigError as error:
    report.errors.append(error)
    return report
  if not pipeline_config.ListFields():
    report.error(None, 'the config sets no fields (the file is empty or '
                 'holds only comments)',
                 hint='a pipeline.config needs at least model, '
                 'train_config and train_input_reader')
    return report
  configs = config_util.create_configs_from_pipeline_proto(pipeline_config)
  for warning in dropped:
    report.note(warning)
  check_configs(configs, report)
  if tpu_options is not None:
    tpu_check.check(configs, tpu_options, report)
  if scan_records:
    _scan_records(configs, report)
  return report


def _scan_records(configs, report):
  """Adds an error per bad input record (record_scanner.scan) to report.

  Skipped when the config already has problems: the inputs or num_classes
  the records are checked against may be what is wrong.
  """
  if report.errors:
    report.note('--scan_records: records not scanned; fix the problems '
                'above first.')
    return
  result = record_scanner.scan(configs, limit=SCAN_LIMIT)
  for problem in result.problems:
    report.error(None, problem, hint='fix or drop that record')
  if result.stopped:
    report.note('--scan_records stopped at %d bad records (after %d '
                'records); more may follow.' % (SCAN_LIMIT, result.records))
  else:
    report.note('--scan_records read %d records: %d bad.' % (
        result.records, len(result.problems)))


def check_configs(configs, report, check_train_input_paths=True,
                  check_eval_input_paths=True, command=None):
  """Runs every check but the TPU one on a configs dict, into `report`.

  The training commands run this on their merged configs before launch.

  Args:
    configs: the configs dict of config_util (after any overrides).
    report: the Report to add errors and notes to.
    check_train_input_paths: whether the files training reads must exist:
      train_input_reader's input files and label map and train_config's
      fine_tune_checkpoint (an evaluation-only job reads none of them).
    check_eval_input_paths: whether the eval_input_readers' input files and
      label maps must exist (a parameter server reads no input).
    command: the command about to run, for config_notes.notes.
  """
  errors_before = len(report.errors)
  num_classes = _check_model(configs, report)
  if len(report.errors) == errors_before and num_classes is not None:
    _check_model_builds(configs['model'], report)
  _check_train_config(configs['train_config'], report,
                      check_paths=check_train_input_paths)
  _check_graph_rewriter(configs, report)
  _check_input_reader(configs['train_input_config'], 'train_input_reader',
                      num_classes, report, train_config=configs['train_config'],
                      check_paths=check_train_input_paths,
                      model_config=configs['model'])
  if not configs['eval_input_configs'] and command is None:
    report.note('no eval_input_reader: model_main will train without '
                'evaluating.')
  for index, eval_input in enumerate(configs['eval_input_configs']):
    _check_input_reader(eval_input, 'eval_input_reader[%d]' % index,
                        num_classes, report,
                        check_paths=check_eval_input_paths,
                        model_config=configs['model'],
                        metrics_sets=configs['eval_config'].metrics_set)
  _check_eval_config(configs['eval_config'], report)
  for note in config_notes.notes(configs, command):
    report.note(note)
