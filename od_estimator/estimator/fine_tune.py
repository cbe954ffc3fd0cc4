"""Initialization from train_config.fine_tune_checkpoint, and the saver.

model_lib.create_model_fn builds the TRAIN scaffold (or TPU scaffold_fn)
here: which variables come from the checkpoint, a logged report of those
skipped, and the Saver every replica shares.

A checkpoint that gives fewer than half of the variables the model's
restore_map asks for (same name and shape) is taken for one of another
model or feature extractor: the launch stops while the graph is built,
before anything is written, unless the hparam allow_partial_fine_tune is
true (--hparams_overrides=allow_partial_fine_tune=true).

Both checkpoint formats are read, told apart by the file (so
fine_tune_checkpoint_version changes nothing): name-based ones (TF1) by
variable name, object-based ones (TF2, see object_checkpoint) by object path
and Keras name. `full` (the whole model, shapes permitting) is the TF2
type; with a TF1 checkpoint it means `detection` with
load_all_detection_checkpoint_vars.
"""
from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import object_checkpoint
from od_estimator.utils import checkpoint_contents
from od_estimator.utils import variables_helper


def fine_tune_checkpoint_type(train_config):
  """The checkpoint type, honouring the deprecated from_detection_checkpoint."""
  if train_config.fine_tune_checkpoint_type:
    return train_config.fine_tune_checkpoint_type
  return ('detection' if train_config.from_detection_checkpoint else
          'classification')


# Examples of names listed in the refusal.
_EXAMPLES = 5


def match_checkpoint(model, train_config):
  """What fine_tune_checkpoint gives this model: object_checkpoint.Matched.

  Raises:
    errors.UserInputError: the checkpoint type is unknown or no checkpoint
      is there.
  """
  checkpoint = train_config.fine_tune_checkpoint
  kind = fine_tune_checkpoint_type(train_config)
  if kind not in object_checkpoint.PARTS:
    raise errors.UserInputError(
        'train_config.fine_tune_checkpoint_type %r is not supported; use '
        '"classification", "detection" or "full"' % kind)
  try:
    prefix = checkpoint_contents.resolve(checkpoint)
    object_based = checkpoint_contents.is_object_based(prefix)
  except tf.errors.NotFoundError:
    raise errors.UserInputError(
        'train_config.fine_tune_checkpoint %r: no checkpoint found there. '
        'Give a checkpoint prefix (.../model.ckpt) or directory, or train '
        'from scratch with --hparams_overrides=load_pretrained=false.' %
        checkpoint) from None
  return match_prefix(model, kind, prefix, object_based,
                      train_config.load_all_detection_checkpoint_vars)


def match_prefix(model, kind, prefix, object_based, load_all=False):
  """object_checkpoint.Matched of the checkpoint at `prefix`, either format.

  Args:
    model: the DetectionModel, its graph built.
    kind: 'classification', 'detection' or 'full'.
    prefix: the checkpoint's prefix.
    object_based: whether it is a TF2 checkpoint (see checkpoint_contents).
    load_all: load_all_detection_checkpoint_vars (TF1 'detection' only).
  """
  if object_based:
    if load_all and kind == 'detection':
      logging.info('load_all_detection_checkpoint_vars does nothing with a '
                   'TF2 checkpoint, as in the original; use '
                   'fine_tune_checkpoint_type "full" to restore the heads.')
    return object_checkpoint.restore_map(model, kind, prefix)
  if kind == 'full':
    kind, load_all = 'detection', True
  wanted = model.restore_map(fine_tune_checkpoint_type=kind,
                             load_all_detection_checkpoint_vars=load_all)
  available, missing, mismatched = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          wanted, prefix, include_global_step=False))
  return object_checkpoint.Matched(available, missing, mismatched, [])


def restore_map(model, train_config, allow_partial=False):
  """{checkpoint key: variable} present in fine_tune_checkpoint, logged.

  Raises:
    errors.UserInputError: see match_checkpoint; or (unless allow_partial)
      the checkpoint gives fewer than half of the variables asked for (see
      too_few_message).
  """
  checkpoint = train_config.fine_tune_checkpoint
  kind = fine_tune_checkpoint_type(train_config)
  matched = match_checkpoint(model, train_config)
  log_restore_report(checkpoint, kind, *matched)
  if 2 * len(matched.available) < matched.wanted and not allow_partial:
    raise errors.UserInputError(too_few_message(
        checkpoint, kind, len(matched.available), matched.wanted,
        matched.missing,
        matched.mismatched))
  return matched.available


def _examples(items):
  shown = ', '.join(items[:_EXAMPLES])
  return shown + (', ...' if len(items) > _EXAMPLES else '')


def too_few_message(checkpoint, kind, restored, wanted, missing, mismatched):
  """The one-line refusal of a checkpoint that gives too little."""
  held = [(value.keras_name or value.path, value.shape) for value in
          checkpoint_contents.read(checkpoint_contents.resolve(checkpoint))]
  parts = ['train_config.fine_tune_checkpoint %s (%s): only %d of the %d '
           'variables this model restores from it are there with the same '
           'name and shape (fewer than half: a checkpoint of another model '
           'or feature extractor?).' % (checkpoint, kind, restored, wanted)]
  if missing:
    parts.append('Not in it (%d): %s.' % (len(missing), _examples(missing)))
  if mismatched:
    parts.append('Other shape, checkpoint vs model (%d): %s.' % (
        len(mismatched), _examples(['%s %s vs %s' % entry
                                    for entry in mismatched])))
  parts.append('It holds %d variables, e.g. %s.' % (
      len(held), _examples(['%s %s' % entry for entry in held])))
  parts.append(
      'Nothing was trained or written. Point fine_tune_checkpoint at a '
      'checkpoint of this feature extractor (with the matching '
      'fine_tune_checkpoint_type), or pass '
      '--hparams_overrides=allow_partial_fine_tune=true to restore only '
      'what matches (load_pretrained=false: none of it).')
  return ' '.join(parts)


def log_restore_report(checkpoint, kind, available, missing, mismatched,
                       left_out=()):
  """Logs the names restored from and skipped in fine_tune_checkpoint.

  left_out: object paths of an object-based checkpoint's values, in the
  part `kind` restores, that feed no variable of this model.
  """
  logging.info('Fine-tuning from %s (%s): restoring %d variables: %s',
               checkpoint, kind, len(available),
               ', '.join(sorted(checkpoint_contents.object_path(key)
                                for key in available)))
  if missing:
    logging.warning('Fine-tuning: skipping %d variables not in the '
                    'checkpoint: %s', len(missing), ', '.join(missing))
  if mismatched:
    logging.warning(
        'Fine-tuning: skipping %d variables of another shape (checkpoint vs '
        'model): %s', len(mismatched),
        ', '.join('%s %s vs %s' % entry for entry in mismatched))
  if left_out:
    logging.warning(
        'Fine-tuning: leaving out %d values of the checkpoint that feed no '
        'variable of this model (`od-estimator inspect_checkpoint` lists '
        'them): %s', len(left_out), ', '.join(left_out))


def build_scaffold_fn(model, train_config, use_tpu, load_pretrained=True,
                      allow_partial=False):
  """Initializes from fine_tune_checkpoint; returns a TPU scaffold_fn.

  Off TPU the initialization happens here (init_from_checkpoint) and the
  returned scaffold_fn only adds the saver; on TPU it must run inside
  scaffold_fn. allow_partial: see restore_map.
  """
  available = None
  if train_config.fine_tune_checkpoint and load_pretrained:
    available = restore_map(model, train_config, allow_partial)
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
