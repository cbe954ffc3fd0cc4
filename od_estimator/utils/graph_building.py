"""TF1's identity equality for tensors and variables while a graph is built.

Under TF 2 behaviour every `Variable.__hash__` and `==` first asks whether
the outermost context executes eagerly, a walk of the context stack that
costs ~60 us. tf-slim's layers (Keras' legacy layers) put all global
variables in a set on every `add_weight`, so building a detector costs
O(variables^2) such checks: a quarter of building SSD MobileNet v2.

Inside a `tf.Graph` the answer is always "no", so hashing and `==` are by
identity either way; disabling tensor equality only skips the check (and
lets a function graph's tensors be hashed, which otherwise raises). It
would change `==` on eager tensors, so it is switched off only while a
graph is built, and back on when the outermost such block ends.
"""
import contextlib
import threading

import tensorflow as tf

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def identity_equality():
  """Context (or decorator): tensors and variables hash and compare by identity.

  Reentrant and thread-safe (a distribution strategy builds each replica's
  graph in its own thread).
  """
  global _depth, _was_enabled
  with _lock:
    if _depth == 0:
      _was_enabled = tf.Tensor._USE_EQUALITY  # pylint: disable=protected-access
      tf.compat.v1.disable_tensor_equality()
    _depth += 1
  try:
    yield
  finally:
    with _lock:
      _depth -= 1
      if _depth == 0 and _was_enabled:
        tf.compat.v1.enable_tensor_equality()
