"""The original's tf_record_creation_util: sharded TFRecord writers that
the caller's ExitStack closes (custom converters shard this way)."""
import tensorflow as tf

from od_estimator.utils import dataset_util
from od_estimator.utils import file_safety


def open_sharded_output_tfrecords(exit_stack, base_path, num_shards):
  """Opens num_shards writers named BASE-0000i-of-0000N.

  Args:
    exit_stack: a contextlib.ExitStack that closes the writers.
    base_path: the shards' common prefix.
    num_shards: how many shards.

  Returns:
    The list of writers; example i usually goes to writers[i % num_shards].
    The shards are renamed into place when exit_stack closes without an
    exception, so an earlier conversion's shards stay whole if this one
    fails.
  """
  # Written under temporary names, renamed once all writers are closed.
  temps = exit_stack.enter_context(file_safety.replacing_paths(
      dataset_util.sharded_filenames(base_path, num_shards)))
  return [exit_stack.enter_context(tf.io.TFRecordWriter(name))
          for name in temps]
