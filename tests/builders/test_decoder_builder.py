"""decoder_builder: tf.Example decoders from InputReader text protos."""
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import decoder_builder
from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.data_decoders import tf_sequence_example_decoder
from od_estimator.protos import input_reader_pb2
from od_estimator.utils import dataset_util as du

F = fields.InputDataFields


def _config(text):
  return text_format.Merge(text, input_reader_pb2.InputReader())


def _png(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


def _serialized_example():
  """2x3 image, one object 'dog' (label 9) with a PNG mask and 2 keypoints."""
  mask = np.array([[1, 0, 0], [1, 1, 0]], np.uint8)
  feature = {
      'image/encoded': du.bytes_feature(_png(np.zeros((2, 3, 3), np.uint8))),
      'image/format': du.bytes_feature('png'),
      'image/object/bbox/ymin': du.float_list_feature([0.0]),
      'image/object/bbox/xmin': du.float_list_feature([0.0]),
      'image/object/bbox/ymax': du.float_list_feature([1.0]),
      'image/object/bbox/xmax': du.float_list_feature([0.5]),
      'image/object/class/label': du.int64_list_feature([9]),
      'image/object/class/text': du.bytes_list_feature(['dog']),
      'image/object/mask': du.bytes_list_feature([_png(mask)]),
      'image/object/keypoint/y': du.float_list_feature([0.1, 0.2]),
      'image/object/keypoint/x': du.float_list_feature([0.3, 0.4]),
  }
  example = tf.train.Example(features=tf.train.Features(feature=feature))
  return np.array(example.SerializeToString(), dtype=object), mask


def test_build_tf_example_decoder_from_config(tmp_path, execute):
  label_map = tmp_path / 'label_map.pbtxt'
  label_map.write_text("item { id: 1 name: 'cat' }\n"
                       "item { id: 4 name: 'dog' }\n")
  decoder = decoder_builder.build(_config("""
    tf_record_input_reader { input_path: "/data/train.record-?????-of-00010" }
    label_map_path: "%s"
    load_instance_masks: true
    mask_type: PNG_MASKS
    num_keypoints: 2
  """ % label_map))
  assert isinstance(decoder, tf_example_decoder.TfExampleDecoder)
  serialized, mask = _serialized_example()
  out = execute(decoder.decode, [serialized], dynamic=True)
  # 'dog' maps through the label map (4), not the stored label 9.
  np.testing.assert_array_equal(out[F.groundtruth_classes], [4])
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks], [mask])
  np.testing.assert_allclose(out[F.groundtruth_keypoints],
                             [[[0.1, 0.3], [0.2, 0.4]]])


def test_default_config_decodes_without_masks_or_label_map(execute):
  decoder = decoder_builder.build(_config(
      'tf_record_input_reader { input_path: "x" }'))
  serialized, _ = _serialized_example()
  out = execute(decoder.decode, [serialized], dynamic=True)
  np.testing.assert_array_equal(out[F.groundtruth_classes], [9])
  assert F.groundtruth_instance_masks not in out
  assert F.groundtruth_keypoints not in out


def test_input_default_type_means_tf_example():
  decoder = decoder_builder.build(_config(
      'input_type: INPUT_DEFAULT tf_record_input_reader { input_path: "x" }'))
  assert isinstance(decoder, tf_example_decoder.TfExampleDecoder)


def test_external_input_reader_is_rejected():
  with pytest.raises(ValueError, match='external_input_reader'):
    decoder_builder.build(_config('external_input_reader {}'))


def test_unset_input_reader_is_rejected():
  with pytest.raises(ValueError, match='input_reader is not set'):
    decoder_builder.build(input_reader_pb2.InputReader())


def test_sequence_examples_build_the_sequence_decoder(tmp_path):
  label_map = tmp_path / 'label_map.pbtxt'
  label_map.write_text("item { id: 3 name: 'dog' }")
  decoder = decoder_builder.build(_config(
      'input_type: TF_SEQUENCE_EXAMPLE load_context_features: true '
      'label_map_path: "%s" tf_record_input_reader { input_path: "x" }' %
      label_map))
  assert isinstance(decoder,
                    tf_sequence_example_decoder.TfSequenceExampleDecoder)
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
  frame = tf.train.FeatureList(feature=[tf.train.Feature(
      bytes_list=tf.train.BytesList(value=[b'dog']))])
  serialized = tf.train.SequenceExample(
      context=tf.train.Features(feature={
          'image/height': ints([2]), 'image/width': ints([3]),
          'image/context_features': tf.train.Feature(
              float_list=tf.train.FloatList(value=[1., 2., 3., 4.])),
          'image/context_feature_length': ints([2])}),
      feature_lists=tf.train.FeatureLists(feature_list={
          'image/encoded': frame, 'image/source_id': frame,
          'region/label/string': frame,
          'region/is_annotated': tf.train.FeatureList(feature=[ints([1])]),
          **{'region/bbox/' + name: tf.train.FeatureList(
              feature=[tf.train.Feature(float_list=tf.train.FloatList(
                  value=[0.5]))]) for name in ('ymin', 'xmin', 'ymax', 'xmax')
            }})).SerializeToString()
  out = decoder.decode(tf.constant(serialized))
  np.testing.assert_array_equal(out[F.context_features], [[1, 2], [3, 4]])
  np.testing.assert_array_equal(out[F.groundtruth_classes], [[3]])


def test_sequence_examples_need_a_label_map():
  with pytest.raises(ValueError, match='label_map_path'):
    decoder_builder.build(_config(
        'input_type: TF_SEQUENCE_EXAMPLE '
        'tf_record_input_reader { input_path: "x" }'))


@pytest.mark.parametrize('flag', ['expand_labels_hierarchy',
                                  'load_dense_pose', 'load_track_id'])
def test_unsupported_flags_are_rejected(flag):
  with pytest.raises(ValueError, match=flag):
    decoder_builder.build(_config(
        '%s: true tf_record_input_reader { input_path: "x" }' % flag))


def test_rejects_wrong_type():
  with pytest.raises(ValueError, match='InputReader'):
    decoder_builder.build('tf_record_input_reader {}')
