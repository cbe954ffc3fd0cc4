"""The Beam pipeline generate_detection_data and generate_embedding_data share.

TFRecords of tf.Examples matched by a glob are read file by file (each
record tagged with its file and position, for error messages), spread over
the workers, converted by a function that may run an exported detector on
the record, and written as sharded TFRecords (`<prefix>-SSSSS-of-NNNNN`).
Each worker loads the SavedModel once (DoFn.setup), shared by its threads.

Flags, Beam's pipeline options and the run are beam_tool's. This module
imports without Beam, so `--help` works; its DoFns are made only once
beam_tool.import_beam() has found Beam.
"""
import sys

from google.protobuf import message
import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.dataset_tools.context_rcnn import exported_detector
from od_estimator.utils import flag_checks

try:
  import apache_beam as beam
  from apache_beam.utils import shared
except ModuleNotFoundError as missing:
  if not (missing.name or '').startswith('apache_beam'):
    raise
  beam = None  # beam_tool.import_beam() refuses before a DoFn is made.

# The flags both tools define as --<tool>_<name> and construct_pipeline
# takes as <name>.
_TOOL_FLAGS = ('input_tfrecord', 'output_tfrecord', 'model_dir')


def add_tool_flags(parser, tool, model_help):
  """The flags both tools have, named after the tool ('detection').

  --<tool>_input_tfrecord, --<tool>_output_tfrecord, --<tool>_model_dir
  and --num_shards, as the original's.
  """
  parser.add_argument('--%s_input_tfrecord' % tool, required=True,
                      help='TFRecords (a glob) of tf.Examples with images.')
  parser.add_argument('--%s_output_tfrecord' % tool, required=True,
                      help='Prefix of the output TFRecords '
                      '(<prefix>-SSSSS-of-NNNNN).')
  parser.add_argument('--%s_model_dir' % tool, required=True,
                      help='SavedModel of a detector exported with '
                      'export_inference_graph --input_type tf_example%s.' %
                      model_help)
  parser.add_argument('--num_shards', type=flag_checks.at_least(0),
                      default=0, help='Output files; 0 lets the runner '
                      'choose.')


def _compression(path):
  return 'GZIP' if path.endswith('.gz') else ''


class _ReadRecords(beam.DoFn if beam else object):
  """file name -> (file name, record index, serialized record) per record."""

  def process(self, path):
    records = tf.compat.v1.io.tf_record_iterator(
        path, tf.io.TFRecordOptions(_compression(path)))
    index = 0
    try:
      for index, record in enumerate(records):
        yield path, index, record
    except tf.errors.OpError as error:
      raise errors.UserInputError(
          'input file %s: cannot read record %d: %s' % (
              path, index, error.message)) from None


class ConvertWithModel(beam.DoFn if beam else object):
  """Converts each tf.Example, running the exported detector when asked.

  `convert(example, detect)` returns (list of tf.Examples to write, outcome
  name); detect() runs the model on the record and returns its outputs.
  Each outcome is counted (Beam metrics of `namespace`).
  """

  def __init__(self, model_dir, model_flag, outputs, convert, namespace):
    """Keeps the settings; the model is loaded by setup() on the worker.

    Args:
      model_dir: the SavedModel directory.
      model_flag: the flag that named it, for messages.
      outputs: the signature outputs detect() returns.
      convert: a picklable function of (tf.train.Example, detect).
      namespace: the metrics namespace of the outcome counters.

    Raises:
      errors.UserInputError: without Beam, naming the install extra.
    """
    beam_tool.import_beam()
    self._model_dir = model_dir
    self._model_flag = model_flag
    self._outputs = tuple(outputs)
    self._convert = convert
    self._namespace = namespace
    self._shared_model = shared.Shared()
    self._model = None

  def _load(self):
    return exported_detector.ExportedDetector(
        self._model_dir, self._outputs, self._model_flag)

  def setup(self):
    self._model = self._shared_model.acquire(self._load)

  def process(self, element):
    path, index, record = element
    where = 'record %d of %s' % (index, path)
    try:
      example = tf.train.Example.FromString(record)
    except message.DecodeError as error:
      raise errors.UserInputError('%s is not a tf.Example: %s' % (
          where, error)) from None

    def detect():
      try:
        return self._model.run(record)
      except tf.errors.InvalidArgumentError as error:
        source_id = example.features.feature[
            'image/source_id'].bytes_list.value
        raise errors.UserInputError('%s%s: the model cannot read it: %s' % (
            where, ' (image/source_id %s)' % source_id[0].decode(
                'utf-8', 'replace') if source_id else '',
            error.message)) from None

    results, outcome = self._convert(example, detect)
    beam_tool.count(self._namespace, outcome)
    for result in results:
      yield result.SerializeToString()


def construct(pipeline, tool, input_pattern, output_prefix, num_shards,
              model_dir, outputs, convert, namespace):
  """Adds read -> convert with the model -> write to `pipeline`.

  Args:
    pipeline: a beam.Pipeline.
    tool: the prefix of the tool's flags ('detection'), for messages.
    input_pattern: glob of the input TFRecords.
    output_prefix: output files are <prefix>-SSSSS-of-NNNNN.
    num_shards: output files; 0 lets the runner choose.
    model_dir: the exported detector (exported_detector.check_model_dir).
    outputs: the signature outputs convert's detect() returns.
    convert: see ConvertWithModel.
    namespace: the metrics namespace of the outcome counters.

  Raises:
    errors.UserInputError: for an unusable model or a glob matching nothing.
  """
  model_flag = '--%s_model_dir' % tool
  model_dir = exported_detector.check_model_dir(model_dir, model_flag, outputs)
  files = beam_tool.input_files(input_pattern, '%s_input_tfrecord' % tool)
  convert_fn = ConvertWithModel(model_dir, model_flag, outputs, convert,
                                namespace)
  _ = (pipeline
       | 'InputFiles' >> beam.Create(files)
       | 'ReadInputTFRecord' >> beam.ParDo(_ReadRecords())
       | 'SpreadRecords' >> beam.Reshuffle()
       | 'RunInference' >> beam.ParDo(convert_fn)
       | 'WriteToDisk' >> beam.io.WriteToTFRecord(output_prefix,
                                                  num_shards=num_shards))


def run_tool(parser, tool, construct_pipeline, namespace, outcomes, argv):
  """A tool's main: parses its flags, runs its pipeline, prints its counts.

  Args:
    parser: the tool's beam_tool.argument_parser, with add_tool_flags'.
    tool: the prefix of its flags ('detection').
    construct_pipeline: the tool's construct_pipeline, called with the
      pipeline and the flags as keyword arguments (_TOOL_FLAGS without the
      prefix).
    namespace: the metrics namespace of the tool's outcome counters.
    outcomes: {outcome name: what its count means}, one stderr line each.
    argv: the command line without the program name, or None for sys.argv.
  """
  args, options = beam_tool.parse_flags(parser, argv)
  for name in _TOOL_FLAGS:
    args[name] = args.pop('%s_%s' % (tool, name))
  output_prefix = args['output_tfrecord']
  folder, _, name = output_prefix.rpartition('/')
  # Where Beam stages the output files: a failed run leaves them behind.
  staging = '%s/beam-temp-%s-*' % (folder or '.', name)
  staged_before = set(tf.io.gfile.glob(staging))
  try:
    counts, _ = beam_tool.run(
        options, lambda pipeline: construct_pipeline(pipeline, **args),
        namespace, output_prefix, '%s_output_tfrecord' % tool)
  except BaseException:
    for path in set(tf.io.gfile.glob(staging)) - staged_before:
      tf.io.gfile.rmtree(path)
    raise
  for outcome, count in sorted(counts.items()):
    print('%d %s' % (count, outcomes.get(outcome, outcome)), file=sys.stderr)
