"""Legacy train.py's cluster: TF_CONFIG tasks, servers, synchronous replicas.

As the original: the cluster comes from TF_CONFIG (chief or master, workers,
parameter servers); a cluster with workers needs a parameter server; with
train_config.sync_replicas the optimizer is a SyncReplicasOptimizer that
aggregates replicas_to_aggregate gradients per step over all training
tasks, each reading batch_size / replicas_to_aggregate images.
"""
import tensorflow as tf

from od_estimator import errors

_TRAIN = tf.estimator.ModeKeys.TRAIN


def training_tasks(run_config):
  """Number of training tasks (chief or master, and workers); 1 alone."""
  jobs = (run_config.cluster_spec.as_dict()
          if run_config.cluster_spec else {})
  return max(sum(len(jobs.get(job, ())) for job in
                 ('chief', 'master', 'worker')), 1)


def check_clones(num_clones, train_config):
  """Refuses clones with synchronous replicas, as the original."""
  if num_clones > 1 and train_config.sync_replicas:
    raise errors.UserInputError(
        'In Synchronous SGD mode num_clones must be 1. Found num_clones: %d '
        '(--num_clones with train_config.sync_replicas: true)' % num_clones)


def check(run_config, num_clones, train_config):
  """Raises errors.UserInputError for clusters the original refused.

  Args:
    run_config: the RunConfig (it read TF_CONFIG).
    num_clones: --num_clones.
    train_config: the TrainConfig about to run.
  """
  if num_clones > 1 and run_config.cluster_spec:
    raise errors.UserInputError(
        '--num_clones=%d in a TF_CONFIG cluster is not supported: run one '
        'training task per device, or use --num_clones on one machine '
        'without TF_CONFIG' % num_clones)
  if training_tasks(run_config) > 1 and not run_config.num_ps_replicas:
    raise errors.UserInputError(
        'At least 1 ps task is needed for distributed training (TF_CONFIG '
        'has several training tasks and no "ps" job).')
  if train_config.sync_replicas and (
      train_config.batch_size < train_config.replicas_to_aggregate):
    raise errors.UserInputError(
        'train_config.batch_size %d is smaller than replicas_to_aggregate '
        '%d: with sync_replicas each task reads batch_size / '
        'replicas_to_aggregate images per step' % (
            train_config.batch_size, train_config.replicas_to_aggregate))


def start_server(run_config):
  """Starts this task's server in a cluster with parameter servers.

  Returns:
    The tf.distribute.Server, or None outside such a cluster.
  """
  if not run_config.cluster_spec or not run_config.num_ps_replicas:
    return None
  return tf.distribute.Server(
      run_config.cluster_spec, job_name=run_config.task_type,
      task_index=run_config.task_id, config=run_config.session_config,
      protocol=run_config.protocol or 'grpc', start=True)


class SyncReplicas:
  """Makes a model_fn train with tf.compat.v1.train.SyncReplicasOptimizer.

  `wrap_optimizer` goes to model_lib.create_model_fn as optimizer_wrapper;
  `model_fn` then adds the optimizer's session hook (queue runner, tokens)
  to the training hooks, as the Estimator needs.
  """

  def __init__(self, replicas_to_aggregate, total_num_replicas):
    self._replicas_to_aggregate = replicas_to_aggregate
    self._total_num_replicas = total_num_replicas
    self._optimizer = None

  def wrap_optimizer(self, optimizer):
    self._optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
        optimizer, replicas_to_aggregate=self._replicas_to_aggregate,
        total_num_replicas=self._total_num_replicas)
    return self._optimizer

  def model_fn(self, inner_model_fn):
    """Returns inner_model_fn whose TRAIN spec has the optimizer's hook."""
    def model_fn(features, labels, mode, params, config):
      self._optimizer = None
      spec = inner_model_fn(features, labels, mode, params)
      if mode != _TRAIN:
        return spec
      hook = _UnjoinedQueueRunnerHook(
          self._optimizer.make_session_run_hook(config.is_chief))
      return spec._replace(
          training_hooks=list(spec.training_hooks) + [hook])
    return model_fn


class _UnjoinedCoordinator:
  """A Coordinator whose registered threads are not waited for at close."""

  def __init__(self, coord):
    self._coord = coord

  def register_thread(self, unused_thread):
    pass

  def __getattr__(self, name):
    return getattr(self._coord, name)


class _UnjoinedQueueRunnerHook(tf.compat.v1.train.SessionRunHook):
  """The SyncReplicasOptimizer's hook, its chief queue runner not joined.

  The chief's queue runner op waits for replicas_to_aggregate gradients,
  which stopping the coordinator does not cancel: a joined thread held the
  end of every training for the session's 120 s stop grace period. Unjoined,
  the op is cancelled when the session closes; errors still reach the
  coordinator and stop training.
  """

  def __init__(self, hook):
    self._hook = hook

  def begin(self):
    self._hook.begin()

  def after_create_session(self, session, coord):
    self._hook.after_create_session(session, _UnjoinedCoordinator(coord))
