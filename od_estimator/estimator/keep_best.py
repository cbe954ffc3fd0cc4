"""Keeps the best evaluated checkpoint by one metric (--keep_best_by).

After each evaluation the training commands hand its metrics and the
evaluated checkpoint to a BestKeeper. When the metric beats the kept one,
the checkpoint's files are copied (hard-linked where possible) into
model_dir/best/, with

  best.json        {"step", "metric", "value", "higher_is_better",
                    "checkpoint", "files", "metrics"}: the kept
                    checkpoint and every scalar of its evaluation.
  checkpoint       the state file naming it (tf.train.latest_checkpoint
                   and export_inference_graph take the folder).
  pipeline.config  the as-run config it was trained with.

and, when asked, exported to model_dir/export/best/<step>/ as
export_inference_graph exports (saved_model/, frozen_inference_graph.pb,
model.ckpt.*, pipeline.config; image_tensor input); the export of the
previous best is removed once the new one is complete.

A killed job never leaves a half-kept model: each file is written under a
temporary name and renamed; best.json, written once the checkpoint's files
are all in place, is what says which checkpoint is kept, and the next
keeper removes what a killed one left beside it. A resumed job reads
best.json back, so a worse checkpoint never replaces a better one kept
before the restart.
"""
import dataclasses
import json
import math
import os
import re
from typing import Callable, Optional

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util
from od_estimator.utils import checkpoint_health
from od_estimator.utils import file_safety

BEST_FOLDER = 'best'
BEST_JSON = 'best.json'
# Where the Estimator puts an exporter named 'best': model_dir/export/best.
EXPORTER_NAME = 'best'

# Metrics whose names say which way is better.
_LOWER_IS_BETTER = re.compile(r'loss', re.IGNORECASE)
_HIGHER_IS_BETTER = re.compile(
    r'precision|recall|accuracy|corloc|\bm?AP\b|m?AP@|AR@', re.IGNORECASE)
# A checkpoint's files in the best folder: PREFIX.index, .data-*, .meta.
_CHECKPOINT_FILE = re.compile(r'\.(index|data-\d+-of-\d+|meta)$')


@dataclasses.dataclass(frozen=True)
class Options:
  """What --keep_best_by and its companion flags ask for.

  Attributes:
    metric: the evaluation metric to keep the best checkpoint by.
    higher_is_better: its direction; None tells it by the metric's name.
    export_fn: None, or how to export the kept checkpoint to
      export/best/<step>/: fn(pipeline_config, checkpoint prefix, output
      directory), export_inference_graph's export (the commands hand in
      export.exporter.export_for_serving; the export floor is above this
      one).
  """
  metric: str
  higher_is_better: Optional[bool] = None
  export_fn: Optional[Callable[..., None]] = None


def new_flags():
  """The --keep_best_* flags; a command defines each with flags.DEFINE_flag
  (as its own: its --help lists them)."""
  return [
      flags.Flag(
          flags.ArgumentParser(), flags.ArgumentSerializer(), 'keep_best_by',
          None, 'Keep the best evaluated checkpoint by this metric, any '
          'scalar the evaluation writes (e.g. DetectionBoxes_Precision/mAP, '
          'Loss/total_loss): its files go to model_dir/best/ with best.json '
          '(step, metric, value). A relaunch keeps comparing with it.'),
      flags.BooleanFlag(
          'keep_best_higher_is_better', None, 'With --keep_best_by: whether '
          'a higher value is better. Default: by the name (losses lower; '
          'precision, recall, AP, AR higher); required for other metrics.'),
      flags.BooleanFlag(
          'keep_best_export', False, 'With --keep_best_by: also export each '
          'new best checkpoint to model_dir/export/best/<step>/ as '
          'export_inference_graph does (image_tensor input); the previous '
          "best's export is then removed."),
  ]


def options_from_flags(flag_values, export_fn, evaluates=True, why_not=''):
  """Options of the --keep_best_* flags, or None without --keep_best_by.

  Args:
    flag_values: the parsed absl FLAGS.
    export_fn: Options.export_fn, used with --keep_best_export.
    evaluates: whether the run evaluates (else a --keep_best_by is an
      error saying `why_not`).
    why_not: what to do instead, for the error.

  Raises:
    errors.UserInputError: a companion flag without --keep_best_by, or
      --keep_best_by in a run without evaluations, or a metric whose
      direction its name does not tell.
  """
  if not flag_values.keep_best_by:
    companions = [name for name in ('keep_best_higher_is_better',
                                    'keep_best_export')
                  if flag_values[name].present]
    if companions:
      raise errors.UserInputError(
          '--%s needs --keep_best_by=METRIC.' % ' --'.join(companions))
    return None
  if not evaluates:
    raise errors.UserInputError(
        '--keep_best_by=%s keeps the best evaluated checkpoint, but this run '
        'does not evaluate; %s' % (flag_values.keep_best_by, why_not))
  options = Options(flag_values.keep_best_by,
                    flag_values.keep_best_higher_is_better,
                    export_fn if flag_values.keep_best_export else None)
  higher_is_better(options)
  return options


def higher_is_better(options):
  """Whether a higher value of options.metric is better.

  Raises:
    errors.UserInputError: options.higher_is_better is None and the
      metric's name does not tell.
  """
  if options.higher_is_better is not None:
    return options.higher_is_better
  if _LOWER_IS_BETTER.search(options.metric):
    return False
  if _HIGHER_IS_BETTER.search(options.metric):
    return True
  raise errors.UserInputError(
      '--keep_best_by=%s: its name does not tell whether higher or lower is '
      'better (losses are lower; precision, recall, AP and AR higher). Add '
      '--keep_best_higher_is_better or --nokeep_best_higher_is_better.' %
      options.metric)


def scalar_metrics(metrics):
  """{name: float} of the scalar numbers of an evaluation's result."""
  scalars = {}
  for name, value in metrics.items():
    value = np.asarray(value)
    if value.ndim == 0 and value.dtype.kind in 'biuf':
      scalars[name] = float(value)
  return scalars


def read_best(model_dir):
  """model_dir/best/best.json as a dict, or None when nothing is kept."""
  path = os.path.join(model_dir, BEST_FOLDER, BEST_JSON)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


class BestKeeper:
  """Keeps the best checkpoint of a run's evaluations in model_dir/best/."""

  def __init__(self, options, model_dir, pipeline_config):
    """Checks the options against what model_dir/best already keeps.

    Args:
      options: the Options.
      model_dir: the command's --model_dir.
      pipeline_config: the as-run TrainEvalPipelineConfig (kept beside the
        checkpoint, and exported).

    Raises:
      errors.UserInputError: the metric's direction is unknown, or
        model_dir/best keeps a checkpoint by another metric or direction.
    """
    self._options = options
    self._higher = higher_is_better(options)
    self._model_dir = model_dir
    self._best_dir = os.path.join(model_dir, BEST_FOLDER)
    self._pipeline_config = pipeline_config
    self._tidied = False
    kept = read_best(model_dir)
    if kept and (kept['metric'], kept['higher_is_better']) != (
        options.metric, self._higher):
      raise errors.UserInputError(
          '--keep_best_by=%s (%s is better): %s keeps the checkpoint of step '
          '%d by %s (%s is better). Keep by that metric, or move that folder '
          'away to start anew.' % (
              options.metric, _direction(self._higher), self._best_dir,
              kept['step'], kept['metric'],
              _direction(kept['higher_is_better'])))

  @property
  def best_dir(self):
    return self._best_dir

  def update(self, metrics, checkpoint):
    """Keeps `checkpoint` when its metrics beat the kept one's.

    Args:
      metrics: the evaluation's result (with global_step).
      checkpoint: the evaluated checkpoint's prefix.

    Returns:
      Whether `checkpoint` is now the kept one.

    Raises:
      errors.UserInputError: the evaluation writes no scalar of that name
        (the message lists those it writes).
    """
    scalars = scalar_metrics(metrics)
    scalars.pop('global_step', None)
    metric = self._options.metric
    if metric not in scalars:
      raise errors.UserInputError(
          '--keep_best_by=%s: the evaluation writes no such metric. It '
          'writes: %s.' % (metric, ', '.join(sorted(scalars))))
    if not self._tidied:
      self._tidy()
    value = scalars[metric]
    step = int(np.asarray(metrics[tf.compat.v1.GraphKeys.GLOBAL_STEP]))
    kept = read_best(self._model_dir)
    if math.isnan(value) or (kept and not self._better(value, kept['value'])):
      logging.info('%s %s at step %d; the best stays step %s (%s).', metric,
                   value, step, kept and kept['step'], kept and kept['value'])
      self._export_if_asked(kept)
      return False
    try:
      record = self._keep(checkpoint, step, value, scalars)
    except tf.errors.NotFoundError as error:
      # Rotated away (keep_checkpoint_max) before it could be copied.
      logging.warning('Could not keep %s as the best (%s %s): %s', checkpoint,
                      metric, value, error)
      return False
    logging.info('Kept %s as the best (%s %s) in %s.', checkpoint, metric,
                 value, self._best_dir)
    self._export_if_asked(record)
    return True

  def _better(self, value, kept_value):
    return value > kept_value if self._higher else value < kept_value

  def _keep(self, checkpoint, step, value, scalars):
    """Copies the checkpoint in, then commits it in best.json; its record."""
    sources = [path for path in tf.io.gfile.glob(checkpoint + '.*')
               if _CHECKPOINT_FILE.search(path)]
    if not any(path.endswith('.index') for path in sources):
      raise tf.errors.NotFoundError(None, None, checkpoint + '.index')
    tf.io.gfile.makedirs(self._best_dir)
    files = sorted(os.path.basename(path) for path in sources)
    for source, name in zip(sorted(sources), files):
      file_safety.copy_file(source, os.path.join(self._best_dir, name))
    config_util.save_pipeline_config(self._pipeline_config, self._best_dir)
    record = {'step': step, 'metric': self._options.metric, 'value': value,
              'higher_is_better': self._higher,
              'checkpoint': os.path.basename(checkpoint), 'files': files,
              'metrics': scalars}
    file_safety.write_file(os.path.join(self._best_dir, BEST_JSON),
                           json.dumps(record, indent=2, sort_keys=True) + '\n')
    self._tidy()
    return record

  def _tidy(self):
    """Points the state file at the kept checkpoint; removes every other
    checkpoint file and what a killed keeper left."""
    self._tidied = True
    kept = read_best(self._model_dir)
    if not tf.io.gfile.isdir(self._best_dir):
      return
    if kept:
      file_safety.write_file(
          os.path.join(self._best_dir, checkpoint_health.STATE_FILE),
          'model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' %
          (kept['checkpoint'], kept['checkpoint']))
    keep = set(kept['files']) if kept else set()
    for name in tf.io.gfile.listdir(self._best_dir):
      if name.startswith(file_safety.TEMP_PREFIX) or (
          _CHECKPOINT_FILE.search(name) and name not in keep):
        file_safety.remove(os.path.join(self._best_dir, name), self._best_dir)

  def _export_if_asked(self, record):
    """Exports the kept checkpoint unless its export is there already."""
    if not (self._options.export_fn and record):
      return
    root = os.path.join(self._model_dir, 'export', EXPORTER_NAME)
    target = os.path.join(root, str(record['step']))
    if not tf.io.gfile.exists(os.path.join(target, 'saved_model',
                                           'saved_model.pb')):
      self._options.export_fn(
          self._pipeline_config,
          os.path.join(self._best_dir, record['checkpoint']), target)
      logging.info('Exported the best checkpoint (step %d) to %s.',
                   record['step'], target)
    for name in tf.io.gfile.listdir(root):
      if name.rstrip('/') != str(record['step']):
        file_safety.remove(os.path.join(root, name.rstrip('/')), root)


def _direction(higher):
  return 'higher' if higher else 'lower'


class BestExporter(tf.estimator.Exporter):
  """The keeper as an exporter of train_and_evaluate's EvalSpec: it sees
  each evaluation's result and checkpoint."""

  def __init__(self, keeper):
    self._keeper = keeper

  @property
  def name(self):
    return EXPORTER_NAME

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del estimator, export_path, is_the_final_export  # The keeper's own.
    self._keeper.update(eval_result, checkpoint_path)
    return self._keeper.best_dir


def keeper(options, model_dir, configs):
  """A BestKeeper for `options` (None: None), from the run's configs."""
  if options is None:
    return None
  return BestKeeper(options, model_dir,
                    config_util.create_pipeline_proto_from_configs(configs))
