"""Initialization from train_config.fine_tune_checkpoint, and the saver.

model_lib.create_model_fn builds the TRAIN scaffold (or TPU scaffold_fn)
here: which variables come from the checkpoint, a logged report of those
skipped, and the Saver every replica shares.
"""
from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import variables_helper


def fine_tune_checkpoint_type(train_config):
  """The checkpoint type, honouring the deprecated from_detection_checkpoint."""
  if train_config.fine_tune_checkpoint_type:
    return train_config.fine_tune_checkpoint_type
  return ('detection' if train_config.from_detection_checkpoint else
          'classification')


def restore_map(model, train_config):
  """{checkpoint name: variable} present in fine_tune_checkpoint, logged."""
  checkpoint = train_config.fine_tune_checkpoint
  kind = fine_tune_checkpoint_type(train_config)
  if kind not in ('detection', 'classification'):
    raise errors.UserInputError(
        'train_config.fine_tune_checkpoint_type %r is not '
        'supported; use "detection" or "classification"' % kind)
  wanted = model.restore_map(
      fine_tune_checkpoint_type=kind,
      load_all_detection_checkpoint_vars=(
          train_config.load_all_detection_checkpoint_vars))
  try:
    available, missing, mismatched = (
        variables_helper.get_variables_available_in_checkpoint_with_report(
            wanted, checkpoint, include_global_step=False))
  except tf.errors.NotFoundError:
    raise errors.UserInputError(
        'train_config.fine_tune_checkpoint %r: no checkpoint found there. '
        'Give a checkpoint prefix (.../model.ckpt) or directory, or train '
        'from scratch with --hparams_overrides=load_pretrained=false.' %
        checkpoint) from None
  log_restore_report(checkpoint, kind, available, missing, mismatched)
  return available


def log_restore_report(checkpoint, kind, available, missing, mismatched):
  """Logs the names restored from and skipped in fine_tune_checkpoint."""
  logging.info('Fine-tuning from %s (%s): restoring %d variables: %s',
               checkpoint, kind, len(available), ', '.join(sorted(available)))
  if missing:
    logging.warning('Fine-tuning: skipping %d variables not in the '
                    'checkpoint: %s', len(missing), ', '.join(missing))
  if mismatched:
    logging.warning(
        'Fine-tuning: skipping %d variables of another shape (checkpoint vs '
        'model): %s', len(mismatched),
        ', '.join('%s %s vs %s' % entry for entry in mismatched))


def build_scaffold_fn(model, train_config, use_tpu, load_pretrained=True):
  """Initializes from fine_tune_checkpoint; returns a TPU scaffold_fn.

  Off TPU the initialization happens here (init_from_checkpoint) and the
  returned scaffold_fn only adds the saver; on TPU it must run inside
  scaffold_fn.
  """
  available = None
  if train_config.fine_tune_checkpoint and load_pretrained:
    available = restore_map(model, train_config)
    if not use_tpu:
      tf.compat.v1.train.init_from_checkpoint(
          train_config.fine_tune_checkpoint, available)

  def make_saver():
    saver = tf.compat.v1.train.Saver(
        sharded=True,
        keep_checkpoint_every_n_hours=(
            train_config.keep_checkpoint_every_n_hours),
        save_relative_paths=True)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
    return saver

  def scaffold_fn():
    if use_tpu and available:
      tf.compat.v1.train.init_from_checkpoint(
          train_config.fine_tune_checkpoint, available)
    return tf.compat.v1.train.Scaffold(saver=once_across_replicas(
        make_saver))
  return scaffold_fn


def once_across_replicas(fn):
  """fn() built once, in cross-replica context, under a strategy's replicas.

  A Saver of mirrored variables (MirroredStrategy) must be built outside
  the replicas; every replica then gets the same object.
  """
  if not tf.distribute.has_strategy() or (
      tf.distribute.in_cross_replica_context()):
    return fn()
  return tf.distribute.get_replica_context().merge_call(lambda _: fn())
