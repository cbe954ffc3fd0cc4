"""Frames of tf.SequenceExamples as single-image examples (Context R-CNN).

The sequence decoder returns per-frame tensors (standard_fields.
SEQUENCE_FIELDS: encoded images, source ids, boxes, classes, weights, box
counts, is_annotated) and per-sequence ones (the image shape, the context
features). As in the original, training takes one frame of each sequence
(InputReader.frame_index, a random frame when it is -1) and evaluation
every frame in order, each frame with its sequence's tensors; then the
frame's image is decoded. The frames then have the keys and shapes of a
decoded tf.Example, so transform, padding and batching are unchanged.
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.protos import input_reader_pb2

_IN = fields.InputDataFields
_RANDOM_FRAME = -1


def _num_frames(tensor_dict):
  return tf.shape(tensor_dict[_IN.image])[0]


def single_frame(tensor_dict, frame_index=_RANDOM_FRAME):
  """One frame of a decoded sequence, with the sequence's other tensors.

  Args:
    tensor_dict: TfSequenceExampleDecoder output.
    frame_index: the frame to take; -1 takes one at random.

  Returns:
    A dict with the same keys: SEQUENCE_FIELDS sliced at the frame, the
    others as they are.

  Raises:
    tf.errors.InvalidArgumentError: at run time, for a frame_index past
      the sequence's last frame or a sequence without frames.
  """
  num_frames = _num_frames(tensor_dict)
  if frame_index == _RANDOM_FRAME:
    index = tf.random.uniform([], maxval=tf.maximum(num_frames, 1),
                              dtype=tf.int32)
  else:
    index = tf.constant(frame_index, tf.int32)
  check = tf.debugging.Assert(
      index < num_frames,
      ['InputReader.frame_index', frame_index, '(-1: a random frame) asks '
       'for frame', index, 'of a tf.SequenceExample with', num_frames,
       'frames; source ids:', tensor_dict.get(_IN.source_id, '')])
  with tf.control_dependencies([check]):
    index = tf.identity(index)
  return {key: value[index] if key in fields.SEQUENCE_FIELDS else value
          for key, value in tensor_dict.items()}


def tile_sequence_tensors(tensor_dict):
  """Repeats every per-sequence tensor once per frame (a leading axis)."""
  num_frames = _num_frames(tensor_dict)
  tiled = {}
  for key, value in tensor_dict.items():
    if key in fields.SEQUENCE_FIELDS:
      tiled[key] = value
    else:
      tiled[key] = tf.tile(value[tf.newaxis],
                           tf.stack([num_frames] + [1] * value.shape.rank))
  return tiled


def decode_frame_image(tensor_dict):
  """Decodes the frame's encoded image (JPEG, PNG, ...) to [H, W, 3] uint8."""
  tensor_dict = dict(tensor_dict)
  tensor_dict[_IN.image] = tf.io.decode_image(
      tensor_dict[_IN.image], channels=3, expand_animations=False)
  return tensor_dict


def get_reduce_to_frame_fn(input_reader_config, is_training):
  """The dataset_builder.build reduce_to_frame_fn of an input reader.

  Args:
    input_reader_config: input_reader_pb2.InputReader.
    is_training: one frame per sequence (training) or every frame.

  Returns:
    fn(dataset, dataset_map_fn, batch_size, input_reader_config) returning
    a dataset of single frames with decoded images; for inputs other than
    TF_SEQUENCE_EXAMPLE, the dataset unchanged (as the original's).
  """
  if input_reader_config.input_type != input_reader_pb2.TF_SEQUENCE_EXAMPLE:
    return lambda dataset, dataset_map_fn, batch_size, config: dataset
  frame_index = input_reader_config.frame_index
  # Plain graph code: AutoGraph would only slow tracing.
  plain = tf.autograph.experimental.do_not_convert

  def reduce_to_frame(dataset, dataset_map_fn, batch_size, config):
    if is_training:
      dataset = dataset_map_fn(
          dataset, plain(lambda tensors: single_frame(tensors, frame_index)),
          batch_size, config)
    else:
      dataset = dataset_map_fn(dataset, plain(tile_sequence_tensors),
                               batch_size, config).unbatch()
    return dataset_map_fn(dataset, plain(decode_frame_image), batch_size,
                          config)
  return reduce_to_frame
