"""A tiny real Faster R-CNN end to end: model_main trains it until it
overfits a small set and evaluates it with COCO metrics; exporter exports it
fed serialized tf.Examples, and the export's detections equal
Estimator.predict's. (Every input type decodes to the same image batch
before the model: tests/export/test_exporter.py and
tests/test_export_vs_estimator.py check each one on SSD; the Mask R-CNN
end to end exports for image_tensor.)

The model of tests/tiny_faster_rcnn.py (64x64 pixels, 8 proposals, frozen
batch norm) on tests/tiny_resnet.py's narrow ResNet v1 (the pipeline is what
this checks, not ResNet-50's network) on
tiny_faster_rcnn.write_overfit_config's set: two images of one large shape
each, which evaluation reads too. Adam trains the heads on the fixed
features of a stand-in classification checkpoint calibrated on those images.
Measured COCO mAP@.5 on that set with ResNet-50: 1.0 in each of 5 unseeded
runs of OVERFIT_STEPS (80) steps, yet 0.05 in one CI run; at 40 steps 0.5
and 1.0. So model_main runs with --random_seed trained_models.SEED: the same
initialization, sampling and order in every run. With the tiny ResNet, seeds
1 and 2: 0.75 and 1.0 (Mask R-CNN: 0.75 and 1.0 for boxes and masks alike).
The run is tests/trained_models.py's overfit_faster_rcnn, built once per
test run. Each test exports into its own tmp_path; the exports are compared
on the first of those images, where the model detects its shape, served in a
TF1 session (tests/saved_models.py). The Mask R-CNN end to end runs the same
recipe with the mask head.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.export import exporter
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.config import config_util
from tests import event_tags
from tests import image_inputs
from tests import saved_models
from tests import trained_models

_IN = fields.InputDataFields
OVERFIT_STEPS = trained_models.OVERFIT_STEPS
TOLERANCE = 1e-4
# The losses a two-stage model's training summarizes.
TRAIN_LOSS_TAGS = ('Loss/RPNLoss/localization_loss',
                   'Loss/RPNLoss/objectness_loss',
                   'Loss/BoxClassifierLoss/localization_loss',
                   'Loss/BoxClassifierLoss/classification_loss',
                   'Loss/total_loss')


# The run's extractor (tests/tiny_resnet.py) for the exports and predictions.
pytestmark = pytest.mark.usefixtures('tiny_resnet_extractors')


@pytest.fixture(scope='module')
def trained(overfit_faster_rcnn):
  """model_main's run of OVERFIT_STEPS steps and evaluation; its paths."""
  return overfit_faster_rcnn


def test_model_main_trains_and_evaluates_with_coco_metrics(trained):
  assert trained['checkpoint'].endswith('-%d' % OVERFIT_STEPS)
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in TRAIN_LOSS_TAGS:
    assert tag in train_tags, (tag, sorted(train_tags))
  eval_tags = event_tags.scalar_tags(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/RPNLoss/objectness_loss', 'Loss/total_loss'):
    assert tag in eval_tags, (tag, sorted(eval_tags))


def test_model_main_overfits_the_small_set(trained):
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  assert metrics['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5, metrics


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


def predict(trained, images):
  """Estimator.predict's outputs on the images."""
  configs = config_util.get_configs_from_pipeline_file(trained['config'])
  return _estimator_predictions(configs, trained['model_dir'],
                                trained['checkpoint'], images)


def export_and_serve(trained, images, output_directory,
                     input_type='image_tensor'):
  """Exports into output_directory; its SavedModel's outputs on the images."""
  exporter.export_inference_graph(
      input_type, config_util.read_pipeline_config(trained['config']),
      trained['checkpoint'], output_directory)
  assert os.path.exists(os.path.join(output_directory,
                                     'frozen_inference_graph.pb'))
  if input_type == 'encoded_image_string_tensor':
    images = [image_inputs.png(image) for image in images]
  elif input_type == 'tf_example':
    images = [image_inputs.tf_example(image) for image in images]
  return saved_models.serve(os.path.join(output_directory, 'saved_model'),
                            images)


def export_and_predict(trained, images, output_directory):
  """(image_tensor SavedModel outputs, Estimator.predict outputs)."""
  return (export_and_serve(trained, images, output_directory),
          predict(trained, images))


def overfit_image(trained, index=0):
  """The overfitted set's image `index`, [1, 64, 64, 3] uint8.

  One image: with two, Estimator.predict's detections beyond the first two
  differ from one image's (the exports' equal them); not yet explained.
  """
  record = list(tf.data.TFRecordDataset(
      str(trained['root'] / 'data' / 'shapes.record')))[index]
  return tf.io.decode_jpeg(tf.train.Example.FromString(
      record.numpy()).features.feature['image/encoded'].bytes_list.value[0]
                          ).numpy()[np.newaxis]


def check_trains_evaluates_and_overfits(trained, num_steps, config_text,
                                        loss_tags=TRAIN_LOSS_TAGS):
  """A family's overfitting run: num_steps steps of a config holding
  config_text, the losses (loss_tags: a two-stage model's by default)
  summarized, evaluation's mAP@.5 above 0.5."""
  assert trained['checkpoint'].endswith('-%d' % num_steps)
  with open(trained['config']) as f:
    assert config_text in f.read()
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in loss_tags:
    assert tag in train_tags, (tag, sorted(train_tags))
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  assert metrics['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5, metrics


def check_export_equals_estimator_predict(trained, output_directory):
  """An overfitting run's image_tensor export: its detections of the set's
  first image equal Estimator.predict's, the overfitted shape (class 1)
  first."""
  served, predicted = export_and_predict(trained, overfit_image(trained),
                                         output_directory)
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key], atol=TOLERANCE,
                               err_msg=key)
  assert (served['num_detections'] > 0).all()
  assert served['detection_classes'][0, 0] == 1.0


@pytest.fixture(scope='module')
def shapes(trained):
  return overfit_image(trained)


@pytest.fixture(scope='module')
def predicted(trained, shapes):
  return predict(trained, shapes)


def test_export_detections_equal_estimator_predict(trained, shapes, predicted,
                                                   tmp_path):
  served = export_and_serve(trained, shapes, str(tmp_path / 'export'),
                            'tf_example')
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key], atol=TOLERANCE,
                               err_msg=key)
  assert (served['num_detections'] > 0).all()
  assert np.isfinite(served['detection_boxes']).all()
  for classes, count in zip(served['detection_classes'],
                            served['num_detections'].astype(int)):
    assert set(np.unique(classes[:count])) <= {1.0, 2.0, 3.0}
