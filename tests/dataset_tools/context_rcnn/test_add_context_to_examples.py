"""Tests for the add_context_to_examples Beam pipeline (DirectRunner).

The input is what the original's chain gives this tool: camera-trap
tf.Examples (create_cococameratraps_tfexample_main's) with an embedding
each (generate_embedding_data's keys). Two pipeline runs, one per output
type, are shared by the module; the options are also checked on the
per-group functions, without Beam.
"""
import glob
import io
import os
import re

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.data_decoders import tf_sequence_example_decoder
from od_estimator.dataset_tools.context_rcnn import (
    create_cococameratraps_tfexample_main as cct)
from od_estimator.dataset_tools.context_rcnn import memory_banks
from od_estimator.utils import dataset_util
from tests.command_modules import run_command

pytest.importorskip('apache_beam')

_TOOL = 'dataset_tools.context_rcnn.add_context_to_examples'
_F = fields.InputDataFields
_LENGTH = 4
_CATEGORIES = {1: 'deer', 2: 'fox'}
_LABEL_MAP = "item { id: 1 name: 'deer' } item { id: 2 name: 'fox' }"
# (source id, seq id, frame, date, embedding score, boxes [x, y, w, h]).
_FRAMES = (
    ('a2', 's1', 2, '2020-01-05 01:00:02', 0.8, [[10, 10, 20, 20]]),
    ('a0', 's1', 0, '2020-01-05 01:00:00', 0.9, [[0, 0, 48, 32]]),
    ('a1', 's1', 1, '2020-01-05 01:00:01', 0.2, []),
    ('b0', 's2', 0, '2020-02-03 09:30:00', 0.95, [[4, 8, 8, 8]]),
)


def _embedding(source_id):
  """A distinct embedding per frame: [k, k + .25, k + .5, k + .75]."""
  k = [frame[0] for frame in _FRAMES].index(source_id) * 10
  return [k, k + 0.25, k + 0.5, k + 0.75]


def _input_examples(image_dir):
  """The camera-trap examples of _FRAMES (96x64 images) with embeddings."""
  examples = []
  for source_id, seq_id, frame, date, score, boxes in _FRAMES:
    file_name = source_id + '.jpg'
    Image.fromarray(np.full([64, 96, 3], 60 + frame, np.uint8)).save(
        os.path.join(image_dir, file_name))
    image = {'id': source_id, 'file_name': file_name, 'width': 96,
             'height': 64, 'location': 'loc1', 'seq_id': seq_id,
             'seq_num_frames': 3, 'frame_num': frame, 'date_captured': date}
    annotations = [{'id': i, 'image_id': source_id, 'category_id': 1 + i % 2,
                    'bbox': box} for i, box in enumerate(boxes)]
    example, _ = cct.image_example(image, annotations, image_dir,
                                   _CATEGORIES)
    feature = example.features.feature
    feature['image/embedding'].CopyFrom(
        dataset_util.float_list_feature(_embedding(source_id)))
    feature['image/embedding_score'].CopyFrom(
        dataset_util.float_list_feature([score]))
    feature['image/embedding_length'].CopyFrom(
        dataset_util.int64_feature(_LENGTH))
    examples.append(example)
  return examples


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """The input TFRecord (two shards), its examples and a label map."""
  root = tmp_path_factory.mktemp('context')
  (root / 'images').mkdir()
  examples = _input_examples(str(root / 'images'))
  for shard in range(2):
    with tf.io.TFRecordWriter(str(root / ('in.record-%d' % shard))) as w:
      for example in examples[shard::2]:
        w.write(example.SerializeToString())
  (root / 'label_map.pbtxt').write_text(_LABEL_MAP)
  return {'root': root, 'pattern': str(root / 'in.record-*'),
          'examples': {memory_banks.source_id(e): e for e in examples},
          'label_map': str(root / 'label_map.pbtxt')}


def _run(data, name, flags):
  prefix = str(data['root'] / name / 'out.record')
  result = run_command(_TOOL, ['--input_tfrecord', data['pattern'],
                               '--output_tfrecord', prefix] + flags)
  assert result.returncode == 0, result.stderr[-3000:]
  shards = sorted(glob.glob(prefix + '-*'))
  records = [record for shard in shards
             for record in tf.data.TFRecordDataset(shard).as_numpy_iterator()]
  return result, shards, records


@pytest.fixture(scope='module')
def example_output(data):
  """tf.Examples, grouped by sequence, two shards, images as they were."""
  result, shards, records = _run(data, 'examples', [
      '--sequence_key=image/seq_id', '--num_shards=2',
      '--reduce_image_size=false', '--runner=DirectRunner'])
  examples = [tf.train.Example.FromString(r) for r in records]
  return result, shards, {memory_banks.source_id(e): e for e in examples}


@pytest.fixture(scope='module')
def sequence_output(data):
  """tf.SequenceExamples by location and month, clips of 2, positives."""
  result, shards, records = _run(data, 'sequences', [
      '--output_type', 'tf_sequence_example', '--time_horizon', 'month',
      '--max_clip_length=2', '--keep_only_positives',
      '--keep_context_features_image_id_list', '--max_image_dimension=48'])
  sequences = [tf.train.SequenceExample.FromString(r) for r in records]
  by_media_id = {s.context.feature['clip/media_id'].bytes_list.value[0]
                 .decode(): s for s in sequences}
  return result, shards, records, by_media_id


def _values(feature):
  return list(getattr(feature, feature.WhichOneof('kind')).value)


def _decode(decoder, record):
  return tf.nest.map_structure(lambda t: t.numpy(),
                               decoder.decode(tf.constant(record)))


def test_examples_carry_their_sequence_bank_in_frame_order(example_output):
  result, shards, examples = example_output
  assert [s[-len('-00000-of-00002'):] for s in shards] == [
      '-00000-of-00002', '-00001-of-00002']
  assert sorted(examples) == ['a0', 'a1', 'a2', 'b0']
  assert 'read 4 tf.Example(s), wrote 4 tf_example record(s) (2 group(s)' \
      in result.stdout
  sequence_bank = _embedding('a0') + _embedding('a1') + _embedding('a2')
  for row, source_id in enumerate(['a0', 'a1', 'a2']):
    feature = examples[source_id].features.feature
    np.testing.assert_allclose(_values(feature['image/context_features']),
                               sequence_bank)
    assert _values(feature['image/context_feature_length']) == [_LENGTH]
    assert _values(feature['context_features_idx']) == [row]
    assert 'image/context_features_image_id_list' not in feature
  np.testing.assert_allclose(_values(
      examples['b0'].features.feature['image/context_features']),
                             _embedding('b0'))


def test_examples_keep_their_own_features(data, example_output):
  _, _, examples = example_output
  for source_id, example in examples.items():
    given = data['examples'][source_id].features.feature
    for key, feature in given.items():
      assert examples[source_id].features.feature[key] == feature, key


def test_our_example_decoder_reads_the_bank(example_output):
  _, _, examples = example_output
  decoder = tf_example_decoder.TfExampleDecoder(load_context_features=True)
  out = _decode(decoder, examples['a1'].SerializeToString())
  assert out[_F.context_features].shape == (3, _LENGTH)
  np.testing.assert_allclose(out[_F.context_features][2], _embedding('a2'))
  assert out[_F.context_feature_length] == _LENGTH
  assert out[_F.image].shape == (64, 96, 3)


def test_sequences_by_location_and_month_in_clips(sequence_output):
  result, _, records, by_media_id = sequence_output
  # January's three frames in two clips of at most 2; February's one.
  assert sorted(by_media_id) == ['loc1/2020/1_0', 'loc1/2020/1_1',
                                 'loc1/2020/2_0']
  assert 'wrote 3 tf_sequence_example record(s) (2 group(s), 4 frame(s))' \
      in result.stdout
  first = by_media_id['loc1/2020/1_0']
  context = first.context.feature
  assert _values(context['clip/frames']) == [2]
  assert _values(context['clip/start/timestamp']) == [0]
  assert _values(context['clip/end/timestamp']) == [2]
  assert _values(context['image/format']) == [b'JPG']
  assert _values(context['image/channels']) == [3]
  # Shrunk to at most 48 a side, aspect kept.
  assert _values(context['image/width']) == [48]
  assert _values(context['image/height']) == [32]
  # a1 scores 0.2 < 0.7: not in the bank, its index past the bank's end.
  bank = _embedding('a0') + _embedding('a2')
  np.testing.assert_allclose(_values(context['image/context_features']),
                             bank)
  assert _values(context['image/context_feature_length']) == [_LENGTH]
  assert _values(context['image/context_features_image_id_list']) == [
      b'a0', b'a2']
  frames = first.feature_lists.feature_list
  assert [_values(f) for f in frames['image/source_id'].feature] == [
      [b'a0'], [b'a1']]
  assert [_values(f) for f in frames['image/timestamp'].feature] == [[0], [1]]
  assert [_values(f) for f in frames['image/context_features_idx'].feature
         ] == [[0], [2001]]
  assert [_values(f) for f in frames['region/is_annotated'].feature] == [
      [1], [1]]
  assert [_values(f) for f in frames['image/location'].feature] == [
      [b'loc1'], [b'loc1']]
  assert [_values(f) for f in frames['region/label/string'].feature] == [
      [b'deer'], []]
  assert [_values(f) for f in frames['region/label/index'].feature] == [
      [1], []]
  second = by_media_id['loc1/2020/1_1']
  assert [_values(f) for f in second.feature_lists.feature_list[
      'image/context_features_idx'].feature] == [[1]]
  np.testing.assert_allclose(_values(
      second.context.feature['image/context_features']), bank)
  assert len(records) == 3


def test_our_sequence_decoder_reads_the_clips(data, sequence_output):
  _, _, _, by_media_id = sequence_output
  decoder = tf_sequence_example_decoder.TfSequenceExampleDecoder(
      data['label_map'], load_context_features=True)
  out = _decode(decoder,
                by_media_id['loc1/2020/1_0'].SerializeToString())
  assert list(out[_F.source_id]) == [b'a0', b'a1']
  assert out[_F.context_features].shape == (2, _LENGTH)
  np.testing.assert_allclose(out[_F.context_features][1], _embedding('a2'))
  assert list(out[_F.num_groundtruth_boxes]) == [1, 0]
  np.testing.assert_allclose(out[_F.groundtruth_boxes][0], [[0, 0, 0.5, 0.5]])
  assert out[_F.groundtruth_classes][0, 0] == 1
  assert list(out[_F.is_annotated]) == [True, True]
  assert list(out[_F.original_image_spatial_shape]) == [32, 48]
  image = tf.io.decode_image(out[_F.image][0]).numpy()
  assert image.shape == (32, 48, 3)


# The per-group functions, for the options the two runs leave out.

def _frames(data, *source_ids):
  return [data['examples'][source_id] for source_id in source_ids]


def _with(example, key, feature):
  copied = tf.train.Example()
  copied.CopyFrom(example)
  copied.features.feature[key].CopyFrom(feature)
  return copied


def test_groups_are_ordered_and_split_in_chunks(data):
  chunks = memory_banks.order_and_split(
      b's1', _frames(data, 'a2', 'a0', 'a1'), 'image/seq_id', True, 2)
  assert [(key, [memory_banks.source_id(e) for e in frames])
          for key, frames in chunks] == [(b's1_0', ['a0', 'a1']),
                                         (b's1_1', ['a2'])]


def test_location_frames_by_date_unless_ids_sort(data):
  a2 = _with(data['examples']['a2'], 'image/date_captured',
             dataset_util.bytes_feature('2019-12-31 23:59:59'))
  frames = _frames(data, 'a0', 'a1') + [a2]
  for sorted_ids, expected in ((True, ['a0', 'a1', 'a2']),
                               (False, ['a2', 'a0', 'a1'])):
    (_, ordered), = memory_banks.order_and_split(
        b'loc1', frames, 'image/location', sorted_ids, 10)
    assert [memory_banks.source_id(e) for e in ordered] == expected


def test_group_keys_per_time_horizon(data):
  a0 = data['examples']['a0']  # 2020-01-05 01:00:00 at loc1
  keys = {horizon: memory_banks.group_key(a0, 'image/location', horizon)
          for horizon in (None,) + memory_banks.TIME_HORIZONS}
  assert keys == {None: b'loc1', 'year': b'loc1/2020',
                  'month': b'loc1/2020/1', 'week': b'loc1/2020/1/0.0',
                  'day': b'loc1/2020/1/5', 'hour': b'loc1/2020/1/5/1',
                  'minute': b'loc1/2020/1/5/1/0'}
  assert memory_banks.group_key(a0, 'image/seq_id') == b's1'


def test_bank_subsampled_or_from_annotated_frames(data):
  frames = _frames(data, 'a0', 'a1', 'a2')
  every_third = memory_banks.build_bank(
      frames, memory_banks.BankSettings(subsample_rate=3, max_elements=10))
  assert every_third.indices == [0, 11, 11]
  assert every_third.image_ids == [b'a0']
  np.testing.assert_allclose(every_third.features, _embedding('a0'))
  annotated = memory_banks.build_bank(
      frames, memory_banks.BankSettings(keep_only_positives_gt=True,
                                        max_elements=10))
  assert annotated.indices == [0, 11, 1]
  np.testing.assert_allclose(annotated.features,
                             _embedding('a0') + _embedding('a2'))


def test_kept_images_keep_their_bank_rows(data):
  frames = _frames(data, 'a0', 'a1', 'a2')
  bank = memory_banks.build_bank(frames, memory_banks.BankSettings())
  kept, kept_bank = memory_banks.keep_images(frames, bank, {'a1'})
  assert [memory_banks.source_id(e) for e in kept] == ['a1']
  assert kept_bank.indices == [1]
  assert kept_bank.features == bank.features
  (example,) = memory_banks.with_context(kept, kept_bank)
  assert _values(example.features.feature['context_features_idx']) == [1]


def test_no_context_features_when_not_asked(data):
  frames = _frames(data, 'a0', 'a1')
  (example, _) = memory_banks.with_context(frames, None)
  assert 'image/context_features' not in example.features.feature
  (sequence,) = memory_banks.sequence_clips(b'k', frames, None)
  assert 'image/context_features' not in sequence.context.feature
  assert 'image/context_features_idx' not in (
      sequence.feature_lists.feature_list)


def test_shrink_only_larger_images(data):
  example = tf.train.Example()
  example.CopyFrom(data['examples']['a0'])
  encoded = example.features.feature['image/encoded'].bytes_list.value[0]
  assert not memory_banks.shrink_image(example, 96)
  assert example.features.feature['image/encoded'].bytes_list.value[0] == (
      encoded)
  assert memory_banks.shrink_image(example, 30)
  feature = example.features.feature
  assert _values(feature['image/width']) == [30]
  assert _values(feature['image/height']) == [20]
  assert Image.open(io.BytesIO(_values(feature['image/encoded'])[0])).size \
      == (30, 20)


@pytest.mark.parametrize('edit, call, message', [
    ('image/embedding', 'bank', 'record a0: image/embedding has 0 values'),
    ('image/embedding_length', 'bank', 'not the embedding length 2057'),
    ('image/seq_id', 'key', 'record a0 has no image/seq_id'),
    ('image/date_captured', 'month', "is not a %Y-%m-%d %H:%M:%S date"),
    ('image/embedding_score', 'positives',
     'record a0 has no image/embedding_score'),
])
def test_bad_records_are_named(data, edit, call, message):
  example = _with(data['examples']['a0'], edit, tf.train.Feature())
  if edit == 'image/date_captured':
    example = _with(example, edit, dataset_util.bytes_feature('05/01/2020'))
  calls = {
      'bank': lambda: memory_banks.build_bank(
          [example], memory_banks.BankSettings()),
      'key': lambda: memory_banks.group_key(example, 'image/seq_id'),
      'month': lambda: memory_banks.group_key(example, 'image/location',
                                              'month'),
      'positives': lambda: memory_banks.build_bank(
          [example], memory_banks.BankSettings(keep_only_positives=True)),
  }
  with pytest.raises(errors.UserInputError, match=re.escape(message)):
    calls[call]()


# Bad input to the command: one error line, before or inside the pipeline.

def _command(data, flags, pattern=None):
  return run_command(_TOOL, [
      '--input_tfrecord', pattern or data['pattern'], '--output_tfrecord',
      str(data['root'] / 'bad' / 'out.record')] + flags)


def _one_error(result):
  assert result.returncode == 1, result.stderr[-2000:]
  lines = [line for line in result.stderr.splitlines()
           if line.startswith('error:')]
  assert len(lines) == 1, result.stderr[-2000:]
  assert 'Traceback' not in result.stderr
  return lines[0]


@pytest.mark.parametrize('flags, message', [
    (['--output_type=tf_record'], '--output_type=tf_record: not supported'),
    (['--sequence_key=image/filename'], 'one of image/seq_id, image/location'),
    (['--time_horizon=fortnight'], 'year, month, week, day, hour, minute'),
    (['--image_ids_to_keep=/no/such.json'], '--image_ids_to_keep file'),
    (['--runner=NoSuchRunner'], 'error: --runner=NoSuchRunner: Unexpected'),
])
def test_bad_flags_are_one_line(data, flags, message):
  assert message in _one_error(_command(data, flags))


def test_unknown_flags_are_named(data):
  line = _one_error(_command(data, ['--num_shard=2', '--runer', 'Direct']))
  assert line == ('error: unknown flags --num_shard, --runer: neither a flag '
                  'of this tool nor an Apache Beam pipeline option; see '
                  '--help for the tool\'s flags')


def test_a_glob_without_a_folder_reads_the_current_one(data, monkeypatch):
  monkeypatch.chdir(data['root'])
  prefix = str(data['root'] / 'bare' / 'out.record')
  result = run_command(_TOOL, ['--input_tfrecord', 'in.record-*',
                               '--output_tfrecord', prefix])
  assert result.returncode == 0, result.stderr[-3000:]
  records = [record for shard in sorted(glob.glob(prefix + '-*'))
             for record in tf.data.TFRecordDataset(shard).as_numpy_iterator()]
  assert len(records) == len(data['examples'])


def test_empty_glob_is_one_line(data):
  pattern = str(data['root'] / 'no-*')
  line = _one_error(_command(data, [], pattern=pattern))
  assert line == ('error: --input_tfrecord=%s matches no file; give a glob '
                  'of the input TFRecord files' % pattern)
  line = _one_error(_command(data, [], pattern='nofs://bucket/*'))
  assert line.startswith('error: --input_tfrecord=nofs://bucket/*: File '
                         'system scheme \'nofs\' not implemented')


def test_a_bad_record_stops_the_pipeline_with_its_name(data):
  """A record without the sequence key fails inside the Beam pipeline."""
  path = str(data['root'] / 'unkeyed.record')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(_with(data['examples']['b0'], 'image/seq_id',
                       tf.train.Feature()).SerializeToString())
  line = _one_error(_command(data, ['--sequence_key=image/seq_id',
                                    '--reduce_image_size=false'],
                             pattern=path))
  assert 'record b0 has no image/seq_id' in line
  assert not glob.glob(str(data['root'] / 'bad' / 'out.record-*'))


def test_an_output_directory_is_refused(data):
  result = run_command(_TOOL, ['--input_tfrecord', data['pattern'],
                               '--output_tfrecord', str(data['root'])])
  assert 'give a file name prefix' in _one_error(result)
