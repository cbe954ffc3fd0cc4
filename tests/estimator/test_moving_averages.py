"""moving_averages: the one restore of eval_config.use_moving_averages."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import moving_averages

_AVERAGE = '/ExponentialMovingAverage'


def _variables(shape=(2,)):
  """A trainable `weights`, a non-trainable `counter` and global_step."""
  weights = tf.compat.v1.get_variable(
      'weights', shape, initializer=tf.zeros_initializer())
  counter = tf.compat.v1.get_variable(
      'counter', [], trainable=False, initializer=tf.zeros_initializer())
  tf.compat.v1.train.get_or_create_global_step()
  return weights, counter


def _checkpoint(path, averaged=True):
  """weights 1 (average 2 when `averaged`), counter 5."""
  with tf.Graph().as_default():
    weights, counter = _variables()
    assigns = [weights.assign([1.0, 1.0]), counter.assign(5.0)]
    if averaged:
      tf.compat.v1.get_variable('weights' + _AVERAGE,
                                initializer=[2.0, 2.0])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(assigns)
      return tf.compat.v1.train.Saver().save(sess, path)


def _restored(checkpoint, use_moving_averages, shape=(2,)):
  with tf.Graph().as_default():
    weights, counter = _variables(shape)
    with tf.compat.v1.Session() as sess:
      moving_averages.restore(sess, use_moving_averages, checkpoint)
      return sess.run([weights, counter])


def test_without_a_checkpoint_every_trainable_variable_reads_its_average():
  with tf.Graph().as_default():
    weights, counter = _variables()
    name_map = moving_averages.variables_to_restore(True)
  assert name_map['weights' + _AVERAGE] is weights
  assert name_map['counter'] is counter
  assert 'weights' not in name_map


def test_restore_reads_the_averages_of_trainable_variables_only(tmp_path):
  checkpoint = _checkpoint(str(tmp_path / 'model.ckpt'))
  weights, counter = _restored(checkpoint, True)
  np.testing.assert_array_equal(weights, [2.0, 2.0])
  assert counter == 5.0
  weights, _ = _restored(checkpoint, False)
  np.testing.assert_array_equal(weights, [1.0, 1.0])


def test_a_checkpoint_without_averages_gives_the_raw_weights(tmp_path):
  checkpoint = _checkpoint(str(tmp_path / 'model.ckpt'), averaged=False)
  assert not moving_averages.has_moving_averages(checkpoint)
  weights, _ = _restored(checkpoint, True)
  np.testing.assert_array_equal(weights, [1.0, 1.0])


def test_a_shape_mismatch_names_the_variable(tmp_path):
  checkpoint = _checkpoint(str(tmp_path / 'model.ckpt'))
  with pytest.raises(errors.UserInputError,
                     match=r'weights/ExponentialMovingAverage \(graph \[3\]'):
    _restored(checkpoint, True, shape=(3,))
