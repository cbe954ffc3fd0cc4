"""What the Beam tools of this package share: Beam, its options, a run.

Each tool parses the original's flags and hands every flag it does not
define to Beam as a pipeline option (`--runner=DataflowRunner --project=...`,
`--runner=FlinkRunner --flink_master=...`, `--direct_num_workers=4`); with
none the DirectRunner runs the pipeline on this machine. A flag that neither
the tool nor Beam knows is refused, where the original's tools passed a
misspelt flag to Beam, which dropped it with a warning.

apache_beam is imported only when a pipeline is built, so `--help` and the
per-record code work without the `beam` install extra, and a missing Beam
is one `error:` line naming the extra.
"""
import argparse
import logging
import os

import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags

INSTALL_HINT = 'pip install od_estimator[beam]'
# The shard names Beam's WriteToTFRecord gives by default (and the
# original's tools kept): PREFIX-00000-of-00004.
SHARD_PATTERN = '-?????-of-?????'


def import_beam():
  """The apache_beam module.

  Raises:
    errors.UserInputError: when Beam does not import, naming the extra.
  """
  try:
    import apache_beam  # pylint: disable=g-import-not-at-top
  except ImportError as error:
    raise errors.UserInputError(
        'Apache Beam is not installed (%s); this tool is a Beam pipeline: '
        '%s' % (error, INSTALL_HINT)) from None
  return apache_beam


def argument_parser(description):
  """An argparse parser for a Beam tool's own flags.

  Without abbreviations: a Beam option that begins like a tool flag must
  not pass for it.
  """
  return argparse.ArgumentParser(
      description=description + ' Flags this tool does not define are '
      'Apache Beam pipeline options (--runner=...); without --runner the '
      'DirectRunner runs the pipeline on this machine.',
      allow_abbrev=False)


def parse_flags(parser, argv):
  """(the tool's flags as a dict, Beam's PipelineOptions of the others).

  Args:
    parser: the tool's argparse parser, without absl's logging flags (they
      are added here, as the original's usage lines carry them).
    argv: the command line without the program name, or None for sys.argv.

  Raises:
    errors.UserInputError: Beam is not installed, or pipeline_options()
      refuses the other flags.
  """
  args, others = tool_flags.known_tool_arguments(
      tool_flags.add_logging_flags(parser), argv)
  return args, pipeline_options(import_beam(), others)


class _Collected(Exception):
  """Stops Beam's option parsing once the unknown flags are known."""


def pipeline_options(beam, pipeline_args):
  """Beam's PipelineOptions of the flags the tool does not define.

  Args:
    beam: the apache_beam module.
    pipeline_args: those flags, e.g. ['--runner=DirectRunner'].

  Raises:
    errors.UserInputError: for a runner Beam does not know or cannot load,
      or flags that no Beam option (of that runner) defines.
  """
  options = beam.options.pipeline_options.PipelineOptions(pipeline_args)
  runner = options.view_as(
      beam.options.pipeline_options.StandardOptions).runner
  if runner:
    # Loading the runner defines its own options (FlinkRunner's
    # --flink_master, ...), which the check below then knows.
    try:
      beam.runners.runner.create_runner(runner)
    except (ImportError, ValueError) as error:
      raise errors.UserInputError('--runner=%s: %s' % (
          runner, error)) from None
  unknown = []

  def collect(parser):
    unknown.extend(parser.parse_known_args(pipeline_args)[1])
    raise _Collected()

  try:
    options.get_all_options(add_extra_args_fn=collect)
  except _Collected:
    pass
  if unknown:
    # Flags by name (--num_shard of --num_shard=2); a stray value as it is.
    names = [token.split('=', 1)[0] for token in unknown
             if token.startswith('-')] or unknown
    raise errors.UserInputError(
        'unknown flag%s %s: neither a flag of this tool nor an Apache Beam '
        'pipeline option%s; see --help for the tool\'s flags' % (
            's' if len(names) > 1 else '', ', '.join(names),
            ' of --runner=%s' % runner if runner else ''))
  return options


def input_files(pattern, flag):
  """The files a TFRecord glob matches, sorted; checked before a pipeline
  starts.

  Args:
    pattern: the glob (TensorFlow's file systems: local, gs://, ...).
    flag: the flag that gave it, without the dashes.

  Raises:
    errors.UserInputError: naming the flag when the glob matches nothing.
  """
  try:
    files = tf.io.gfile.glob(pattern)
  except tf.errors.OpError as error:
    raise errors.UserInputError('--%s=%s: %s' % (
        flag, pattern, error.message)) from None
  if not files:
    raise errors.UserInputError(
        '--%s=%s matches no file; give a glob of the input TFRecord files' % (
            flag, pattern))
  return sorted(files)


def beam_glob(pattern):
  """The glob as Beam's readers must get it: a local relative glob made
  absolute (Beam's file matcher finds nothing for a glob without a folder,
  such as `in-*.record`); URLs (gs://, ...) stay as they are."""
  return pattern if '://' in pattern else os.path.abspath(pattern)


def prepare_output(prefix, flag):
  """Creates the directory of an output prefix; its shard glob.

  Raises:
    errors.UserInputError: naming the flag when the prefix is a directory.
  """
  if not prefix or tf.io.gfile.isdir(prefix):
    raise errors.UserInputError(
        '--%s=%s: give a file name prefix (shards are written as '
        'PREFIX%s), not a directory' % (flag, prefix, SHARD_PATTERN))
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  return prefix + SHARD_PATTERN


def count(namespace, name, value=1):
  """Adds to one of the pipeline's counters (run() returns them)."""
  from apache_beam.metrics import Metrics  # pylint: disable=g-import-not-at-top
  Metrics.counter(namespace, name).inc(value)


class _InputErrorTracebacks(logging.Filter):
  """Drops Beam's logged traceback of bad input: the tool prints one line."""

  def filter(self, record):
    return not (record.exc_info and
                isinstance(record.exc_info[1], errors.UserInputError))


def run(options, build, namespace, output_prefix, output_flag):
  """Builds a pipeline, runs it to its end and returns its counters.

  Args:
    options: the PipelineOptions (parse_flags()).
    build: build(pipeline) adds the tool's transforms.
    namespace: the namespace of the tool's counters (count()).
    output_prefix: the prefix of the shards the pipeline writes; its
      directory is created once the pipeline is built.
    output_flag: the flag that gave it, for errors.

  Returns:
    ({counter name: value}, the output shards' glob); the counters are
    empty where the runner reports no metrics.

  Raises:
    errors.UserInputError: a record's bad input, raised where the pipeline
      read it (Beam keeps the type and appends the step's name).
  """
  beam = import_beam()
  pipeline = beam.Pipeline(options=options)
  build(pipeline)  # may refuse its input: nothing is created before
  shards = prepare_output(output_prefix, output_flag)
  quiet = _InputErrorTracebacks()
  beam_logger = logging.getLogger('apache_beam.runners.common')
  beam_logger.addFilter(quiet)
  try:
    result = pipeline.run()
    result.wait_until_finish()
  finally:
    beam_logger.removeFilter(quiet)
  return _counters(beam, result, namespace), shards


def _counters(beam, result, namespace):
  try:
    query = result.metrics().query(
        beam.metrics.MetricsFilter().with_namespace(namespace))
  except NotImplementedError:
    return {}
  totals = {}
  for counter in query['counters']:
    value = counter.committed
    if value is None:
      value = counter.attempted
    name = counter.key.metric.name
    totals[name] = totals.get(name, 0) + (value or 0)
  return totals
