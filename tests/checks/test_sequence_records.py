"""record_scanner on tf.SequenceExample records (checks/sequence_records)."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.checks import record_scanner
from od_estimator.config import config_util
from od_estimator.dataset_tools import create_synthetic_sequence_tf_record
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.utils import label_map_util


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('sequence_records')
  written = create_synthetic_sequence_tf_record.create_dataset(
      str(directory), num_train=2, num_val=1, num_frames=2, image_size=16,
      max_shapes=2, context_feature_length=4)
  good = list(tf.compat.v1.io.tf_record_iterator(written['train'][0]))
  return written, good


def _lists(sequence):
  return sequence.feature_lists.feature_list


def _inverted(sequence):
  _lists(sequence)['region/bbox/ymin'].feature[1].float_list.value[0] = 2.0


def _fewer_labels(sequence):
  del _lists(sequence)['region/label/string'].feature[0].bytes_list.value[:]


def _missing_is_annotated(sequence):
  del _lists(sequence)['region/is_annotated'].feature[1]


def _bad_image(sequence):
  _lists(sequence)['image/encoded'].feature[1].bytes_list.value[:] = [b'no']


def _partial_context_row(sequence):
  sequence.context.feature['image/context_features'].float_list.value.append(
      0.5)


def _high_class(sequence):
  _lists(sequence)['region/label/string'].feature[0].bytes_list.value[:1] = [
      b'big']


# Case -> (how the good first record is broken, what the scanner says).
BAD_SEQUENCES = {
    'inverted': (_inverted, 'frame 1: inverted (ymin > ymax or xmin > '
                 'xmax) or non-finite box (ymin, xmin, ymax, xmax) = (2,'),
    'fewer_labels': (_fewer_labels, 'frame 0: region/label/string has 0 '
                     'entries for'),
    'missing_is_annotated': (_missing_is_annotated, 'region/is_annotated '
                             'has 1 entries for 2 frames'),
    'bad_image': (_bad_image, 'an image/encoded frame is not a decodable'),
    'partial_context_row': (_partial_context_row, 'image/context_features '
                            'holds'),
    'high_class': (_high_class, 'frame 0: region/label/string maps to class '
                   'ids 4 outside 1..num_classes=3'),
}


def _broken(good, case):
  sequence = tf.train.SequenceExample.FromString(good)
  BAD_SEQUENCES[case][0](sequence)
  return sequence.SerializeToString()


def _label_ids(data):
  ids = label_map_util.get_label_map_dict(data[0]['label_map'])
  ids['big'] = 4
  return ids


def test_generated_sequences_pass(data):
  for record in data[1]:
    assert record_scanner.record_problem(record, 3, _label_ids(data),
                                         sequence=True) is None


@pytest.mark.parametrize('case', sorted(BAD_SEQUENCES))
def test_each_problem_is_named(data, case):
  problem = record_scanner.record_problem(
      _broken(data[1][0], case), 3, _label_ids(data), sequence=True)
  assert problem.startswith(BAD_SEQUENCES[case][1]), problem


def test_a_tf_example_is_not_a_sequence():
  example = create_synthetic_tf_record.make_example(
      *create_synthetic_tf_record.make_image(
          np.random.default_rng(0), 16, 16, 1),
      source_id=1, include_masks=False)
  assert record_scanner.record_problem(
      example.SerializeToString(), 3, sequence=True) == (
          'not a tf.train.SequenceExample with an image/encoded feature '
          'list')


def _config(data, tmp_path, train_path):
  """A pipeline config whose readers read sequences (train: train_path)."""
  written = data[0]
  reader = """label_map_path: "%s" input_type: TF_SEQUENCE_EXAMPLE
      tf_record_input_reader { input_path: "%s" }"""
  text = """
    model { ssd { num_classes: 3 } }
    train_input_reader { %s }
    eval_input_reader { %s }
  """ % (reader % (written['label_map'], train_path),
         reader % (written['label_map'], written['val'][0]))
  path = str(tmp_path / 'sequences.config')
  with open(path, 'w') as f:
    f.write(text)
  return path


def _write(path, records):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return str(path)


def test_scan_reads_sequence_readers_frame_by_frame(data, tmp_path):
  good = data[1]
  path = _write(tmp_path / 'bad.record',
                [good[0], _broken(good[1], 'inverted')])
  configs = config_util.get_configs_from_pipeline_file(
      _config(data, tmp_path, path))
  result = record_scanner.scan(configs)
  assert result.records == 3  # 2 train sequences, 1 eval sequence.
  assert result.problems == [
      'record 1 of %s (media_id=sequence_1, source_ids=2..3): %s' % (
          path, record_scanner.record_problem(
              _broken(good[1], 'inverted'), 3, sequence=True))]


def test_an_undecodable_frame_is_found_after_a_decode_error(data, tmp_path):
  good = data[1]
  path = _write(tmp_path / 'bad_image.record',
                [good[0], _broken(good[1], 'bad_image')])
  config = _config(data, tmp_path, path)
  error = tf.errors.InvalidArgumentError(
      None, None, 'Unknown image file format. [[{{node DecodeImage}}]]')
  assert record_scanner.is_data_error(error)
  line = record_scanner.describe(error, config)
  assert line.startswith('image/encoded is not a decodable JPEG/PNG/GIF/BMP '
                         'image in record media_id=sequence_1, '
                         'source_ids=2..3 (record 1 of %s)' % path), line
