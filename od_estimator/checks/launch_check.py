"""The check the training commands run before they touch --model_dir.

model_main and model_tpu_main pass `check` to
model_lib.create_estimator_and_inputs, which calls it on the configs as they
will run (after --hparams_overrides, --num_train_steps, --train_batch_size)
and before it builds the Estimator or writes the as-run pipeline.config. It
runs the checks of `od-estimator validate` (without --check_tpu), prints
their notes, and stops the launch on any problem, so a bad glob, a zero
batch size or a label map beyond num_classes is reported in one go instead
of as a traceback once training has started, and a failed launch leaves the
pipeline.config of the last good run in --model_dir.
"""
import json
import os
import sys

from od_estimator import errors
from od_estimator.checks import config_check

# As the original: no step limit trains until the job is stopped.
_UNBOUNDED_TRAINING = ('train_config.num_steps is 0%s: training runs until '
                       'stopped.')


def check(configs, pipeline_config_path, evaluation_only=False,
          stream=None, command=None):
  """Checks merged configs before launch: prints notes, raises on problems.

  A training job without a step limit (train_config.num_steps 0, no
  --num_train_steps) gets a note saying it runs until stopped.

  Args:
    configs: the configs dict of config_util, with every override applied.
    pipeline_config_path: the --pipeline_config_path the configs came from,
      named in the messages.
    evaluation_only: the job only evaluates: the training input files and
      the fine-tune checkpoint need not exist. So does a TF_CONFIG
      cluster's evaluator task; a parameter server reads no input files at
      all.
    stream: where `note:` lines go; None for stderr.
    command: the command launching, for config_notes.notes (None:
      model_main's).

  Raises:
    errors.UserInputErrors: one problem per error `validate` reports, then
      a line saying --model_dir was left as it was.
  """
  report = config_check.Report(pipeline_config_path)
  task_type = _cluster_task_type()
  trains = not evaluation_only and task_type not in ('evaluator', 'ps')
  config_check.check_configs(
      configs, report, check_train_input_paths=trains,
      check_eval_input_paths=task_type != 'ps', command=command)
  if trains and not configs['train_config'].num_steps:
    report.note(_UNBOUNDED_TRAINING % (
        '' if command == 'legacy_train' else
        ' and --num_train_steps is not set'))
  stream = stream or sys.stderr
  for note in report.notes:
    print('note: %s' % note, file=stream)
  if report.errors:
    raise errors.UserInputErrors(report.errors + [
        '%s: %d problem(s) in the config as it would run (the file with '
        '--hparams_overrides and the other flags applied); nothing was '
        'written to --model_dir. Fix them and relaunch (`od-estimator '
        'validate --pipeline_config_path=%s` checks the file alone).' % (
            pipeline_config_path, len(report.errors), pipeline_config_path)])


def _cluster_task_type():
  """This process's task type in a TF_CONFIG cluster, or None outside one."""
  try:
    task = json.loads(os.environ.get('TF_CONFIG') or '{}').get('task') or {}
  except (ValueError, AttributeError):
    # RunConfig reports a malformed TF_CONFIG itself.
    return None
  return task.get('type')
