"""Test images in each form an exported model takes."""
import io

import numpy as np
from PIL import Image
import tensorflow as tf


def images():
  """Two distinct 48x40 images: not the tiny models' size, so both resize."""
  rng = np.random.RandomState(11)
  return rng.randint(0, 256, size=[2, 48, 40, 3]).astype(np.uint8)


def png(image):
  """Lossless PNG bytes of a uint8 [H, W, 3] image."""
  buffer = io.BytesIO()
  Image.fromarray(image).save(buffer, format='PNG')
  return buffer.getvalue()


def tf_example(image):
  """A serialized tf.Example holding the image as PNG, the original's keys."""
  feature = {
      'image/encoded': tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[png(image)])),
      'image/format': tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[b'png'])),
  }
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()
