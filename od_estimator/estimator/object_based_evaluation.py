"""Evaluating a folder of the original's TF2 training checkpoints (ckpt-N).

The original's model_main_tf2 saves tf.train.Checkpoint(step, model,
optimizer) as ckpt-N (N counts the saves, `step` holds the training step).
The Estimator evaluates them as its own checkpoints, in place: the
evaluation graph's Scaffold gets a Saver keyed by the values' object paths
(moving_averages.variables_to_restore, as the exporters read a ckpt-N:
the averages with eval_config.use_moving_averages where the checkpoint
holds them), so global_step reads `step` and the summaries carry it.
Nothing is converted or written into the user's folder.

The keys come from the folder's latest checkpoint when the graph is built,
just before the Estimator restores the one it evaluates: the checkpoints of
one training run share their keys.
"""
import os

import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import moving_averages
from od_estimator.utils import checkpoint_contents

_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP


def evaluating_model_fn(model_fn, checkpoint_dir, use_moving_averages,
                        pipeline_config_path):
  """model_fn whose EVAL spec restores the ckpt-N of checkpoint_dir.

  Args:
    model_fn: the model_fn (an EstimatorSpec in EVAL).
    checkpoint_dir: the --checkpoint_dir evaluated.
    use_moving_averages: eval_config.use_moving_averages.
    pipeline_config_path: the config, for the messages.

  Returns:
    fn(features, labels, mode, params=None): the same specs; in EVAL, when
    the folder's latest checkpoint is object-based, with a Scaffold whose
    Saver reads it (name-based ones keep the Estimator's own restore).

  Raises (when the EVAL graph is built):
    errors.UserInputError: the checkpoint lacks a value of the model, holds
      one of another shape, or holds no training step.
  """
  def object_based_model_fn(features, labels, mode, params=None):
    spec = model_fn(features, labels, mode, params)
    if mode != tf.estimator.ModeKeys.EVAL:
      return spec
    checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
    if checkpoint is None or not checkpoint_contents.is_object_based(
        checkpoint):
      return spec
    saver = tf.compat.v1.train.Saver(restored_variables(
        checkpoint, use_moving_averages, checkpoint_dir,
        pipeline_config_path))
    return spec._replace(scaffold=tf.compat.v1.train.Scaffold(saver=saver))
  return object_based_model_fn


def restored_variables(checkpoint, use_moving_averages, checkpoint_dir,
                       pipeline_config_path):
  """{checkpoint key: variable} of the default graph, all in `checkpoint`.

  Raises:
    errors.UserInputError: see evaluating_model_fn.
  """
  available, missing, mismatched = moving_averages.match(
      use_moving_averages, checkpoint)
  where = ('--checkpoint_dir=%s: %s (TF2, object-based) does not fit the '
           'model of --pipeline_config_path=%s' % (
               checkpoint_dir, os.path.basename(checkpoint),
               pipeline_config_path))
  if missing == [_GLOBAL_STEP] and not mismatched:
    raise errors.UserInputError(
        '%s: it holds the model alone, no training step (`step` or the '
        "optimizer's `iter`), as an export's checkpoint/ckpt-0 does; "
        'evaluate the folder the training wrote.' % where)
  missing = [name for name in missing if name != _GLOBAL_STEP]
  if missing:
    raise errors.UserInputError(
        '%s: no value for %s%s (a value is found by the variable name its '
        'object graph records); is it the config that trained it? Nothing '
        'was changed.' % (where, missing[0], _more(missing)))
  if mismatched:
    raise errors.UserInputError(
        '%s: shape differs for %s%s. Nothing was changed.' % (
            where, mismatched[0], _more(mismatched)))
  return available


def _more(items):
  return ' (and %d more)' % (len(items) - 1) if len(items) > 1 else ''
