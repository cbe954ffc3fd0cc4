"""Whether the checkpoint a run would resume from (or evaluate) is intact.

A checkpoint `PREFIX` is `PREFIX.index`, a table of one BundleEntryProto per
tensor (its data shard, offset and size), and the data shards
`PREFIX.data-0000i-of-0000n` the index's header counts. `problem` reads the
index alone (kilobytes, whatever the checkpoint's size) and compares the
bytes each shard must hold with the shard's length, so a truncated or
missing shard is found without reading the tensors. The `checkpoint` state
file of a directory names the checkpoint a run resumes from; `resume_point`
checks both before anything is built or written, and with
resume_from_last_good points the state file at the newest intact checkpoint
(one atomic rewrite; no file is deleted).
"""
import glob
import os
import re
import struct

from absl import logging
import tensorflow as tf
from tensorflow.core.protobuf import tensor_bundle_pb2

from od_estimator import errors

STATE_FILE = 'checkpoint'
_MAGIC = 0xdb4775248b80fb57
_FOOTER = 48
_BLOCK_TRAILER = 5
_STEP = re.compile(r'-(\d+)$')


class _BadIndex(Exception):
  """The index file is not a readable checkpoint index."""


def _varint(data, position):
  """(value, next position) of the varint at data[position]."""
  value = shift = 0
  while True:
    if position >= len(data) or shift > 63:
      raise _BadIndex('a damaged varint')
    byte = data[position]
    position += 1
    value |= (byte & 0x7f) << shift
    shift += 7
    if not byte & 0x80:
      return value, position


def _block(data, handle, position=0):
  """(contents, next position) of the block whose handle is handle[position:].
  """
  offset, position = _varint(handle, position)
  size, position = _varint(handle, position)
  if offset + size + _BLOCK_TRAILER > len(data):
    raise _BadIndex('a block past the end of the file')
  if data[offset + size] != 0:
    raise _BadIndex('a compressed block')
  return data[offset:offset + size], position


def _block_entries(block):
  """The (key, value) pairs of a table block (keys prefix-compressed)."""
  if len(block) < 4:
    raise _BadIndex('a block too short')
  restarts, = struct.unpack('<I', block[-4:])
  end = len(block) - 4 * (restarts + 1)
  if end < 0:
    raise _BadIndex('a damaged block')
  position, key = 0, b''
  while position < end:
    shared, position = _varint(block, position)
    unshared, position = _varint(block, position)
    length, position = _varint(block, position)
    key = key[:shared] + block[position:position + unshared]
    position += unshared
    yield key, block[position:position + length]
    position += length


def _index_entries(data):
  """{tensor name: BundleEntryProto}, and the BundleHeaderProto."""
  if len(data) < _FOOTER or struct.unpack('<Q', data[-8:])[0] != _MAGIC:
    raise _BadIndex('no table footer (the file is truncated or not an index)')
  footer = len(data) - _FOOTER
  _, position = _varint(data, footer)  # The metaindex handle: unused.
  _, position = _varint(data, position)
  index_block, _ = _block(data, data, position)
  header, entries = None, {}
  for _, handle in _block_entries(index_block):
    block, _ = _block(data, handle)
    for key, value in _block_entries(block):
      if not key:
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
      else:
        entries[key.decode('utf-8', 'replace')] = (
            tensor_bundle_pb2.BundleEntryProto.FromString(value))
  if header is None:
    raise _BadIndex('no header entry')
  return header, entries


def data_files(prefix, num_shards):
  """The data shard paths of checkpoint `prefix` with num_shards shards."""
  return ['%s.data-%05d-of-%05d' % (prefix, shard, num_shards)
          for shard in range(num_shards)]


def problem(prefix):
  """What is wrong with checkpoint `prefix`, as one phrase, or None if intact.

  Checks that the index is a complete table, that every data shard it counts
  exists and is at least as long as its tensors' offsets and sizes say.
  """
  index = prefix + '.index'
  if not tf.io.gfile.exists(index):
    if tf.io.gfile.exists(prefix) and not tf.io.gfile.isdir(prefix):
      return None  # A V1 checkpoint (one file, no index): not checked.
    return '%s does not exist' % index
  try:
    with tf.io.gfile.GFile(index, 'rb') as f:
      header, entries = _index_entries(f.read())
  except (_BadIndex, ValueError, tf.errors.OpError) as error:
    return '%s is not a readable checkpoint index (%s)' % (index, error)
  needed = {}
  for entry in entries.values():
    if entry.slices or not entry.size:
      continue
    needed[entry.shard_id] = max(needed.get(entry.shard_id, 0),
                                 entry.offset + entry.size)
  for shard, path in enumerate(data_files(prefix, header.num_shards)):
    if not tf.io.gfile.exists(path):
      return '%s does not exist' % path
    size = tf.io.gfile.stat(path).length
    if size < needed.get(shard, 0):
      return '%s is truncated: %d bytes where its index needs %d' % (
          path, size, needed[shard])
  return None


def checkpoint_bytes(prefix):
  """Bytes of checkpoint `prefix`'s files (index, data shards; not .meta)."""
  paths = tf.io.gfile.glob(prefix + '.data-*') + tf.io.gfile.glob(
      prefix + '.index')
  return sum(tf.io.gfile.stat(path).length for path in paths)


def _step(prefix):
  match = _STEP.search(prefix)
  return int(match.group(1)) if match else -1


def checkpoints(directory):
  """Checkpoint prefixes in `directory` (their .index files), newest last."""
  prefixes = [path[:-len('.index')] for path in
              tf.io.gfile.glob(os.path.join(glob.escape(directory),
                                            '*.index'))]
  return sorted(prefixes, key=lambda prefix: (
      _step(prefix), tf.io.gfile.stat(prefix + '.index').mtime_nsec))


def last_intact(directory, skip=()):
  """The newest intact checkpoint in `directory` outside `skip`, or None."""
  for prefix in reversed(checkpoints(directory)):
    if prefix not in skip and problem(prefix) is None:
      return prefix
  return None


def _state(directory):
  """(named prefix or None, problem or None) of directory's state file."""
  path = os.path.join(directory, STATE_FILE)
  if not tf.io.gfile.exists(path):
    return None, None
  try:
    state = tf.train.get_checkpoint_state(directory)
  except ValueError:
    state = None
  if state is None:
    return None, '%s is not a readable checkpoint state file' % path
  return state.model_checkpoint_path, None


def resume_point(directory, flag, resume_from_last_good=False,
                 evaluating=False):
  """The checkpoint a run resumes from or evaluates, checked first.

  Args:
    directory: the --model_dir (or --checkpoint_dir) of the run.
    flag: that flag's name, for the messages.
    resume_from_last_good: on a damaged checkpoint, go on from the newest
      intact one: training rewrites the state file to name it (atomically;
      the damaged files are kept), evaluation only reads it.
    evaluating: the run only reads `directory`.

  Returns:
    The checkpoint prefix, or None when the directory has no checkpoint.

  Raises:
    errors.UserInputError: the checkpoint the state file names (or the
      state file itself) is damaged, and resume_from_last_good is off or
      no intact checkpoint is left.
  """
  if not directory or not tf.io.gfile.isdir(directory):
    return None
  named, wrong = _state(directory)
  if named is None and wrong is None:
    return None
  wrong = wrong or problem(named)
  if wrong is None:
    return named
  good = last_intact(directory, skip=(named,))
  if good is None:
    raise errors.UserInputError(
        '%s=%s: the checkpoint to %s is damaged: %s; no intact checkpoint is '
        'left in that directory. %s' % (
            flag, directory, 'evaluate' if evaluating else 'resume from',
            wrong, 'Evaluate another directory.' if evaluating else
            'Train into a new %s (nothing was changed in this one).' % flag))
  if not resume_from_last_good:
    raise errors.UserInputError(
        '%s=%s: the checkpoint to %s is damaged: %s. The last intact '
        'checkpoint there is %s: relaunch with --resume_from_last_good to %s '
        'it (the damaged files are kept). Nothing was changed in %s.' % (
            flag, directory, 'evaluate' if evaluating else 'resume from',
            wrong, good, 'evaluate' if evaluating else 'resume from', flag))
  if evaluating:
    logging.warning('--resume_from_last_good: skipping the damaged '
                    'checkpoint (%s); evaluating %s instead.', wrong, good)
    return good
  _point_state_at(directory, good)
  logging.warning('--resume_from_last_good: skipping the damaged checkpoint '
                  '(%s); resuming from %s instead. Its files are kept until '
                  'a save of the same step replaces them: copy them away to '
                  'keep them.', wrong, good)
  return good


def _point_state_at(directory, prefix):
  """Rewrites directory's state file to name `prefix`, atomically.

  TF writes the state through a temporary file renamed over the old one.
  The older intact checkpoints stay listed, so the Saver keeps rotating
  them; damaged ones are left unlisted (and never deleted by it).
  """
  older = [path for path in checkpoints(directory)
           if _step(path) < _step(prefix) and problem(path) is None]
  tf.compat.v1.train.update_checkpoint_state(
      directory, os.path.basename(prefix),
      all_model_checkpoint_paths=[os.path.basename(path)
                                  for path in older + [prefix]])
