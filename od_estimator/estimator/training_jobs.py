"""What the training commands run: training, train_and_evaluate, evaluation.

model_main and model_main_tf2 (and model_tpu_main's training) describe
their run with a Job built from their flags, and share the rest: the
Estimator and inputs built from the pipeline config (checked first), the
progress and preemption hooks, continuous evaluation of a checkpoint
folder, and the metrics printed at the end.
"""
import dataclasses
import functools
import glob
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util
from od_estimator.estimator import keep_best
from od_estimator.estimator import model_lib
from od_estimator.estimator import preemption
from od_estimator.estimator import progress
from od_estimator.utils import checkpoint_health
from od_estimator.utils import interrupts
from od_estimator.utils import quiet_output


# An export's entries (the exporters'), never a training's.
_NOT_CHECKPOINTS = ('saved_model', 'frozen_inference_graph.pb')


@dataclasses.dataclass(frozen=True)
class Job:
  """A training command's flags that say what to run (see model_main).

  Attributes:
    pipeline_config_path: the pipeline.config.
    num_train_steps: overrides train_config.num_steps when set.
    sample_1_of_n_eval_examples: evaluation sampling; None keeps the
      config's.
    sample_1_of_n_eval_on_train_examples: sampling of the training data
      when it is evaluated.
    hparams_overrides: 'name=value,...' overrides, or None.
    checkpoint_dir: evaluate its checkpoints only (no training).
    eval_training_data: evaluate the training data, not the eval input.
    run_once: evaluate the latest checkpoint once, not continuously.
    max_eval_retries: evaluations retried after an error.
    eval_timeout_secs: stop continuous evaluation after this long without
      a new checkpoint (None: wait forever).
    resume_from_last_good: skip a damaged last checkpoint (see
      checkpoint_health).
    log_every_n_steps: progress line interval (0: none).
    eval_name: the Estimator's name of the evaluation of the eval input
      (events in model_dir/eval_<name>; None: model_dir/eval).
    bfloat16: --bfloat16 (see estimator/cpu_bfloat16.py).
    keep_best_options: keep_best.Options of --keep_best_by, or None.
    eval_plots: --eval_plots (see metrics/eval_plots.py).
  """
  pipeline_config_path: str
  num_train_steps: Optional[int] = None
  sample_1_of_n_eval_examples: Optional[int] = 1
  sample_1_of_n_eval_on_train_examples: int = 5
  hparams_overrides: Optional[str] = None
  checkpoint_dir: Optional[str] = None
  eval_training_data: bool = False
  run_once: bool = False
  max_eval_retries: int = 0
  eval_timeout_secs: Optional[int] = None
  resume_from_last_good: bool = False
  log_every_n_steps: int = 100
  eval_name: Optional[str] = 'validation_data'
  bfloat16: bool = False
  keep_best_options: Optional[keep_best.Options] = None
  eval_plots: bool = False


def checkpoint_to_evaluate(job):
  """The checkpoint of job.checkpoint_dir evaluated first (checked), or
  None when it has none yet or the job trains.

  Its checkpoints are ours (model.ckpt-N) or the original TF2 trainer's
  (ckpt-N); see object_based_evaluation.

  Raises:
    errors.UserInputError: job.checkpoint_dir is a checkpoint, not its
      folder, or holds neither kind (checkpoint files no `checkpoint` state
      file names, an export), or its latest checkpoint is damaged.
  """
  if not job.checkpoint_dir:
    return None
  _check_checkpoint_folder(job.checkpoint_dir)
  return checkpoint_health.resume_point(
      job.checkpoint_dir, '--checkpoint_dir', job.resume_from_last_good,
      evaluating=True)


def _check_checkpoint_folder(directory):
  """Refuses a --checkpoint_dir that can never give a checkpoint to evaluate.

  An empty or missing folder is fine: evaluation waits for the training
  to write there (up to --eval_timeout).
  """
  flag = '--checkpoint_dir=%s' % directory
  if tf.io.gfile.exists(directory + '.index'):
    raise errors.UserInputError(
        '%s is a checkpoint; --checkpoint_dir takes the folder holding it '
        '(%s), whose checkpoints are evaluated as they appear.' % (
            flag, os.path.dirname(directory) or '.'))
  if not tf.io.gfile.isdir(directory) or tf.train.latest_checkpoint(
      directory):
    return
  found = [name for name in _NOT_CHECKPOINTS
           if tf.io.gfile.exists(os.path.join(directory, name))]
  indexes = tf.io.gfile.glob(os.path.join(glob.escape(directory), '*.index'))
  if indexes:
    found.append('%s without the `checkpoint` state file naming the latest '
                 'checkpoint (copy it along)' % os.path.basename(indexes[0]))
  if found:
    raise errors.UserInputError(
        '%s holds neither our checkpoints (model.ckpt-N) nor the TF2 '
        "trainer's (ckpt-N) with their `checkpoint` state file, but %s. "
        'Point it at the folder a training writes.' % (
            flag, ', '.join(found)))


def build(job, run_config, check, checkpoint=None, writes_model_dir=True,
          **kwargs):
  """The Estimator and inputs of create_estimator_and_inputs for `job`.

  Args:
    job: the Job.
    run_config: the RunConfig.
    check: fn(configs, pipeline_config_path, evaluation_only) raising to
      refuse the launch before anything is built (the commands pass
      checks.launch_check.check).
    checkpoint: the checkpoint evaluated first (checkpoint_to_evaluate).
    writes_model_dir: a training job's chief: check the checkpoint it
      resumes from and write the as-run pipeline.config.
    **kwargs: more arguments of create_estimator_and_inputs.
  """
  return model_lib.create_estimator_and_inputs(
      run_config=run_config,
      hparams=config_util.parse_hparams_overrides(job.hparams_overrides or
                                                  ''),
      pipeline_config_path=job.pipeline_config_path,
      train_steps=job.num_train_steps,
      sample_1_of_n_eval_examples=job.sample_1_of_n_eval_examples,
      sample_1_of_n_eval_on_train_examples=(
          job.sample_1_of_n_eval_on_train_examples),
      save_final_config=writes_model_dir and job.checkpoint_dir is None,
      resume_from_last_good=job.resume_from_last_good,
      evaluated_checkpoint=checkpoint, checkpoint_dir=job.checkpoint_dir,
      bfloat16=job.bfloat16, eval_plots=job.eval_plots,
      check_configs=functools.partial(
          check, pipeline_config_path=job.pipeline_config_path,
          evaluation_only=bool(job.checkpoint_dir) and
          not job.eval_training_data),
      **kwargs)


def _training_hooks(job, parts, preemption_hook):
  hooks = [preemption_hook] if preemption_hook else []
  if job.log_every_n_steps:
    hooks.insert(0, progress.ProgressHook(job.log_every_n_steps,
                                          parts['train_steps']))
  return hooks


def train_on_tpu(job, parts):
  """train() with TPUEstimator: its own lines tell the loss and speed, no
  ProgressHook (the hooks run once per --iterations_per_loop steps, where
  the loss is inside the TPU computation)."""
  quiet_output.keep_tf_lines('loss = ', 'global_step/sec: ')
  train(dataclasses.replace(job, log_every_n_steps=0), parts)


def train(job, parts):
  """Trains to the last step without evaluating.

  Raises:
    preemption.TrainingPreempted: a signal stopped training once its
      checkpoint was saved.
  """
  estimator = parts['estimator']
  preemption_hook = preemption.PreemptionHook(estimator.model_dir)
  try:
    estimator.train(input_fn=parts['train_input_fn'],
                    max_steps=parts['train_steps'],
                    hooks=_training_hooks(job, parts, preemption_hook),
                    saving_listeners=[preemption_hook.saving_listener()])
  finally:
    preemption_hook.restore_handlers()


def train_and_evaluate(job, parts, throttle_secs=0, preemptible=True):
  """tf.estimator.train_and_evaluate of the first eval input.

  Args:
    job: the Job.
    parts: build's result.
    throttle_secs: least seconds between two evaluations.
    preemptible: a signal saves a checkpoint first (PreemptionHook); off
      under a multi-worker strategy, whose Estimator takes no saving
      listeners.

  Returns:
    train_and_evaluate's (metrics, exports) on the chief.

  Raises:
    preemption.TrainingPreempted: a signal stopped training once its
      checkpoint was saved (no evaluation and export follow).
  """
  if parts['estimator'].config.task_type == 'ps':
    # Serves until stopped: a signal must end it (see interrupts).
    interrupts.end_process_on_signals()
  preemption_hook = preemption.PreemptionHook(
      parts['estimator'].model_dir,
      parts['configs']['eval_config'].batch_size or 1) if preemptible else None
  train_spec, eval_specs = model_lib.create_train_and_eval_specs(
      parts['train_input_fn'], parts['eval_input_fns'],
      parts['eval_on_train_input_fn'], parts['predict_input_fn'],
      parts['train_steps'], eval_on_train_data=False,
      exporters=_best_exporters(job, parts),
      hooks=_training_hooks(job, parts, preemption_hook),
      throttle_secs=throttle_secs,
      saving_listeners=([preemption_hook.saving_listener()]
                        if preemption_hook else None),
      eval_hooks=([preemption_hook.evaluation_hook()]
                  if preemption_hook else None))
  try:
    return tf.estimator.train_and_evaluate(parts['estimator'], train_spec,
                                           eval_specs[0])
  finally:
    if preemption_hook:
      preemption_hook.restore_handlers()


def _keeper(job, parts):
  """The run's keep_best.BestKeeper, or None."""
  return keep_best.keeper(job.keep_best_options, parts['estimator'].model_dir,
                          parts['configs'])


def _best_exporters(job, parts):
  keeper = _keeper(job, parts)
  return [keep_best.BestExporter(keeper)] if keeper else []


def evaluate(job, parts, checkpoint):
  """Evaluates job.checkpoint_dir; a signal stops it, saying how far it got.

  Returns:
    The metrics of the last evaluation (None when none was made).
  """
  progress_hook = preemption.EvaluationProgress(
      parts['configs']['eval_config'].batch_size or 1)
  try:
    return _evaluate_checkpoints(job, parts, checkpoint, [progress_hook])
  except interrupts.Interrupted as stop:
    if progress_hook.running:
      stop.add(progress_hook.describe())
    raise stop.add('nothing in --checkpoint_dir=%s was changed' %
                   job.checkpoint_dir)


def _evaluate_checkpoints(job, parts, checkpoint, hooks):
  """Evaluates `checkpoint` (run_once) or each new one; returns metrics."""
  estimator = parts['estimator']
  if job.eval_training_data:
    name, input_fn = 'training_data', parts['eval_on_train_input_fn']
  else:
    name, input_fn = job.eval_name, parts['eval_input_fns'][0]
  keeper = _keeper(job, parts)
  if job.run_once:
    if not checkpoint:
      raise errors.UserInputError('no checkpoint in --checkpoint_dir=%s' %
                                  job.checkpoint_dir)
    metrics = estimator.evaluate(input_fn, steps=None, hooks=hooks,
                                 checkpoint_path=checkpoint, name=name)
    if keeper:
      keeper.update(metrics, checkpoint)
    return metrics
  return model_lib.continuous_eval(
      estimator, job.checkpoint_dir, input_fn, parts['train_steps'], name,
      job.max_eval_retries, timeout_secs=job.eval_timeout_secs,
      hooks=hooks, skip_damaged=job.resume_from_last_good,
      on_evaluated=keeper.update if keeper else None)


def print_metrics(result):
  """Prints every scalar the evaluation returned, one per line, on stdout.

  Whatever the metrics family (COCO, PASCAL, Open Images, masks, every
  model's losses): only global_step, which heads the list, and non-scalar
  values are left out.
  """
  metrics = result[0] if isinstance(result, tuple) else result
  if not isinstance(metrics, dict):
    return
  print('Evaluation at step %s:' % metrics.get('global_step'))
  for name in sorted(metrics):
    value = np.asarray(metrics[name])
    if name != 'global_step' and value.ndim == 0 and (
        value.dtype.kind in 'biuf'):
      print('  %-50s %.4f' % (name, value))
