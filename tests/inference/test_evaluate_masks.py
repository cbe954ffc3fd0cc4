"""`od-estimator evaluate` of a Mask R-CNN export gives model_main's mask
metrics.

The session's overfit_mask_rcnn (tests/trained_models.py) is model_main's
run on PNG masks, evaluated with coco_detection_metrics and
coco_mask_metrics (eval_0's events) and exported by its Servo exporter (a
SavedModel with detection_masks). `evaluate` of that export on the same
records must print the events' DetectionMasks_ numbers.
"""
import contextlib
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from tests.inference import test_evaluate

TOLERANCE = test_evaluate.TOLERANCE

# The run's extractor (tests/tiny_resnet.py) serves its export.
pytestmark = pytest.mark.usefixtures('tiny_resnet_extractors')


@pytest.fixture(scope='module')
def run(overfit_mask_rcnn, tiny_resnet_extractors):
  """model_main's run: its Servo export, records, label map and metrics."""
  del tiny_resnet_extractors  # registered first
  return test_evaluate.servo_run(overfit_mask_rcnn)


def _flags(run, records=None):
  return ['evaluate', '--saved_model_dir=' + run['export'],
          '--input_tfrecord_paths=' + (records or run['records']),
          '--label_map_path=' + run['label_map'],
          '--eval_metrics=coco_mask_metrics']


def _evaluated(run, records=None):
  """evaluate's printed metrics."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert cli.main(_flags(run, records)) == 0
  return test_evaluate.printed_metrics(out.getvalue())


def _rewritten(run, path, edit):
  """run's records, each edited by edit(tf.Example), written to path."""
  with tf.io.TFRecordWriter(path) as writer:
    for serialized in tf.data.TFRecordDataset(run['records']):
      example = tf.train.Example.FromString(serialized.numpy())
      edit(example)
      writer.write(example.SerializeToString())
  return path


@pytest.fixture(scope='module')
def evaluated(run):
  """evaluate's metrics of the run's records (PNG masks), run once."""
  return _evaluated(run)


def test_prints_model_mains_mask_metrics_of_the_same_records(run, evaluated):
  mask_metrics = {name: value for name, value in run['model_main'].items()
                  if name.startswith('DetectionMasks_')}
  assert len(mask_metrics) == 12, sorted(run['model_main'])
  assert sorted(evaluated) == sorted(mask_metrics)
  for name, value in mask_metrics.items():
    assert evaluated[name] == pytest.approx(value, abs=TOLERANCE), name
  # The run learned masks: the comparison is not of empty evaluations.
  assert evaluated['DetectionMasks_Precision/mAP@.50IOU'] > 0.5


def _numerical_masks(example):
  """PNG masks replaced by their pixels as floats, height * width each."""
  feature = example.features.feature['image/object/mask']
  pixels = [np.asarray(Image.open(io.BytesIO(png)), np.float32).ravel()
            for png in feature.bytes_list.value]
  feature.Clear()
  feature.float_list.value.extend(np.concatenate(pixels).tolist())


def test_numerical_masks_give_the_png_masks_metrics(run, evaluated,
                                                    tmp_path):
  records = _rewritten(run, str(tmp_path / 'numerical.record'),
                       _numerical_masks)
  assert _evaluated(run, records) == evaluated


def test_records_without_masks_are_one_line(run, tmp_path, capsys):
  records = _rewritten(
      run, str(tmp_path / 'no_masks.record'),
      lambda example: example.features.feature.pop('image/object/mask'))
  assert cli.main(_flags(run, records)) == 1
  err = capsys.readouterr().err
  assert err.count('\n') == 1, err
  assert ('metrics set coco_mask_metrics evaluates masks, but no record of '
          '%s holds image/object/mask.' % records) in err
