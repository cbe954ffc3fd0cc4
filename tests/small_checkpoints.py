"""Small real checkpoints (one variable), written and damaged for tests."""
import os

import tensorflow as tf


def save(directory, steps, size=100):
  """Saves a one-variable checkpoint at each step; returns the prefixes."""
  prefixes = []
  os.makedirs(str(directory), exist_ok=True)
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.get_variable('weights', [size, 3])
    saver = tf.compat.v1.train.Saver(sharded=True)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for value in steps:
        session.run(step.assign(value))
        prefixes.append(saver.save(session, os.path.join(
            str(directory), 'model.ckpt'), global_step=step))
  return prefixes


def truncate(path, size=100):
  with open(path, 'r+b') as f:
    f.truncate(size)
