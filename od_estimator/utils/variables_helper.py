"""Selecting variables by name and matching them against checkpoints.

Used by training to freeze or rescale gradients of parts of the model and to
warm-start from a checkpoint that may only partly match the model.
"""
import re

from absl import logging
import tensorflow as tf
# PartitionedVariable has no public TF2 symbol.
from tensorflow.python.ops import variables as tf_variables
# Neither has the name -> key table of object-based (TF2) checkpoints.
from tensorflow.python.trackable import base as trackable_base
from tensorflow.python.training import saver as saver_lib


def _variable_name(variable):
  """Checkpoint-style name: `scope/var` without the `:0` output suffix."""
  if isinstance(variable, tf_variables.PartitionedVariable):
    # A partitioned variable is saved under its full name, not a part's.
    return variable.name
  return variable.op.name


def filter_variables(variables, filter_regex_list, invert=False,
                     search=False):
  """Drops (or, with `invert`, keeps only) variables matching any regex.

  A variable matches when one of the regular expressions matches at the
  start of its name (`re.match`, as the original's gradient multipliers and
  freezers), or with `search` anywhere in it (`re.search`, as tf-slim's
  filter_variables, which the original applies to
  train_config.update_trainable_variables and freeze_variables). Empty
  expressions are ignored.

  Args:
    variables: list of tf variables.
    filter_regex_list: list of regular expression strings.
    invert: keep the matching variables instead of the others.
    search: match anywhere in the name rather than at its start.

  Returns:
    list of variables, in input order.
  """
  patterns = [re.compile(regex) for regex in filter_regex_list if regex]
  kept = []
  for variable in variables:
    name = _variable_name(variable)
    matched = any((pattern.search if search else pattern.match)(name)
                  for pattern in patterns)
    if matched == invert:
      kept.append(variable)
  return kept


def _matching_variable_refs(grads_and_vars, regex_list):
  variables = [var for _, var in grads_and_vars]
  return {var.ref() for var in filter_variables(variables, regex_list,
                                                 invert=True)}


def multiply_gradients_matching_regex(grads_and_vars, regex_list, multiplier):
  """Scales the gradients of variables whose names match a regex.

  Args:
    grads_and_vars: list of (gradient, variable) pairs; gradients may be
      tensors, tf.IndexedSlices or None.
    regex_list: list of regular expression strings.
    multiplier: float factor applied to the matching gradients.

  Returns:
    list of (gradient, variable) pairs, same order and variables as the
    input; None gradients stay None.
  """
  matching = _matching_variable_refs(grads_and_vars, regex_list)
  multiplier = float(multiplier)
  output = []
  for grad, var in grads_and_vars:
    if grad is not None and var.ref() in matching:
      logging.info('Applying multiplier %f to variable [%s]', multiplier,
                   _variable_name(var))
      if isinstance(grad, tf.IndexedSlices):
        # Sparse gradients (embedding lookups): scale the values only.
        grad = tf.IndexedSlices(grad.values * multiplier, grad.indices,
                                grad.dense_shape)
      else:
        grad = grad * multiplier
    output.append((grad, var))
  return output


def freeze_gradients_matching_regex(grads_and_vars, regex_list):
  """Removes the pairs whose variable names match a regex.

  The optimizer then never updates those variables.

  Args:
    grads_and_vars: list of (gradient, variable) pairs.
    regex_list: list of regular expression strings.

  Returns:
    list of the remaining (gradient, variable) pairs, in input order.
  """
  matching = _matching_variable_refs(grads_and_vars, regex_list)
  kept = []
  for grad, var in grads_and_vars:
    if var.ref() in matching:
      logging.info('Freezing variable [%s]', _variable_name(var))
    else:
      kept.append((grad, var))
  return kept


def _resolve_checkpoint_path(checkpoint_path):
  """Accepts a checkpoint prefix or a directory holding checkpoints."""
  if tf.io.gfile.isdir(checkpoint_path):
    latest = tf.train.latest_checkpoint(checkpoint_path)
    if latest is None:
      raise ValueError('No checkpoint found in directory %s.'
                       % checkpoint_path)
    return latest
  return checkpoint_path


def _object_based_keys(reader, checkpoint_path):
  """{variable name when saved: key} of a TF2 object-based checkpoint.

  tf.train.Checkpoint stores variables under object paths
  (`model/_feature_extractor/.../kernel/.ATTRIBUTES/VARIABLE_VALUE`) and
  records each one's name in the object graph; name-based checkpoints
  have no object graph and give {}.
  """
  if not reader.has_tensor(trackable_base.OBJECT_GRAPH_PROTO_KEY):
    return {}
  return saver_lib.object_graph_key_mapping(checkpoint_path)


def _variable_shape(variable):
  if isinstance(variable, (list, tuple)):
    raise ValueError('Expected a variable, got a list for one name; pass '
                     'partitioned variables as tf.PartitionedVariable.')
  return variable.shape.as_list()


def get_variables_available_in_checkpoint_with_report(
    variables, checkpoint_path, include_global_step=True):
  """Splits variables into restorable, missing and shape-mismatched ones.

  Names absent from the checkpoint are looked up in the object graph of a
  TF2 object-based checkpoint (tf.train.Checkpoint, as the original's TF2
  models write), by the name each variable had when saved; restoring those
  needs the dict form, whose result is keyed by checkpoint key.

  Args:
    variables: list of variables (looked up by their op name), or dict from
      checkpoint name to variable.
    checkpoint_path: checkpoint prefix (`.../model.ckpt-123`) or a directory,
      in which case its latest checkpoint is used.
    include_global_step: when False, a `global_step` entry of the checkpoint
      is ignored (the variable is neither restored nor reported as missing).

  Returns:
    available: variables present in the checkpoint with the same shape; a
      list (input order) if `variables` is a list, else a dict from
      checkpoint key (the name, or the object-based key it was found under)
      to variable, ready for init_from_checkpoint.
    missing: sorted list of names not found in the checkpoint.
    mismatched: sorted list of (name, checkpoint_shape, variable_shape)
      tuples, shapes as lists of ints.

  Raises:
    ValueError: if `variables` is neither a list nor a dict, or a directory
      holds no checkpoint.
  """
  if isinstance(variables, (list, tuple)):
    names_to_variables = {_variable_name(var): var for var in variables}
  elif isinstance(variables, dict):
    names_to_variables = variables
  else:
    raise ValueError('`variables` is expected to be a list or dict, got %s.'
                     % type(variables).__name__)
  checkpoint_path = _resolve_checkpoint_path(checkpoint_path)
  reader = tf.compat.v1.train.NewCheckpointReader(checkpoint_path)
  checkpoint_shapes = reader.get_variable_to_shape_map()
  object_keys = _object_based_keys(reader, checkpoint_path)
  global_step_name = tf.compat.v1.GraphKeys.GLOBAL_STEP

  available_keys = {}
  missing = []
  mismatched = []
  for name, variable in names_to_variables.items():
    if not include_global_step and name == global_step_name:
      continue
    key = name if name in checkpoint_shapes else object_keys.get(name)
    if key not in checkpoint_shapes:
      missing.append(name)
      continue
    checkpoint_shape = list(checkpoint_shapes[key])
    variable_shape = _variable_shape(variable)
    if checkpoint_shape == variable_shape:
      available_keys[name] = key
    else:
      mismatched.append((name, checkpoint_shape, variable_shape))

  if isinstance(variables, dict):
    available = {available_keys[name]: var for name, var in variables.items()
                 if name in available_keys}
  else:
    available = [var for var in variables
                 if _variable_name(var) in available_keys]
  return available, sorted(missing), sorted(mismatched)


def get_variables_available_in_checkpoint(variables,
                                          checkpoint_path,
                                          include_global_step=True):
  """Returns the variables that can be restored from a checkpoint.

  A variable is restorable when the checkpoint has an entry of the same name
  and shape. The others are logged in one warning that lists the missing
  names and the shape mismatches; use
  get_variables_available_in_checkpoint_with_report to get them as lists.

  Args:
    variables: list of variables, or dict from checkpoint name to variable.
    checkpoint_path: checkpoint prefix or a directory holding checkpoints.
    include_global_step: whether a `global_step` entry may be restored.

  Returns:
    list of variables if `variables` is a list, else dict name -> variable.

  Raises:
    ValueError: if `variables` is neither a list nor a dict, or a directory
      holds no checkpoint.
  """
  available, missing, mismatched = (
      get_variables_available_in_checkpoint_with_report(
          variables, checkpoint_path, include_global_step))
  if missing or mismatched:
    lines = ['Restoring %d of %d variables from %s; the others keep their '
             'initializers.' % (len(available),
                                len(available) + len(missing) +
                                len(mismatched), checkpoint_path)]
    if missing:
      lines.append('Not in checkpoint (%d): %s' % (len(missing),
                                                   ', '.join(missing)))
    if mismatched:
      lines.append('Shape mismatch (%d), checkpoint vs model: %s' % (
          len(mismatched), ', '.join(
              '%s %s vs %s' % entry for entry in mismatched)))
    logging.warning('\n'.join(lines))
  return available
