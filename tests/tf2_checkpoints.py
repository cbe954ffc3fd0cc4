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

_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                       'tf2_checkpoint_keys')
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_SLOT_MARK = '/.OPTIMIZER_SLOT/'
# Created by tf.train.Checkpoint itself.
_SAVE_COUNTER = 'save_counter'

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


class _Node(tf.Module):
  """An object of the graph; like an optimizer, it may own slot variables.

  The checkpoint saves slot `name` of variable v under
  `<v's path>/.OPTIMIZER_SLOT/<this object's path>/<name>`.
  """

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
    raise NotImplementedError('written by the tests only, never restored')


def _child(parent, name, factory):
  if not hasattr(parent, name):
    setattr(parent, name, factory())
  return getattr(parent, name)


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
  root = _Node()
  variables = {}
  slots = []
  for fact in lines:
    if fact.key.startswith(_SAVE_COUNTER + '/'):
      continue
    path = _path(fact.key)
    variable = tf.Variable(np.asarray(value_fn(fact), fact.dtype),
                           name=fact.keras_name)
    if _SLOT_MARK in path:
      slots.append((path, variable))
      continue
    *parents, attribute = path.split('/')
    node = root
    for part in parents:
      node = _child(node, part, _Node)
    setattr(node, attribute, variable)
    variables[path] = variable
  for path, slot in slots:
    owner, _, optimizer = path.partition(_SLOT_MARK)
    *parents, name = optimizer.split('/')
    node = root
    for part in parents[:-1]:
      node = _child(node, part, _Node)
    _child(node, parents[-1], _Node).add(variables[owner], name, slot)
  checkpoint = tf.train.Checkpoint(**{
      name: child for name, child in vars(root).items()
      if isinstance(child, (tf.Module, tf.Variable))})
  if any(fact.key.startswith(_SAVE_COUNTER + '/') for fact in lines):
    checkpoint.save_counter.assign(1)  # Created on first use, as save() does.
  return checkpoint.write(prefix)
