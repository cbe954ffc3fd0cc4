"""DetectionModel called like the original's: model(images) gives detections."""
import numpy as np
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.core import model as model_lib
from tests import tiny_ssd


class _RecordingModel(model_lib.DetectionModel):
  """Preprocess halves, predict sums, postprocess names the result."""

  def __init__(self):
    super().__init__(num_classes=1)
    self.calls = []

  def preprocess(self, inputs):
    self.calls.append('preprocess')
    return inputs / 2.0, tf.constant([[2, 2, 1]])

  def predict(self, preprocessed_inputs, true_image_shapes):
    self.calls.append('predict')
    return {'sum': tf.reduce_sum(preprocessed_inputs),
            'shapes': true_image_shapes}

  def postprocess(self, prediction_dict, true_image_shapes):
    self.calls.append('postprocess')
    return {'detection_scores': prediction_dict['sum'][tf.newaxis],
            'shapes': true_image_shapes}

  def loss(self, prediction_dict, true_image_shapes):
    return {}

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return {}


def test_call_runs_preprocess_predict_and_postprocess(execute):
  model = _RecordingModel()
  out = execute(lambda images: model(images),
                [np.full([1, 2, 2, 1], 4., np.float32)])
  assert model.calls == ['preprocess', 'predict', 'postprocess']
  np.testing.assert_allclose(out['detection_scores'], [8.])
  np.testing.assert_array_equal(out['shapes'], [[2, 2, 1]])


def test_calling_a_built_ssd_returns_detections(execute):
  def graph_fn(images):
    model = model_builder.build(tiny_ssd.model_config(), is_training=False)
    return model(images)
  detections = execute(graph_fn, [np.random.RandomState(0).uniform(
      0, 255, [2, 64, 64, 3]).astype(np.float32)])
  assert detections['detection_boxes'].shape[:1] == (2,)
  assert detections['num_detections'].shape == (2,)
