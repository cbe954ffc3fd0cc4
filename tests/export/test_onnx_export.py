"""`od-estimator export_onnx`: an exported SSD and Faster R-CNN in ONNX
Runtime give the SavedModel's detections; an op tf2onnx cannot convert is
named. Skipped, on one line, without the onnx extra
(test_onnx_extra.py checks what the command says then).

The models are the run's one-step tiny SSD and fake-extractor Faster R-CNN
exports (tests/trained_models.py). Untrained, their scores are near ties
(the SSD's all about 0.5): detections are matched as sets, each to one of
the other side's with the same class within _TOLERANCE, since an order
among ties is no difference.
"""
import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.export import onnx_export
from tests import saved_models
from tests.command_modules import run_command
from tests.trained_models import one_step_fake_faster_rcnn_export  # pylint: disable=unused-import

_EXTRA = ('tf2onnx', 'onnx', 'onnxruntime')
# Scores and normalized coordinates: float32 sums in another order (and
# ONNX's crop-and-resize) differ by up to 1.2e-4 on these models.
_TOLERANCE = 1e-3
_OUTPUTS = ('detection_boxes', 'detection_scores', 'detection_classes',
            'num_detections')


if any(importlib.util.find_spec(name) is None for name in _EXTRA):
  pytest.skip('the onnx extra is not installed (%s)' %
              onnx_export.INSTALL_HINT, allow_module_level=True)
import onnxruntime  # pylint: disable=g-import-not-at-top,g-bad-import-order


def _images():
  """Two images of different sizes (the input's height and width are free)."""
  rng = np.random.RandomState(0)
  return [rng.randint(0, 256, size=(1,) + shape + (3,), dtype=np.uint8)
          for shape in ((64, 64), (48, 80))]


def _onnx_detections(path, image):
  session = onnxruntime.InferenceSession(
      path, providers=['CPUExecutionProvider'])
  names = [output.name for output in session.get_outputs()]
  return dict(zip(names, session.run(None, {'inputs': image})))


def _assert_same_detections(got, want):
  """One image's detections, equal as sets within _TOLERANCE."""
  count = int(want['num_detections'][0])
  assert int(got['num_detections'][0]) == count > 0
  np.testing.assert_allclose(got['detection_scores'][0, :count],
                             want['detection_scores'][0, :count],
                             atol=_TOLERANCE)
  rows = {key: [np.concatenate([
      detections['detection_boxes'][0, i],
      detections['detection_scores'][0, i:i + 1],
      detections['detection_classes'][0, i:i + 1]]) for i in range(count)]
          for key, detections in (('got', got), ('want', want))}
  unmatched = list(rows['want'])
  for row in rows['got']:
    matches = [i for i, other in enumerate(unmatched)
               if other[-1] == row[-1] and
               np.abs(other - row).max() <= _TOLERANCE]
    assert matches, ('ONNX detection %s not among the SavedModel\'s %s' %
                     (row, np.array(rows['want'])))
    unmatched.pop(matches[0])


@pytest.fixture(params=['one_step_tiny_ssd_export',
                        'one_step_fake_faster_rcnn_export'])
def export(request):
  """Each model's export folder."""
  return request.getfixturevalue(request.param)


def test_onnx_runtime_gives_the_saved_models_detections(export, tmp_path):
  path = str(tmp_path / 'model.onnx')
  result = run_command('export.onnx_command', [
      '--saved_model_dir=' + export, '--output_path=' + path])
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'outputs ' in result.stdout and 'num_detections' in result.stdout
  saved_model = os.path.join(export, 'saved_model')
  for image in _images():
    got = _onnx_detections(path, image)
    want = saved_models.serve(saved_model, image)
    for key in _OUTPUTS:
      assert got[key].shape == want[key].shape, key
    _assert_same_detections(got, want)


def _write_unconvertible_saved_model(directory):
  """A SavedModel whose serving_default computes with RGBToHSV, an op
  tf2onnx 1.17 has no conversion for."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    images = tf.compat.v1.placeholder(tf.uint8, [None, None, None, 3])
    hsv = tf.image.rgb_to_hsv(tf.cast(images, tf.float32) / 255.0)
    scores = tf.reduce_mean(hsv, axis=[1, 2], name='detection_scores')
    builder = tf.compat.v1.saved_model.Builder(directory)
    builder.add_meta_graph_and_variables(
        session, [tf.saved_model.SERVING], signature_def_map={
            'serving_default':
                tf.compat.v1.saved_model.predict_signature_def(
                    {'inputs': images}, {'detection_scores': scores})})
    builder.save()


def test_an_op_without_conversion_is_named(tmp_path):
  saved_model = str(tmp_path / 'saved_model')
  _write_unconvertible_saved_model(saved_model)
  path = tmp_path / 'model.onnx'
  result = run_command('export.onnx_command', [
      '--saved_model_dir=' + saved_model, '--output_path=' + str(path)])
  assert result.returncode == 1
  (line,) = result.stderr.strip().splitlines()[-1:]
  assert line.startswith('od-estimator export_onnx: error: cannot convert')
  assert 'RGBToHSV' in line and 'no ONNX conversion' in line, line
  assert not path.exists()

