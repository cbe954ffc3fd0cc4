"""Whether the checkpoint a training would resume from fits its model.

An Estimator restores the latest checkpoint of its model_dir into whatever
graph the pipeline config builds. When the config changed between two runs
into the same model_dir (num_classes, the feature extractor, the
optimizer), that restore fails late, after the Estimator has rewritten
files there. `check` compares the checkpoint with the variables of the
training graph, built once in a throwaway graph, before anything in
model_dir is written.
"""
import tensorflow as tf

from od_estimator import errors

# A long list of names helps nobody: the first few show what changed.
_MAX_NAMES = 20


def training_variable_shapes(model_fn, train_input_fn):
  """{name: shape} of every global variable of model_fn's training graph.

  These are what the Estimator's Saver restores when training resumes:
  the model's variables, the optimizer's slots and global_step.

  Args:
    model_fn: fn(features, labels, mode, params) returning an
      EstimatorSpec, built for CPU (the variables of a TPU graph have the
      same names and shapes).
    train_input_fn: fn(params) returning the training tf.data.Dataset.

  Returns:
    {variable name: shape as a list of ints}.
  """
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    dataset = train_input_fn(params={})
    features, labels = tf.compat.v1.data.make_initializable_iterator(
        dataset).get_next()
    model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, None)
    return {variable.op.name: variable.shape.as_list()
            for variable in tf.compat.v1.global_variables()}


def differences(checkpoint_shapes, model_shapes):
  """What keeps a checkpoint from restoring into a model.

  Checkpoint entries the model lacks are no obstacle (the Saver restores
  only the model's variables). Optimizer slots and moving averages
  (`<variable>/<suffix>`) of a variable listed in either list are left
  out.

  Args:
    checkpoint_shapes: {name: shape} of the checkpoint.
    model_shapes: {name: shape} of the model's variables.

  Returns:
    (mismatched, missing): sorted [(name, checkpoint shape, model shape)]
    of variables whose shapes differ, and sorted names of model variables
    the checkpoint lacks.
  """
  mismatched = sorted(
      (name, list(checkpoint_shapes[name]), list(shape))
      for name, shape in model_shapes.items()
      if name in checkpoint_shapes and
      list(checkpoint_shapes[name]) != list(shape))
  missing = sorted(name for name in model_shapes
                   if name not in checkpoint_shapes)
  listed = {entry[0] for entry in mismatched} | set(missing)
  return ([entry for entry in mismatched if not _is_slot(entry[0], listed)],
          [name for name in missing if not _is_slot(name, listed)])


def _is_slot(name, listed):
  """Whether `name` is `<a listed name>/<suffix>` (a slot or an average)."""
  parts = name.split('/')
  return any('/'.join(parts[:end]) in listed for end in range(1, len(parts)))


def _listed(items):
  shown = ', '.join(items[:_MAX_NAMES])
  if len(items) > _MAX_NAMES:
    shown += ' (and %d more)' % (len(items) - _MAX_NAMES)
  return shown


def mismatch_message(model_dir, checkpoint, mismatched, missing):
  """The error naming what differs and how to go on."""
  parts = ['--model_dir=%s holds checkpoint %s of a different model than '
           'this pipeline config builds (did num_classes, the feature '
           'extractor or the optimizer change since it was written?), so '
           'training cannot resume from it.' % (model_dir, checkpoint)]
  if mismatched:
    parts.append('Shape differs (checkpoint vs model) for %d variable(s): '
                 '%s.' % (len(mismatched), _listed(
                     ['%s %s vs %s' % entry for entry in mismatched])))
  if missing:
    parts.append('Not in the checkpoint: %d variable(s): %s.' % (
        len(missing), _listed(missing)))
  parts.append(
      'Nothing in --model_dir was changed. Train into a new --model_dir, '
      'or start a new --model_dir from the old weights with train_config { '
      'fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: "detection" } '
      '(variables of another shape then keep their initial values).'
      % checkpoint)
  return ' '.join(parts)


def check(model_dir, model_fn, train_input_fn):
  """Raises when training would resume from a checkpoint of another model.

  Args:
    model_dir: the Estimator's model_dir (None or without a checkpoint:
      nothing to check).
    model_fn: the training model_fn, built for CPU.
    train_input_fn: fn(params) returning the training dataset.

  Raises:
    errors.UserInputError: naming the variables whose shapes differ (with
      both shapes) and those missing from the checkpoint, and what to do.
  """
  checkpoint = tf.train.latest_checkpoint(model_dir) if model_dir else None
  if not checkpoint:
    return
  checkpoint_shapes = dict(tf.train.list_variables(checkpoint))
  mismatched, missing = differences(
      checkpoint_shapes, training_variable_shapes(model_fn, train_input_fn))
  if mismatched or missing:
    raise errors.UserInputError(
        mismatch_message(model_dir, checkpoint, mismatched, missing))
