"""The training half of model_fn: losses, trainable variables, train op.

Called by model_lib.create_model_fn in TRAIN (and EVAL for the losses);
each function is small and testable alone.
"""
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import optimizer_builder
from od_estimator.utils import variables_helper

# In the error of a training step whose loss was NaN or Inf.
NON_FINITE_LOSS = 'Loss/total_loss is NaN or Inf'
# Graph collection holding the configured optimizer (before any wrapper) and
# its learning rate tensor, for resuming from a TF2 checkpoint
# (object_based_resume maps that checkpoint's optimizer slots onto it).
OPTIMIZER_COLLECTION = 'od_estimator_configured_optimizer'


def replica_id():
  """This replica's index within a distribution strategy's replicas (0)."""
  context = tf.distribute.get_replica_context()
  if context is None:
    return 0
  return int(tf.get_static_value(context.replica_id_in_sync_group) or 0)


def scalar_summary(tag, tensor):
  """A scalar summary whose tag is exactly `tag`.

  tf.summary.scalar derives the tag from a uniquified op name, so a tag
  equal to an existing op's name (e.g. the model's 'Loss/total_loss')
  would come out as 'Loss/total_loss_1'. Under a distribution strategy
  only the first replica writes it (as tf.compat.v1.summary does), since
  merged summaries may not repeat a tag; returns None on the others.
  """
  if replica_id() > 0:
    return None
  summary = tf.raw_ops.ScalarSummary(tags=tf.constant(tag),
                                     values=tf.cast(tensor, tf.float32))
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES, summary)
  return summary


def build_losses(model, prediction_dict, true_image_shapes, train_config):
  """Returns ({'Loss/...': scalar}, loss to minimize); see below.

  The dict has the four standard keys. The loss to minimize is
  Loss/total_loss except under a distribution strategy (see
  replica_training_loss).
  """
  losses = dict(model.loss(prediction_dict, true_image_shapes))
  regularization = model.regularization_losses()
  if train_config.add_regularization_loss and regularization:
    losses['Loss/regularization_loss'] = tf.add_n(
        [tf.cast(r, tf.float32) for r in regularization],
        name='regularization_loss')
  else:
    losses['Loss/regularization_loss'] = tf.constant(
        0.0, name='regularization_loss')
  total = tf.add_n(list(losses.values()), name='total_loss')
  losses['Loss/total_loss'] = total
  return losses, replica_training_loss(total,
                                        losses['Loss/regularization_loss'])


def replica_training_loss(total_loss, regularization_loss):
  """The loss this replica minimizes (total_loss without a strategy).

  Under MirroredStrategy the regularization losses exist once, built from
  the first replica's variables when it created them, so the other
  replicas' gradients miss them. The first replica counts them
  num_replicas times and the others not at all: the mean loss and the
  summed gradients then equal one device's.
  """
  context = tf.distribute.get_replica_context()
  replicas = context.num_replicas_in_sync if context else 1
  if replicas == 1:
    return total_loss
  weight = replicas - 1 if replica_id() == 0 else -1
  return total_loss + weight * regularization_loss


def trainable_variables(train_config):
  """The trainable variables the optimizer updates, as the original chose.

  train_config.update_trainable_variables lists the only variables trained
  (all when empty), then train_config.freeze_variables removes some of
  those; each regex may match anywhere in a variable's name.
  """
  variables = tf.compat.v1.trainable_variables()
  update = [regex for regex in train_config.update_trainable_variables
            if regex]
  if update:
    variables = variables_helper.filter_variables(
        variables, update, invert=True, search=True)
  variables = variables_helper.filter_variables(
      variables, train_config.freeze_variables, search=True)
  if not variables:
    raise errors.UserInputError(
        'train_config.update_trainable_variables %s and freeze_variables %s '
        'leave no variable to train; each regex matches anywhere in a '
        'variable name, e.g. "FeatureExtractor" freezes the backbone.' % (
            list(train_config.update_trainable_variables),
            list(train_config.freeze_variables)))
  return variables


def build_train_op(total_loss, model, train_config, use_tpu,
                    check_finite_loss=False, optimizer_wrapper=None):
  """Returns the train op: gradients, clipping, update ops, apply.

  With `check_finite_loss` a NaN or Inf loss fails the step (an
  InvalidArgumentError naming NON_FINITE_LOSS) before the weights change.
  `optimizer_wrapper`, fn(optimizer) -> optimizer, wraps the configured
  optimizer (legacy train's SyncReplicasOptimizer).
  """
  global_step = tf.compat.v1.train.get_or_create_global_step()
  optimizer, summary_vars = optimizer_builder.build(train_config.optimizer,
                                                    global_step)
  tf.compat.v1.add_to_collection(OPTIMIZER_COLLECTION,
                                 (optimizer, summary_vars[0]))
  # XLA compiles no summary op, so a TPU step writes none (as the original).
  if not use_tpu:
    for variable in summary_vars:
      scalar_summary(variable.op.name, variable)
  if optimizer_wrapper is not None:
    optimizer = optimizer_wrapper(optimizer)
  if use_tpu:
    optimizer = tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
  grads_and_vars = optimizer.compute_gradients(
      total_loss, var_list=trainable_variables(train_config))
  grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
  if train_config.bias_grad_multiplier:
    grads_and_vars = variables_helper.multiply_gradients_matching_regex(
        grads_and_vars, ['.*/biases'], train_config.bias_grad_multiplier)
  if train_config.gradient_clipping_by_norm > 0:
    gradients, variables = zip(*grads_and_vars)
    gradients, _ = tf.clip_by_global_norm(
        gradients, train_config.gradient_clipping_by_norm)
    grads_and_vars = list(zip(gradients, variables))
  if train_config.summarize_gradients:
    for gradient, variable in grads_and_vars:
      tf.compat.v1.summary.histogram('gradients/' + variable.op.name,
                                     gradient)
  checks = ([assert_finite_loss(total_loss, global_step)]
            if check_finite_loss else [])
  # One grouped dependency: every op apply_gradients makes gets one control
  # input, not one per batch-norm update (a 30 MB graph on a tiny SSD).
  with tf.control_dependencies([tf.group(checks + model.updates())]):
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step)


def assert_finite_loss(total_loss, global_step):
  """Op failing the training step, before any update, on a NaN or Inf loss.

  The Estimator's NanTensorHook looks only after the update and only for
  NaN: by then a checkpoint of the broken weights may have been written.
  """
  return tf.debugging.Assert(
      tf.math.is_finite(total_loss),
      [NON_FINITE_LOSS, 'at step', global_step, 'loss', total_loss],
      name='assert_finite_loss')
