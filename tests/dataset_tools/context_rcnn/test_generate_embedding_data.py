"""generate_embedding_data with the DirectRunner on a few generated records.

The embeddings written are computed here from the tiny exported model's
outputs (run directly on the SavedModel): each row the detection's
features averaged over their 2x2 positions, its box centre and size, and
the capture time, in the original's layout.
"""
import calendar
import datetime

import numpy as np
import pytest

pytest.importorskip('apache_beam')

# pylint: disable=g-import-not-at-top
import apache_beam as beam

from od_estimator import errors
from od_estimator.dataset_tools.context_rcnn import generate_embedding_data
from tests.command_modules import run_command
from tests.dataset_tools.context_rcnn import tiny_exported_detector as tiny

_COMMAND = 'dataset_tools.context_rcnn.generate_embedding_data'
_DATE = '2019-10-20 12:12:12'
# _DATE's time features: (2019 - 1990) / 40, (10 - 1) / 12, (20 - 1) / 31,
# 12 / 24, 12 / 60.
_TIME = [0.725, 0.75, 19 / 31, 0.5, 0.2]
_TOP_K, _BOTTOM_K = 2, 1


@pytest.fixture(scope='module')
def model(tmp_path_factory):
  return tiny.export_once(tmp_path_factory)


@pytest.fixture(scope='module')
def run(model, tmp_path_factory):
  """construct_pipeline on a dated and an undated example (top 2, bottom 1),
  with the model's outputs on both, run directly."""
  root = tmp_path_factory.mktemp('embedding_data')
  examples = [tiny.example('dated', labels=[1], date=_DATE, seed=5),
              tiny.example('undated', seed=6)]
  tiny.write_records(root / 'in.record', examples)
  prefix = str(root / 'out' / 'embeddings')
  pipeline = beam.Pipeline(options=beam.options.pipeline_options
                           .PipelineOptions(['--runner', 'DirectRunner']))
  generate_embedding_data.construct_pipeline(
      pipeline, str(root / 'in.record'), prefix, model, _TOP_K, _BOTTOM_K, 1)
  pipeline.run().wait_until_finish()
  _, written = tiny.read_outputs(prefix)
  served = tiny.serve(model, examples)
  return {'written': written, 'served': served,
          'examples': dict(zip(('dated', 'undated'), examples))}


def _feature(example, key):
  feature = example.features.feature[key]
  return list(getattr(feature, feature.WhichOneof('kind')).value)


def _expected_rows(served, index, time):
  """The model's rows top 2 and bottom 1 of image `index`, computed here."""
  count = int(served['num_detections'][index])
  assert count >= 2
  rows = []
  for row in (0, 1, count - 1):
    ymin, xmin, ymax, xmax = served['detection_boxes'][index, row]
    rows.append(np.concatenate([
        served['detection_features'][index, row].mean(axis=(0, 1)),
        [(xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin],
        time]))
  scores = served['detection_scores'][index, [0, 1, count - 1]]
  return np.stack(rows), scores


@pytest.mark.parametrize('name, index, time', [('dated', 0, _TIME),
                                               ('undated', 1, [])])
def test_embeddings_are_the_models_features_boxes_and_time(run, name, index,
                                                           time):
  written = run['written'][name]
  rows, scores = _expected_rows(run['served'], index, time)
  length = tiny.FEATURE_DEPTH + 4 + len(time)
  assert _feature(written, 'image/embedding_length') == [length]
  assert _feature(written, 'image/embedding_count') == [3]
  np.testing.assert_allclose(
      np.reshape(_feature(written, 'image/embedding'), [3, length]), rows,
      atol=1e-5)
  np.testing.assert_allclose(_feature(written, 'image/embedding_score'),
                             scores, atol=1e-5)
  # Every input feature is kept.
  for key, value in run['examples'][name].features.feature.items():
    assert written.features.feature[key] == value, key


def test_unix_time_is_the_capture_date_in_seconds(run):
  expected = calendar.timegm(datetime.datetime(2019, 10, 20, 12, 12,
                                               12).timetuple())
  np.testing.assert_allclose(
      _feature(run['written']['dated'], 'image/unix_time'), [expected],
      rtol=1e-7)
  assert 'image/unix_time' not in run['written']['undated'].features.feature


@pytest.mark.parametrize('detections, top_k, bottom_k, rows, count', [
    (5, 1, 0, [0], 1),
    (5, 2, 2, [0, 1, 4, 3], 4),
    (2, 3, 3, [0, 1, 1, 0], 4),
    # Nothing asked for: the first row, counted 0.
    (5, 0, 0, [0], 0),
    # No detection: the first (padding) row, counted once, as the original.
    (0, 1, 0, [0], 1),
])
def test_chosen_rows(detections, top_k, bottom_k, rows, count):
  assert generate_embedding_data.chosen_rows(detections, top_k, bottom_k) == (
      rows, count)


def test_an_unreadable_date_gives_rows_without_time():
  outputs = {'detection_boxes': np.array([[[0.2, 0.1, 0.6, 0.5]]], np.float32),
             'detection_scores': np.array([[0.9]], np.float32),
             'num_detections': np.array([1.0], np.float32),
             'detection_features': np.ones([1, 1, 3], np.float32)}
  source = tiny.example('a', date='20 October 2019')
  (written,), outcome = generate_embedding_data.add_embedding(
      source, lambda: outputs, 1, 0, 'detection_features')
  assert outcome == 'embedded_without_time'
  # Already pooled features ([1, N, depth]) are embedded as they are.
  np.testing.assert_allclose(_feature(written, 'image/embedding'),
                             [1, 1, 1, 0.3, 0.4, 0.4, 0.4])


def _error_line(result):
  assert result.returncode == 1, result.stderr
  assert 'Traceback' not in result.stderr
  return result.stderr.strip().splitlines()[-1]


def test_a_model_without_detection_features_is_refused(tmp_path):
  model = tiny.signature_only_model(
      tmp_path, ('detection_boxes', 'detection_scores', 'num_detections'))
  record = tiny.write_records(tmp_path / 'in.record', [tiny.example('a')])
  flags = ['--embedding_input_tfrecord', record,
           '--embedding_output_tfrecord', str(tmp_path / 'out' / 'x'),
           '--embedding_model_dir', model]
  line = _error_line(run_command(_COMMAND, flags))
  assert line == (
      'error: --embedding_model_dir %s: the model has no output '
      'detection_features (it serves detection_boxes, detection_scores, '
      'num_detections); export a model built with '
      'model.faster_rcnn.output_final_box_features: true.' % model)
  line = _error_line(run_command(_COMMAND, flags + [
      '--embedding_type', 'rpn_box_features']))
  assert 'no output cropped_rpn_box_features' in line
  assert not (tmp_path / 'out').exists()


def test_bad_counts_are_refused(tmp_path):
  result = run_command(_COMMAND, [
      '--embedding_input_tfrecord', 'a', '--embedding_output_tfrecord', 'b',
      '--embedding_model_dir', 'c', '--top_k_embedding_count', '-1'])
  assert result.returncode == 2
  assert '--top_k_embedding_count: must be at least 0, got -1' in (
      result.stderr)
  with pytest.raises(errors.UserInputError, match='--embedding_type'):
    generate_embedding_data.construct_pipeline(
        None, 'a', 'b', str(tmp_path), 1, 0, 0, embedding_type='pooled')
