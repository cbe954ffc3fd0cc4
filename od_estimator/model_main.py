r"""Trains and evaluates a detector with tf.estimator, as the original did.

Train and evaluate (train_and_evaluate; TF_CONFIG clusters work as usual):

  python -m od_estimator.model_main \
      --pipeline_config_path=PATH/pipeline.config --model_dir=TRAIN_DIR \
      --num_train_steps=50000 --sample_1_of_n_eval_examples=1

Evaluate only, each new checkpoint (or once with --run_once):

  python -m od_estimator.model_main --pipeline_config_path=... \
      --model_dir=EVAL_DIR --checkpoint_dir=TRAIN_DIR [--run_once]

Relaunching the same command after a crash resumes from the last
checkpoint in --model_dir. A damaged last checkpoint (truncated or missing
files) stops the launch with one line naming it and the last intact one;
--resume_from_last_good then resumes from (or evaluates) the intact one.
SIGTERM (a preemptible VM or Cloud TPU being stopped) or Ctrl-C first saves
a checkpoint at the current step, then exits (status 0 after SIGTERM, 130
after Ctrl-C) without evaluating; during an evaluation it stops the
evaluation at once (no metrics are written for it), with the same statuses
in train_and_evaluate and 143 / 130 when evaluating only.

--keep_best_by=METRIC (e.g. DetectionBoxes_Precision/mAP) keeps the best
evaluated checkpoint in MODEL_DIR/best/ (best.json: step, metric, value),
also across relaunches; --keep_best_export exports it to
MODEL_DIR/export/best/<step>/ as export_inference_graph does.

Clusters: run the train-and-evaluate command on every machine with its
TF_CONFIG (chief, workers, ps, evaluator); each training task reads its
share of the input files. Parameter servers serve until stopped: SIGTERM
or Ctrl-C ends one at once. Several GPUs of one machine: add --num_gpus=N
(MirroredStrategy).
"""

from absl import flags
import tensorflow as tf

from od_estimator import command_line
from od_estimator.checks import launch_check
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import keep_best
from od_estimator.estimator import model_lib
from od_estimator.estimator import preemption
from od_estimator.estimator import progress
from od_estimator.estimator import training_jobs
from od_estimator.estimator import xla
from od_estimator.export import exporter
from od_estimator.metrics import eval_plots
from od_estimator.utils import flag_checks

# An evaluator task polls for new checkpoints this often by default.
_EVALUATOR_THROTTLE_SECS = 30

flags.DEFINE_string('model_dir', None, 'Path to output model directory where '
                    'event and checkpoint files will be written.')
flags.DEFINE_string('pipeline_config_path', None, 'Path to pipeline config '
                    'file.')
flags.DEFINE_integer('num_train_steps', None, 'Number of train steps.')
flags.DEFINE_boolean('eval_training_data', False,
                     'If training data should be evaluated for this job. Note '
                     'that one call only use this in eval-only mode, and '
                     '`checkpoint_dir` must be supplied.')
flags.DEFINE_integer('sample_1_of_n_eval_examples', 1, 'Will sample one of '
                     'every n eval input examples, where n is provided.')
flags.DEFINE_integer('sample_1_of_n_eval_on_train_examples', 5, 'Will sample '
                     'one of every n train input examples for evaluation, '
                     'where n is provided. This is only used if '
                     '`eval_training_data` is True.')
flags.DEFINE_string('hparams_overrides', None, 'Hyperparameter overrides, '
                    'represented as a string containing comma-separated '
                    'hparam_name=value pairs.')
flags.DEFINE_string('checkpoint_dir', None, 'Path to directory holding a '
                    'checkpoint.  If `checkpoint_dir` is provided, this binary '
                    'operates in eval-only mode, writing resulting metrics to '
                    '`model_dir`.')
flags.DEFINE_boolean('run_once', False, 'If running in eval-only mode, whether '
                     'to run just one round of eval vs running continuously '
                     '(default).')
flags.DEFINE_integer('max_eval_retries', 0, 'If running continuous eval, the '
                     'maximum number of retries upon encountering tf errors. '
                     'The default is 0, meaning no retries.')
# Beyond the original.
flags.DEFINE_integer('save_checkpoints_steps', None, 'Write a checkpoint '
                     'every N steps (default: every 10 minutes). A relaunch '
                     'resumes from the last one.')
flags.DEFINE_integer('log_every_n_steps', 100,
                     progress.LOG_EVERY_N_STEPS_HELP)
flags.DEFINE_integer('eval_timeout_secs', None, 'In continuous eval, stop '
                     'when no new checkpoint arrives for this many seconds.')
flags.DEFINE_integer('eval_throttle_secs', None, 'Least seconds between two '
                     'evaluations, and how often an evaluator task of a '
                     'TF_CONFIG cluster looks for a new checkpoint (default '
                     '%d there; 0, i.e. every checkpoint, in a local run).' %
                     _EVALUATOR_THROTTLE_SECS)
flags.DEFINE_integer('num_gpus', 0, 'Train with tf.distribute.'
                     'MirroredStrategy on this many GPUs of this machine; '
                     'train_config.batch_size is split across them.')
flags.DEFINE_boolean('xla', False, 'Compile with XLA (auto-clustering of '
                     'the element-wise, reduction and shape ops; see '
                     'od_estimator/estimator/xla.py). Slower on CPU as '
                     'measured in bench/NOTES.md: for accelerators and '
                     'comparisons.')
flags.DEFINE_boolean('bfloat16', False, cpu_bfloat16.FLAG_HELP)
flags.DEFINE_boolean('eval_plots', False, eval_plots.FLAG_HELP)
flags.DEFINE_integer('random_seed', None, 'Graph-level random seed '
                     '(RunConfig.tf_random_seed): weight initialization, '
                     'samplers, shuffling and augmentations repeat from run '
                     'to run. Default: unseeded, as the original.')
flags.DEFINE_boolean('resume_from_last_good', False, 'When the latest '
                     'checkpoint of --model_dir (or --checkpoint_dir) is '
                     'damaged, resume from (or evaluate) the newest intact '
                     'one; the damaged files are kept.')
for _flag in keep_best.new_flags():
  flags.DEFINE_flag(_flag)
FLAGS = flags.FLAGS

# Count flags: smallest meaningful value (see flag_checks).
_COUNT_FLAGS = {
    'num_train_steps': flag_checks.NUM_TRAIN_STEPS,
    'sample_1_of_n_eval_examples': flag_checks.SAMPLE_1_OF_N,
    'sample_1_of_n_eval_on_train_examples': flag_checks.SAMPLE_1_OF_N,
    'max_eval_retries': flag_checks.NON_NEGATIVE,
    'save_checkpoints_steps': flag_checks.NON_NEGATIVE,
    'log_every_n_steps': flag_checks.NON_NEGATIVE,
    'eval_timeout_secs': flag_checks.NON_NEGATIVE,
    'eval_throttle_secs': flag_checks.NON_NEGATIVE,
    'num_gpus': flag_checks.NON_NEGATIVE,
}


def _run_config():
  kwargs = {'model_dir': FLAGS.model_dir}
  if FLAGS.random_seed is not None:
    kwargs['tf_random_seed'] = FLAGS.random_seed
  if FLAGS.save_checkpoints_steps:
    kwargs['save_checkpoints_steps'] = FLAGS.save_checkpoints_steps
  if FLAGS.num_gpus:
    kwargs.update(model_lib.mirrored_run_config_kwargs(FLAGS.num_gpus))
  if FLAGS.xla:
    kwargs['session_config'] = xla.jit_session_config(
        kwargs.get('session_config'))
  return tf.estimator.RunConfig(**kwargs)


def _throttle_secs(run_config):
  """--eval_throttle_secs, else a polling pause on an evaluator task only."""
  if FLAGS.eval_throttle_secs is not None:
    return FLAGS.eval_throttle_secs
  if run_config.task_type == 'evaluator':
    return _EVALUATOR_THROTTLE_SECS
  return 0


def _job():
  """The run the flags ask for."""
  return training_jobs.Job(
      pipeline_config_path=FLAGS.pipeline_config_path,
      num_train_steps=FLAGS.num_train_steps,
      sample_1_of_n_eval_examples=FLAGS.sample_1_of_n_eval_examples,
      sample_1_of_n_eval_on_train_examples=(
          FLAGS.sample_1_of_n_eval_on_train_examples),
      hparams_overrides=FLAGS.hparams_overrides,
      checkpoint_dir=FLAGS.checkpoint_dir,
      eval_training_data=FLAGS.eval_training_data,
      run_once=FLAGS.run_once, max_eval_retries=FLAGS.max_eval_retries,
      eval_timeout_secs=FLAGS.eval_timeout_secs,
      resume_from_last_good=FLAGS.resume_from_last_good,
      log_every_n_steps=FLAGS.log_every_n_steps, bfloat16=FLAGS.bfloat16,
      eval_plots=FLAGS.eval_plots,
      keep_best_options=keep_best.options_from_flags(
          FLAGS, exporter.export_for_serving))


_print_metrics = training_jobs.print_metrics


def main(unused_argv):
  flags.mark_flag_as_required('model_dir')
  flags.mark_flag_as_required('pipeline_config_path')
  flag_checks.check_minimums(FLAGS, _COUNT_FLAGS)
  job = _job()
  checkpoint = training_jobs.checkpoint_to_evaluate(job)
  parts = training_jobs.build(job, _run_config(), launch_check.check,
                              checkpoint)
  if FLAGS.checkpoint_dir:
    result = training_jobs.evaluate(job, parts, checkpoint)
  else:
    try:
      result = training_jobs.train_and_evaluate(
          job, parts, _throttle_secs(parts['estimator'].config))
    except preemption.TrainingPreempted as stop:
      # The checkpoint is saved: exit without the evaluation and export.
      return stop.exit_status
  _print_metrics(result)


def run():
  """Console-script entry: clear one-line errors instead of tracebacks."""
  return command_line.run_training(main, lambda: FLAGS.model_dir, __doc__,
                                   __name__)


if __name__ == '__main__':
  run()
