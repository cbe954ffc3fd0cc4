"""dataset_util called the way the original's dataset converters call it."""
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import dataset_util


def test_features_round_trip_through_an_example():
  example = tf.train.Example(features=tf.train.Features(feature={
      'image/height': dataset_util.int64_feature(64),
      'image/object/class/label': dataset_util.int64_list_feature(
          np.array([1, 2], np.int64)),
      'image/format': dataset_util.bytes_feature(b'jpeg'),
      'image/object/class/text': dataset_util.bytes_list_feature(
          [b'cat', 'dog']),
      'image/score': dataset_util.float_feature(0.5),
      'image/object/bbox/xmin': dataset_util.float_list_feature([0.25, 0.75]),
  }))
  parsed = tf.train.Example.FromString(example.SerializeToString())
  feature = parsed.features.feature
  assert feature['image/height'].int64_list.value == [64]
  assert feature['image/object/class/label'].int64_list.value == [1, 2]
  assert feature['image/format'].bytes_list.value == [b'jpeg']
  assert feature['image/object/class/text'].bytes_list.value == [b'cat',
                                                                 b'dog']
  assert feature['image/score'].float_list.value == [0.5]
  assert feature['image/object/bbox/xmin'].float_list.value == [0.25, 0.75]


def test_read_examples_list(tmp_path):
  path = tmp_path / 'trainval.txt'
  path.write_text('000005 -1\n000007  1\n\nxyz\n')
  assert dataset_util.read_examples_list(str(path)) == ['000005', '000007',
                                                        'xyz']
  with pytest.raises(errors.UserInputError, match='missing.txt'):
    dataset_util.read_examples_list(str(tmp_path / 'missing.txt'))


def test_recursive_parse_xml_to_dict():
  xml = ElementTree.fromstring(
      '<annotation><folder>VOC2012</folder>'
      '<size><width>64</width><height>48</height></size>'
      '<object><name>cat</name><pose></pose></object></annotation>')
  data = dataset_util.recursive_parse_xml_to_dict(xml)
  assert data == {'annotation': {
      'folder': 'VOC2012',
      'size': {'width': '64', 'height': '48'},
      'object': [{'name': 'cat', 'pose': None}]}}


def test_make_initializable_iterator_runs_with_table_initializers():
  with tf.Graph().as_default():
    iterator = dataset_util.make_initializable_iterator(
        tf.data.Dataset.range(3))
    value = iterator.get_next()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      assert [sess.run(value) for _ in range(3)] == [0, 1, 2]
