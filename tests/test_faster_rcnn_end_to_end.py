"""A tiny real Faster R-CNN end to end: model_main trains and evaluates it,
exporter exports it, and the export's detections equal Estimator.predict's.

The ResNet-50 model of tests/tiny_faster_rcnn.py (64x64 pixels, 8
proposals, frozen batch norm) fine-tuned for two steps from a stand-in
classification checkpoint on generated shapes data (gradients clipped so
two steps keep the backbone near its batch norm statistics).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import exporter
from od_estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.utils import config_util
from tests import event_tags
from tests import image_inputs
from tests import tiny_faster_rcnn
from tests import tiny_ssd

_IN = fields.InputDataFields
TRAIN_STEPS = 2
TOLERANCE = 1e-4


def train_with_model_main(root, write_config):
  """model_main fine-tunes a tiny config TRAIN_STEPS steps and evaluates.

  Args:
    root: a fresh directory.
    write_config: tiny_faster_rcnn.write_config or a function taking the
      same arguments.

  Returns:
    {'root', 'model_dir', 'config' (the model_dir's copy), 'checkpoint'}.
  """
  checkpoint = tiny_faster_rcnn.write_calibrated_checkpoint(root)
  config = write_config(
      root, root / 'data', train_fields=(
          'fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: '
          '"classification" gradient_clipping_by_norm: 1.0' % checkpoint))
  model_dir = str(root / 'model')
  result = subprocess.run(
      [sys.executable, '-m', 'od_estimator.model_main',
       '--pipeline_config_path=' + config, '--model_dir=' + model_dir,
       '--num_train_steps=%d' % TRAIN_STEPS],
      capture_output=True, text=True, timeout=900, cwd=tiny_ssd.REPO,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return {'root': root, 'model_dir': model_dir,
          'config': os.path.join(model_dir, 'pipeline.config'),
          'checkpoint': tf.train.latest_checkpoint(model_dir)}


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """model_main trains TRAIN_STEPS steps and evaluates; returns the paths."""
  return train_with_model_main(tmp_path_factory.mktemp('faster_rcnn'),
                               tiny_faster_rcnn.write_config)


def test_model_main_trains_and_evaluates_with_coco_metrics(trained):
  assert trained['checkpoint'].endswith('-%d' % TRAIN_STEPS)
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in ('Loss/RPNLoss/localization_loss',
              'Loss/RPNLoss/objectness_loss',
              'Loss/BoxClassifierLoss/localization_loss',
              'Loss/BoxClassifierLoss/classification_loss',
              'Loss/total_loss'):
    assert tag in train_tags, (tag, sorted(train_tags))
  eval_tags = event_tags.scalar_tags(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/RPNLoss/objectness_loss', 'Loss/total_loss'):
    assert tag in eval_tags, (tag, sorted(eval_tags))


def _estimator_predictions(configs, model_dir, checkpoint, images):
  """Estimator.predict on the images: one batch of numpy outputs."""
  def input_fn():
    model = model_builder.build(configs['model'], is_training=False)
    preprocessed, true_image_shape = model.preprocess(
        tf.cast(tf.constant(images), tf.float32))
    return tf.data.Dataset.from_tensors({
        _IN.image: preprocessed, _IN.true_image_shape: true_image_shape})

  estimator = tf.estimator.Estimator(
      model_lib.create_model_fn(
          lambda is_training, add_summaries: model_builder.build(
              configs['model'], is_training, add_summaries), configs),
      model_dir=model_dir)
  batches = list(estimator.predict(input_fn, checkpoint_path=checkpoint,
                                   yield_single_examples=False))
  assert len(batches) == 1
  return batches[0]


def export_and_predict(trained, images):
  """(SavedModel outputs, Estimator.predict outputs) on the images."""
  output_directory = str(trained['root'] / 'export')
  exporter.export_inference_graph(
      'image_tensor', config_util.read_pipeline_config(trained['config']),
      trained['checkpoint'], output_directory)
  assert os.path.exists(os.path.join(output_directory,
                                     'frozen_inference_graph.pb'))
  serve = tf.saved_model.load(os.path.join(
      output_directory, 'saved_model')).signatures['serving_default']
  served = {key: value.numpy() for key, value in
            serve(inputs=tf.constant(images)).items()}
  configs = config_util.get_configs_from_pipeline_file(trained['config'])
  return served, _estimator_predictions(
      configs, trained['model_dir'], trained['checkpoint'], images)


def test_export_detections_equal_estimator_predict(trained):
  served, predicted = export_and_predict(trained, image_inputs.images()[:1])
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key], atol=TOLERANCE,
                               err_msg=key)
  assert served['num_detections'][0] > 0
  assert np.isfinite(served['detection_boxes']).all()
  assert set(np.unique(served['detection_classes'][0][
      :int(served['num_detections'][0])])) <= {1.0, 2.0, 3.0}
