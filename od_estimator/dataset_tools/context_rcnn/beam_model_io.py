"""The Beam pipeline generate_detection_data and generate_embedding_data share.

TFRecords of tf.Examples matched by a glob are read file by file (each
record tagged with its file and position, for error messages), spread over
the workers, converted by a function that may run an exported detector on
the record, and written as sharded TFRecords (`<prefix>-SSSSS-of-NNNNN`).
Each worker loads the SavedModel once (DoFn.setup), shared by its threads.

The flags a tool does not define are Beam pipeline options (--runner,
--direct_num_workers, --project, ...); DirectRunner is the default. Beam
is an optional install extra: without it, main says how to install it.
"""
import logging
import sys

from google.protobuf import message
import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.dataset_tools.context_rcnn import exported_detector
from od_estimator.utils import flag_checks

try:
  import apache_beam as beam
  from apache_beam.io import filesystems
  from apache_beam.options import pipeline_options
  from apache_beam.utils import shared
except ModuleNotFoundError as missing:
  if not (missing.name or '').startswith('apache_beam'):
    raise
  beam = None  # require_beam() says how to install it.

_MISSING_BEAM = ('apache_beam is not installed; these tools are Beam '
                 'pipelines: pip install od_estimator[beam]')
# The logger Beam reports a failed DoFn on, with its traceback.


def require_beam():
  """Raises errors.UserInputError saying how to install Beam if missing."""
  if beam is None:
    raise errors.UserInputError(_MISSING_BEAM)


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


def parse_known_flags(parser, argv):
  """(the tool's flags as a dict, the flags left for Beam).

  The parser should not allow abbreviations (a Beam option could be taken
  for one of the tool's flags). absl's logging flags are accepted and
  dropped (tool_flags.add_logging_flags).
  """
  tool_flags.add_logging_flags(parser)
  args, pipeline_args = parser.parse_known_args(argv)
  args = vars(args)
  for name in ('logtostderr', 'alsologtostderr'):
    del args[name]
  return args, pipeline_args


def pipeline_options_from(pipeline_args):
  """PipelineOptions of the flags a tool left over (--runner, ...).

  Raises:
    errors.UserInputError: for a flag that is neither the tool's nor a Beam
      pipeline option (Beam would drop it with a warning).
  """
  require_beam()
  options = pipeline_options.PipelineOptions(pipeline_args)
  beam_logger = logging.getLogger(pipeline_options.__name__)
  level = beam_logger.level
  beam_logger.setLevel(logging.ERROR)  # Its warnings say what we raise.
  try:
    unknown = set(options.get_all_options(retain_unknown_options=True)) - set(
        options.get_all_options())
  finally:
    beam_logger.setLevel(level)
  if unknown:
    raise errors.UserInputError(
        'unknown flag%s %s: neither a flag of this tool (see --help) nor a '
        'Beam pipeline option.' % (
            's' if len(unknown) > 1 else '',
            ', '.join('--' + name for name in sorted(unknown))))
  return options


def input_files(pattern, flag):
  """The files matching a glob (Beam's file systems: local, gs://, ...).

  Raises:
    errors.UserInputError: naming the flag, when nothing matches.
  """
  require_beam()
  try:
    (result,) = filesystems.FileSystems.match([pattern])
    files = sorted(metadata.path for metadata in result.metadata_list)
  except (IOError, ValueError) as error:  # Beam's BeamIOError is an IOError.
    raise errors.UserInputError('%s %s: %s' % (flag, pattern, error)) from None
  if not files:
    raise errors.UserInputError('%s %s: no file matches.' % (flag, pattern))
  return files


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
    """
    require_beam()
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
    beam.metrics.Metrics.counter(self._namespace, outcome).inc()
    for result in results:
      yield result.SerializeToString()


def construct(pipeline, input_pattern, input_flag, output_prefix, num_shards,
              convert_fn):
  """Adds read -> convert -> write to `pipeline`.

  Args:
    pipeline: a beam.Pipeline.
    input_pattern: glob of the input TFRecords.
    input_flag: the flag that gave it, for messages.
    output_prefix: output files are <prefix>-SSSSS-of-NNNNN.
    num_shards: output files; 0 lets the runner choose.
    convert_fn: a ConvertWithModel.

  Raises:
    errors.UserInputError: when the glob matches nothing.
  """
  files = input_files(input_pattern, input_flag)
  _ = (pipeline
       | 'InputFiles' >> beam.Create(files)
       | 'ReadInputTFRecord' >> beam.ParDo(_ReadRecords())
       | 'SpreadRecords' >> beam.Reshuffle()
       | 'RunInference' >> beam.ParDo(convert_fn)
       | 'WriteToDisk' >> beam.io.WriteToTFRecord(output_prefix,
                                                  num_shards=num_shards))


def run_tool(pipeline_args, construct_fn, output_prefix, output_flag,
             namespace, outcomes):
  """A tool's main after its flags: builds, runs and summarises a pipeline.

  Args:
    pipeline_args: the flags left for Beam (pipeline_options_from).
    construct_fn: function adding the tool's transforms to a pipeline.
    output_prefix: the output files' prefix; its folder is created.
    output_flag: the flag that gave it, for errors.
    namespace: the metrics namespace of the tool's outcome counters.
    outcomes: {outcome name: what its count means}, one stderr line each.
  """
  require_beam()
  options = pipeline_options_from(pipeline_args)
  folder, _, name = output_prefix.rpartition('/')
  # Where Beam stages the output files: a failed run leaves them behind.
  staging = '%s/beam-temp-%s-*' % (folder or '.', name)
  staged_before = set(tf.io.gfile.glob(staging))
  try:
    counts, _ = beam_tool.run(options, construct_fn, namespace,
                              output_prefix, output_flag)
  except BaseException:
    for path in set(tf.io.gfile.glob(staging)) - staged_before:
      tf.io.gfile.rmtree(path)
    raise
  for outcome, count in sorted(counts.items()):
    print('%d %s' % (count, outcomes.get(outcome, outcome)), file=sys.stderr)
