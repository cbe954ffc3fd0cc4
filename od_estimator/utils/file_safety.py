"""Writing and replacing files so that a failed or killed command loses nothing.

- A file is written beside its destination under a temporary name and
  renamed over it in one step: a reader (or a relaunch after a kill) sees
  the old file or the new one, never half of one.
- A command's several outputs (an export's SavedModel, frozen graph and
  checkpoint) are written together in a staging folder inside the output
  directory and moved into place only once all are complete; what they
  replace is moved aside first and removed last.
- Removal stays inside the folder the user named: a symbolic link found
  there is removed as a link, never followed.

Object stores (gs://...) publish an object only when it is closed, so
there files are written in place with tf.io.gfile.
"""
import contextlib
import glob
import os
import shutil
import uuid

import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import interrupts

# Names of the temporary entries, so that leftovers of a killed command are
# recognisable (and never taken for outputs).
TEMP_PREFIX = '.od_estimator-tmp-'
STAGING_PREFIX = '.od_estimator-staging-'
REPLACED_PREFIX = '.od_estimator-replaced-'


def is_url(path):
  return '://' in str(path)


@contextlib.contextmanager
def replacing(path, mode='w'):
  """Yields a file open for writing that replaces `path` when it closes.

  The data goes to a temporary file in the same folder, which is renamed
  over `path` once complete. On an exception (or a kill) `path` keeps its
  previous content and the temporary file is removed (or left under a
  TEMP_PREFIX name). An existing link at `path` is replaced by the file,
  never written through.

  Args:
    path: the destination file.
    mode: 'w' (text) or 'wb' (bytes).
  """
  if is_url(path):
    with tf.io.gfile.GFile(path, mode) as f:
      yield f
    return
  temp = temporary_path(path)
  # The usual permissions of a new file (the umask applies).
  descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
  try:
    with os.fdopen(descriptor, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(temp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temp)
    raise


def temporary_path(path):
  """A new TEMP_PREFIX name beside `path` (its folder is created)."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  return os.path.join(directory, '%s%s.%s' % (
      TEMP_PREFIX, os.path.basename(path), uuid.uuid4().hex[:8]))


@contextlib.contextmanager
def replacing_paths(paths):
  """Yields temporary paths to write `paths` under; renamed at the end.

  For writers that open files by name (tf.io.TFRecordWriter): each file
  is written beside its destination under a TEMP_PREFIX name and renamed
  into place once the block completes. When the block raises (a signal
  included), the temporary files are removed and the destinations keep
  what they held: a later reader never takes a partial file for a
  complete one. URLs (gs://...) are written in place.

  Args:
    paths: the destination files.
  """
  paths = list(paths)
  if any(is_url(path) for path in paths):
    yield paths
    return
  temps = [temporary_path(path) for path in paths]
  try:
    yield temps
    for temp, path in zip(temps, paths):
      os.replace(temp, path)
  except BaseException as error:
    for temp in temps:
      with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    if isinstance(error, interrupts.Interrupted):
      error.add('the unfinished %s removed' % (
          paths[0] + ' was' if len(paths) == 1 else
          '%s and %d more were' % (paths[0], len(paths) - 1)))
    raise


def write_file(path, data):
  """Writes str or bytes `data` to `path` in one step (see `replacing`)."""
  with replacing(path, 'wb' if isinstance(data, bytes) else 'w') as f:
    f.write(data)


def copy_file(source, path):
  """Copies file `source` to `path` in one step (see `replacing`).

  Locally the copy is a hard link when both are on one file system (no
  bytes copied: checkpoints are never changed in place), else a copy
  under a temporary name, renamed into place once complete.
  """
  if is_url(path):
    tf.io.gfile.copy(source, path, overwrite=True)
    return
  temp = temporary_path(path)
  try:
    try:
      if is_url(source):
        raise OSError('no link to an object store')
      os.link(source, temp)
    except OSError:
      tf.io.gfile.copy(source, temp, overwrite=True)
    os.replace(temp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temp)
    raise


def check_file_destination(path, flag):
  """Raises UserInputError when `path` cannot become a file: a folder is there.

  Args:
    path: the file a command is about to write.
    flag: the flag or field that named it, for the message.
  """
  if not is_url(path) and os.path.isdir(path) and not os.path.islink(path):
    raise errors.UserInputError(
        '%s=%s is a directory; give the path of a file to write.' % (
            flag, path))


def check_directory_destination(path, flag):
  """Raises UserInputError unless `path` is, or can become, a writable folder.

  Args:
    path: a local folder a command is about to write into; None or a URL
      (gs://...) is not checked.
    flag: the flag that named it, for the message.
  """
  if not path or is_url(path):
    return
  existing = os.path.abspath(path)
  while not os.path.lexists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise errors.UserInputError(
        '%s=%s: %s is a file, not a directory. Choose another directory.' % (
            flag, path, existing))
  if not os.access(existing, os.W_OK | os.X_OK):
    raise errors.UserInputError(
        '%s=%s: %s is not writable by this user. Choose a writable '
        'directory.' % (flag, path, existing))


def check_inside(path, root):
  """Raises UserInputError unless `path` is an entry inside folder `root`.

  The last component of `path` is not resolved (a link there is the
  entry itself); every folder above it is, links included.
  """
  real_root = os.path.realpath(root)
  parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
  if os.path.commonpath([real_root, parent]) != real_root:
    raise errors.UserInputError(
        'refusing to remove or replace %s: it lies outside %s, the folder '
        'this command was given.' % (path, root))


def remove(path, root):
  """Removes the file, link or folder at `path`, which must be inside `root`.

  A link is removed itself, never what it points to; a folder's contents
  are removed without following the links among them.
  """
  if is_url(path):
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
      tf.io.gfile.remove(path)
    return
  check_inside(path, root)
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path)
  elif os.path.lexists(path):
    os.unlink(path)


def _matching(directory, patterns):
  """Entries of `directory` matching any glob pattern, links not followed."""
  found = set()
  for pattern in patterns:
    found.update(os.path.basename(path) for path in
                 glob.glob(os.path.join(glob.escape(directory), pattern)))
  return sorted(found)


@contextlib.contextmanager
def staged_outputs(directory, patterns, overwrite, flag):
  """Yields a staging folder whose entries replace `directory`'s at the end.

  The command writes all its outputs into the yielded folder (inside
  `directory`, so nothing is written elsewhere). When the block completes,
  the entries of `directory` matching `patterns` (the outputs of an
  earlier run) are moved aside, the new entries are moved into place, and
  the old ones are removed, links as links. When the block raises, or the
  process is killed, `directory` keeps what it held before; leftover
  staging folders of killed runs are removed at the next call, and a move
  into place that a kill interrupted is completed then.

  Args:
    directory: the output directory the user named.
    patterns: glob patterns of the entries this command writes there.
    overwrite: whether entries matching `patterns` may be replaced.
    flag: the flag that named `directory`, for messages.

  Raises:
    errors.UserInputError: `directory` already holds matching entries and
      `overwrite` is false (nothing is changed), or it is a file.
  """
  check_directory_destination(directory, flag)
  if is_url(directory):
    # No atomic rename on object stores: the old outputs are removed and
    # the new ones written in place.
    existing = [path for name in patterns
                for path in tf.io.gfile.glob(os.path.join(directory, name))]
    _refuse_unless(overwrite, sorted(os.path.basename(p) for p in existing),
                   directory, flag, 'on an object store they are removed '
                   'before the new output is written')
    for path in existing:
      remove(path, directory)
    tf.io.gfile.makedirs(directory)
    yield directory
    return
  existing = _matching(directory, patterns) if os.path.isdir(
      directory) else []
  _refuse_unless(overwrite, existing, directory, flag)
  created = _makedirs(directory)
  if _finish_interrupted_moves(directory):
    existing = _matching(directory, patterns)
  for leftover in _matching(directory, [STAGING_PREFIX + '*']):
    remove(os.path.join(directory, leftover), directory)
  staging = os.path.join(directory, STAGING_PREFIX + uuid.uuid4().hex[:8])
  os.mkdir(staging)
  try:
    yield staging
  except BaseException as error:
    remove(staging, directory)
    if isinstance(error, interrupts.Interrupted):
      error.add('%s=%s keeps what it held before; nothing was written '
                'there' % (flag, directory))
    for folder in created:
      with contextlib.suppress(OSError):  # Not empty: someone wrote there.
        os.rmdir(folder)
    raise
  _move_into_place(staging, directory, existing)


def _makedirs(directory):
  """Creates `directory`; returns the folders created, innermost first."""
  created = []
  folder = os.path.abspath(directory)
  while not os.path.lexists(folder):
    created.append(folder)
    folder = os.path.dirname(folder)
  os.makedirs(directory, exist_ok=True)
  return created


def _refuse_unless(overwrite, existing, directory, flag,
                   kept='they are kept until the new output is complete'):
  if existing and not overwrite:
    raise errors.UserInputError(
        '%s=%s already holds %s from an earlier run; nothing was changed. '
        'Pass --overwrite to replace them (%s), or choose another '
        'directory.' % (flag, directory, ', '.join(existing), kept))


def _move_into_place(staging, directory, existing):
  """Moves the old entries aside, the new ones in, then drops the old.

  The folder holding the old entries is named after the staging folder, so
  that a command killed in between can be completed by the next one (see
  _finish_interrupted_moves).
  """
  token = os.path.basename(staging)[len(STAGING_PREFIX):]
  replaced = os.path.join(directory, REPLACED_PREFIX + token)
  os.mkdir(replaced)
  for name in existing:
    os.rename(os.path.join(directory, name), os.path.join(replaced, name))
  _move_in(staging, directory, replaced)
  remove(replaced, directory)


def _move_in(staging, directory, replaced):
  """Moves the entries of `staging` into `directory`, then removes it.

  An entry of the same name already there is first moved into `replaced`.
  """
  for name in sorted(os.listdir(staging)):
    target = os.path.join(directory, name)
    if os.path.lexists(target):
      os.rename(target, os.path.join(replaced, name))
    os.rename(os.path.join(staging, name), target)
  os.rmdir(staging)


def _finish_interrupted_moves(directory):
  """Completes the moves of commands killed in _move_into_place.

  A REPLACED_PREFIX folder exists only once its staging folder was
  complete: what is left of that staging folder is moved in, then the
  replaced entries are removed.

  Returns:
    Whether there was any.
  """
  interrupted = _matching(directory, [REPLACED_PREFIX + '*'])
  for name in interrupted:
    replaced = os.path.join(directory, name)
    staging = os.path.join(directory,
                           STAGING_PREFIX + name[len(REPLACED_PREFIX):])
    if os.path.isdir(replaced) and not os.path.islink(replaced) and (
        os.path.isdir(staging) and not os.path.islink(staging)):
      _move_in(staging, directory, replaced)
    remove(replaced, directory)
  return bool(interrupted)
