"""Builds the tf.Example decoder from an input_reader.proto config."""
from od_estimator import errors
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.data_decoders import tf_sequence_example_decoder
from od_estimator.protos import input_reader_pb2

# InputReader fields asking for decoding we do not implement; a set one
# raises rather than silently yielding tensors without those annotations.
_UNSUPPORTED_FLAGS = ('expand_labels_hierarchy', 'load_dense_pose',
                      'load_track_id', 'load_keypoint_depth_features',
                      'use_keypoint_label_map', 'load_context_image_ids')


def _build_tf_example_decoder(config):
  return tf_example_decoder.TfExampleDecoder(
      load_instance_masks=config.load_instance_masks,
      instance_mask_type=config.mask_type,
      label_map_proto_file=config.label_map_path or None,
      use_display_name=config.use_display_name,
      num_keypoints=config.num_keypoints,
      num_additional_channels=config.num_additional_channels,
      load_multiclass_scores=config.load_multiclass_scores,
      load_context_features=config.load_context_features)


def _build_tf_sequence_example_decoder(config):
  if not config.label_map_path:
    raise errors.UserInputError(
        'InputReader.label_map_path is not set; input_type '
        'TF_SEQUENCE_EXAMPLE maps region/label/string through the label map.')
  return tf_sequence_example_decoder.TfSequenceExampleDecoder(
      label_map_proto_file=config.label_map_path,
      load_context_features=config.load_context_features)


# InputReader.input_type -> function(InputReader) returning a decoder.
# INPUT_DEFAULT (0) means TF_EXAMPLE, as its proto default does.
_DECODERS = {
    input_reader_pb2.INPUT_DEFAULT: _build_tf_example_decoder,
    input_reader_pb2.TF_EXAMPLE: _build_tf_example_decoder,
    input_reader_pb2.TF_SEQUENCE_EXAMPLE: _build_tf_sequence_example_decoder,
}


def build(input_reader_config):
  """Builds the decoder for an InputReader.

  Args:
    input_reader_config: input_reader_pb2.InputReader using
      tf_record_input_reader.

  Returns:
    A tf_example_decoder.TfExampleDecoder (input_type TF_EXAMPLE) or a
    tf_sequence_example_decoder.TfSequenceExampleDecoder
    (TF_SEQUENCE_EXAMPLE, which needs label_map_path).

  Raises:
    ValueError: for a config of the wrong type, external_input_reader, an
      unsupported decoding flag or TF_SEQUENCE_EXAMPLE without a label
      map, naming the field.
  """
  if not isinstance(input_reader_config, input_reader_pb2.InputReader):
    raise ValueError('input_reader_config must be an '
                     'input_reader_pb2.InputReader, got %s' %
                     type(input_reader_config).__name__)
  reader = input_reader_config.WhichOneof('input_reader')
  if reader is None:
    raise errors.UserInputError('InputReader.input_reader is not set; set '
                                'tf_record_input_reader.')
  if reader != 'tf_record_input_reader':
    raise errors.UserInputError('InputReader.%s is not supported; only '
                                'tf_record_input_reader is.' % reader)
  if input_reader_config.input_type not in _DECODERS:
    raise errors.UserInputError(
        'InputReader.input_type %s is not supported; only '
        'TF_EXAMPLE and TF_SEQUENCE_EXAMPLE are.' % input_reader_pb2.InputType.Name(
                         input_reader_config.input_type))
  for flag in _UNSUPPORTED_FLAGS:
    if getattr(input_reader_config, flag):
      raise errors.UserInputError('InputReader.%s is not supported.' % flag)
  return _DECODERS[input_reader_config.input_type](input_reader_config)
