"""graph_building: identity equality while graphs are built, restored after."""
import threading

import tensorflow as tf

from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import tiny_ssd


def _uses_equality():
  return tf.Tensor._USE_EQUALITY  # pylint: disable=protected-access


def test_equality_is_off_inside_and_back_on_after():
  assert _uses_equality()
  with graph_building.identity_equality():
    assert not _uses_equality()
    with graph_building.identity_equality():
      assert not _uses_equality()
    assert not _uses_equality()
  assert _uses_equality()
  # Eager tensors compare element-wise again.
  equal = tf.constant([1, 2]) == tf.constant([1, 3])
  assert equal.numpy().tolist() == [True, False]


def test_restored_on_error():
  try:
    with graph_building.identity_equality():
      raise RuntimeError('build failed')
  except RuntimeError:
    pass
  assert _uses_equality()


def test_threads_restore_only_when_the_last_one_leaves():
  entered = threading.Barrier(2)
  first_left = threading.Event()
  seen = []

  def first():
    with graph_building.identity_equality():
      entered.wait()
    first_left.set()

  def second():
    with graph_building.identity_equality():
      entered.wait()
      first_left.wait()
      seen.append(_uses_equality())

  threads = [threading.Thread(target=first), threading.Thread(target=second)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert seen == [False]
  assert _uses_equality()


def _predict_graph(scoped):
  graph = tf.Graph()
  with graph.as_default():
    model = model_builder.build(tiny_ssd.model_config(), is_training=True)
    images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
    if scoped:
      with graph_building.identity_equality():
        model.predict(*model.preprocess(images))
    else:
      model.predict(*model.preprocess(images))
  return graph


def test_the_model_graph_is_the_same():
  plain, scoped = _predict_graph(False), _predict_graph(True)
  assert ([(n.name, n.op, list(n.input)) for n in
           plain.as_graph_def().node] ==
          [(n.name, n.op, list(n.input)) for n in
           scoped.as_graph_def().node])
  assert ([v.name for v in plain.get_collection('trainable_variables')] ==
          [v.name for v in scoped.get_collection('trainable_variables')])


def test_model_fn_builds_under_it(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(
      tiny_ssd.write_config(tmp_path, tmp_path))
  seen = []

  def detection_model_fn(is_training, add_summaries):
    seen.append(_uses_equality())
    return model_builder.build(tiny_ssd.model_config(),
                               is_training=is_training,
                               add_summaries=add_summaries)

  model_fn = model_lib.create_model_fn(detection_model_fn, configs)
  with tf.Graph().as_default():
    features = {'image': tf.zeros([1, 64, 64, 3]),
                'true_image_shape': tf.constant([[64, 64, 3]])}
    model_fn(features, None, tf.estimator.ModeKeys.PREDICT)
  assert seen == [False]
  assert _uses_equality()
