"""`od-estimator evaluate` on an export reproduces model_main's evaluation.

The session's overfit_faster_rcnn (tests/trained_models.py) is model_main's
run: trained, evaluated on its two records (eval_0's events) and exported
by its Servo exporter (model_dir/export/Servo/<timestamp>/, a SavedModel
fed serialized tf.Examples). One `evaluate` of that export on the same
records, with a report, is shared by the module's tests; its metrics must
be the events' numbers.
"""
import contextlib
import glob
import html
import io
import json
import os
import re

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluation_report
from tests import event_tags

_TF = fields.TfExampleFields
METRICS_SETS = 'coco_detection_metrics,pascal_voc_detection_metrics'
PICTURES = (evaluation_report.CURVES_FILE, evaluation_report.CONFUSION_FILE,
            evaluation_report.WORST_FILE)
TOLERANCE = 1e-6

# The run's extractor (tests/tiny_resnet.py) serves its export.
pytestmark = pytest.mark.usefixtures('tiny_resnet_extractors')


def servo_run(trained):
  """A trained_models run's Servo export, records, label map and metrics."""
  data = trained['root'] / 'data'
  (export,) = glob.glob(os.path.join(trained['model_dir'], 'export', 'Servo',
                                     '*'))
  return {'export': export, 'records': str(data / 'shapes.record'),
          'label_map': str(data / 'label_map.pbtxt'),
          'model_main': event_tags.last_scalars(os.path.join(
              trained['model_dir'], 'eval_0'))}


@pytest.fixture(scope='module')
def run(overfit_faster_rcnn, tiny_resnet_extractors):
  """model_main's run: its Servo export, records, label map and metrics."""
  del tiny_resnet_extractors  # registered first
  return servo_run(overfit_faster_rcnn)


def _main(capsys, *flags):
  """(exit status, stdout, stderr) of `od-estimator FLAGS`."""
  code = cli.main(list(flags))
  captured = capsys.readouterr()
  return code, captured.out, captured.err


def printed_metrics(out):
  return {name: float(value) for name, value in
          re.findall(r'^(\S[^:\n]*): (-?[0-9.]+|nan)$', out, re.MULTILINE)}


@pytest.fixture(scope='module')
def evaluated(run, tmp_path_factory):
  """evaluate's printed metrics, metrics.json and report folder (one run)."""
  report = tmp_path_factory.mktemp('evaluate') / 'report'
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    code = cli.main([
        'evaluate', '--saved_model_dir=' + run['export'],
        '--input_tfrecord_paths=' + run['records'],
        '--label_map_path=' + run['label_map'],
        '--eval_metrics=' + METRICS_SETS, '--output_dir=' + str(report)])
  assert code == 0
  with open(report / evaluation_report.METRICS_FILE) as f:
    metrics = json.load(f)
  return {'printed': printed_metrics(out.getvalue()), 'metrics': metrics,
          'report': report}


def test_prints_model_mains_metrics_of_the_same_records(run, evaluated):
  box_metrics = {name: value for name, value in run['model_main'].items()
                 if name.startswith('DetectionBoxes_')}
  assert len(box_metrics) == 12, sorted(run['model_main'])
  for name, value in box_metrics.items():
    assert evaluated['printed'][name] == pytest.approx(
        value, abs=TOLERANCE), name
    assert evaluated['metrics'][name] == pytest.approx(value, abs=TOLERANCE)
  # Not a trivial agreement: the overfitted model finds its shapes.
  assert evaluated['printed']['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5
  assert 'PascalBoxes_Precision/mAP@0.5IOU' in evaluated['printed']


def test_report_pictures_are_written(evaluated):
  for name in PICTURES:
    with Image.open(evaluated['report'] / name) as picture:
      assert picture.format == 'PNG'
      assert picture.width > 100 and picture.height > 30
      # Drawn on: more than one colour.
      assert len(picture.convert('RGB').getcolors(1 << 16) or [0, 0]) > 1
  with open(evaluated['report'] / evaluation_report.REPORT_FILE) as f:
    text = f.read()
  for name in PICTURES:
    assert 'src="%s"' % name in text


def test_per_class_table_holds_the_evaluators_numbers(evaluated, run):
  with open(evaluated['report'] / evaluation_report.REPORT_FILE) as f:
    text = f.read()
  table = text.split('id="per-class"')[1].split('</table>')[0]
  rows = [[html.unescape(cell) for cell in re.findall(r'<t[dh]>(.*?)</t[dh]>',
                                                       row)]
          for row in re.findall(r'<tr>(.*?)</tr>', table)]
  titles = rows[0]
  assert titles[:3] == ['id', 'class', 'groundtruth boxes']
  assert 'DetectionBoxes_PerformanceByCategory/mAP' in titles
  assert 'PascalBoxes_PerformanceByCategory/AP@0.5IOU' in titles
  metrics = evaluated['metrics']
  checked = 0
  for row in rows[1:]:
    cells = dict(zip(titles, row))
    for title in titles[4:]:
      value = metrics['%s/%s' % (title, cells['class'])]
      assert cells[title] == ('-' if value is None else '%.4f' % value)
      checked += value is not None
  assert checked >= 4  # two classes with groundtruth, two metrics each
  # The two records hold one shape each.
  assert sum(int(row[2]) for row in rows[1:]) == 2


def test_infer_detections_adds_the_detections_to_the_records(run, tmp_path,
                                                             capsys):
  output = str(tmp_path / 'detections.record')
  code, out, err = _main(
      capsys, 'infer_detections', '--input_tfrecord_paths=' + run['records'],
      '--output_tfrecord_path=' + output, '--inference_graph=' + run['export'],
      '--discard_image_pixels')
  assert code == 0, err
  assert '2 record(s)' in out
  examples = [tf.train.Example.FromString(record.numpy())
              for record in tf.data.TFRecordDataset(output)]
  assert len(examples) == 2
  for example in examples:
    feature = example.features.feature
    assert _TF.image_encoded not in feature
    boxes = np.stack([feature[key].float_list.value for key in (
        _TF.detection_bbox_ymin, _TF.detection_bbox_xmin,
        _TF.detection_bbox_ymax, _TF.detection_bbox_xmax)], axis=1)
    scores = np.array(feature[_TF.detection_score].float_list.value)
    labels = np.array(feature[_TF.detection_class_label].int64_list.value)
    assert len(boxes) == len(scores) == len(labels) > 0
    assert set(labels) <= {1, 2, 3}
    assert np.all(np.diff(scores) <= 0)
    # The best detection is the record's one shape, of its class.
    truth = [feature['image/object/bbox/' + key].float_list.value[0]
             for key in ('ymin', 'xmin', 'ymax', 'xmax')]
    assert np.abs(boxes[0] - truth).max() < 0.2, (boxes[0], truth)
    assert labels[0] == feature['image/object/class/label'].int64_list.value[0]


@pytest.mark.parametrize('changes,expected', [
    ({'--input_tfrecord_paths': '{tmp}/none-*.record'},
     'none-*.record matches no file'),
    ({'--saved_model_dir': '{tmp}'}, 'holds no saved_model.pb'),
    ({'--saved_model_dir': None, '--inference_graph': '{records}'},
     'is not an exported detector'),
    ({'--eval_metrics': 'coco_mask_metrics'},
     'metrics set coco_mask_metrics evaluates masks, but the model has no '
     'detection_masks output'),
])
def test_bad_input_is_one_line(run, tmp_path, capsys, changes, expected):
  flags = {'--saved_model_dir': run['export'],
           '--input_tfrecord_paths': run['records'],
           '--label_map_path': run['label_map']}
  for flag, value in changes.items():
    flags[flag] = value and value.format(tmp=tmp_path,
                                         records=run['records'])
  code, _, err = _main(capsys, 'evaluate', *[
      '%s=%s' % item for item in flags.items() if item[1]])
  assert code == 1
  assert err.count('\n') == 1 and err.startswith(
      'od-estimator evaluate: error: '), err
  assert expected in err
