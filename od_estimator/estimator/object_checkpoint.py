"""Restoring from object-based (TF2) checkpoints, as the original's TF2 code
reads them: fine-tuning, and whole models (evaluation, export).

The original fine-tunes from a part of the checkpoint's object graph per
fine_tune_checkpoint_type (its SSD's restore_from_objects):

  classification  the Keras backbone: `feature_extractor/...`, as its
                  classification checkpoints hold it (we also take
                  `model/_feature_extractor/classification_backbone/...`
                  from a detection checkpoint);
  detection       the whole feature extractor, backbone and FPN or extra
                  feature maps, no heads: `model/_feature_extractor/...`;
  full            the whole model, heads included: `model/...`.

Within that part, each saved model value feeds the variable of this graph
that has its Keras name (the name the object graph records for it; our
Keras-named models give their variables the original's names). Where the
name does not identify it, its object path does: a process that built its
model twice (a notebook) saves the second one's added layers below a
numbered Keras model name (`ssd_mobile_net_v2_keras_feature_extractor_1/
FeatureMaps/...`) at the object paths of the first, which name them
without the number. Where Keras numbered the layers themselves in the
order it built them (`conv2d_17`, `freezable_batch_norm_42`: the Keras
Inception-ResNet v2), the name says nothing about the layer; such models'
values are read by object path alone (models/keras_object_paths). The
original's two-stage models hold their feature extractor as two Keras
models, `model/_feature_extractor_for_proposal_features/...` and
`model/_feature_extractor_for_box_classifier_features/...`, the detection
part, whose layers together are the classification backbone.

Fine-tuning never restores optimizer slots: the original restores the
model objects alone, so a checkpoint holding moving averages (`average`
slots of its ExponentialMovingAverage optimizer) fine-tunes from the raw
weights there too; its evaluation swaps the averages in (whole_model_keys
with use_moving_averages).
"""
import collections
import re

from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import keras_object_paths
from od_estimator.utils import checkpoint_contents

# fine_tune_checkpoint_type -> object paths of the part it restores.
_TWO_STAGE_EXTRACTOR = ('model/_feature_extractor_for_proposal_features/',
                        'model/_feature_extractor_for_box_classifier_features/')
PARTS = {
    'classification': ('feature_extractor/',
                       'model/_feature_extractor/classification_backbone/')
                      + _TWO_STAGE_EXTRACTOR,
    'detection': ('model/_feature_extractor/',) + _TWO_STAGE_EXTRACTOR,
    'full': ('model/',),
}

# Roots of the model's values: a training or exported checkpoint's model,
# a classification checkpoint's backbone.
_MODEL_ROOTS = ('model/', 'feature_extractor/')

# The number Keras gives a model's name (`<model>_<n>`).
_MODEL_NUMBER = re.compile(r'_\d+$')

class Matched(collections.namedtuple('Matched', [
    'available',   # {checkpoint key: variable}, for init_from_checkpoint
    'missing',     # sorted names of wanted variables the part lacks
    'mismatched',  # sorted (name, checkpoint shape, variable shape)
    'left_out',    # sorted object paths of the part's values fed nowhere
])):
  """Which wanted variables a checkpoint gives, and what it does not."""

  @property
  def wanted(self):
    """How many variables were asked for."""
    return len(self.available) + len(self.missing) + len(self.mismatched)


def model_values(values):
  """The saved values that are model weights (no slot, no bookkeeping)."""
  return [value for value in values
          if value.slot_of is None and value.keras_name and
          value.path.startswith(_MODEL_ROOTS)]


def kinds_restoring(path):
  """The fine_tune_checkpoint_types whose part holds object path `path`."""
  return [kind for kind, prefixes in sorted(PARTS.items())
          if path.startswith(prefixes)]


def wanted_variables(model, kind):
  """{variable name: variable} that `kind` restores into this graph.

  classification: the Keras backbone's variables, which sit at the graph's
  root as `<layer>/<weight>` (the extractor's added layers are below its
  own Keras name), or those its `is_backbone_variable` tells; detection: the feature extractor's; full: the model's.
  """
  if kind == 'full':
    wanted = model.restore_map(fine_tune_checkpoint_type='detection',
                               load_all_detection_checkpoint_vars=True)
    wanted.pop(tf.compat.v1.GraphKeys.GLOBAL_STEP, None)
    return wanted
  wanted = model.restore_map(fine_tune_checkpoint_type=kind,
                             load_all_detection_checkpoint_vars=False)
  if kind == 'classification':
    is_backbone = getattr(getattr(model, 'feature_extractor', None),
                          'is_backbone_variable', _at_the_root)
    wanted = {name: variable for name, variable in wanted.items()
              if is_backbone(name)}
  return wanted


def _at_the_root(name):
  """Whether a Keras name is `<layer>/<weight>`, a backbone's."""
  return name.count('/') == 1


def match(wanted, values, kind):
  """Pairs the wanted variables with the saved values of `kind`'s part.

  Args:
    wanted: {variable name: variable}, from wanted_variables.
    values: checkpoint_contents.read of the checkpoint.
    kind: 'classification', 'detection' or 'full'.

  Returns:
    Matched.
  """
  by_name = collections.defaultdict(list)
  left_out = []
  by_path = _known_paths(wanted)
  by_keras_name = _without(wanted, by_path.values())
  for value in model_values(values):
    if value.path.startswith(PARTS[kind]):
      name = by_path.get(value.path) or _identity(value.keras_name,
                                                  by_keras_name)
      if name is None:
        left_out.append(value.path)
      else:
        by_name[name].append(value)
  available, missing, mismatched = {}, [], []
  used = set()
  for name, variable in sorted(wanted.items()):
    saved = by_name.get(name, [])
    if len(saved) != 1:
      # Not there, or a name shared by two values (the object paths then
      # tell them apart, and nothing says which one this variable is).
      missing.append(name)
      continue
    value, = saved
    used.add(value.key)
    shape = variable.shape.as_list()
    if value.shape == shape:
      available[value.key] = variable
    else:
      mismatched.append((name, value.shape, shape))
  left_out += [value.path for group in by_name.values() for value in group
               if value.key not in used]
  return Matched(available, missing, mismatched, sorted(left_out))


def _known_paths(variables):
  """{object path: name} of the variables whose object paths are known.

  Args:
    variables: {name: variable}.
  """
  names = {variable.op.name: name for name, variable in variables.items()}
  return {path: names[variable_name] for variable_name, paths in
          keras_object_paths.known_paths(list(names)).items()
          for path in paths if path is not None}


def _without(variables, names):
  """`variables` ({name: variable}) without `names`."""
  names = set(names)
  return {name: variable for name, variable in variables.items()
          if name not in names}


def _identity(keras_name, wanted):
  """The wanted variable name a saved value's Keras name stands for, or None.

  The name itself, or the name without the numbers Keras gave the models
  it is below (`<model>_<n>/<layer>/<w>`, or nested as the second stage's
  `mask_rcnn_keras_box_predictor_1/mask_rcnn_box_head_1/...`) when the
  writing process had built them before (same object path, see above).
  """
  if keras_name in wanted:
    return keras_name
  parts = keras_name.split('/')
  unnumbered = '/'.join([_MODEL_NUMBER.sub('', model)
                         for model in parts[:-2]] + parts[-2:])
  return unnumbered if unnumbered in wanted else None


def restore_map(model, kind, checkpoint_prefix):
  """Matched for an object-based checkpoint; logs a note on averages.

  Args:
    model: the DetectionModel, its graph built.
    kind: 'classification', 'detection' or 'full'.
    checkpoint_prefix: an object-based checkpoint's prefix.

  Raises:
    errors.UserInputError: the model has no Keras backbone to restore
      (classification into a feature extractor of TF1 names).
  """
  values = checkpoint_contents.read(checkpoint_prefix)
  if has_moving_averages(values):
    logging.info('%s holds moving averages; fine-tuning starts from its raw '
                 'weights, as the original does.', checkpoint_prefix)
  wanted = wanted_variables(model, kind)
  if not wanted:
    raise errors.UserInputError(
        'train_config.fine_tune_checkpoint %s is a TF2 (object-based) '
        'checkpoint, whose %s part restores into the feature extractor '
        'types of TF2 names (those ending in _keras); this model has no '
        'variable of such names. Use a TF1 checkpoint, or the _keras type '
        'of this feature extractor.' % (checkpoint_prefix, kind))
  return match(wanted, values, kind)


# Path of the training step's value in the original's training checkpoints,
# and of its optimizer's step count (with moving averages, of the optimizer
# they wrap), which stands for it in a checkpoint without `step`.
_STEP_PATH = 'step'
_ITERATION_PATHS = ('optimizer/iter', 'optimizer/ema_base_optimizer/iter')


def whole_model_keys(variables, values, use_moving_averages=False,
                     keep_raw=()):
  """{checkpoint key: variable} restoring a whole model from a TF2 checkpoint.

  Args:
    variables: the default graph's global variables.
    values: checkpoint_contents.read of the checkpoint.
    use_moving_averages: trainable variables read the `average` slot of
      their value where the checkpoint has one.
    keep_raw: name substrings of variables that never read an average.

  Returns:
    dict; a variable no value stands for keeps its own name as key (so
    restoring reports it missing), global_step reads the training step
    (`step`, else the optimizer's `iter`).
  """
  names = {variable.op.name: variable for variable in variables}
  by_path = _known_paths(names)
  by_keras_name = _without(names, by_path.values())
  trainable = {variable.op.name
               for variable in tf.compat.v1.trainable_variables()}
  averages = {value.slot_of: value.key for value in values
              if value.slot_name == checkpoint_contents.AVERAGE_SLOT}
  keys = {}
  for value in values:
    if value.slot_of is not None or not (
        value.path.startswith(PARTS['full']) or value.path == _STEP_PATH):
      continue
    name = by_path.get(value.path) or _identity(value.keras_name,
                                                by_keras_name)
    if name is None or name in keys:
      continue
    key = value.key
    if (use_moving_averages and name in trainable and
        not any(part in name for part in keep_raw)):
      key = averages.get(value.path, key)
    keys[name] = key
  step = tf.compat.v1.GraphKeys.GLOBAL_STEP
  if step in names and step not in keys:
    keys.update({step: value.key for value in values
                 if value.path in _ITERATION_PATHS})
  return {keys.get(name, name): variable for name, variable in names.items()}


def has_moving_averages(values):
  """Whether a TF2 checkpoint holds the original's moving averages."""
  return any(value.slot_name == checkpoint_contents.AVERAGE_SLOT
             for value in values)
