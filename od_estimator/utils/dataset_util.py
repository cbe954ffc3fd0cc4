"""Helpers to build tf.train.Example features and shard TFRecord files."""
import contextlib

import tensorflow as tf


def int64_feature(value):
  return int64_list_feature([value])


def int64_list_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def bytes_feature(value):
  return bytes_list_feature([value])


def bytes_list_feature(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[
      v.encode('utf-8') if isinstance(v, str) else v for v in values]))


def float_feature(value):
  return float_list_feature([value])


def float_list_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def sharded_filenames(output_prefix, num_shards):
  """Returns the original's shard names: PREFIX-00000-of-0000N."""
  return ['%s-%05d-of-%05d' % (output_prefix, index, num_shards)
          for index in range(num_shards)]


@contextlib.contextmanager
def open_sharded_output_tfrecords(output_prefix, num_shards):
  """Opens num_shards TFRecord writers named by sharded_filenames.

  Yields:
    The list of writers; example i should go to writers[i % num_shards].
  """
  with contextlib.ExitStack() as stack:
    yield [stack.enter_context(tf.io.TFRecordWriter(name))
           for name in sharded_filenames(output_prefix, num_shards)]
