"""Whether the checkpoint a training would resume from fits its model.

An Estimator restores the latest checkpoint of its model_dir into whatever
graph the pipeline config builds. When the config changed between two runs
into the same model_dir (num_classes, the feature extractor, the
optimizer), that restore fails late, after the Estimator has written files
there. `checked_model_fn` compares the checkpoint with the variables of
the training graph when the Estimator has just built it: after model_fn,
before the Estimator writes anything in model_dir.
"""
import tensorflow as tf

from od_estimator import errors

# A long list of names helps nobody: the first few show what changed.
_MAX_NAMES = 20


def checked_model_fn(model_fn, model_dir, checkpoint, then,
                     evaluating=False):
  """model_fn, checking the training graph it builds against `checkpoint`.

  The graph's global variables are what the Estimator's Saver restores
  when training resumes: the model's, the optimizer's slots, moving
  averages and global_step. When model_fn has built the training graph
  (every replica of it, under a distribution strategy), those the
  checkpoint cannot give raise errors.UserInputError; otherwise `then()`
  runs, once. Both happen before the Estimator writes anything in
  model_dir. When the checkpoint is at the last step, the Estimator skips
  training and the evaluation graph is checked instead.

  Args:
    model_fn: fn(features, labels, mode, params) returning an
      EstimatorSpec.
    model_dir: the Estimator's model_dir, as given (for the message).
    checkpoint: the checkpoint in model_dir training would resume from, or
      None when it starts afresh (then only `then()` runs).
    then: fn() run once the check has passed (writing the run's files).
    evaluating: model_dir is the --checkpoint_dir of an evaluation-only
      run, which the message names instead.

  Returns:
    fn(features, labels, mode, params=None), the same EstimatorSpecs.
  """
  checked = []

  def check(unused_strategy=None):
    if checked:
      return
    mismatched, missing = differences(
        dict(tf.train.list_variables(checkpoint)),
        {variable.op.name: variable.shape.as_list()
         for variable in tf.compat.v1.global_variables()}
    ) if checkpoint else ([], [])
    if mismatched or missing:
      raise errors.UserInputError(mismatch_message(
          model_dir, checkpoint, mismatched, missing, evaluating))
    then()
    checked.append(checkpoint)

  # Plain Python: no AutoGraph conversion under call_for_each_replica.
  @tf.autograph.experimental.do_not_convert
  def build(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    # Evaluation first when the checkpoint has reached the last step.
    if mode != tf.estimator.ModeKeys.PREDICT:
      if tf.distribute.has_strategy():
        # Once every replica has built its part of the graph.
        tf.distribute.get_replica_context().merge_call(check)
      else:
        check()
    return spec

  # The arguments the Estimator looks for, by name.
  def resuming_model_fn(features, labels, mode, params=None):
    return build(features, labels, mode, params)
  return resuming_model_fn


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


def mismatch_message(model_dir, checkpoint, mismatched, missing,
                     evaluating=False):
  """The error naming what differs and how to go on."""
  parts = ['%s=%s holds checkpoint %s of a different model than this '
           'pipeline config builds (did num_classes, the feature extractor '
           'or the optimizer change since it was written?), so %s.' % (
               '--checkpoint_dir' if evaluating else '--model_dir',
               model_dir, checkpoint, 'it cannot be evaluated with this '
               'config' if evaluating else 'training cannot resume from it')]
  if mismatched:
    parts.append('Shape differs (checkpoint vs model) for %d variable(s): '
                 '%s.' % (len(mismatched), _listed(
                     ['%s %s vs %s' % entry for entry in mismatched])))
  if missing:
    parts.append('Not in the checkpoint: %d variable(s): %s.' % (
        len(missing), _listed(missing)))
  if evaluating:
    parts.append('Nothing was changed. Evaluate with the pipeline.config '
                 'the training wrote into its model_dir.')
    return ' '.join(parts)
  parts.append(
      'Nothing in --model_dir was changed. Train into a new --model_dir, '
      'or start a new --model_dir from the old weights with train_config { '
      'fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: "detection" } '
      '(variables of another shape then keep their initial values).'
      % checkpoint)
  return ' '.join(parts)
