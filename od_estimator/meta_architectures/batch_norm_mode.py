"""Building part of a tf-slim model in the meta-architecture's batch norm mode.

Every meta-architecture runs its feature extractor and predictors with
batch norm in training mode only when it trains and batch norm is not
frozen, and collects the moving-average updates the same way.
"""
import tensorflow as tf
import tf_slim as slim


def build_in_batch_norm_mode(build_fn, is_training, inplace_update=False):
  """Returns build_fn()'s tensors, built with slim batch norm in this mode.

  Updates always go to UPDATE_OPS first: tf-slim's own in-place path
  (updates_collections=None) fails on TF 2.15. With `inplace_update` they
  are taken back out of the collection and made control dependencies of the
  outputs, which has the same effect.

  Args:
    build_fn: callable building tensors with slim layers.
    is_training: batch norm in training mode (batch statistics, updates).
    inplace_update: tie the updates to the outputs instead of UPDATE_OPS.

  Returns:
    build_fn()'s outputs (identities of them with `inplace_update`).
  """
  update_ops = tf.compat.v1.get_collection_ref(
      tf.compat.v1.GraphKeys.UPDATE_OPS)
  num_existing_updates = len(update_ops)
  with slim.arg_scope([slim.batch_norm], is_training=is_training,
                      updates_collections=tf.compat.v1.GraphKeys.UPDATE_OPS):
    outputs = build_fn()
  new_updates = update_ops[num_existing_updates:]
  if not inplace_update or not new_updates:
    return outputs
  del update_ops[num_existing_updates:]
  with tf.control_dependencies(new_updates):
    return tf.nest.map_structure(tf.identity, outputs)
