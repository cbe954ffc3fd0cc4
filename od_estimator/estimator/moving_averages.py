"""The one restore of eval_config.use_moving_averages: averages as weights.

Evaluation, Estimator.predict and the Servo export read the weights through
`scaffold` (the Saver of a Scaffold, or TPUEstimator's scaffold_fn); the
SavedModel / frozen-graph export and the TFLite graph through `restore`
(then re-save them under the variables' own names). Both map the
variables with `variables_to_restore`: each trainable variable from its
`<name>/ExponentialMovingAverage` entry, every other one from its own name;
from a TF2 checkpoint (exports, which know it), each variable from its
value's key, the averages from its `average` slot (see object_checkpoint).
"""
from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import optimizer_builder
from od_estimator.estimator import object_checkpoint
from od_estimator.utils import checkpoint_contents

_GLOBAL_STEP = 'global_step'
_EMA_NAME = 'ExponentialMovingAverage'


def has_moving_averages(checkpoint_prefix):
  """Whether the checkpoint holds any `.../ExponentialMovingAverage` entry."""
  names = tf.compat.v1.train.NewCheckpointReader(
      checkpoint_prefix).get_variable_to_shape_map()
  return any(name.endswith('/' + _EMA_NAME) for name in names)


def variables_to_restore(use_moving_averages, checkpoint_prefix=None,
                         no_ema_collection=None):
  """{checkpoint name: variable} for the default graph's global variables.

  Args:
    use_moving_averages: read the trainable variables from their averages.
    checkpoint_prefix: the checkpoint read, when known as the graph is
      built (exports): one without any average gives the raw weights (with
      a logged line), and a trainable variable without its average reads
      its raw value. Without it (the Estimator's graphs, built before the
      checkpoint is chosen) every trainable variable reads its average.
    no_ema_collection: optional name substrings of variables that keep their
      raw values.
  """
  variables = tf.compat.v1.global_variables()
  if checkpoint_prefix is not None and checkpoint_contents.is_object_based(
      checkpoint_prefix):
    return _object_based_variables_to_restore(
        variables, use_moving_averages, checkpoint_prefix, no_ema_collection)
  if (use_moving_averages and checkpoint_prefix is not None and
      not has_moving_averages(checkpoint_prefix)):
    # E.g. released checkpoints trained without averaging: one line instead
    # of a warning per variable.
    logging.info('%s holds no moving averages; exporting the raw weights.',
                 checkpoint_prefix)
    use_moving_averages = False
  if not use_moving_averages:
    return {var.op.name: var for var in variables}
  name_map = optimizer_builder.moving_average_variables_to_restore(
      variables, checkpoint_path=checkpoint_prefix)
  if no_ema_collection:
    name_map = {
        (var.op.name if any(s in var.op.name for s in no_ema_collection)
         else name): var for name, var in name_map.items()}
  return name_map


def _object_based_variables_to_restore(variables, use_moving_averages,
                                       checkpoint_prefix, no_ema_collection):
  """variables_to_restore of a TF2 checkpoint: keys by object path."""
  values = checkpoint_contents.read(checkpoint_prefix)
  if use_moving_averages and not object_checkpoint.has_moving_averages(
      values):
    logging.info('%s holds no moving averages; reading its raw weights.',
                 checkpoint_prefix)
    use_moving_averages = False
  return object_checkpoint.whole_model_keys(
      variables, values, use_moving_averages, no_ema_collection or ())


def scaffold():
  """Scaffold whose saver loads the averages into the model's variables."""
  return tf.compat.v1.train.Scaffold(
      saver=tf.compat.v1.train.Saver(variables_to_restore(True)))


def scaffold_fn(use_moving_averages):
  """`scaffold` (a TPUEstimator scaffold_fn) with use_moving_averages; None
  otherwise (the Estimator's default saver reads the raw weights)."""
  return scaffold if use_moving_averages else None


def restore(sess, use_moving_averages, checkpoint_prefix,
            no_ema_collection=None):
  """Initializes sess's variables, then restores the checkpoint's weights.

  The averages with use_moving_averages (see variables_to_restore).
  global_step may be absent (e.g. some released checkpoints) and then keeps
  its initial value.

  Raises:
    errors.UserInputError: naming every variable missing from the
      checkpoint and every shape that differs.
  """
  available, missing, mismatched = match(
      use_moving_averages, checkpoint_prefix, no_ema_collection)
  missing = [name for name in missing if name != _GLOBAL_STEP]
  if missing or mismatched:
    raise errors.UserInputError(_mismatch_message(checkpoint_prefix, missing,
                                                  mismatched))
  sess.run(tf.compat.v1.global_variables_initializer())
  tf.compat.v1.train.Saver(available).restore(sess, checkpoint_prefix)


def match(use_moving_averages, checkpoint_prefix, no_ema_collection=None):
  """What of variables_to_restore the checkpoint gives.

  Returns:
    ({checkpoint key: variable} it gives, sorted keys it lacks (a
    variable's own name where a TF2 checkpoint has no value for it), and
    sorted 'key (graph shape, checkpoint shape)' of values of another
    shape).
  """
  name_to_variable = variables_to_restore(
      use_moving_averages, checkpoint_prefix, no_ema_collection)
  shapes = tf.compat.v1.train.NewCheckpointReader(
      checkpoint_prefix).get_variable_to_shape_map()
  available, missing, mismatched = {}, [], []
  for name, var in sorted(name_to_variable.items()):
    if name not in shapes:
      missing.append(name)
    elif not var.shape.is_compatible_with(shapes[name]):
      mismatched.append('%s (graph %s, checkpoint %s)' % (
          name, var.shape.as_list(), shapes[name]))
    else:
      available[name] = var
  return available, missing, mismatched


def _mismatch_message(checkpoint_prefix, missing, mismatched):
  problems = []
  if missing:
    problems.append('%d variable(s) of the model are not in the '
                    'checkpoint: %s' % (len(missing), ', '.join(missing)))
  if mismatched:
    problems.append('%d have another shape: %s' % (
        len(mismatched), ', '.join(mismatched)))
  return ('checkpoint %s does not match the model of the pipeline config; '
          '%s.' % (checkpoint_prefix, '; '.join(problems)))
