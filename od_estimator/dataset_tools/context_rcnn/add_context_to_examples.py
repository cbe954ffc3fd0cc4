r"""Adds Context R-CNN memory banks to tf.Examples: an Apache Beam pipeline.

Install extra: `pip install od_estimator[beam]`. The original's flags:

  python -m od_estimator.dataset_tools.context_rcnn.add_context_to_examples \
      --input_tfrecord='embedded/train.record-*' \
      --output_tfrecord=context/train.record \
      --sequence_key=image/location --time_horizon=month \
      [--output_type=tf_sequence_example] [--runner=DataflowRunner ...]

The input is tf.Examples that carry an embedding per image
(image/embedding, with image/embedding_score and image/embedding_length:
generate_embedding_data's output) and the camera-trap keys of
create_cococameratraps_tfexample_main (image/location, image/seq_id,
image/seq_frame_num, image/date_captured). Frames are grouped by the value
of --sequence_key (and, with --time_horizon, the year, month, week, day,
hour or minute of image/date_captured), ordered (by frame number in a
sequence; by source id or capture time at a location), and each group's
embeddings (all, every n-th, the high-scoring or the annotated frames')
become its memory bank. The output is either each frame as a tf.Example
with the bank in image/context_features and image/context_feature_length
(`input_type: TF_EXAMPLE` with `load_context_features: true`), or each
group as tf.SequenceExamples with the bank in their context
(`input_type: TF_SEQUENCE_EXAMPLE`): Context R-CNN's training data.
Shards are written as OUTPUT-0000i-of-0000N (--num_shards; 0 lets the
runner choose).

Where this differs from the original: every flag value is parsed (the
original kept command-line values as text, so `--reduce_image_size=False`
still resized and a numeric flag failed); --reduce_image_size only
shrinks (the original also enlarged smaller images to the maximum
dimension); a group larger than --max_num_elements_in_context_features is
split into chunks (the original's split never ended); a sequence key other
than image/seq_id and image/location is refused (the original did not know
how to order it); and a record without the key, date or embedding that
the flags read is an error naming it, where the original failed inside
the pipeline or wrote a misaligned bank.
"""
import argparse
import json
import sys

import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.dataset_tools.context_rcnn import memory_banks
from od_estimator.utils import flag_checks

_NAMESPACE = 'sequence_data_generation'
OUTPUT_TYPES = ('tf_example', 'tf_sequence_example')
_ALL_IMAGES = 'All'


def _rekey(serialized, sequence_key, time_horizon, reduce_image_size,
           max_image_dimension):
  """Beam step: a serialized tf.Example -> (its group's key, the example)."""
  example = tf.train.Example.FromString(serialized)
  if reduce_image_size and memory_banks.shrink_image(example,
                                                     max_image_dimension):
    beam_tool.count(_NAMESPACE, 'num_images_resized')
  beam_tool.count(_NAMESPACE, 'num_tf_examples_read')
  return [(memory_banks.group_key(example, sequence_key, time_horizon),
           example)]


def _order(grouped, sequence_key, sorted_image_ids, max_elements):
  """Beam step: a group -> its ordered chunks."""
  key, examples = grouped
  chunks = memory_banks.order_and_split(key, list(examples), sequence_key,
                                        sorted_image_ids, max_elements)
  if len(chunks) > 1:
    beam_tool.count(_NAMESPACE, 'groups_split')
  return chunks


def _add_context(chunk, settings, add_context_features, image_ids_to_keep,
                 keep_image_id_list, output_type, max_clip_length):
  """Beam step: an ordered group -> its output records."""
  key, examples = chunk
  bank = (memory_banks.build_bank(examples, settings)
          if add_context_features else None)
  if image_ids_to_keep is not None:
    examples, bank = memory_banks.keep_images(examples, bank,
                                              image_ids_to_keep)
    if not examples:
      return []
  beam_tool.count(_NAMESPACE, 'num_keys_processed')
  beam_tool.count(_NAMESPACE, 'num_frames_written', len(examples))
  if output_type == 'tf_sequence_example':
    records = memory_banks.sequence_clips(key, examples, bank,
                                          max_clip_length, keep_image_id_list)
  else:
    records = memory_banks.with_context(examples, bank, keep_image_id_list)
  beam_tool.count(_NAMESPACE, 'num_records_written', len(records))
  return records


def load_image_ids(image_ids_to_keep):
  """The ids --image_ids_to_keep names: None for 'All', else a set.

  Raises:
    errors.UserInputError: the file is unreadable or not a JSON list.
  """
  if image_ids_to_keep == _ALL_IMAGES:
    return None
  text = tool_flags.read_bytes(image_ids_to_keep, '--image_ids_to_keep file')
  try:
    ids = json.loads(text)
  except ValueError as error:
    raise errors.UserInputError('--image_ids_to_keep file %s is not valid '
                                'JSON: %s' % (image_ids_to_keep, error))
  if not isinstance(ids, list):
    raise errors.UserInputError(
        '--image_ids_to_keep file %s holds a JSON %s, not a list of image '
        'ids' % (image_ids_to_keep, type(ids).__name__))
  return frozenset(str(image_id) for image_id in ids)


def _check_choices(sequence_key, time_horizon, output_type):
  checks = (('sequence_key', sequence_key, memory_banks.SEQUENCE_KEYS),
            ('time_horizon', time_horizon,
             (None,) + memory_banks.TIME_HORIZONS),
            ('output_type', output_type, OUTPUT_TYPES))
  for flag, value, accepted in checks:
    if value not in accepted:
      raise errors.UserInputError('--%s=%s: not supported; one of %s' % (
          flag, value, ', '.join(str(a) for a in accepted)))


def construct_pipeline(pipeline, input_tfrecord, output_tfrecord,
                       sequence_key, time_horizon=None,
                       subsample_context_features_rate=0,
                       reduce_image_size=True, max_image_dimension=1024,
                       add_context_features=True, sorted_image_ids=True,
                       image_ids_to_keep=_ALL_IMAGES,
                       keep_context_features_image_id_list=False,
                       keep_only_positives=False,
                       context_features_score_threshold=0.7,
                       keep_only_positives_gt=False,
                       max_num_elements_in_context_features=5000,
                       num_shards=0, output_type='tf_example',
                       max_clip_length=None, context_feature_length=2057):
  """Adds the pipeline to `pipeline`, with the original's arguments.

  See the module docstring and the flags' help for each argument.

  Raises:
    errors.UserInputError: an unsupported sequence key, time horizon or
      output type, or an unreadable --image_ids_to_keep file.
  """
  beam = beam_tool.import_beam()
  if isinstance(sequence_key, bytes):
    sequence_key = sequence_key.decode('utf-8')
  _check_choices(sequence_key, time_horizon, output_type)
  settings = memory_banks.BankSettings(
      subsample_rate=subsample_context_features_rate,
      keep_only_positives=keep_only_positives,
      score_threshold=context_features_score_threshold,
      keep_only_positives_gt=keep_only_positives_gt,
      max_elements=max_num_elements_in_context_features,
      default_length=context_feature_length)
  record_type = (tf.train.SequenceExample
                 if output_type == 'tf_sequence_example' else tf.train.Example)
  _ = (pipeline
       | 'ReadInputTFRecord' >> beam.io.ReadFromTFRecord(
           beam_tool.beam_glob(input_tfrecord), coder=beam.coders.BytesCoder())
       | 'RekeyExamples' >> beam.FlatMap(
           _rekey, sequence_key, time_horizon, reduce_image_size,
           max_image_dimension)
       | 'GroupBySequenceKey' >> beam.GroupByKey()
       | 'OrderByFrameNumber' >> beam.FlatMap(
           _order, sequence_key, sorted_image_ids,
           max_num_elements_in_context_features)
       # Spreads the groups over the workers.
       | 'ReshuffleSortedGroups' >> beam.Reshuffle()
       | 'AddContextToExamples' >> beam.FlatMap(
           _add_context, settings, add_context_features,
           load_image_ids(image_ids_to_keep),
           keep_context_features_image_id_list, output_type,
           max_clip_length)
       | 'WritetoDisk' >> beam.io.WriteToTFRecord(
           output_tfrecord, num_shards=num_shards,
           coder=beam.coders.ProtoCoder(record_type)))


def _time_horizon(text):
  """The original's help lists `None` among the horizons: no horizon."""
  return None if text in ('None', 'none', '') else text


def _score(text):
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(
        'expected a number, got %r' % text) from None


def _parser():
  parser = beam_tool.argument_parser(
      'Add Context R-CNN memory banks (image/context_features) to '
      'tf.Examples with embeddings, as an Apache Beam pipeline.')
  at_least = flag_checks.at_least
  add, boolean = parser.add_argument, tool_flags.add_bool_flag
  add('--input_tfrecord', required=True,
      help='TFRecord glob of tf.Examples with boxes and image/embedding.')
  add('--output_tfrecord', required=True,
      help='Output prefix: shards OUTPUT-0000i-of-0000N.')
  add('--sequence_key', default='image/location',
      help='The feature grouping frames: image/location or image/seq_id.')
  add('--context_feature_length', type=at_least(1), default=2057,
      help='The embedding length, when records carry no '
      'image/embedding_length.')
  add('--time_horizon', type=_time_horizon, default=None,
      help='Also group by this period of image/date_captured: year, month, '
      'week, day, hour, minute or None.')
  add('--subsample_context_features_rate', type=at_least(0), default=0,
      help='n > 0: the bank holds every n-th frame of a group; 0: every '
      'frame.')
  boolean(parser, 'reduce_image_size',
          'Shrink images to at most --max_image_dimension a side.',
          default=True)
  add('--max_image_dimension', type=at_least(1), default=1024,
      help='See --reduce_image_size.')
  boolean(parser, 'add_context_features',
          'Add the memory bank to each frame or clip.', default=True)
  boolean(parser, 'sorted_image_ids',
          'Order frames of a location by source id (else by '
          'image/date_captured).', default=True)
  add('--image_ids_to_keep', default=_ALL_IMAGES,
      help='A JSON list of the image ids to write (the banks still hold '
      'every frame), or All.')
  boolean(parser, 'keep_context_features_image_id_list',
          'Also write the bank\'s image ids '
          '(image/context_features_image_id_list).', default=False)
  boolean(parser, 'keep_only_positives',
          'The bank holds frames whose image/embedding_score reaches '
          '--context_features_score_threshold only.', default=False)
  add('--context_features_score_threshold', type=_score, default=0.7,
      help='See --keep_only_positives.')
  boolean(parser, 'keep_only_positives_gt',
          'The bank holds frames with a groundtruth box only.', default=False)
  add('--max_num_elements_in_context_features', type=at_least(1),
      default=2000, help='Groups of more frames are split into chunks.')
  add('--output_type', default='tf_example',
      help='tf_example or tf_sequence_example.')
  add('--max_clip_length', type=at_least(1), default=None,
      help='tf_sequence_example: frames per clip at most (default: a whole '
      'group).')
  add('--num_shards', type=at_least(0), default=0,
      help='Output shards; 0 lets the runner choose.')
  return parser


@tool_flags.reporting_input_errors
def main(argv=None):
  args, options = beam_tool.parse_flags(_parser(), argv)
  _check_choices(args['sequence_key'], args['time_horizon'],
                 args['output_type'])
  beam_tool.input_files(args['input_tfrecord'], 'input_tfrecord')
  load_image_ids(args['image_ids_to_keep'])
  counters, shards = beam_tool.run(
      options, lambda pipeline: construct_pipeline(pipeline, **args),
      _NAMESPACE, args['output_tfrecord'], 'output_tfrecord')
  print('read %s tf.Example(s), wrote %s %s record(s) (%s group(s), %s '
        'frame(s)) to %s' % (
            counters.get('num_tf_examples_read', '?'),
            counters.get('num_records_written', '?'), args['output_type'],
            counters.get('num_keys_processed', '?'),
            counters.get('num_frames_written', '?'), shards))
  return 0


if __name__ == '__main__':
  # Under `python -m` this file is __main__, a module Beam workers (other
  # processes, other machines) cannot import: the pipeline must refer to
  # the steps of the module under its own name.
  from od_estimator.dataset_tools.context_rcnn import add_context_to_examples
  sys.exit(add_context_to_examples.main())
