"""Helpers to build tf.train.Example features and shard TFRecord files.

The feature helpers, read_examples_list and recursive_parse_xml_to_dict keep
the original's names and results (object_detection.utils.dataset_util), so
dataset converters written for it work. make_initializable_iterator lived
here in older versions of the original (builders/dataset_builder gives it
too, as the newer ones do).
"""
import contextlib

import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import file_safety


def int64_feature(value):
  return int64_list_feature([value])


def int64_list_feature(value):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(value)))


def bytes_feature(value):
  return bytes_list_feature([value])


def bytes_list_feature(value):
  """Bytes values; str values are UTF-8 encoded (the original takes bytes)."""
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[
      v.encode('utf-8') if isinstance(v, str) else v for v in value]))


def float_feature(value):
  return float_list_feature([value])


def float_list_feature(value):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(value)))


def make_initializable_iterator(dataset):
  """An initializable iterator whose initializer runs with the tables'.

  Args:
    dataset: a tf.data.Dataset.

  Returns:
    A tf.compat.v1.data.Iterator; its initializer is added to the
    TABLE_INITIALIZERS collection so Estimator/Scaffold sessions run it.
  """
  iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS,
                                 iterator.initializer)
  return iterator


def read_examples_list(path):
  """Reads the example ids of a list file such as VOC's ImageSets/Main/*.txt.

  Each non-blank line starts with an id that names the example's image and
  annotation (`xyz 3` gives `xyz`, for xyz.jpg and xyz.xml).

  Args:
    path: the list file (any path tf.io.gfile reads).

  Returns:
    The ids (strings), in file order.

  Raises:
    errors.UserInputError: naming the file, when it cannot be read.
  """
  try:
    with tf.io.gfile.GFile(path) as fid:
      lines = fid.readlines()
  except tf.errors.OpError as error:
    raise errors.UserInputError('cannot read examples list %s: %s' % (
        path, error.message)) from None
  return [line.split()[0] for line in lines if line.strip()]


def recursive_parse_xml_to_dict(xml):
  """Turns an XML element into nested dicts keyed by tag.

  Leaves map to their text. `object` is the only tag assumed to repeat (as in
  PASCAL VOC annotations), so it always maps to a list, even of one.

  Args:
    xml: an element of xml.etree.ElementTree or lxml.etree.

  Returns:
    {xml.tag: text or dict}.
  """
  if len(xml) == 0:  # pylint: disable=g-explicit-length-test
    return {xml.tag: xml.text}
  result = {}
  for child in xml:
    value = recursive_parse_xml_to_dict(child)[child.tag]
    if child.tag == 'object':
      result.setdefault('object', []).append(value)
    else:
      result[child.tag] = value
  return {xml.tag: result}


def sharded_filenames(output_prefix, num_shards):
  """Returns the original's shard names: PREFIX-00000-of-0000N."""
  return ['%s-%05d-of-%05d' % (output_prefix, index, num_shards)
          for index in range(num_shards)]


@contextlib.contextmanager
def open_sharded_output_tfrecords(output_prefix, num_shards):
  """Opens num_shards TFRecord writers named by sharded_filenames.

  The shards are written under temporary names beside them and renamed
  when all are closed: an exception or a signal leaves no partial shard
  under a shard's name (see file_safety.replacing_paths).

  Yields:
    The list of writers; example i should go to writers[i % num_shards].
  """
  with contextlib.ExitStack() as stack:
    temps = stack.enter_context(file_safety.replacing_paths(
        sharded_filenames(output_prefix, num_shards)))
    yield [stack.enter_context(tf.io.TFRecordWriter(name))
           for name in temps]
