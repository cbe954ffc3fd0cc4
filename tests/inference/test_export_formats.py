"""infer_detections and evaluate fed the other forms of an export: the
frozen graph (the original's way) detects as the SavedModel does, and a
TFLite SSD finds the SavedModel's best detection.

The session's one_step_tiny_ssd (tests/trained_models.py: the tiny SSD,
64x64, trained one step) and its export for image_tensor input, on the
model's 8 validation records; the TFLite model is converted from
export_tflite_ssd_graph's graph of the same checkpoint.
"""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.export import export_tflite_ssd_graph_lib
from tests import tflite_runs

_TF = fields.TfExampleFields
_BOX_KEYS = (_TF.detection_bbox_ymin, _TF.detection_bbox_xmin,
             _TF.detection_bbox_ymax, _TF.detection_bbox_xmax)
NUM_RECORDS = 8
SIZE = 64
TOLERANCE = 1e-4
TFLITE_TOLERANCE = 1e-3


@pytest.fixture(scope='module')
def export(one_step_tiny_ssd, one_step_tiny_ssd_export):
  root = one_step_tiny_ssd[0]
  return {'frozen': os.path.join(one_step_tiny_ssd_export,
                                 'frozen_inference_graph.pb'),
          'saved_model': one_step_tiny_ssd_export,
          'records': str(root / 'data' / 'shapes_val.record-*'),
          'label_map': str(root / 'data' / 'shapes_label_map.pbtxt')}


@pytest.fixture(scope='module')
def tflite(one_step_tiny_ssd, tmp_path_factory):
  """The checkpoint's .tflite SSD (float, with its postprocessing op)."""
  model_dir = one_step_tiny_ssd[2]
  folder = tmp_path_factory.mktemp('tflite')
  export_tflite_ssd_graph_lib.export_tflite_graph(
      config_util.read_pipeline_config(
          os.path.join(model_dir, 'pipeline.config')), model_dir,
      str(folder), add_postprocessing_op=True, max_detections=10,
      max_classes_per_detection=1)
  path = folder / 'model.tflite'
  path.write_bytes(tflite_runs.convert_float(
      str(folder / 'tflite_graph.pb'), tflite_runs.POSTPROCESS_OUTPUTS, SIZE))
  return str(path)


def _records(path):
  return [tf.train.Example.FromString(record.numpy())
          for record in tf.data.TFRecordDataset(path)]


def _detections(example):
  """(boxes [n, 4], scores [n], labels [n]) an example holds."""
  feature = example.features.feature
  boxes = np.stack([feature[key].float_list.value for key in _BOX_KEYS], 1)
  scores = np.array(feature[_TF.detection_score].float_list.value)
  labels = np.array(feature[_TF.detection_class_label].int64_list.value)
  assert len(boxes) == len(scores) == len(labels) > 0
  return boxes, scores, labels


def _infer(export, model_path, output):
  assert cli.main(['infer_detections',
                   '--input_tfrecord_paths=' + export['records'],
                   '--output_tfrecord_path=' + output,
                   '--inference_graph=' + model_path]) == 0
  return _records(output)


@pytest.fixture(scope='module')
def saved_model_detections(export, tmp_path_factory):
  return _infer(export, export['saved_model'], str(
      tmp_path_factory.mktemp('saved') / 'detections.record'))


def test_infer_detections_from_the_frozen_graph_as_from_the_saved_model(
    export, saved_model_detections, tmp_path, capsys):
  frozen = _infer(export, export['frozen'], str(tmp_path / 'frozen.record'))
  assert '%d record(s)' % NUM_RECORDS in capsys.readouterr().out
  inputs = _records(tf.io.gfile.glob(export['records'])[0])
  assert len(frozen) == len(saved_model_detections) == len(inputs) == (
      NUM_RECORDS)
  for got, expected, original in zip(frozen, saved_model_detections, inputs):
    # Everything the input held is kept, image included (no discarding).
    for key, value in original.features.feature.items():
      assert got.features.feature[key] == value, key
    for got_values, expected_values in zip(_detections(got),
                                           _detections(expected)):
      np.testing.assert_allclose(got_values, expected_values,
                                 atol=TOLERANCE)


def test_a_tflite_model_finds_the_saved_models_best_detection(
    export, saved_model_detections, tflite, tmp_path):
  detections = _infer(export, tflite, str(tmp_path / 'tflite.record'))
  assert len(detections) == NUM_RECORDS
  for got, expected in zip(detections, saved_model_detections):
    (box, *_), (score, *_), (label, *_) = _detections(got)
    boxes, scores, labels = _detections(expected)
    assert score == pytest.approx(scores[0], abs=TFLITE_TOLERANCE)
    # The model trained one step: where its best scores tie within the
    # converter's rounding, either of them may come first.
    tied = np.flatnonzero(scores >= scores[0] - 2 * TFLITE_TOLERANCE)
    assert any(label == labels[i] and np.allclose(
        box, boxes[i], atol=TFLITE_TOLERANCE) for i in tied), (
            box, label, boxes[tied], labels[tied])


def test_evaluate_the_frozen_graph_and_the_tflite_model(export, tflite,
                                                        capsys):
  for flag in ('--inference_graph=' + export['frozen'],
               '--tflite_model=' + tflite):
    assert cli.main(['evaluate', flag,
                     '--input_tfrecord_paths=' + export['records'],
                     '--label_map_path=' + export['label_map']]) == 0
    out = capsys.readouterr().out
    assert '%d image(s)' % NUM_RECORDS in out
    assert re.search(r'^DetectionBoxes_Precision/mAP: [0-9.]+$', out,
                     re.MULTILINE), out
