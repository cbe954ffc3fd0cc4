"""Checkpoints laid out as the original's TF2 code writes them.

tests/data/tf2_checkpoint_keys/ records, for checkpoints the original's TF2
code wrote, every saved value: its key (object path), the name its object
graph records (the Keras name), shape and dtype. `write` lays out a
tf.train.Checkpoint with exactly those keys, names, shapes and dtypes
(optimizer slots included), so our reader meets the original's object
graph; the values are ours to choose.
"""
import collections
import os

import numpy as np
import tensorflow as tf

from od_estimator.estimator import fine_tune
from od_estimator.estimator import object_checkpoint
from od_estimator.export import exporter_v2
from od_estimator.protos import train_pb2
from od_estimator.utils import object_checkpoint_writer

_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                       'tf2_checkpoint_keys')
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_SLOT_MARK = '/.OPTIMIZER_SLOT/'
# Created by tf.train.Checkpoint itself.
_SAVE_COUNTER = object_checkpoint_writer.SAVE_COUNTER
# The sample configs' num_classes when the facts were recorded.
_RECORDED_CLASSES = 90
# The Keras second-stage box layer of Faster R-CNN (a box per class unless
# share_box_across_classes).
_PER_CLASS_BOXES = 'mask_rcnn_box_head/BoxEncodingPredictor_dense'

Fact = collections.namedtuple('Fact', ['key', 'keras_name', 'shape', 'dtype'])


def facts(name):
  """The recorded lines of tests/data/tf2_checkpoint_keys/<name>.txt."""
  lines = []
  with open(os.path.join(_FOLDER, name + '.txt')) as text:
    for line in text:
      key, keras_name, shape, dtype = line.rstrip('\n').split('\t')
      lines.append(Fact(key, keras_name,
                        [int(size) for size in shape.split(',') if size],
                        dtype))
  return lines


def model_lines(lines):
  """The model's own values of `lines`: no step, counter or optimizer slot."""
  return [fact for fact in lines
          if fact.key.startswith('model/') and _SLOT_MARK not in fact.key]


def with_num_classes(lines, num_classes, background=True):
  """`lines` of the same model predicting `num_classes` classes.

  The class predictor's outputs (last axis of its kernel, pointwise kernel
  and bias; not its depthwise kernel) are num_classes + 1 per anchor
  (num_classes without a background class, as EfficientDet's); a
  Faster R-CNN second stage predicting a box per class has
  num_classes * code_size box outputs. Optimizer slots keep their shapes.
  """
  changed = []
  for fact in lines:
    for layer, slots in (('ClassPredictor', int(background)),
                         (_PER_CLASS_BOXES, 0)):
      per_anchor, rest = divmod(fact.shape[-1] if fact.shape else 0,
                                _RECORDED_CLASSES + slots)
      if (layer in fact.keras_name and _SLOT_MARK not in fact.key and
          per_anchor and not rest):
        fact = fact._replace(
            shape=fact.shape[:-1] + [per_anchor * (num_classes + slots)])
    changed.append(fact)
  return changed


def _path(key):
  return key[:-len(_VALUE_SUFFIX)]


def write(prefix, lines, value_fn):
  """Writes a checkpoint with the keys and names of `lines`.

  Args:
    prefix: where to save (tf.train.Checkpoint.write, no counter added).
    lines: list of Fact, e.g. facts(name).
    value_fn: callable(Fact) -> numpy array of the fact's shape.

  Returns:
    The prefix written.
  """
  entries, slots = [], []
  for fact in lines:
    if fact.key.startswith(_SAVE_COUNTER + '/'):
      continue
    path = _path(fact.key)
    value = np.asarray(value_fn(fact), fact.dtype)
    if _SLOT_MARK in path:
      owner, _, optimizer = path.partition(_SLOT_MARK)
      optimizer_path, _, slot_name = optimizer.rpartition('/')
      slots.append(object_checkpoint_writer.Slot(
          owner, optimizer_path, slot_name, fact.keras_name, value))
    else:
      entries.append(object_checkpoint_writer.Entry(path, fact.keras_name,
                                                    value))
  return object_checkpoint_writer.write(
      prefix, entries, slots, with_save_counter=any(
          fact.key.startswith(_SAVE_COUNTER + '/') for fact in lines))


def indexed_values(lines):
  """value_fn for write: i + 1 for the i-th line, negative for slots."""
  index = {fact.key: i + 1 for i, fact in enumerate(lines)}

  def value(fact):
    sign = -1 if _SLOT_MARK in fact.key else 1
    return np.full(fact.shape, sign * index[fact.key])
  return value


def train_config(prefix, kind):
  """A TrainConfig fine-tuning from the TF2 checkpoint `prefix` as `kind`."""
  return train_pb2.TrainConfig(
      fine_tune_checkpoint=prefix, fine_tune_checkpoint_type=kind,
      fine_tune_checkpoint_version=train_pb2.CheckpointVersion.V2)


def match(graph, model, prefix, kind):
  """What a `kind` fine-tuning from `prefix` gives `model` of `graph`.

  Returns:
    (object_checkpoint.Matched, {name: variable} the kind wants).
  """
  with graph.as_default():
    return (fine_tune.match_checkpoint(model, train_config(prefix, kind)),
            object_checkpoint.wanted_variables(model, kind))


def write_exported(graph, model, model_config, directory):
  """exporter_main_v2's checkpoint/ckpt-0 of the model of `graph` (its
  global variables, in creation order, zeros as values), checked to
  fine-tune back into `model` with nothing skipped, as `detection` and
  as `full`.

  Returns:
    {checkpoint key: the name its object graph records}.
  """
  with graph.as_default():
    variables = [variable for variable in tf.compat.v1.global_variables()
                 if variable.op.name != 'global_step']
  values = {variable.op.name: np.zeros(variable.shape.as_list(),
                                       variable.dtype.as_numpy_dtype)
            for variable in variables}
  entries = exporter_v2.checkpoint_entries(list(values), values,
                                           model_config)
  prefix = object_checkpoint_writer.save_numbered(directory, entries, 0)
  for kind in ('detection', 'full'):
    matched, wanted = match(graph, model, prefix, kind)
    assert (matched.missing, matched.mismatched, matched.left_out) == (
        [], [], []), kind
    assert len(matched.available) == len(wanted), kind
  return {entry.path + _VALUE_SUFFIX: entry.name for entry in entries}
