"""Shared pytest fixtures: run graph-mode TF code and get numpy results."""
import os

import numpy as np
import pytest
import tensorflow as tf

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')


def _execute(graph_fn, inputs=(), dynamic=False):
  """Builds `graph_fn(*tensors)` in a fresh graph and runs it once.

  Args:
    graph_fn: function of tensors returning a tensor or a nested structure
      of tensors.
    inputs: numpy arrays fed as the function's arguments.
    dynamic: when True the inputs are placeholders with unknown dimensions,
      to exercise the code's dynamic-shape path; otherwise constants.

  Returns:
    graph_fn's outputs evaluated to numpy, with the same structure.
  """
  with tf.Graph().as_default() as graph:
    feed = {}
    tensors = []
    for value in inputs:
      value = np.asarray(value)
      if dynamic:
        placeholder = tf.compat.v1.placeholder(
            tf.as_dtype(value.dtype), shape=[None] * value.ndim)
        feed[placeholder] = value
        tensors.append(placeholder)
      else:
        tensors.append(tf.constant(value))
    outputs = graph_fn(*tensors)
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      return sess.run(outputs, feed_dict=feed)


@pytest.fixture
def execute():
  """`execute(graph_fn, inputs, dynamic=False)`: see _execute."""
  return _execute
