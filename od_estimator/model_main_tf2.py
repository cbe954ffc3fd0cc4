r"""The original's TF2 trainer (model_main_tf2) on the Estimator engine.

Train only, as the original's TF2 trainer (evaluation is another job):

  python -m od_estimator.model_main_tf2 \
      --pipeline_config_path=PATH/pipeline.config --model_dir=TRAIN_DIR \
      --num_train_steps=25000 --checkpoint_every_n=1000

Evaluate each new checkpoint of TRAIN_DIR; stops once the checkpoint of
the last training step is evaluated, or after --eval_timeout seconds
without a new one:

  python -m od_estimator.model_main_tf2 --pipeline_config_path=... \
      --model_dir=TRAIN_DIR --checkpoint_dir=TRAIN_DIR

TRAIN_DIR may also be a model_dir of the original's TF2 trainer (ckpt-N
and their `checkpoint` file): evaluated in place, nothing written there
(metrics in --model_dir/eval); the step is the checkpoint's `step`, the
last one train_config.num_steps (or --num_train_steps).

Several machines, synchronously (MultiWorkerMirroredStrategy under the
Estimator): run the training command on each with --num_workers=N and a
TF_CONFIG naming the N workers, e.g. on the second
  TF_CONFIG='{"cluster": {"worker": ["host1:2222", "host2:2222"]},
              "task": {"type": "worker", "index": 1}}'
Every worker reads its share of the input files; train_config.batch_size
is the batch of all workers together, as the original's; each step
averages the gradients of all. Worker 0 (or a "chief" task) writes the
checkpoints and summaries to --model_dir, a folder all can reach; each
other worker writes its copies to model_dir/tmp_worker_<index>.

Cloud TPU: --use_tpu [--tpu_name=TPU] trains with TPUEstimator, as
model_tpu_main (--model_dir on gs://). Evaluation runs on CPU/GPU.

Where the layout differs from the original's TF2 trainer:
  - Checkpoints are model.ckpt-N (name-based, as every Estimator and the
    TF1 API), not ckpt-N (object-based). This command's --checkpoint_dir
    and the exporters read both, and training resumes from the latest
    ckpt-N of a --model_dir the original trained (its weights, step,
    averages and optimizer slots), then writes model.ckpt-N beside it.
  - Training summaries go to --model_dir itself, not model_dir/train
    (TensorBoard on --model_dir shows training and evaluation).
    Evaluation summaries go to model_dir/eval, as the original's
    (model_dir/eval_training_data with --eval_on_train_data); the images
    there are tagged Detections_Left_Groundtruth_Right/N, not
    eval_side_by_side_N_0.
  - A checkpoint is also written after the last step (the original writes
    one only each --checkpoint_every_n steps); 7 are kept, as there.
  - Evaluation takes each new checkpoint at once; the original waits at
    least 300 s between two.

The evaluation job's --keep_best_by=METRIC keeps the best evaluated
checkpoint in its --model_dir/best/ (best.json: step, metric, value), also
across relaunches; --keep_best_export exports it to
model_dir/export/best/<step>/ as export_inference_graph does.

A relaunch resumes from the last checkpoint of --model_dir. SIGTERM (a
preempted VM or TPU) or Ctrl-C saves a checkpoint at the current step
first (one worker: exit 0 after SIGTERM, 130 after Ctrl-C).
"""
import os

from absl import flags
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.checks import launch_check
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import keep_best
from od_estimator.estimator import model_lib
from od_estimator.estimator import preemption
from od_estimator.estimator import progress
from od_estimator.estimator import tpu_run_config
from od_estimator.estimator import training_jobs
from od_estimator.export import exporter
from od_estimator.utils import flag_checks

# The original's TF2 trainer keeps this many checkpoints (the Estimator 5).
_CHECKPOINTS_KEPT = 7

flags.DEFINE_string('pipeline_config_path', None, 'Path to pipeline config '
                    'file.')
flags.DEFINE_integer('num_train_steps', None, 'Number of train steps.')
flags.DEFINE_bool('eval_on_train_data', False, 'With --checkpoint_dir: '
                  'evaluate the training data (one of every '
                  '--sample_1_of_n_eval_on_train_examples) instead of the '
                  'eval input.')
flags.DEFINE_integer('sample_1_of_n_eval_examples', None, 'Will sample one '
                     'of every n eval input examples, where n is provided '
                     '(default: eval_input_reader.sample_1_of_n_examples).')
flags.DEFINE_integer('sample_1_of_n_eval_on_train_examples', 5, 'Will sample '
                     'one of every n train input examples for evaluation, '
                     'where n is provided. This is only used if '
                     '`eval_on_train_data` is True.')
flags.DEFINE_string('model_dir', None, 'Path to output model directory '
                    'where event and checkpoint files will be written.')
flags.DEFINE_string('checkpoint_dir', None, 'Path to directory holding a '
                    'checkpoint. If `checkpoint_dir` is provided, this binary '
                    'operates in eval-only mode, writing resulting metrics to '
                    '`model_dir`. Our model.ckpt-N or the original TF2 '
                    "trainer's ckpt-N (read in place).")
flags.DEFINE_integer('eval_timeout', 3600, 'Number of seconds to wait for an '
                     'evaluation checkpoint before exiting.')
flags.DEFINE_bool('use_tpu', False, 'Whether the job is executing on a TPU.')
flags.DEFINE_string('tpu_name', None, 'Name of the Cloud TPU for Cluster '
                    'Resolvers.')
flags.DEFINE_integer('num_workers', 1, 'When num_workers > 1, training uses '
                     'MultiWorkerMirroredStrategy across the workers of '
                     'TF_CONFIG.')
flags.DEFINE_integer('checkpoint_every_n', 1000, 'Integer defining how often '
                     'we checkpoint (in steps).')
flags.DEFINE_boolean('record_summaries', True, 'Whether or not to record '
                     'summaries defined by the model or the training '
                     'pipeline. This does not impact the summaries of the '
                     'loss values which are always recorded.')
# Beyond the original's present flags.
flags.DEFINE_string('hparams_overrides', None, 'Hyperparameter overrides, '
                    'represented as a string containing comma-separated '
                    'hparam_name=value pairs (a flag of the original\'s '
                    'earlier versions).')
flags.DEFINE_integer('log_every_n_steps', 100,
                     progress.LOG_EVERY_N_STEPS_HELP + ' With --use_tpu, '
                     "TPUEstimator's own loss and speed lines instead.")
flags.DEFINE_boolean('resume_from_last_good', False, 'When the latest '
                     'checkpoint of --model_dir (or --checkpoint_dir) is '
                     'damaged, resume from (or evaluate) the newest intact '
                     'one; the damaged files are kept.')
flags.DEFINE_boolean('bfloat16', False, cpu_bfloat16.FLAG_HELP)
for _flag in keep_best.new_flags():
  flags.DEFINE_flag(_flag)
FLAGS = flags.FLAGS

# Count flags: smallest meaningful value (see flag_checks).
_COUNT_FLAGS = {
    'num_train_steps': flag_checks.NUM_TRAIN_STEPS,
    'sample_1_of_n_eval_examples': flag_checks.SAMPLE_1_OF_N,
    'sample_1_of_n_eval_on_train_examples': flag_checks.SAMPLE_1_OF_N,
    'eval_timeout': flag_checks.NON_NEGATIVE,
    'num_workers': flag_checks.POSITIVE,
    'checkpoint_every_n': flag_checks.POSITIVE,
    'log_every_n_steps': flag_checks.NON_NEGATIVE,
}


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
      eval_training_data=FLAGS.eval_on_train_data,
      eval_timeout_secs=FLAGS.eval_timeout,
      resume_from_last_good=FLAGS.resume_from_last_good,
      log_every_n_steps=FLAGS.log_every_n_steps,
      bfloat16=FLAGS.bfloat16,
      # model_dir/eval, as the original's model_dir/eval/<input name>.
      eval_name=None,
      keep_best_options=keep_best.options_from_flags(
          FLAGS, exporter.export_for_serving, evaluates=bool(FLAGS.checkpoint_dir),
          why_not='pass it to the evaluation job (--checkpoint_dir=%s).' %
          FLAGS.model_dir))


def _cluster_workers():
  """(TF_CONFIG, its training tasks) for --num_workers > 1, checked.

  Raises:
    errors.UserInputError: no TF_CONFIG, tasks other than a chief and
      workers, or another number of them than --num_workers.
  """
  example = ('{"cluster": {"worker": ["host1:port", ...]}, "task": '
             '{"type": "worker", "index": i}}')
  tf_config = command_line.parsed_tf_config()
  if not tf_config or not tf_config.get('cluster'):
    raise errors.UserInputError(
        '--num_workers=%d trains on %d machines: set TF_CONFIG on each, '
        'e.g. %s; or leave --num_workers at 1 to train here.' % (
            FLAGS.num_workers, FLAGS.num_workers, example))
  cluster = tf_config['cluster']
  others = sorted(set(cluster) - {'chief', 'worker'})
  if others:
    raise errors.UserInputError(
        '--num_workers: synchronous training has no %s tasks (evaluate in '
        'another job, with --checkpoint_dir); TF_CONFIG names the workers '
        '(and an optional chief): %s' % (', '.join(others), example))
  workers = list(cluster.get('chief', [])) + list(cluster.get('worker', []))
  if len(workers) != FLAGS.num_workers:
    raise errors.UserInputError(
        '--num_workers=%d but the TF_CONFIG cluster has %d training tasks '
        '(chief and workers): %s' % (FLAGS.num_workers, len(workers),
                                     os.environ.get('TF_CONFIG')))
  return tf_config, workers


def _check_cluster():
  """TF_CONFIG as the run uses it (workers only for --num_workers > 1)."""
  if _multi_worker():
    _cluster_workers()
  else:
    command_line.check_tf_config()


def _multi_worker():
  return (FLAGS.num_workers > 1 and not FLAGS.checkpoint_dir and
          not FLAGS.use_tpu)


def _is_chief(tf_config):
  """The task that writes model_dir: the chief, else worker 0."""
  task = tf_config.get('task') or {}
  if 'chief' in tf_config['cluster']:
    return task.get('type') == 'chief'
  return task.get('type') == 'worker' and int(task.get('index', 0)) == 0


def _checkpointing():
  return {'save_checkpoints_steps': FLAGS.checkpoint_every_n,
          'keep_checkpoint_max': _CHECKPOINTS_KEPT}


def _run_config(**kwargs):
  return tf.estimator.RunConfig(model_dir=FLAGS.model_dir,
                                **_checkpointing(), **kwargs)


def _model_fn_creator(detection_model_fn, *args, **kwargs):
  """create_model_fn, the model's summaries off without --record_summaries."""
  if not FLAGS.record_summaries:
    build = detection_model_fn

    def detection_model_fn(is_training, add_summaries):
      del add_summaries  # Loss summaries are the model_fn's, always kept.
      return build(is_training=is_training, add_summaries=False)
  return model_lib.create_model_fn(detection_model_fn, *args, **kwargs)


def _train_on_workers(job):
  """Synchronous training on the TF_CONFIG workers (--num_workers > 1).

  The Estimator runs MultiWorkerMirroredStrategy through train_and_evaluate
  (its distribute coordinator); with no evaluator task it trains only.
  Built in a graph, as the strategy's collective ops are graph
  ops here (eagerly, copying the strategy fails on the cluster devices).
  """
  tf_config, _ = _cluster_workers()
  with tf.Graph().as_default():
    strategy = (
        tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy())
    parts = training_jobs.build(
        job, _run_config(train_distribute=strategy), launch_check.check,
        writes_model_dir=_is_chief(tf_config),
        model_fn_creator=_model_fn_creator)
    batch_size = parts['configs']['train_config'].batch_size
    if batch_size % FLAGS.num_workers:
      raise errors.UserInputError(
          'train_config.batch_size=%d is the batch of all workers, split '
          "among them (as the original's TF2 trainer): make it a multiple "
          'of --num_workers=%d.' % (batch_size, FLAGS.num_workers))
    training_jobs.train_and_evaluate(job, parts, preemptible=False)


def _train(job):
  """Trains only (on this machine, or on a Cloud TPU with --use_tpu)."""
  if FLAGS.use_tpu:
    parts = training_jobs.build(
        job, tpu_run_config.run_config(
            FLAGS.model_dir, True, FLAGS.tpu_name, num_shards=None,
            **_checkpointing()),
        launch_check.check, use_tpu_estimator=True, use_tpu=True,
        model_fn_creator=_model_fn_creator)
    training_jobs.train_on_tpu(job, parts)
    return
  parts = training_jobs.build(job, _run_config(), launch_check.check,
                              model_fn_creator=_model_fn_creator)
  training_jobs.train(job, parts)


def main(unused_argv):
  flag_checks.check_required(FLAGS, ('model_dir', 'pipeline_config_path'))
  flag_checks.check_minimums(FLAGS, _COUNT_FLAGS)
  job = _job()
  if FLAGS.checkpoint_dir:
    checkpoint = training_jobs.checkpoint_to_evaluate(job)
    parts = training_jobs.build(job, _run_config(), launch_check.check,
                                checkpoint)
    training_jobs.print_metrics(training_jobs.evaluate(job, parts,
                                                       checkpoint))
    return None
  if FLAGS.eval_on_train_data:
    raise errors.UserInputError(
        '--eval_on_train_data: training does not evaluate (as the '
        "original's TF2 trainer); evaluate the training data in an "
        'evaluation job, with --checkpoint_dir=%s.' % FLAGS.model_dir)
  try:
    if _multi_worker():
      _train_on_workers(job)
    else:
      _train(job)
  except preemption.TrainingPreempted as stop:
    return stop.exit_status
  return None


def run():
  """Console-script entry: clear one-line errors instead of tracebacks."""
  return command_line.run_training(main, lambda: FLAGS.model_dir, __doc__,
                                   __name__, check_cluster=_check_cluster)


if __name__ == '__main__':
  run()
