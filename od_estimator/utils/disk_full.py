"""A full disk while a training writes: one line instead of a traceback.

A checkpoint save that runs out of space fails in the Saver's SaveV2 op
(tf.errors.ResourceExhaustedError naming the file it was writing, `...;
No space left on device`) and leaves the save's `model.ckpt-N_temp`
folder in model_dir; other writers fail with an OSError (ENOSPC). `reported`
turns either into errors.UserInputError: the path that filled up, the space
left there and about how much a save needs (the last checkpoint's size),
after removing the failed save's `_temp` folder (that folder only, and only
inside model_dir). The checkpoints saved before are untouched.
"""
import contextlib
import errno
import os
import re
import shutil

import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import checkpoint_health

_NO_SPACE = 'No space left on device'
# `<path>; No space left on device` in TF's messages; the Saver writes
# through `<file>.tempstate<digits>`.
_TF_PATH = re.compile(r'(\S+?)(?:\.tempstate\d+)?; ' + _NO_SPACE)
_TEMP_FOLDER = re.compile(r'-\d+_temp$')


def is_disk_full(error):
  """Whether `error` (an exception) says the device is full."""
  return (isinstance(error, OSError) and error.errno == errno.ENOSPC) or (
      isinstance(error, tf.errors.OpError) and _NO_SPACE in str(error))


def _written_path(error):
  """The file that could not be written, or None."""
  if isinstance(error, OSError):
    return error.filename
  match = _TF_PATH.search(str(error))
  return match.group(1) if match else None


def _failed_save_folder(path, model_dir):
  """The Saver's `<prefix>-N_temp` folder, directly in model_dir, that
  `path` was written into; None for any other path."""
  if not path or not model_dir:
    return None
  folder = os.path.dirname(os.path.abspath(path))
  if (_TEMP_FOLDER.search(os.path.basename(folder)) and
      os.path.isdir(folder) and not os.path.islink(folder) and
      os.path.dirname(os.path.realpath(folder)) ==
      os.path.realpath(model_dir)):
    return folder
  return None


def _free_bytes(path):
  """Bytes free to this user on the filesystem of `path`'s nearest folder."""
  existing = os.path.abspath(path)
  while not os.path.isdir(existing):
    existing = os.path.dirname(existing)
  stat = os.statvfs(existing)
  return stat.f_bavail * stat.f_frsize


def _megabytes(size):
  return '%.1f MB' % (size / 1e6)


def describe(error, model_dir):
  """Cleans up after the failed save; returns the one-line message.

  Args:
    error: the exception (see is_disk_full).
    model_dir: the training's model_dir (or legacy train_dir).
  """
  path = _written_path(error) or model_dir
  parts = ['no space left on the device while writing %s (%s free there).'
           % (path, _megabytes(_free_bytes(path)))]
  last = tf.train.latest_checkpoint(model_dir) if model_dir else None
  if last:
    parts.append('Each checkpoint save needs about %s (the size of %s), '
                 'the last complete checkpoint.' % (
                     _megabytes(checkpoint_health.checkpoint_bytes(last)),
                     last))
  folder = _failed_save_folder(path, model_dir)
  if folder:
    shutil.rmtree(folder)
    parts.append('Removed the incomplete save %s.' % folder)
  parts.append('Free space on that device (or move the directory to a '
               'larger one) and relaunch to resume.')
  return ' '.join(parts)


@contextlib.contextmanager
def reported(model_dir):
  """Raises errors.UserInputError (describe) for a full disk inside."""
  try:
    yield
  except (tf.errors.OpError, OSError) as error:
    if not is_disk_full(error):
      raise
    raise errors.UserInputError(describe(error, model_dir)) from None
