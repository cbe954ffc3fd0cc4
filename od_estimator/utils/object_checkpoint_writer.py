"""Writes object-based (TF2) checkpoints from values and object paths.

tf.train.Checkpoint saves each variable under the path of attributes that
leads to it from the checkpoint's root (`model/_feature_extractor/...`)
and records the variable's name in its object graph. Given the object
path, recorded name and value of each variable, `write` builds a tree of
plain tf.Modules with exactly those paths, so that a checkpoint of the
original's TF2 layout can be written from a model built in a TF1 graph
(the exporter's `checkpoint/ckpt-0`), and the tests can lay out the
checkpoints the original writes. Optimizer slots are saved below their
variable: `<path>/.OPTIMIZER_SLOT/<optimizer path>/<slot name>`.
"""
import collections

import numpy as np
import tensorflow as tf

# Created by tf.train.Checkpoint itself.
SAVE_COUNTER = 'save_counter'

Entry = collections.namedtuple('Entry', [
    'path',   # object path below the root, e.g. 'model/_box_predictor/...'
    'name',   # the variable's name the object graph records
    'value',  # numpy array
])
Slot = collections.namedtuple('Slot', [
    'variable_path',   # the Entry.path of the variable it belongs to
    'optimizer_path',  # e.g. 'optimizer'
    'slot_name',       # e.g. 'momentum'
    'name',
    'value',
])


class _Node(tf.Module):
  """An object of the tree; like an optimizer, it may own slot variables."""

  def __init__(self):
    super().__init__()
    # Not an attribute the checkpoint tracks: slots hang below variables.
    object.__setattr__(self, '_slot_table', {})

  def add(self, variable, name, slot):
    self._slot_table[(variable.ref(), name)] = slot

  def get_slot_names(self):
    return sorted({name for _, name in self._slot_table})

  def get_slot(self, variable, name):
    return self._slot_table[(variable.ref(), name)]

  def _create_or_restore_slot_variable(self, *args, **kwargs):
    # tf.train.Checkpoint.restore calls this on an object owning slots.
    del args, kwargs
    raise TypeError('a tree of object_checkpoint_writer is for writing '
                    'checkpoints; read them with tf.train.load_checkpoint')


def _node_at(root, parts):
  node = root
  for part in parts:
    if not hasattr(node, part):
      setattr(node, part, _Node())
    node = getattr(node, part)
  return node


def _variable(value, name):
  return tf.Variable(np.asarray(value), name=name, trainable=False)


def checkpoint(entries, slots=(), with_save_counter=False):
  """A tf.train.Checkpoint holding `entries` (and `slots`) at their paths.

  Args:
    entries: iterable of Entry.
    slots: iterable of Slot, each of a variable among `entries`.
    with_save_counter: create the checkpoint's save_counter (saved as 1),
      as tf.train.Checkpoint.save does.

  Raises:
    ValueError: two entries at one path, or a path below another's.
  """
  root = _Node()
  variables = {}
  for entry in entries:
    *parents, attribute = entry.path.split('/')
    node = _node_at(root, parents)
    if hasattr(node, attribute):
      raise ValueError('object path %s is taken twice' % entry.path)
    variables[entry.path] = _variable(entry.value, entry.name)
    setattr(node, attribute, variables[entry.path])
  for slot in slots:
    optimizer = _node_at(root, slot.optimizer_path.split('/'))
    optimizer.add(variables[slot.variable_path], slot.slot_name,
                  _variable(slot.value, slot.name))
  saved = tf.train.Checkpoint(**{
      name: child for name, child in vars(root).items()
      if isinstance(child, (tf.Module, tf.Variable))})
  if with_save_counter:
    saved.save_counter.assign(1)  # Created on first use, as save() does.
  return saved


def write(prefix, entries, slots=(), with_save_counter=False):
  """Writes checkpoint(...) at `prefix` (no number added); returns it."""
  return checkpoint(entries, slots, with_save_counter).write(prefix)


def save_numbered(directory, entries, number):
  """Saves `entries` as `<directory>/ckpt-<number>` with its state file.

  The layout of tf.train.CheckpointManager.save, which the original's
  exports use (`checkpoint/ckpt-0` and `checkpoint/checkpoint`).

  Returns:
    The checkpoint prefix written.
  """
  manager = tf.train.CheckpointManager(checkpoint(entries), directory,
                                       max_to_keep=1)
  return manager.save(checkpoint_number=number)
