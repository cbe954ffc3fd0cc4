"""The original's way: infer_detections and evaluate fed an export's frozen
graph, which detects as its SavedModel does.

The session's one_step_tiny_ssd_export (tests/trained_models.py: the tiny
SSD trained one step, exported for image_tensor input) on the model's 8
validation records.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator.core import standard_fields as fields

_TF = fields.TfExampleFields
_DETECTION_KEYS = (_TF.detection_bbox_ymin, _TF.detection_bbox_xmin,
                   _TF.detection_bbox_ymax, _TF.detection_bbox_xmax,
                   _TF.detection_score, _TF.detection_class_label)
TOLERANCE = 1e-4


@pytest.fixture(scope='module')
def export(one_step_tiny_ssd, one_step_tiny_ssd_export):
  root = one_step_tiny_ssd[0]
  return {'frozen': os.path.join(one_step_tiny_ssd_export,
                                 'frozen_inference_graph.pb'),
          'saved_model': one_step_tiny_ssd_export,
          'records': str(root / 'data' / 'shapes_val.record-*'),
          'label_map': str(root / 'data' / 'shapes_label_map.pbtxt')}


def _records(path):
  return [tf.train.Example.FromString(record.numpy())
          for record in tf.data.TFRecordDataset(path)]


def _infer(export, model, output, capsys):
  assert cli.main(['infer_detections',
                   '--input_tfrecord_paths=' + export['records'],
                   '--output_tfrecord_path=' + output,
                   '--inference_graph=' + export[model]]) == 0
  assert '8 record(s)' in capsys.readouterr().out
  return _records(output)


def test_infer_detections_from_the_frozen_graph_as_from_the_saved_model(
    export, tmp_path, capsys):
  frozen = _infer(export, 'frozen', str(tmp_path / 'frozen.record'), capsys)
  saved = _infer(export, 'saved_model', str(tmp_path / 'saved.record'),
                 capsys)
  inputs = _records(tf.io.gfile.glob(export['records'])[0])
  assert len(frozen) == len(saved) == len(inputs) == 8
  for got, expected, original in zip(frozen, saved, inputs):
    got, expected = got.features.feature, expected.features.feature
    # Everything the input held is kept, image included (no discarding).
    for key, value in original.features.feature.items():
      assert got[key] == value, key
    counts = {len(getattr(got[key], kind).value) for key, kind in zip(
        _DETECTION_KEYS, ['float_list'] * 5 + ['int64_list'])}
    assert len(counts) == 1 and counts.pop() > 0
    for key in _DETECTION_KEYS[:5]:
      np.testing.assert_allclose(got[key].float_list.value,
                                 expected[key].float_list.value,
                                 atol=TOLERANCE)
    assert (got[_TF.detection_class_label] ==
            expected[_TF.detection_class_label])


def test_evaluate_the_frozen_graph(export, capsys):
  outputs = []
  for flag in ('--inference_graph=' + export['frozen'],
               '--saved_model_dir=' + export['saved_model']):
    assert cli.main(['evaluate', flag,
                     '--input_tfrecord_paths=' + export['records'],
                     '--label_map_path=' + export['label_map']]) == 0
    outputs.append(capsys.readouterr().out)
  assert 'DetectionBoxes_Precision/mAP: ' in outputs[0]
  assert '8 image(s)' in outputs[0]
  assert outputs[0] == outputs[1]
