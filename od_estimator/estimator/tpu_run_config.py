"""The RunConfig of the TPUEstimator path (model_tpu_main, model_main_tf2)."""
from absl import logging
import tensorflow as tf
from tensorflow_estimator.python.estimator.tpu import tpu_config

from od_estimator import errors


def run_config(model_dir, use_tpu, tpu_name=None, tpu_zone=None,
               gcp_project=None, iterations_per_loop=100, num_shards=8,
               **kwargs):
  """tpu_config.RunConfig; resolves the Cloud TPU only when use_tpu.

  Args:
    model_dir: --model_dir (gs:// for a Cloud TPU).
    use_tpu: run on the TPU; else the same TPUEstimator path on CPU.
    tpu_name, tpu_zone, gcp_project: the TPU for the cluster resolver
      (None: detected from the GCE metadata).
    iterations_per_loop: training steps per TPU loop.
    num_shards: TPU cores (None: all of the TPU's).
    **kwargs: more RunConfig arguments (save_checkpoints_steps, ...); None
      values are left out (RunConfig's defaults).

  Raises:
    errors.UserInputError: use_tpu, and no TPU by that name is found.
  """
  cluster = None
  if use_tpu:
    try:
      cluster = tf.distribute.cluster_resolver.TPUClusterResolver(
          tpu=[tpu_name] if tpu_name else None, zone=tpu_zone,
          project=gcp_project)
    except (ValueError, RuntimeError) as error:
      # No TPU by that name (or none named, off Cloud): the flags are wrong.
      given = [('tpu_name', tpu_name), ('tpu_zone', tpu_zone),
               ('gcp_project', gcp_project)]
      raise errors.UserInputError(
          '--use_tpu: cannot find the Cloud TPU (%s): %s. Name a TPU of '
          'this project and zone, or pass --use_tpu=false to run on '
          'CPU/GPU.' % (
              ' '.join('--%s=%s' % (name, value) for name, value in given
                       if value or name == 'tpu_name'),
              str(error).splitlines()[0] if str(error) else
              type(error).__name__)) from None
    # TPU workers (not this host) read and write model_dir; a local path
    # only fails once training starts.
    if not model_dir.startswith('gs://'):
      logging.warning('--model_dir=%s is not a gs:// path; a Cloud TPU '
                      'node cannot reach local files.', model_dir)
  return tpu_config.RunConfig(
      cluster=cluster, model_dir=model_dir,
      tpu_config=tpu_config.TPUConfig(
          iterations_per_loop=iterations_per_loop, num_shards=num_shards),
      **{name: value for name, value in kwargs.items() if value is not None})
