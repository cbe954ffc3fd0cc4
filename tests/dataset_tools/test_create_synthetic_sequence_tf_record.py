"""Tests for od_estimator.dataset_tools.create_synthetic_sequence_tf_record."""
import os

import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_sequence_example_decoder
from od_estimator.dataset_tools import create_synthetic_sequence_tf_record as seq
from od_estimator.utils import label_map_util

_IN = fields.InputDataFields


def _records(path):
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _lists(example, key):
  return example.feature_lists.feature_list[key].feature


def test_writes_shards_and_the_shapes_label_map(tmp_path):
  written = seq.create_dataset(str(tmp_path), num_train=3, num_val=2,
                               num_frames=2, image_size=32,
                               num_train_shards=2)
  assert [os.path.basename(f) for f in written['train']] == [
      'shapes_seq_train.record-00000-of-00002',
      'shapes_seq_train.record-00001-of-00002']
  assert sum(len(_records(f)) for f in written['train']) == 3
  assert len(_records(written['val'][0])) == 2
  assert label_map_util.get_label_map_dict(written['label_map']) == {
      'circle': 1, 'square': 2, 'triangle': 3}


def test_sequences_decode_with_the_original_layout(tmp_path):
  written = seq.create_dataset(str(tmp_path), num_train=2, num_val=1,
                               num_frames=3, image_size=32, annotate_every=2,
                               context_feature_length=9)
  decoder = tf_sequence_example_decoder.TfSequenceExampleDecoder(
      written['label_map'], load_context_features=True)
  for index, record in enumerate(_records(written['train'][0])):
    example = tf.train.SequenceExample.FromString(record)
    context = example.context.feature
    assert context['clip/frames'].int64_list.value == [3]
    assert context['clip/media_id'].bytes_list.value == [
        b'sequence_%d' % index]
    out = decoder.decode(tf.constant(record))
    assert out[_IN.image].shape == (3,)
    assert list(out[_IN.source_id].numpy()) == [
        b'%d' % (index * 3 + frame) for frame in range(3)]
    # Frames 0 and 2 annotated; frame 1 has no regions.
    np.testing.assert_array_equal(out[_IN.is_annotated], [True, False, True])
    counts = out[_IN.num_groundtruth_boxes].numpy()
    assert counts[1] == 0 and counts[0] >= 1 and counts[2] >= 1
    assert out[_IN.original_image_spatial_shape].numpy().tolist() == [32, 32]
    image = tf.io.decode_jpeg(out[_IN.image][0]).numpy()
    assert image.shape == (32, 32, 3)
    # One context row per box: its class one-hot, its box, zeros.
    rows = out[_IN.context_features].numpy()
    assert rows.shape == (counts.sum(), 9)
    classes = out[_IN.groundtruth_classes].numpy()
    boxes = out[_IN.groundtruth_boxes].numpy()
    expected = [np.concatenate([np.eye(3)[classes[f, b] - 1], boxes[f, b],
                                [0.0, 0.0]])
                for f in range(3) for b in range(counts[f])]
    np.testing.assert_allclose(rows, expected, rtol=1e-6)


def test_context_rows_truncate_and_sequences_are_deterministic(tmp_path):
  rows = seq.context_rows([np.array([[0.1, 0.2, 0.3, 0.4]])], [[2]], 4)
  np.testing.assert_allclose(rows, [[0.0, 1.0, 0.0, 0.1]])
  assert seq.context_rows([np.zeros([0, 4])], [[]], 4).shape == (0, 4)
  first = seq.create_dataset(str(tmp_path / 'a'), num_train=2, num_val=0,
                             image_size=16)
  second = seq.create_dataset(str(tmp_path / 'b'), num_train=2, num_val=0,
                              image_size=16)
  assert _records(first['train'][0]) == _records(second['train'][0])


def test_without_context_features_and_from_the_command_line(tmp_path,
                                                            capsys):
  assert seq.main(['--output_dir', str(tmp_path), '--num_train', '1',
                   '--num_val', '1', '--num_frames', '2', '--image_size',
                   '16', '--context_feature_length', '0']) == 0
  assert 'wrote 1 train shard(s), 1 val shard(s)' in capsys.readouterr().out
  record = _records(str(tmp_path / 'shapes_seq_val.record-00000-of-00001'))
  example = tf.train.SequenceExample.FromString(record[0])
  assert 'image/context_features' not in example.context.feature
  assert len(_lists(example, 'image/encoded')) == 2
  assert [f.int64_list.value[0] for f in _lists(example,
                                                'region/is_annotated')] == [
                                                    1, 1]
