r"""Trains a detector with the original's legacy train.py command line.

One pipeline config:

  python -m od_estimator.legacy.train --logtostderr \
      --train_dir=path/to/train_dir --pipeline_config_path=pipeline.config

Or three files, one per part:

  python -m od_estimator.legacy.train --logtostderr \
      --train_dir=path/to/train_dir --model_config_path=model.config \
      --train_config_path=train.config --input_config_path=input.config

Training runs on od_estimator's Estimator (the model_fn and input_fn of
model_main) for train_config.num_steps steps (0: until stopped), logging
`global step N: loss = X (T sec/step)` every step and keeping a checkpoint
every train_config.keep_checkpoint_every_n_hours besides the last five.
--num_clones=N trains on N GPUs of this machine (N CPU devices with
--clone_on_cpu) with MirroredStrategy, batch_size split across them. A
cluster comes from TF_CONFIG (chief or master, workers, ps), as in the
original; train_config.sync_replicas then aggregates replicas_to_aggregate
gradients per step (SyncReplicasOptimizer). --master, --task,
--worker_replicas and --ps_tasks are accepted for old scripts; as in the
original, TF_CONFIG alone describes the cluster. A damaged last checkpoint
in --train_dir stops the launch with one line naming it and the last intact
one; --resume_from_last_good resumes from that.
"""
import functools
import sys

from absl import flags
from absl import logging
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.checks import launch_check
from od_estimator.estimator import model_lib
from od_estimator.estimator import resume_check
from od_estimator.builders import model_builder
from od_estimator.legacy import cluster
from od_estimator.legacy import configs as legacy_configs
from od_estimator.legacy import step_logging
from od_estimator.utils import checkpoint_health
from od_estimator.utils import flag_checks
from od_estimator.utils import interrupts

flags.DEFINE_string('master', '', 'Name of the TensorFlow master to use.')
flags.DEFINE_integer('task', 0, 'task id')
flags.DEFINE_integer('num_clones', 1, 'Number of clones to deploy per worker.')
flags.DEFINE_boolean('clone_on_cpu', False,
                     'Force clones to be deployed on CPU.')
flags.DEFINE_integer('worker_replicas', 1, 'Number of worker+trainer '
                     'replicas.')
flags.DEFINE_integer('ps_tasks', 0, 'Number of parameter server tasks.')
flags.DEFINE_string('train_dir', '',
                    'Directory to save the checkpoints and training summaries.')
flags.DEFINE_string('pipeline_config_path', '',
                    'Path to a pipeline_pb2.TrainEvalPipelineConfig config '
                    'file. If provided, other configs are ignored')
flags.DEFINE_string('train_config_path', '',
                    'Path to a train_pb2.TrainConfig config file.')
flags.DEFINE_string('input_config_path', '',
                    'Path to an input_reader_pb2.InputReader config file.')
flags.DEFINE_string('model_config_path', '',
                    'Path to a model_pb2.DetectionModel config file.')
flags.DEFINE_boolean('resume_from_last_good', False, 'When the latest '
                     'checkpoint of --train_dir is damaged, resume from the '
                     'newest intact one; the damaged files are kept.')
FLAGS = flags.FLAGS

# Count flags: smallest meaningful value (see flag_checks).
_COUNT_FLAGS = {
    'task': flag_checks.NON_NEGATIVE,
    'num_clones': flag_checks.POSITIVE,
    'worker_replicas': flag_checks.POSITIVE,
    'ps_tasks': flag_checks.NON_NEGATIVE,
}

# The original saved a checkpoint every 60 seconds.
_SAVE_CHECKPOINTS_SECS = 60
_CLUSTER_FLAGS = (('master', ''), ('task', 0), ('worker_replicas', 1),
                  ('ps_tasks', 0))


def _run_config(train_config):
  kwargs = {}
  if FLAGS.num_clones > 1:
    device = 'CPU' if FLAGS.clone_on_cpu else 'GPU'
    found = len(tf.config.list_physical_devices('GPU'))
    if device == 'GPU' and found < FLAGS.num_clones:
      raise errors.UserInputError(
          '--num_clones=%d asks for %d GPUs but TensorFlow sees %d; add '
          '--clone_on_cpu to run the clones on CPU devices' % (
              FLAGS.num_clones, FLAGS.num_clones, found))
    kwargs = model_lib.mirrored_run_config_kwargs(FLAGS.num_clones, device)
  return tf.estimator.RunConfig(
      model_dir=FLAGS.train_dir, save_checkpoints_secs=_SAVE_CHECKPOINTS_SECS,
      keep_checkpoint_every_n_hours=(
          train_config.keep_checkpoint_every_n_hours), **kwargs)


def _note_cluster_flags():
  for name, default in _CLUSTER_FLAGS:
    if FLAGS[name].value != default:
      print('note: --%s has no effect: the cluster and this task come from '
            'TF_CONFIG, as in the original train.py.' % name,
            file=sys.stderr)


def _synchronous_configs(configs):
  """Each task reads batch_size / replicas_to_aggregate images per step."""
  train_config = configs['train_config'].__class__()
  train_config.CopyFrom(configs['train_config'])
  train_config.batch_size //= train_config.replicas_to_aggregate
  return dict(configs, train_config=train_config)


def _model_fn(configs, sync, resume=None):
  """The training model_fn; with resume=(train_dir, checkpoint, then), see
  resume_check.checked_model_fn."""
  model_fn = model_lib.create_model_fn(
      functools.partial(model_builder.build, model_config=configs['model']),
      configs, optimizer_wrapper=sync.wrap_optimizer if sync else None)
  if resume:
    model_fn = resume_check.checked_model_fn(model_fn, *resume)
  return sync.model_fn(model_fn) if sync else model_fn


def main(unused_argv):
  logging.set_verbosity(logging.INFO)
  flag_checks.check_minimums(FLAGS, _COUNT_FLAGS)
  if not FLAGS.train_dir:
    raise errors.UserInputError('`train_dir` is missing (--train_dir).')
  _note_cluster_flags()
  configs, copies, label = legacy_configs.load(
      FLAGS.pipeline_config_path, FLAGS.model_config_path,
      FLAGS.train_config_path, FLAGS.input_config_path, training=True)
  train_config = configs['train_config']
  cluster.check_clones(FLAGS.num_clones, train_config)
  run_config = _run_config(train_config)
  cluster.check(run_config, FLAGS.num_clones, train_config)
  launch_check.check(configs, pipeline_config_path=label,
                     command='legacy_train')
  server = cluster.start_server(run_config)
  if run_config.task_type == 'ps':
    interrupts.end_process_on_signals()
    server.join()
    return 0
  sync = None
  if train_config.sync_replicas:
    sync = cluster.SyncReplicas(train_config.replicas_to_aggregate,
                                cluster.training_tasks(run_config))
    configs = _synchronous_configs(configs)
  train_input_fn = model_lib.MODEL_BUILD_UTIL_MAP['create_train_input_fn'](
      configs['train_config'], configs['train_input_config'], configs['model'])
  resume = None
  if run_config.is_chief:
    copy = functools.partial(legacy_configs.copy_files, copies,
                             FLAGS.train_dir)
    checkpoint = checkpoint_health.resume_point(
        FLAGS.train_dir, '--train_dir', FLAGS.resume_from_last_good)
    # Copied once the training graph is built (and fits the checkpoint).
    resume = (FLAGS.train_dir, checkpoint, copy)
  estimator = tf.estimator.Estimator(
      model_fn=_model_fn(configs, sync, resume), config=run_config)
  estimator.train(train_input_fn, max_steps=train_config.num_steps or None,
                  hooks=[step_logging.StepLossHook()])
  return 0


def run():
  """Console-script entry: clear one-line errors instead of tracebacks."""
  return command_line.run_training(main, lambda: FLAGS.train_dir, __doc__,
                                   __name__)


if __name__ == '__main__':
  run()
