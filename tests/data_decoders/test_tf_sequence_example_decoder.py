"""Tests for od_estimator.data_decoders.tf_sequence_example_decoder."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_sequence_example_decoder as seqdec

F = fields.InputDataFields

_LABEL_MAP = """
item { id: 1 name: 'dog' }
item { id: 2 name: 'cat' }
item { id: 4 name: 'panda' }
"""


def _bytes(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[v.encode() if isinstance(v, str) else v for v in values]))


def _floats(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _ints(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _sequence_example(bboxes, labels, is_annotated=None, context=None):
  """A SequenceExample in the original's field layout, one frame a box list."""
  num_frames = len(bboxes)
  feature_lists = {
      'image/encoded': [_bytes(['jpeg%d' % i]) for i in range(num_frames)],
      'image/source_id': [_bytes([str(i)]) for i in range(num_frames)],
      'region/label/string': [_bytes(frame) for frame in labels],
  }
  for axis, name in enumerate(('ymin', 'xmin', 'ymax', 'xmax')):
    feature_lists['region/bbox/' + name] = [
        _floats([box[axis] for box in frame]) for frame in bboxes]
  if is_annotated is not None:
    feature_lists['region/is_annotated'] = [_ints([a]) for a in is_annotated]
  context_features = {'image/height': _ints([20]), 'image/width': _ints([30]),
                      'image/format': _bytes(['JPEG'])}
  if context is not None:
    context_features['image/context_features'] = _floats(
        np.ravel(context).tolist())
    context_features['image/context_feature_length'] = _ints(
        [len(context[0])])
  return tf.train.SequenceExample(
      context=tf.train.Features(feature=context_features),
      feature_lists=tf.train.FeatureLists(feature_list={
          key: tf.train.FeatureList(feature=value)
          for key, value in feature_lists.items()})).SerializeToString()


@pytest.fixture
def label_map(tmp_path):
  path = tmp_path / 'label_map.pbtxt'
  path.write_text(_LABEL_MAP)
  return str(path)


def _decode(decoder, serialized):
  return tf.nest.map_structure(lambda t: t.numpy(), decoder.decode(
      tf.constant(serialized)))


def test_decodes_frames_boxes_and_labels_as_the_original(label_map):
  # The original's test case: unknown texts and padding become -1.
  serialized = _sequence_example(
      bboxes=[[[0., 0., 1., 1.]],
              [[0.2, 0.2, 1., 1.], [0., 0., 1., 1.]],
              [[0., 0., 1., 1.], [0.1, 0.1, 0.2, 0.2]],
              []],
      labels=[['fox'], ['fox', 'dog'], ['dog', 'cat'], []],
      is_annotated=[1, 1, 0, 1])
  out = _decode(seqdec.TfSequenceExampleDecoder(label_map), serialized)
  np.testing.assert_allclose(out[F.groundtruth_boxes], [
      [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
      [[0.2, 0.2, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]],
      [[0.0, 0.0, 1.0, 1.0], [0.1, 0.1, 0.2, 0.2]],
      [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
  np.testing.assert_array_equal(out[F.groundtruth_classes],
                                [[-1, -1], [-1, 1], [1, 2], [-1, -1]])
  np.testing.assert_array_equal(out[F.num_groundtruth_boxes], [1, 2, 2, 0])
  np.testing.assert_array_equal(out[F.groundtruth_weights],
                                [[1, 0], [1, 1], [1, 1], [0, 0]])
  np.testing.assert_array_equal(out[F.is_annotated],
                                [True, True, False, True])
  np.testing.assert_array_equal(out[F.image],
                                [b'jpeg0', b'jpeg1', b'jpeg2', b'jpeg3'])
  np.testing.assert_array_equal(out[F.source_id], [b'0', b'1', b'2', b'3'])
  np.testing.assert_array_equal(out[F.original_image_spatial_shape], [20, 30])
  assert F.context_features not in out


def test_frames_without_boxes_give_empty_box_dimension(label_map):
  serialized = _sequence_example(bboxes=[[], [], [], []],
                                 labels=[[], [], [], []])
  out = _decode(seqdec.TfSequenceExampleDecoder(label_map,
                                                fully_annotated=True),
                serialized)
  assert out[F.groundtruth_boxes].shape == (4, 0, 4)
  assert out[F.groundtruth_classes].shape == (4, 0)
  np.testing.assert_array_equal(out[F.is_annotated], [True] * 4)


def test_decodes_context_features_reshaped_by_their_length(label_map):
  context = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
  serialized = _sequence_example(bboxes=[[[0., 0., .5, .5]]],
                                 labels=[['panda']], is_annotated=[1],
                                 context=context)
  out = _decode(seqdec.TfSequenceExampleDecoder(
      label_map, load_context_features=True), serialized)
  np.testing.assert_allclose(out[F.context_features], context)
  assert out[F.context_feature_length] == 3
  np.testing.assert_array_equal(out[F.groundtruth_classes], [[4]])


def test_refuses_no_label_map():
  with pytest.raises(ValueError, match='label_map_path'):
    seqdec.TfSequenceExampleDecoder(None)


def test_graph_mode_outputs_have_static_ranks(label_map):
  # The input functions slice frames and pad by rank; tf.data needs it.
  with tf.Graph().as_default():
    out = seqdec.TfSequenceExampleDecoder(
        label_map, load_context_features=True).decode(
            tf.compat.v1.placeholder(tf.string, []))
  ranks = {key: value.shape.rank for key, value in out.items()}
  assert ranks == {
      F.image: 1, F.source_id: 1, F.num_groundtruth_boxes: 1,
      F.groundtruth_boxes: 3, F.groundtruth_classes: 2,
      F.groundtruth_weights: 2, F.is_annotated: 1,
      F.original_image_spatial_shape: 1, F.context_features: 2,
      F.context_feature_length: 0}
