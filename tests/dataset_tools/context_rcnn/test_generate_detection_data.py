"""generate_detection_data with the DirectRunner on a few generated records.

The boxes written are the tiny exported model's detections (run directly on
the SavedModel) above --confidence_threshold; examples with boxes, without
a label or with several labels go the original's ways.
"""
import importlib.util
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip('apache_beam')

# pylint: disable=g-import-not-at-top
from od_estimator import errors
from od_estimator.dataset_tools.context_rcnn import beam_model_io
from od_estimator.dataset_tools.context_rcnn import exported_detector
from od_estimator.dataset_tools.context_rcnn import generate_detection_data
from od_estimator.export import exporter
from tests.command_modules import run_command
from tests.dataset_tools.context_rcnn import tiny_exported_detector as tiny

_COMMAND = 'dataset_tools.context_rcnn.generate_detection_data'
_GT_BOXES = [[0.1, 0.2, 0.5, 0.6]]


def _examples():
  return {
      'labelled': tiny.example('labelled', labels=[2], seed=1),
      'boxed': tiny.example('boxed', labels=[1], boxes=_GT_BOXES, seed=2),
      'two_classes': tiny.example('two_classes', labels=[1, 3], seed=3),
      'empty': tiny.example('empty', seed=4),
  }


@pytest.fixture(scope='module')
def model(tmp_path_factory):
  return tiny.export_once(tmp_path_factory)


@pytest.fixture(scope='module')
def run(model, tmp_path_factory):
  """The CLI's run on two input files, 2 output shards, a threshold
  between the labelled image's second and third scores."""
  root = tmp_path_factory.mktemp('detection_data')
  examples = _examples()
  tiny.write_records(root / 'in-0.record',
                     [examples['labelled'], examples['boxed']])
  tiny.write_records(root / 'in-1.record',
                     [examples['two_classes'], examples['empty']])
  served = tiny.serve(model, [examples['labelled']])
  scores = served['detection_scores'][0]
  threshold = float(scores[1] + scores[2]) / 2
  prefix = str(root / 'out' / 'detections')
  result = run_command(_COMMAND, [
      '--detection_input_tfrecord', str(root / 'in-*.record'),
      '--detection_output_tfrecord', prefix,
      '--detection_model_dir', model,
      '--confidence_threshold', str(threshold), '--num_shards', '2',
      '--runner', 'DirectRunner', '--alsologtostderr'])
  assert result.returncode == 0, result.stderr
  files, written = tiny.read_outputs(prefix)
  return {'files': files, 'written': written, 'served': served,
          'threshold': threshold, 'examples': examples,
          'stderr': result.stderr}


def _values(example, key):
  feature = example.features.feature[key]
  return list(getattr(feature, feature.WhichOneof('kind')).value)


def test_writes_the_models_boxes_above_the_threshold(run):
  served = run['served']
  count = int(served['num_detections'][0])
  scores = served['detection_scores'][0][:count]
  kept = scores >= run['threshold']
  assert 0 < kept.sum() < count
  written = run['written']['labelled']
  boxes = np.stack([_values(written, 'image/object/bbox/' + name)
                    for name in ('ymin', 'xmin', 'ymax', 'xmax')], axis=1)
  np.testing.assert_allclose(boxes, served['detection_boxes'][0][:count][kept],
                             atol=1e-5)
  np.testing.assert_allclose(_values(written, 'image/object/class/score'),
                             scores[kept], atol=1e-5)
  assert _values(written, 'image/object/class/label') == [2] * kept.sum()
  assert _values(written, 'image/object/class/text') == (
      [b'class_2'] * kept.sum())
  # The image-level features are the input's.
  source = run['examples']['labelled'].features.feature
  for key in ('image/encoded', 'image/format', 'image/filename',
              'image/location', 'image/seq_id', 'image/height'):
    assert written.features.feature[key] == source[key], key


def test_the_other_examples_go_the_originals_ways(run):
  written = run['written']
  # Several labels: left out; boxes already: as it was; no label: no boxes.
  assert sorted(written) == ['boxed', 'empty', 'labelled']
  assert written['boxed'] == run['examples']['boxed']
  assert not [key for key in written['empty'].features.feature
              if key.startswith('image/object/')]
  assert written['empty'].features.feature['image/encoded'] == (
      run['examples']['empty'].features.feature['image/encoded'])
  for line in ('1 examples had boxes already',
               '1 examples got detections above the threshold',
               '1 examples with several class labels were LEFT OUT',
               '1 examples without a class label'):
    assert line in run['stderr']


def test_writes_num_shards_files(run):
  assert [path[-len('-00000-of-00002'):] for path in run['files']] == [
      '-00000-of-00002', '-00001-of-00002']


def test_add_detections_without_a_detection_above_the_threshold():
  outputs = {'detection_boxes': np.zeros([1, 2, 4], np.float32),
             'detection_scores': np.array([[0.5, 0.4]], np.float32),
             'num_detections': np.array([1.0], np.float32)}
  source = tiny.example('a', labels=[4])
  # The second score is past num_detections: never kept.
  (written,), outcome = generate_detection_data.add_detections(
      source, lambda: outputs, confidence_threshold=0.45)
  assert outcome == 'detections_added'
  assert _values(written, 'image/object/class/score') == [0.5]
  (written,), outcome = generate_detection_data.add_detections(
      source, lambda: outputs, confidence_threshold=0.6)
  assert outcome == 'no_detection_above_threshold'
  assert not written.features.feature['image/object/bbox/ymin'].float_list.value
  assert not written.features.feature['image/object/class/label'].int64_list.value


def _error_line(result):
  assert result.returncode == 1, result.stderr
  assert 'Traceback' not in result.stderr
  return result.stderr.strip().splitlines()[-1]


def _flags(tmp_path, model, pattern=None, *more):
  return ['--detection_input_tfrecord', pattern or str(tmp_path / '*.none'),
          '--detection_output_tfrecord', str(tmp_path / 'out'),
          '--detection_model_dir', model] + list(more)


def test_bad_flags_are_one_line_errors(model, tmp_path):
  pattern = str(tmp_path / '*.none')
  line = _error_line(run_command(_COMMAND, _flags(tmp_path, model, pattern)))
  assert line == ('error: --detection_input_tfrecord=%s matches no file; '
                  'give a glob of the input TFRecord files' % pattern)
  record = tiny.write_records(tmp_path / 'in.record', [tiny.example('a')])
  missing = str(tmp_path / 'missing')
  line = _error_line(run_command(_COMMAND, _flags(tmp_path, missing, record)))
  assert line == (
      'error: --detection_model_dir %s: no SavedModel there (no '
      'saved_model.pb); give the saved_model/ folder of an '
      'export_inference_graph --input_type tf_example export.' % missing)
  line = _error_line(run_command(_COMMAND, _flags(
      tmp_path, model, record, '--confidence_treshold', '0.5')))
  assert line == ('error: unknown flag --confidence_treshold: neither a flag '
                  'of this tool nor an Apache Beam pipeline option; see '
                  '--help for the tool\'s flags')
  assert not list(tmp_path.glob('out*'))


def test_an_export_directory_means_its_saved_model(model):
  assert exported_detector.check_model_dir(
      os.path.dirname(model), '--detection_model_dir',
      exported_detector.DETECTION_OUTPUTS) == model


def test_a_model_fed_images_is_refused(tmp_path):
  with tf.Graph().as_default() as graph:
    images = tf.compat.v1.placeholder(tf.uint8, [None, None, None, 3],
                                      name='image_tensor')
    outputs = {'detection_boxes': tf.identity(tf.cast(images, tf.float32),
                                              name='detection_boxes')}
  path = str(tmp_path / 'saved_model')
  exporter.write_saved_model(path, graph.as_graph_def(), images, outputs)
  with pytest.raises(errors.UserInputError,
                     match='--input_type tf_example'):
    generate_detection_data.construct_pipeline(
        None, 'unused', 'unused', path, 0.5, 0)


def test_an_unreadable_record_names_its_file(model, tmp_path):
  bad = tmp_path / 'in-1.record'
  bad.write_bytes(b'not a TFRecord file at all')
  line = _error_line(run_command(_COMMAND, _flags(
      tmp_path, model, str(tmp_path / 'in-*.record'))))
  assert line.startswith('error: input file %s: cannot read record 0' % bad)
  # Nothing written, nothing staged left behind.
  assert sorted(path.name for path in tmp_path.iterdir()) == ['in-1.record']


def test_an_image_the_model_cannot_read_names_its_record(model, tmp_path):
  broken = tiny.example('broken', labels=[1])
  broken.features.feature['image/encoded'].bytes_list.value[0] = b'no image'
  record = tiny.write_records(tmp_path / 'in.record', [broken])
  line = _error_line(run_command(_COMMAND, _flags(tmp_path, model, record)))
  assert line.startswith('error: record 0 of %s (image/source_id broken): '
                         'the model cannot read it: ' % record)
  assert sorted(path.name for path in tmp_path.iterdir()) == ['in.record']


def test_without_beam_main_says_how_to_install_it(monkeypatch, tmp_path):
  # The module imports without Beam...
  spec = importlib.util.find_spec(beam_model_io.__name__)
  module = importlib.util.module_from_spec(spec)
  monkeypatch.setitem(sys.modules, 'apache_beam', None)
  spec.loader.exec_module(module)
  assert module.beam is None
  # ...and main refuses in one line.
  line = _error_line(run_command(_COMMAND, _flags(tmp_path, 'unused')))
  assert re.fullmatch(
      r'error: Apache Beam is not installed \(.+\); this tool is a Beam '
      r'pipeline: pip install od_estimator\[beam\]', line), line
