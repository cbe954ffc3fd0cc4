"""estimator/graph_text: graph.pbtxt parses to the very graph TensorFlow's
own writer describes (float and byte values, shapes, functions)."""
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.training import training_util

from od_estimator.estimator import graph_text


def _parsed(path):
  with open(path) as f:
    return text_format.Parse(f.read(), tf.compat.v1.GraphDef())


def _training_graph():
  with tf.Graph().as_default() as graph:
    images = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 3])
    features = tf.compat.v1.layers.conv2d(images, 4, 3, padding='same')
    tf.constant([0.1, 1e-30, float('inf')]) * 2.5e-7
    tf.constant([b'\x00\xff bytes', 'ünï'.encode()])

    @tf.function
    def count_to(limit):
      return tf.while_loop(lambda i: i < limit, lambda i: i + 1, [0])

    count_to(tf.constant(3))
    tf.compat.v1.train.AdamOptimizer(0.1).minimize(
        tf.reduce_sum(features),
        global_step=tf.compat.v1.train.get_or_create_global_step())
  return graph


def test_written_text_parses_to_the_graph_tensorflows_text_does(tmp_path):
  graph_def = _training_graph().as_graph_def(add_shapes=True)
  assert graph_def.library.function
  ours = graph_text.write_graph(graph_def, str(tmp_path), 'ours.pbtxt')
  theirs = tf.io.write_graph(graph_def, str(tmp_path), 'theirs.pbtxt')
  assert _parsed(ours) == _parsed(theirs) == graph_def


@pytest.fixture
def installed(monkeypatch):
  monkeypatch.setattr(training_util, 'write_graph',
                      training_util.write_graph)  # put back afterwards
  graph_text.install()


def test_a_trainings_checkpoint_hook_writes_it(installed, tmp_path):
  del installed
  graph = _training_graph()
  with graph.as_default():
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_summaries_steps=None):
      pass
  assert training_util.write_graph is graph_text.write_graph
  assert _parsed(tmp_path / 'graph.pbtxt') == graph.as_graph_def(
      add_shapes=True)
