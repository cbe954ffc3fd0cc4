"""Tests for od_estimator.input_pipeline.sequence_frames."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.input_pipeline import sequence_frames
from od_estimator.protos import input_reader_pb2

_IN = fields.InputDataFields


def _sequence(num_frames=3):
  """A decoded sequence: frame f has f + 1 boxes of class f + 1."""
  boxes = np.zeros([num_frames, num_frames, 4], np.float32)
  classes = -np.ones([num_frames, num_frames], np.int32)
  for frame in range(num_frames):
    boxes[frame, :frame + 1] = [0.1 * frame, 0.0, 0.5, 0.5]
    classes[frame, :frame + 1] = frame + 1
  images = [create_synthetic_tf_record.encode_jpeg(
      np.full([4 + frame, 6, 3], 40 * frame, np.uint8))
            for frame in range(num_frames)]
  return {
      _IN.image: tf.constant(images),
      _IN.source_id: tf.constant([str(f) for f in range(num_frames)]),
      _IN.num_groundtruth_boxes: tf.range(1, num_frames + 1),
      _IN.groundtruth_boxes: tf.constant(boxes),
      _IN.groundtruth_classes: tf.constant(classes),
      _IN.groundtruth_weights: tf.ones([num_frames, num_frames]),
      _IN.is_annotated: tf.constant([True, False, True][:num_frames]),
      _IN.original_image_spatial_shape: tf.constant([4, 6]),
      _IN.context_features: tf.reshape(tf.range(10.0), [5, 2]),
      _IN.context_feature_length: tf.constant(2, tf.int64),
  }


def test_single_frame_slices_the_frame_and_keeps_the_sequence_tensors():
  sequence = _sequence()
  frame = sequence_frames.single_frame(sequence, frame_index=1)
  assert set(frame) == set(sequence)
  assert frame[_IN.source_id].numpy() == b'1'
  assert frame[_IN.num_groundtruth_boxes].numpy() == 2
  np.testing.assert_array_equal(frame[_IN.groundtruth_classes], [2, 2, -1])
  assert not frame[_IN.is_annotated].numpy()
  for key in (_IN.context_features, _IN.context_feature_length,
              _IN.original_image_spatial_shape):
    np.testing.assert_array_equal(frame[key], sequence[key])


def test_a_random_frame_is_one_of_the_sequence_and_all_come_up():
  sequence = _sequence()
  tf.random.set_seed(3)
  seen = {sequence_frames.single_frame(sequence)[_IN.source_id].numpy()
          for _ in range(40)}
  assert seen == {b'0', b'1', b'2'}


@pytest.mark.parametrize('frame_index', [3, -1])
def test_a_frame_the_sequence_lacks_fails_naming_frame_index(frame_index):
  sequence = _sequence()
  if frame_index == -1:  # A sequence without frames.
    sequence = {key: value[:0] if key in fields.SEQUENCE_FIELDS else value
                for key, value in sequence.items()}
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='InputReader.frame_index'):
    sequence_frames.single_frame(sequence, frame_index)


def test_tiling_repeats_the_sequence_tensors_per_frame():
  sequence = _sequence()
  tiled = sequence_frames.tile_sequence_tensors(sequence)
  assert tiled[_IN.context_features].shape == (3, 5, 2)
  assert tiled[_IN.context_feature_length].numpy().tolist() == [2, 2, 2]
  np.testing.assert_array_equal(tiled[_IN.original_image_spatial_shape],
                                [[4, 6]] * 3)
  assert tiled[_IN.groundtruth_boxes] is sequence[_IN.groundtruth_boxes]


def test_decode_frame_image_gives_three_channels():
  frame = sequence_frames.single_frame(_sequence(), frame_index=2)
  decoded = sequence_frames.decode_frame_image(frame)
  assert decoded[_IN.image].shape == (6, 6, 3)
  assert decoded[_IN.image].dtype == tf.uint8
  assert frame[_IN.image].dtype == tf.string  # The input is left as it was.


def _reader(text):
  return text_format.Parse(text, input_reader_pb2.InputReader())


def _frames(reader, is_training):
  dataset = tf.data.Dataset.from_tensors(_sequence()).repeat(2)
  reduce_to_frame = sequence_frames.get_reduce_to_frame_fn(reader,
                                                           is_training)
  map_fn = lambda dataset, fn, batch_size, config: dataset.map(fn)
  return list(reduce_to_frame(dataset, map_fn, None, reader))


def test_training_reads_one_frame_of_each_sequence():
  frames = _frames(_reader('input_type: TF_SEQUENCE_EXAMPLE frame_index: 2'),
                   True)
  assert [f[_IN.source_id].numpy() for f in frames] == [b'2', b'2']
  assert frames[0][_IN.image].shape == (6, 6, 3)
  assert frames[0][_IN.context_features].shape == (5, 2)


def test_evaluation_reads_every_frame_in_order():
  frames = _frames(_reader('input_type: TF_SEQUENCE_EXAMPLE'), False)
  assert [f[_IN.source_id].numpy() for f in frames] == [
      b'0', b'1', b'2', b'0', b'1', b'2']
  assert [f[_IN.num_groundtruth_boxes].numpy() for f in frames[:3]] == [
      1, 2, 3]
  assert [f[_IN.image].shape[0] for f in frames[:3]] == [4, 5, 6]
  for frame in frames:
    assert frame[_IN.context_features].shape == (5, 2)
    assert frame[_IN.context_feature_length].numpy() == 2


@pytest.mark.parametrize('input_type', ['TF_EXAMPLE', 'INPUT_DEFAULT'])
def test_other_inputs_pass_through_unchanged(input_type):
  reader = _reader('input_type: %s' % input_type)
  dataset = tf.data.Dataset.range(3)
  for is_training in (True, False):
    reduce_to_frame = sequence_frames.get_reduce_to_frame_fn(reader,
                                                             is_training)
    assert reduce_to_frame(dataset, None, None, reader) is dataset
