"""Snapshots of a folder's files, to check that nothing changed."""
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
