"""Snapshots of a folder's files, to check that nothing changed."""
import hashlib
import os


def tree(root):
  """{relative path: bytes, or 'link -> target'} of everything under root.

  Links are listed, never followed; folders appear through their files.
  """
  found = {}
  for directory, folders, files in os.walk(root):
    for name in folders + files:
      path = os.path.join(directory, name)
      key = os.path.relpath(path, root)
      if os.path.islink(path):
        found[key] = 'link -> ' + os.readlink(path)
      elif os.path.isfile(path):
        with open(path, 'rb') as f:
          found[key] = f.read()
  return found


def snapshot(directory):
  """{relative path: (mtime in ns, sha256)} of every file below it.

  Equal snapshots: no file was added, removed, rewritten or touched.
  """
  files = {}
  for parent, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(parent, name)
      with open(path, 'rb') as f:
        files[os.path.relpath(path, directory)] = (
            os.stat(path).st_mtime_ns, hashlib.sha256(f.read()).hexdigest())
  return files
