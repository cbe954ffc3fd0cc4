"""dataset_builder: tf.data pipelines over real synthetic TFRecords."""
import os
import shutil

import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator import errors
from od_estimator.builders import dataset_builder
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.protos import input_reader_pb2

F = fields.InputDataFields


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """12 examples (source ids 0..11) in 3 shards: shard k holds ids = k mod 3."""
  root = str(tmp_path_factory.mktemp('shapes'))
  written = synth.create_dataset(root, num_train=12, num_val=2, image_size=16,
                                 num_train_shards=3, num_val_shards=1)
  written['root'] = root
  return written


def _config(input_paths, extra=''):
  paths = ' '.join('input_path: "%s"' % path for path in input_paths)
  return text_format.Merge(
      'tf_record_input_reader { %s } %s' % (paths, extra),
      input_reader_pb2.InputReader())


# Deterministic reading: one file at a time, in sorted order.
_ORDERED = 'shuffle: false num_readers: 1 num_epochs: 1'


def _source_ids(dataset, limit=1000, seed=None):
  """Runs the dataset in a graph session (graph-level `seed`); returns the
  source ids as ints."""
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(seed)
    element = tf.compat.v1.data.make_one_shot_iterator(
        dataset()).get_next()
    ids = []
    with tf.compat.v1.Session() as sess:
      try:
        while len(ids) < limit:
          value = sess.run(element[F.source_id])
          ids.extend(value.tolist() if hasattr(value, 'tolist')
                     else [value])
      except tf.errors.OutOfRangeError:
        pass
  return [int(i) for i in ids]


def _train_glob(data):
  return os.path.join(data['root'], 'shapes_train.record-*')


def test_sharded_glob_reads_every_record_once_in_file_order(data):
  ids = _source_ids(lambda: dataset_builder.build(
      _config([_train_glob(data)], _ORDERED)))
  # Shards sorted by name; example i went to shard i % 3.
  assert ids == [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]


def test_several_patterns_are_concatenated(data):
  ids = _source_ids(lambda: dataset_builder.build(
      _config([data['train'][2], data['val'][0]], _ORDERED)))
  # Shard 2 holds 2, 5, 8, 11; the val split continues at id 12.
  assert ids == [2, 5, 8, 11, 12, 13]


def _interleave_determinism(config, seed):
  """The `deterministic` attribute of the built dataset's interleave, under
  graph-level `seed`."""
  with tf.Graph().as_default() as graph:
    tf.compat.v1.set_random_seed(seed)
    dataset_builder.build(config)
    return [node.get_attr('deterministic') for node in graph.get_operations()
            if node.type.startswith('ParallelInterleaveDataset')]


def test_seeded_shuffled_reads_repeat_their_order(data):
  config = _config([_train_glob(data)], 'num_readers: 3 num_epochs: 1')
  first, second = (_source_ids(lambda: dataset_builder.build(config), seed=7)
                   for _ in range(2))
  assert first == second and sorted(first) == list(range(12))
  # Seeded: the interleave waits for each file in turn; unseeded and
  # shuffled it takes whichever answers first (as before).
  assert _interleave_determinism(config, 7) == [b'true']
  assert _interleave_determinism(config, None) == [b'false']


def test_num_epochs_repeats(data):
  ids = _source_ids(lambda: dataset_builder.build(_config(
      [data['train'][0]], 'shuffle: false num_readers: 1 num_epochs: 2')))
  assert ids == [0, 3, 6, 9, 0, 3, 6, 9]


def test_zero_epochs_repeat_forever(data):
  ids = _source_ids(lambda: dataset_builder.build(_config(
      [data['train'][0]], 'shuffle: false num_readers: 1')), limit=10)
  assert ids == [0, 3, 6, 9, 0, 3, 6, 9, 0, 3]


def test_sample_1_of_n_examples(data):
  ids = _source_ids(lambda: dataset_builder.build(_config(
      [_train_glob(data)], _ORDERED + ' sample_1_of_n_examples: 3')))
  # Every third record of [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11].
  assert ids == [0, 9, 7, 5]


def test_shuffled_parallel_reading_keeps_every_record(data):
  ids = _source_ids(lambda: dataset_builder.build(_config(
      [_train_glob(data)], 'num_epochs: 1 num_readers: 4 '
      'shuffle_buffer_size: 8 num_prefetch_batches: -1')))
  assert sorted(ids) == list(range(12))


def _keep_image_and_id(tensor_dict):
  return {F.image: tensor_dict[F.image],
          F.source_id: tensor_dict[F.source_id]}


def test_transform_batch_and_input_context(data):
  context = tf.distribute.InputContext(num_input_pipelines=3,
                                       input_pipeline_id=1,
                                       num_replicas_in_sync=2)

  def dataset():
    return dataset_builder.build(
        _config([_train_glob(data)], _ORDERED + ' num_parallel_batches: 2'),
        batch_size=4, transform_input_data_fn=_keep_image_and_id,
        input_context=context)

  with tf.Graph().as_default():
    element = tf.compat.v1.data.make_one_shot_iterator(dataset()).get_next()
    assert set(element) == {F.image, F.source_id}
    # Per-replica batch = 4 / 2 replicas; drop_remainder makes it static.
    assert element[F.image].shape.as_list() == [2, None, None, 3]
  # Pipeline 1 of 3 reads only the second sorted shard: ids 1, 4, 7, 10.
  assert _source_ids(dataset) == [1, 4, 7, 10]


def test_more_input_pipelines_than_files_is_an_error(data):
  context = tf.distribute.InputContext(num_input_pipelines=4)
  with pytest.raises(ValueError, match='4 input pipelines'):
    dataset_builder.build(_config([_train_glob(data)]),
                          input_context=context)


def test_glob_matching_nothing_names_it(data):
  missing = os.path.join(data['root'], 'no_such.record-*')
  with pytest.raises(errors.UserInputError,
                     match=r'input_path.*no_such\.record-\*'):
    dataset_builder.build(_config([missing]))


def test_one_empty_pattern_among_several_names_it(data):
  missing = '/nonexistent_dir/val.record-*'
  with pytest.raises(errors.UserInputError, match='nonexistent_dir'):
    dataset_builder.build(_config([_train_glob(data), missing]))


def test_empty_input_path_is_an_error():
  with pytest.raises(ValueError, match='input_path'):
    dataset_builder.build(_config([]))


def test_external_input_reader_is_rejected():
  config = text_format.Merge('external_input_reader {}',
                             input_reader_pb2.InputReader())
  with pytest.raises(ValueError, match='external_input_reader'):
    dataset_builder.build(config)


def test_rejects_wrong_type():
  with pytest.raises(ValueError, match='InputReader'):
    dataset_builder.build('tf_record_input_reader {}')


def _damaged_copy(data, tmp_path, damage):
  path = str(tmp_path / 'damaged.record')
  shutil.copy(data['train'][0], path)
  with open(path, 'rb') as f:
    content = bytearray(f.read())
  with open(path, 'wb') as f:
    f.write(damage(content))
  return path


@pytest.mark.parametrize('damage', [
    lambda content: content[:-100],  # truncated last record
    lambda content: content[:40] + bytes([content[40] ^ 0xff]) +
    content[41:],  # corrupted first record
    lambda content: b'this is not a TFRecord file',
], ids=['truncated', 'corrupted', 'garbage'])
def test_damaged_file_is_named_in_the_error(data, tmp_path, damage):
  path = _damaged_copy(data, tmp_path, damage)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Corrupt or truncated TFRecord file.*' +
                     'damaged.record'):
    _source_ids(lambda: dataset_builder.build(
        _config([path, data['train'][1]], _ORDERED)))


def test_records_before_the_damage_are_still_read(data, tmp_path):
  path = _damaged_copy(data, tmp_path, lambda content: content[:-100])
  config = _config([path], _ORDERED)
  with tf.Graph().as_default():
    element = tf.compat.v1.data.make_one_shot_iterator(
        dataset_builder.build(config)).get_next()
    with tf.compat.v1.Session() as sess:
      # Shard 0 holds ids 0, 3, 6, 9; the last one is cut.
      assert [int(sess.run(element[F.source_id])) for _ in range(3)] == [
          0, 3, 6]
      with pytest.raises(tf.errors.InvalidArgumentError, match=path):
        sess.run(element)


def test_sample_from_datasets_weights_must_pair_up(data):
  with pytest.raises(ValueError, match='sample_from_datasets_weights'):
    dataset_builder.build(_config([_train_glob(data)],
                                  'sample_from_datasets_weights: [0.5, 0.5]'))


def test_sample_from_datasets(data):
  ids = _source_ids(lambda: dataset_builder.build(_config(
      [data['train'][0], data['val'][0]],
      _ORDERED + ' sample_from_datasets_weights: [1.0, 0.0]')))
  # A zero weight drops the val file entirely.
  assert ids == [0, 3, 6, 9]


def test_num_readers_zero_is_an_error(data):
  with pytest.raises(ValueError, match='num_readers'):
    dataset_builder.build(_config([_train_glob(data)], 'num_readers: 0'))


def test_make_initializable_iterator_registers_initializer(data):
  with tf.Graph().as_default():
    iterator = dataset_builder.make_initializable_iterator(
        dataset_builder.build(_config([data['train'][0]], _ORDERED)))
    assert iterator.initializer in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
    element = iterator.get_next()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      assert sess.run(element[F.source_id]) == b'0'


def test_tf1_iterator_methods_on_the_built_dataset(data):
  # As the original's tests and TF1 scripts: methods of the dataset itself,
  # also on datasets derived from it.
  with tf.Graph().as_default():
    dataset = dataset_builder.build(_config([_train_glob(data)], _ORDERED),
                                    batch_size=1)
    iterator = dataset.make_initializable_iterator()
    first = iterator.get_next()
    second = dataset.skip(1).take(1).make_one_shot_iterator().get_next()
    with tf.compat.v1.Session() as sess:
      sess.run(iterator.initializer)
      first, second = sess.run((first, second))
  assert first[F.image].shape == (1, 16, 16, 3)
  assert [first[F.source_id], second[F.source_id]] == [[b'0'], [b'3']]
