"""Builds the tf.data input pipeline from an input_reader.proto config.

Pipeline: glob input_path -> (per-worker file shard) -> shuffle file names
-> repeat num_epochs -> interleave num_readers TFRecord files -> shuffle
records -> keep 1 of sample_1_of_n_examples -> decode -> transform ->
batch -> prefetch.

Distribution: with an input_context, input pipeline i of n reads every
n-th file of the sorted list. Files are sharded before they are shuffled
(the original shuffled first, so unseeded per-worker shuffles could give
workers overlapping shards); fewer files than pipelines is an error.

Missing files: every input_path pattern must match at least one file,
otherwise build() raises a UserInputError naming the pattern (a typo in one of
several patterns would otherwise silently drop part of the data). Likewise
every pattern, and each input pipeline's share of the files, must hold
records (a non-empty file): a repeated input of empty files would wait
forever for its first record. Files that hold records always give one per
epoch (sample_1_of_n_examples keeps the first of every n and nothing
else drops whole examples), so no input can repeat empty epochs.

Corrupt or truncated files are detected while reading, not at build time
(validating every shard up front would read the whole dataset before
training starts). TensorFlow's own DataLossError does not say which file is
bad, so each file is read with its errors suppressed while the bytes of the
records read are counted; when a file ends, that count (record lengths plus
16 framing bytes each) must equal the file's size taken at build time.
Otherwise iteration fails with an InvalidArgumentError naming the file and
how far it could be read. Records before the damage are still produced.

The dataset returned is a tf.compat.v1.data.Dataset, as the original's under
TF1: scripts written for it call `dataset.make_one_shot_iterator()` or
`dataset.make_initializable_iterator()` in graph mode, and the datasets
derived from it (take, map, ...) keep those methods.
"""
import concurrent.futures
import math

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from od_estimator import errors
from od_estimator.builders import decoder_builder
from od_estimator.protos import input_reader_pb2
from od_estimator.utils import dataset_util

_READ_BUFFER_BYTES = 8 * 1000 * 1000
# Each TFRecord is framed by a length (8 bytes), its CRC (4) and a data CRC
# (4).
_RECORD_FRAMING_BYTES = 16
_CHECK_BATCH_SIZE = 16
_STAT_THREADS = 16
_FILES_SHOWN = 5
_logging = tf.compat.v1.logging


# The original's name for utils/dataset_util's iterator helper.
make_initializable_iterator = dataset_util.make_initializable_iterator


def _glob_each(patterns):
  """[(pattern, its sorted matches)] for each pattern.

  Raises:
    errors.UserInputError: naming the first pattern that matches no file.
  """
  globbed = []
  for pattern in patterns:
    try:
      matches = sorted(tf.io.gfile.glob(pattern))
    except tf.errors.NotFoundError:
      matches = []
    if not matches:
      raise errors.UserInputError(
          'tf_record_input_reader.input_path pattern %r matches no files.'
          % pattern)
    globbed.append((pattern, matches))
  return globbed


def _glob(patterns):
  """Sorted matches of each pattern, concatenated (see _glob_each)."""
  return [name for _, matches in _glob_each(patterns) for name in matches]


def no_records_problem(what, filenames, sizes):
  """The problem of an input whose files hold no record, or None.

  A TFRecord file without records is empty (0 bytes); reading only such
  files, a repeated input would wait forever for its first record.

  Args:
    what: the input, e.g. "tf_record_input_reader.input_path 'a-*'".
    filenames: the files it reads.
    sizes: their sizes in bytes.

  Returns:
    A one-line message naming the files, or None when one holds records.
  """
  if not filenames or any(sizes):
    return None
  shown = ', '.join(filenames[:_FILES_SHOWN])
  if len(filenames) > _FILES_SHOWN:
    shown += ' (and %d more)' % (len(filenames) - _FILES_SHOWN)
  return ('%s reads %d file(s) and every one is empty (0 records): %s. '
          'Write the records first, or point input_path at files that '
          'hold some.' % (what, len(filenames), shown))


def _refuse_inputs_without_records(globbed, sizes, weighted, input_context):
  """Raises UserInputError when a pattern, or this pipeline, reads nothing.

  Every pattern must hold records, as it must match files. Input pipeline i
  of n reads every n-th file of each pattern (sample_from_datasets_weights)
  or of all of them together (see _read_dataset_internal).
  """
  name = lambda patterns: 'tf_record_input_reader.input_path %s' % (
      ', '.join(repr(pattern) for pattern in patterns))
  inputs = [(name([pattern]), matches) for pattern, matches in globbed]
  if input_context is not None:
    shards = inputs if weighted else [
        (name([pattern for pattern, _ in globbed]),
         [file for _, matches in globbed for file in matches])]
    num, index = (input_context.num_input_pipelines,
                  input_context.input_pipeline_id)
    inputs += [('input pipeline %d of %d of %s' % (index, num, what),
                matches[index::num]) for what, matches in shards]
  for what, matches in inputs:
    problem = no_records_problem(what, matches,
                                 [sizes[file] for file in matches])
    if problem:
      raise errors.UserInputError(problem)


class _FileShardFn:
  """Keeps the input_pipeline_id-th of num_shards slices of file names."""

  def __init__(self, num_shards, index):
    self.num_shards = num_shards
    self.index = index

  def __call__(self, dataset):
    return dataset.shard(self.num_shards, self.index)


def shard_function_for_context(input_context):
  """File-name sharding function for a tf.distribute.InputContext, or None."""
  if input_context is None:
    return None
  return _FileShardFn(input_context.num_input_pipelines,
                      input_context.input_pipeline_id)


def _read_dataset_internal(file_read_func, input_files, num_readers, config,
                           filename_shard_fn=None):
  """Interleaved, shuffled, repeated records of the files matching a glob.

  Args:
    file_read_func: function of a file name tensor returning a dataset of
      serialized records.
    input_files: list of file patterns.
    num_readers: files read in parallel (capped at the number of files).
    config: input_reader_pb2.InputReader.
    filename_shard_fn: optional function sharding the file name dataset.

  Returns:
    A tf.data.Dataset of serialized records.

  Raises:
    errors.UserInputError: if a pattern matches no file.
    ValueError: if there are fewer files than shards.
  """
  filenames = _glob(input_files)
  _logging.info('Reading %d file(s) matching %s', len(filenames), input_files)
  num_shards = getattr(filename_shard_fn, 'num_shards', 1)
  if len(filenames) < num_shards:
    raise errors.UserInputError(
        '%s matches %d file(s) but there are %d input pipelines; each needs '
        'at least one file (tf_record_input_reader.input_path).' %
        (input_files, len(filenames), num_shards))
  if num_readers > len(filenames):
    num_readers = len(filenames)
    _logging.warning('num_readers reduced to %d, the number of input files.',
                     num_readers)
  filename_dataset = tf.data.Dataset.from_tensor_slices(filenames)
  # Shard before shuffling: every worker then splits the same sorted list,
  # where an unseeded per-worker shuffle would make the shards overlap.
  if filename_shard_fn:
    filename_dataset = filename_shard_fn(filename_dataset)
    index = getattr(filename_shard_fn, 'index', 0)
    _logging.info('Input pipeline %d of %d reads %d of these files.', index,
                  num_shards, len(filenames[index::num_shards]))
  if config.shuffle:
    filename_dataset = filename_dataset.shuffle(
        config.filenames_shuffle_buffer_size)
  elif num_readers > 1:
    _logging.warning('shuffle is false, but records of the %d files read in '
                     'parallel are interleaved.', num_readers)
  filename_dataset = filename_dataset.repeat(config.num_epochs or None)
  # Shuffled and unseeded, records come in whichever file answers first;
  # under a graph-level seed (model_main --random_seed) the shuffles repeat,
  # so the interleave keeps one order too and the batches repeat run to run.
  seeded = tf.compat.v1.get_default_graph().seed is not None
  records = filename_dataset.interleave(
      file_read_func, cycle_length=num_readers,
      block_length=config.read_block_length, num_parallel_calls=num_readers,
      deterministic=seeded or not config.shuffle)
  if config.shuffle:
    records = records.shuffle(config.shuffle_buffer_size)
  return records


def read_dataset(file_read_func, input_files, config, filename_shard_fn=None):
  """Reads record files, optionally sampling between several of them.

  Args:
    file_read_func: function of a file name tensor returning a dataset of
      serialized records (e.g. tf.data.TFRecordDataset).
    input_files: list of file patterns.
    config: input_reader_pb2.InputReader.
    filename_shard_fn: optional function sharding the file name dataset
      (see shard_function_for_context).

  Returns:
    A tf.data.Dataset of serialized records. With sample_from_datasets_weights
    each pattern becomes its own dataset, sampled with those weights and
    given a share of num_readers proportional to its weight.

  Raises:
    errors.UserInputError: if a pattern matches no file.
    ValueError: if sample_from_datasets_weights does not pair up with
      input_files, or num_readers is 0.
  """
  if config.num_readers < 1:
    raise errors.UserInputError('InputReader.num_readers must be >= 1.')
  weights = list(config.sample_from_datasets_weights)
  if not weights:
    return _read_dataset_internal(file_read_func, input_files,
                                  config.num_readers, config,
                                  filename_shard_fn)
  if len(weights) != len(input_files):
    raise errors.UserInputError(
        'InputReader.sample_from_datasets_weights has %d values but '
        'tf_record_input_reader.input_path has %d patterns; they must pair '
        'up.' % (len(weights), len(input_files)))
  datasets, kept_weights = [], []
  for pattern, weight in zip(input_files, weights):
    num_readers = math.ceil(config.num_readers * weight / sum(weights))
    if num_readers == 0:
      _logging.info('Skipping %s: its sampling weight is 0.', pattern)
      continue
    datasets.append(_read_dataset_internal(
        file_read_func, [pattern], num_readers, config, filename_shard_fn))
    kept_weights.append(weight)
  return tf.data.Dataset.sample_from_datasets(datasets, kept_weights)


def _file_size(filename):
  try:
    return tf.io.gfile.stat(filename).length
  except tf.errors.NotFoundError as error:
    raise errors.UserInputError(
        'input file %s (matched by tf_record_input_reader.input_path) cannot '
        'be read: %s. A dangling symbolic link? Fix or remove it.' % (
            filename, error.message)) from None


def file_sizes(filenames):
  """Sizes in bytes of the input files.

  Raises:
    errors.UserInputError: naming a matched file that cannot be read.
  """
  # Stat in parallel: on remote file systems each call is a round trip.
  with concurrent.futures.ThreadPoolExecutor(_STAT_THREADS) as pool:
    return list(pool.map(_file_size, filenames))


def _checked_tfrecord_reader(filenames, sizes):
  """TFRecordDataset reader that names a corrupt or truncated file.

  Args:
    filenames: the files that will be read.
    sizes: their sizes in bytes now, when the pipeline is built.

  Returns:
    Function of a file name tensor returning its records (see the module
    docstring for the check). Files not in `filenames` are read unchecked.
  """

  def read(filename):
    expected = tf.reduce_max(tf.where(tf.equal(filenames, filename),
                                      tf.constant(sizes, tf.int64),
                                      tf.constant(-1, tf.int64)))
    # Small batches keep the per-record cost of the check (a function call
    # per element) low; an empty batch flagged True marks the end of file.
    batches = tf.data.TFRecordDataset(
        filename, buffer_size=_READ_BUFFER_BYTES).ignore_errors().batch(
            _CHECK_BATCH_SIZE)
    tagged = batches.map(lambda records: (records, False)).concatenate(
        tf.data.Dataset.from_tensors((tf.constant([], tf.string), True)))

    def count(consumed, element):
      records, at_end = element
      complete = tf.logical_or(expected < 0, tf.equal(consumed, expected))
      check = tf.debugging.Assert(
          tf.logical_or(tf.logical_not(at_end), complete),
          ['Corrupt or truncated TFRecord file', filename, ': read',
           consumed, 'bytes of valid records, but the file had', expected,
           'bytes when the input pipeline was built'])
      with tf.control_dependencies([check]):
        consumed += tf.reduce_sum(
            tf.cast(tf.strings.length(records), tf.int64) +
            _RECORD_FRAMING_BYTES)
      return consumed, records

    return tagged.scan(tf.constant(0, tf.int64), count).unbatch()

  # Plain graph code: skipping AutoGraph conversion makes tracing faster.
  return tf.autograph.experimental.do_not_convert(read)


def _parallel_calls(config, field, multiplier=1):
  """Map parallelism from an explicitly set field, else AUTOTUNE."""
  if config.HasField(field):
    return getattr(config, field) * multiplier
  return tf.data.AUTOTUNE


def _dataset_map_fn(dataset, fn_to_map, batch_size=None,
                    input_reader_config=None):
  """dataset.map with the config's parallelism (see build)."""
  if batch_size:
    calls = _parallel_calls(input_reader_config, 'num_parallel_batches',
                            batch_size)
  else:
    calls = _parallel_calls(input_reader_config, 'num_parallel_map_calls')
  return dataset.map(fn_to_map, num_parallel_calls=calls)


def _checked_records(input_files, input_reader_config, input_context):
  """The serialized records of this pipeline's share of input_files.

  Raises:
    errors.UserInputError: as build, for patterns without records.
  """
  # read_dataset globs again; this first glob lists the files whose sizes
  # the reader checks against and that must hold records.
  globbed = _glob_each(input_files)
  filenames = [file for _, matches in globbed for file in matches]
  sizes = file_sizes(filenames)
  _refuse_inputs_without_records(
      globbed, dict(zip(filenames, sizes)),
      bool(input_reader_config.sample_from_datasets_weights), input_context)
  dataset = read_dataset(_checked_tfrecord_reader(filenames, sizes),
                         input_files, input_reader_config,
                         filename_shard_fn=shard_function_for_context(
                             input_context))
  if input_reader_config.sample_1_of_n_examples > 1:
    dataset = dataset.shard(input_reader_config.sample_1_of_n_examples, 0)
  return dataset


def build(input_reader_config, batch_size=None, transform_input_data_fn=None,
          input_context=None, reduce_to_frame_fn=None):
  """Builds the dataset of decoded (and transformed, batched) examples.

  Args:
    input_reader_config: input_reader_pb2.InputReader with
      tf_record_input_reader.
    batch_size: global batch size; None means no batching.
    transform_input_data_fn: optional function applied to each decoded
      tensor dict.
    input_context: optional tf.distribute.InputContext: files are sharded
      across its input pipelines and batch_size becomes per replica.
    reduce_to_frame_fn: optional function(dataset, dataset_map_fn,
      batch_size, input_reader_config) applied after decoding, as in the
      original (meant for sequence examples).

  Returns:
    A tf.compat.v1.data.Dataset (see the module doc) of tensor dicts
    (batched when batch_size is given).
    Decoding uses batch_size * num_parallel_batches parallel calls when
    num_parallel_batches is set (num_parallel_map_calls when not batching),
    otherwise tf.data.AUTOTUNE; num_prefetch_batches < 0 means AUTOTUNE.

  Raises:
    ValueError: for a config of the wrong type, external_input_reader or
      another unsupported option (naming the field), an empty input_path,
      or fewer files than input pipelines.
    errors.UserInputError: if an input_path pattern matches no file, or
      a pattern (or this pipeline's share of the files) only empty files.
  """
  if not isinstance(input_reader_config, input_reader_pb2.InputReader):
    raise ValueError('input_reader_config must be an '
                     'input_reader_pb2.InputReader, got %s' %
                     type(input_reader_config).__name__)
  decoder = decoder_builder.build(input_reader_config)
  input_files = list(input_reader_config.tf_record_input_reader.input_path)
  if not input_files:
    raise errors.UserInputError(
        'tf_record_input_reader.input_path must list at least '
        'one file pattern.')
  if input_context is not None and batch_size:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  dataset = _checked_records(input_files, input_reader_config, input_context)
  # Decoding and transforms are plain graph code (tf.cond, no Python control
  # flow on tensors): AutoGraph would only slow tracing, by seconds.
  plain = tf.autograph.experimental.do_not_convert
  dataset = _dataset_map_fn(dataset, plain(decoder.decode), batch_size,
                            input_reader_config)
  if reduce_to_frame_fn:
    dataset = reduce_to_frame_fn(dataset, _dataset_map_fn, batch_size,
                                 input_reader_config)
  if transform_input_data_fn is not None:
    dataset = _dataset_map_fn(dataset, plain(transform_input_data_fn),
                              batch_size, input_reader_config)
  if batch_size:
    dataset = dataset.batch(batch_size,
                            drop_remainder=input_reader_config.drop_remainder)
  prefetch = input_reader_config.num_prefetch_batches
  if prefetch:
    dataset = dataset.prefetch(tf.data.AUTOTUNE if prefetch < 0 else prefetch)
  # The adapter tf.compat.v1.data.make_one_shot_iterator wraps datasets in:
  # no op is added to the pipeline. TF 2.15 has no public constructor of a
  # v1 dataset from a v2 one.
  return dataset_ops.DatasetV1Adapter(dataset)
