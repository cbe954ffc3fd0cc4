"""Lists what a checkpoint holds: `od-estimator inspect_checkpoint`.

Usage:
  od-estimator inspect_checkpoint PATH [--pipeline_config_path=CONFIG]
      [--config_override=TEXT]
  python -m od_estimator.checks.inspect_checkpoint ...   (same flags)

PATH is a checkpoint prefix (model.ckpt-123, ckpt-1) or a folder (its latest
checkpoint). One line per saved value, for name-based (TF1) and
object-based (TF2) checkpoints alike:

  <object path or name>  <Keras name>  [<shape>]  <dtype>  <what it is>

The Keras name is the variable's name recorded in a TF2 checkpoint's
object graph ('-' in TF1, where the name is the key). Optimizer slots and
the moving averages of the original's TF2 loop (slots named `average`)
say whose they are. With --pipeline_config_path the model is built (no
training graph) and each value says which variable it feeds and with
which fine_tune_checkpoint_type (classification, detection, full), or why
it feeds none; the variables nothing feeds are listed last. That answers
the original's "Unresolved object in checkpoint" and "Key ... not found in
checkpoint" questions before a launch.
"""
import argparse
import collections
import sys

import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.estimator import fine_tune
from od_estimator.estimator import object_checkpoint
from od_estimator.utils import checkpoint_contents
from od_estimator.utils import graph_building

_PROGRAM = 'od-estimator inspect_checkpoint'
# Image side a model is built at when its resizer fixes none.
_DEFAULT_SIZE = 512
# Last names of the TF1 optimizers' slots and of tf.train's moving averages.
_TF1_AVERAGE = 'ExponentialMovingAverage'
_TF1_SLOTS = ('Momentum', 'RMSProp', 'RMSProp_1', 'Adam', 'Adam_1',
              _TF1_AVERAGE)


def _parser():
  parser = argparse.ArgumentParser(
      prog=_PROGRAM, description=__doc__.split('\n\n', 2)[2],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('checkpoint', metavar='PATH',
                      help='Checkpoint prefix, or a folder of checkpoints.')
  parser.add_argument('--pipeline_config_path', default=None,
                      help='Also say which variable of this config\'s model '
                      'each value feeds.')
  parser.add_argument('--config_override', default='',
                      help='pipeline_pb2.TrainEvalPipelineConfig text proto '
                      'merged on top of the file.')
  return parser


def _shape(shape):
  return '[%s]' % ','.join(str(size) for size in shape)


def _describe(value):
  """What a value is, without a model: '' for a model weight."""
  slot_of, slot_name = value.slot_of, value.slot_name
  if not value.keras_name:
    # TF1: slots and averages are named `<variable>/<slot>`.
    owner, _, last = value.key.rpartition('/')
    if last in _TF1_SLOTS:
      slot_of, slot_name = owner, last
  if slot_name in (checkpoint_contents.AVERAGE_SLOT, _TF1_AVERAGE):
    return 'moving average of %s' % slot_of
  if slot_of:
    return 'optimizer slot %r of %s' % (slot_name, slot_of)
  if value.keras_name and not object_checkpoint.model_values([value]):
    return 'training state (never restored by fine-tuning)'
  return ''


def build_model(pipeline_config_path, config_override=''):
  """(graph, model) of the config, predict built once on zeros."""
  configs = config_util.get_configs_from_pipeline_file(
      pipeline_config_path, config_override=config_override or None)
  model_config = configs['model']
  height, width = config_util.get_spatial_image_size(
      config_util.get_image_resizer_config(model_config))
  shape = [1, height if height > 0 else _DEFAULT_SIZE,
           width if width > 0 else _DEFAULT_SIZE, 3]
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=True)
    model.predict(*model.preprocess(tf.zeros(shape)))
  return graph, model


Feeding = collections.namedtuple('Feeding', ['fed', 'other_shape', 'unfed'])


def feeding(model, prefix, object_based):
  """Which values feed which variables, per fine_tune_checkpoint_type.

  Args:
    model: the DetectionModel, in its graph (the default graph).
    prefix: the checkpoint's prefix.
    object_based: whether it is a TF2 checkpoint.

  Returns:
    Feeding: fed {key: (variable name, [kinds])}; other_shape {name as in
    the checkpoint (Keras name in TF2): (variable name, variable shape)};
    unfed: sorted names of model variables no value feeds.
  """
  fed = {}
  other_shape = {}
  wanted = set()
  for kind in sorted(object_checkpoint.PARTS):
    try:
      matched = fine_tune.match_prefix(model, kind, prefix, object_based)
    except errors.UserInputError:
      continue  # Nothing of this model that kind would restore.
    for key, variable in matched.available.items():
      fed.setdefault(key, (variable.op.name, []))[1].append(kind)
    for name, _, variable_shape in matched.mismatched:
      other_shape[name] = variable_shape
      wanted.add(name)
    wanted.update(variable.op.name for variable in matched.available.values())
    wanted.update(matched.missing)
  every = {variable.op.name for variable in tf.compat.v1.global_variables()}
  restored = {name for name, _ in fed.values()}
  unfed = sorted(name for name in every - restored
                 if name in wanted)
  return Feeding(fed, other_shape, unfed)


def _feeds(value, feeding_of):
  """The line's last column with a model."""
  if value.key in feeding_of.fed:
    name, kinds = feeding_of.fed[value.key]
    return '-> %s (%s)' % (name, ', '.join(kinds))
  name = value.keras_name or value.key
  if name in feeding_of.other_shape:
    return '-> nothing: %s is %s in this model (skipped)' % (
        name, _shape(feeding_of.other_shape[name]))
  return '-> nothing'


def lines(prefix, model=None):
  """The report's lines; `model` (in the default graph) adds what feeds what.

  Args:
    prefix: a checkpoint prefix.
    model: optional DetectionModel built in the default graph.
  """
  object_based = checkpoint_contents.is_object_based(prefix)
  values = checkpoint_contents.read(prefix)
  result = ['%s: %s checkpoint, %d values' % (
      prefix, 'object-based (TF2)' if object_based else 'name-based (TF1)',
      len(values))]
  feeding_of = feeding(model, prefix, object_based) if model else None
  for value in values:
    columns = [value.path, value.keras_name or '-', _shape(value.shape),
               value.dtype]
    described = _describe(value)
    if described:
      columns.append(described)
    elif feeding_of:
      columns.append(_feeds(value, feeding_of))
    result.append('  '.join(columns))
  if feeding_of:
    result.append('Variables of this model no value feeds (%d)%s' % (
        len(feeding_of.unfed), ':' if feeding_of.unfed else '.'))
    result.extend('  ' + name for name in feeding_of.unfed)
  return result


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
  try:
    try:
      prefix = checkpoint_contents.resolve(args.checkpoint)
      checkpoint_contents.is_object_based(prefix)
    except tf.errors.NotFoundError:
      raise errors.UserInputError(
          'no checkpoint at %s: give a checkpoint prefix (model.ckpt-123, '
          'ckpt-1) or a folder holding checkpoints' % args.checkpoint
      ) from None
    if args.pipeline_config_path:
      graph, model = build_model(args.pipeline_config_path,
                                 args.config_override)
      with graph.as_default():
        report = lines(prefix, model)
    else:
      report = lines(prefix)
  except errors.UserInputError as error:
    print('%s: error: %s' % (_PROGRAM, errors.one_line(error)),
          file=sys.stderr)
    return 1
  print('\n'.join(report))
  return 0


if __name__ == '__main__':
  sys.exit(main())
