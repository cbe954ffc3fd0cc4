r"""Trains or evaluates a detector with TPUEstimator, as the original did.

Train on a Cloud TPU (model_dir on GCS, which the TPU workers can reach):

  python -m od_estimator.model_tpu_main --tpu_name=TPU \
      --pipeline_config_path=gs://BUCKET/pipeline.config \
      --model_dir=gs://BUCKET/train --mode=train

Evaluate each new checkpoint (on CPU/GPU, as the original's eval jobs):

  python -m od_estimator.model_tpu_main --use_tpu=false --mode=eval \
      --pipeline_config_path=... --model_dir=gs://BUCKET/train

--use_tpu=false runs the same TPUEstimator path on CPU, e.g. to check a
config before paying for a TPU.

SIGTERM (a preempted Cloud TPU or VM) or Ctrl-C during training saves a
checkpoint at the current step and exits; the same command resumes. A
damaged last checkpoint stops the launch with one line naming it and the
last intact one; --resume_from_last_good resumes from (or evaluates) that.

--mode=eval with --keep_best_by=METRIC keeps the best evaluated checkpoint
in model_dir/best/ (best.json: step, metric, value); --keep_best_export
exports it to model_dir/export/best/<step>/ as export_inference_graph does.
"""

import functools

from absl import flags

from od_estimator import command_line
from od_estimator.checks import launch_check
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import keep_best
from od_estimator.estimator import model_lib
from od_estimator.estimator import preemption
from od_estimator.estimator import tpu_run_config
from od_estimator.estimator import training_jobs
from od_estimator.export import exporter
from od_estimator.metrics import eval_plots
from od_estimator.utils import checkpoint_health
from od_estimator.config import config_util
from od_estimator.utils import flag_checks

flags.DEFINE_bool('use_tpu', True, 'Use TPUs rather than plain CPUs.')
flags.DEFINE_string('gcp_project', None, 'Project of the Cloud TPU; detected '
                    'from the GCE metadata when not given.')
flags.DEFINE_string('tpu_zone', None, 'GCE zone of the Cloud TPU; detected '
                    'from the GCE metadata when not given.')
flags.DEFINE_string('tpu_name', None, 'Name of the Cloud TPU for the cluster '
                    'resolver.')
flags.DEFINE_integer('num_shards', 8, 'Number of shards (TPU cores).')
flags.DEFINE_integer('iterations_per_loop', 100, 'Number of iterations per '
                     'TPU training loop.')
flags.DEFINE_enum('mode', 'train', ['train', 'eval'], 'Mode to run: train, '
                  'eval.')
flags.DEFINE_integer('train_batch_size', None, 'Batch size for training. If '
                     'not given, train_config.batch_size is used.')
flags.DEFINE_string('hparams_overrides', None, 'Hyperparameter overrides, '
                    'represented as a string containing comma-separated '
                    'hparam_name=value pairs.')
flags.DEFINE_integer('num_train_steps', None, 'Number of train steps.')
flags.DEFINE_boolean('eval_training_data', False, 'If training data should be '
                     'evaluated for this job.')
flags.DEFINE_integer('sample_1_of_n_eval_examples', 1, 'Will sample one of '
                     'every n eval input examples, where n is provided.')
flags.DEFINE_integer('sample_1_of_n_eval_on_train_examples', 5, 'Will sample '
                     'one of every n train input examples for evaluation, '
                     'where n is provided. This is only used if '
                     '`eval_training_data` is True.')
flags.DEFINE_string('model_dir', None, 'Path to output model directory where '
                    'event and checkpoint files will be written.')
flags.DEFINE_string('pipeline_config_path', None, 'Path to pipeline config '
                    'file.')
flags.DEFINE_integer('max_eval_retries', 0, 'If running continuous eval, the '
                     'maximum number of retries upon encountering '
                     'tf.errors.InvalidArgumentError.')
# Beyond the original.
flags.DEFINE_integer('save_checkpoints_steps', None, 'Write a checkpoint '
                     'every N steps (default: every 10 minutes).')
flags.DEFINE_integer('eval_timeout_secs', None, 'In --mode=eval, stop when '
                     'no new checkpoint arrives for this many seconds.')
flags.DEFINE_boolean('resume_from_last_good', False, 'When the latest '
                     'checkpoint of --model_dir is damaged, resume from (or '
                     'evaluate) the newest intact one; the damaged files are '
                     'kept.')
flags.DEFINE_boolean('bfloat16', False, cpu_bfloat16.FLAG_HELP)
flags.DEFINE_boolean('eval_plots', False, eval_plots.FLAG_HELP)
for _flag in keep_best.new_flags():
  flags.DEFINE_flag(_flag)
FLAGS = flags.FLAGS

# Count flags: smallest meaningful value (see flag_checks).
_COUNT_FLAGS = {
    'num_shards': flag_checks.POSITIVE,
    'iterations_per_loop': flag_checks.POSITIVE,
    'train_batch_size': flag_checks.NON_NEGATIVE,
    'num_train_steps': flag_checks.NUM_TRAIN_STEPS,
    'sample_1_of_n_eval_examples': flag_checks.SAMPLE_1_OF_N,
    'sample_1_of_n_eval_on_train_examples': flag_checks.SAMPLE_1_OF_N,
    'max_eval_retries': flag_checks.NON_NEGATIVE,
    'save_checkpoints_steps': flag_checks.NON_NEGATIVE,
    'eval_timeout_secs': flag_checks.NON_NEGATIVE,
}


def _run_config():
  return tpu_run_config.run_config(
      FLAGS.model_dir, FLAGS.use_tpu, FLAGS.tpu_name, FLAGS.tpu_zone,
      FLAGS.gcp_project, FLAGS.iterations_per_loop, FLAGS.num_shards,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps or None)


def main(unused_argv):
  flags.mark_flag_as_required('model_dir')
  flags.mark_flag_as_required('pipeline_config_path')
  flag_checks.check_minimums(FLAGS, _COUNT_FLAGS)
  keep_best_options = keep_best.options_from_flags(
      FLAGS, exporter.export_for_serving, evaluates=FLAGS.mode == 'eval',
      why_not='pass it to the --mode=eval job.')
  hparams = config_util.parse_hparams_overrides(FLAGS.hparams_overrides or '')
  overrides = {}
  if FLAGS.train_batch_size:
    # A config override (train_config.batch_size), as the original: it
    # becomes TPUEstimator's train_batch_size.
    overrides['batch_size'] = FLAGS.train_batch_size
  if FLAGS.mode == 'eval':
    checkpoint_health.resume_point(FLAGS.model_dir, '--model_dir',
                                   FLAGS.resume_from_last_good,
                                   evaluating=True)
  parts = model_lib.create_estimator_and_inputs(
      run_config=_run_config(), hparams=hparams,
      pipeline_config_path=FLAGS.pipeline_config_path,
      train_steps=FLAGS.num_train_steps,
      sample_1_of_n_eval_examples=FLAGS.sample_1_of_n_eval_examples,
      sample_1_of_n_eval_on_train_examples=(
          FLAGS.sample_1_of_n_eval_on_train_examples),
      use_tpu_estimator=True, use_tpu=FLAGS.use_tpu,
      num_shards=FLAGS.num_shards,
      save_final_config=FLAGS.mode == 'train',
      resume_from_last_good=FLAGS.resume_from_last_good,
      bfloat16=FLAGS.bfloat16, eval_plots=FLAGS.eval_plots,
      check_configs=functools.partial(
          launch_check.check,
          pipeline_config_path=FLAGS.pipeline_config_path,
          evaluation_only=FLAGS.mode == 'eval' and
          not FLAGS.eval_training_data),
      **overrides)
  estimator = parts['estimator']
  if FLAGS.mode == 'train':
    try:
      training_jobs.train_on_tpu(
          training_jobs.Job(FLAGS.pipeline_config_path), parts)
    except preemption.TrainingPreempted as stop:
      return stop.exit_status
    return
  if FLAGS.eval_training_data:
    name, input_fn = 'training_data', parts['eval_on_train_input_fn']
  else:
    # Only the first eval input is evaluated, as in the original.
    name, input_fn = 'validation_data', parts['eval_input_fns'][0]
  keeper = keep_best.keeper(keep_best_options, FLAGS.model_dir,
                            parts['configs'])
  model_lib.continuous_eval(estimator, FLAGS.model_dir, input_fn,
                            parts['train_steps'], name,
                            FLAGS.max_eval_retries,
                            timeout_secs=FLAGS.eval_timeout_secs,
                            skip_damaged=FLAGS.resume_from_last_good,
                            on_evaluated=keeper.update if keeper else None)


def run():
  """Console-script entry: clear one-line errors instead of tracebacks."""
  return command_line.run_training(main, lambda: FLAGS.model_dir, __doc__,
                                   __name__)


if __name__ == '__main__':
  run()
