"""A tiny EfficientDet D0 end to end, through every command.

tests/tiny_efficientdet.py's model (the original's D0 sample config made
small) on the overfitting set of the two-stage end to ends: model_main
trains it until it overfits and evaluates it with COCO metrics (the run is
tests/trained_models.py's overfit_efficientdet, EFFICIENTDET_STEPS steps
with the fixed seed), export_inference_graph exports it with the
detections of model_main's Servo export (the Estimator's PREDICT graph:
tests/servo_exports.py), and exporter_main_v2 and export_tflite_graph_tf2
(the original's TFLite route for its TF2-era models; --convert, run in the
TFLite interpreter) export the same checkpoint with the same detections.
model_tpu_main (--use_tpu=false) and model_main_tf2 each train a copy of
the run's model_dir one step further and evaluate it. `validate
--check_tpu` XLA-compiles the tiny D0's training step in bfloat16.
"""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator.export import tflite_conversion
from tests import event_tags
from tests import saved_models
from tests import servo_exports
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_efficientdet
from tests import trained_models
from tests.command_modules import run_command

STEPS = trained_models.EFFICIENTDET_STEPS
TOLERANCE = 1e-4
# The converted model's arithmetic is TFLite's kernels'.
TFLITE_TOLERANCE = 1e-3
TRAIN_LOSS_TAGS = ('Loss/localization_loss', 'Loss/classification_loss',
                   'Loss/regularization_loss', 'Loss/total_loss')
_DETECTION_KEYS = ('detection_boxes', 'detection_scores',
                   'detection_classes', 'num_detections')
# The ImageNet normalization of the extractor's preprocess (the TFLite
# route's input is the preprocessed image).
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STDDEV = np.array([0.229, 0.224, 0.225], np.float32)


@pytest.fixture(scope='module')
def trained(overfit_efficientdet):
  return overfit_efficientdet


@pytest.fixture(scope='module')
def image(trained):
  """The set's first image, [1, 64, 64, 3] uint8 (its shape: class 1)."""
  return end_to_end.overfit_image(trained)


@pytest.fixture(scope='module')
def exported(trained, image, tmp_path_factory):
  """export_inference_graph's image_tensor SavedModel's outputs on it."""
  return end_to_end.export_and_serve(
      trained, image, str(tmp_path_factory.mktemp('efficientdet_export')))


def test_model_main_trains_evaluates_and_overfits(trained):
  end_to_end.check_trains_evaluates_and_overfits(
      trained, STEPS, tiny_efficientdet.EXTRACTOR, TRAIN_LOSS_TAGS)


def test_export_detections_equal_estimator_predict(trained, image,
                                                   exported):
  predicted = servo_exports.predictions(trained['model_dir'], image[0],
                                        STEPS)
  for key in _DETECTION_KEYS:
    np.testing.assert_allclose(exported[key], predicted[key],
                               atol=TOLERANCE, err_msg=key)
  assert (exported['num_detections'] > 0).all()
  assert exported['detection_classes'][0, 0] == 1.0


def test_exporter_main_v2_exports_the_same_detections(trained, image,
                                                      exported, tmp_path):
  output = str(tmp_path / 'exported_v2')
  result = run_command('exporter_main_v2', [
      '--input_type=image_tensor',
      '--pipeline_config_path=' + trained['config'],
      '--trained_checkpoint_dir=' + trained['model_dir'],
      '--output_directory=' + output])
  assert result.returncode == 0, result.stderr[-3000:]
  assert os.path.exists(os.path.join(output, 'checkpoint', 'ckpt-0.index'))
  served = saved_models.serve(os.path.join(output, 'saved_model'), image)
  for key in _DETECTION_KEYS:
    np.testing.assert_allclose(served[key], exported[key], atol=TOLERANCE,
                               err_msg=key)


def test_the_tflite_route_detects_the_same_shape(trained, image, exported,
                                                 tmp_path):
  output = str(tmp_path / 'tflite')
  result = run_command('compat.export_tflite_graph_tf2', [
      '--pipeline_config_path=' + trained['config'],
      '--trained_checkpoint_dir=' + trained['model_dir'],
      '--output_directory=' + output, '--max_detections=10', '--convert'])
  assert result.returncode == 0, result.stderr[-3000:]
  interpreter = tf.lite.Interpreter(model_path=os.path.join(
      output, tflite_conversion.TFLITE_NAME))
  interpreter.allocate_tensors()
  preprocessed = ((image / 255.0 - _MEAN) / _STDDEV).astype(np.float32)
  outputs = interpreter.get_signature_runner()(input=preprocessed)
  # output_0 .. output_3: count, scores, 0-based classes, boxes. Its NMS
  # keeps one class per box: the best detection is the export's.
  assert outputs['output_0'][0] > 0
  assert outputs['output_2'][0, 0] + 1 == exported['detection_classes'][0, 0]
  np.testing.assert_allclose(outputs['output_1'][0, 0],
                             exported['detection_scores'][0, 0],
                             atol=TFLITE_TOLERANCE)
  np.testing.assert_allclose(outputs['output_3'][0, 0],
                             exported['detection_boxes'][0, 0],
                             atol=TFLITE_TOLERANCE)


def _copied_model_dir(trained, tmp_path):
  model_dir = str(tmp_path / 'model')
  shutil.copytree(trained['model_dir'], model_dir,
                  ignore=shutil.ignore_patterns('export', 'eval_*',
                                                'events.*'))
  return model_dir


def test_model_tpu_main_trains_and_evaluates(trained, tmp_path):
  model_dir = _copied_model_dir(trained, tmp_path)
  common = ['--use_tpu=false', '--pipeline_config_path=' + trained['config'],
            '--model_dir=' + model_dir, '--num_train_steps=%d' % (STEPS + 1)]
  training = run_command('model_tpu_main', common + [
      '--mode=train', '--train_batch_size=2', '--num_shards=1'])
  assert training.returncode == 0, training.stderr[-3000:]
  assert os.path.exists(os.path.join(model_dir,
                                     'model.ckpt-%d.index' % (STEPS + 1)))
  evaluation = run_command('model_tpu_main', common + [
      '--mode=eval', '--eval_timeout_secs=60'])
  assert evaluation.returncode == 0, evaluation.stderr[-3000:]
  tags = event_tags.scalar_tags(os.path.join(model_dir,
                                             'eval_validation_data'))
  assert 'DetectionBoxes_Precision/mAP@.50IOU' in tags, sorted(tags)


def test_model_main_tf2_trains_and_evaluates(trained, tmp_path):
  model_dir = _copied_model_dir(trained, tmp_path)
  common = ['--pipeline_config_path=' + trained['config'],
            '--model_dir=' + model_dir, '--num_train_steps=%d' % (STEPS + 1)]
  training = run_command('model_main_tf2', common)
  assert training.returncode == 0, training.stderr[-3000:]
  assert os.path.exists(os.path.join(model_dir,
                                     'model.ckpt-%d.index' % (STEPS + 1)))
  evaluation = run_command('model_main_tf2', common + [
      '--checkpoint_dir=' + model_dir, '--eval_timeout=60'])
  assert evaluation.returncode == 0, evaluation.stderr[-3000:]
  assert 'Evaluation at step %d:' % (STEPS + 1) in evaluation.stdout
  tags = event_tags.scalar_tags(os.path.join(model_dir, 'eval'))
  assert 'DetectionBoxes_Precision/mAP@.50IOU' in tags, sorted(tags)


def test_validate_check_tpu_compiles_the_training_step(trained, capsys):
  # Batch 2 = 2 shards x 1, in bfloat16 as D0's config says (the tiny
  # model trains in float32 on CPU).
  code = cli.main(['validate', '--pipeline_config_path=' + trained['config'],
                   '--config_override=train_config { use_bfloat16: true }',
                   '--check_tpu', '--num_shards=2', '--allow_local_paths'])
  out = capsys.readouterr().out
  assert code == 0, out
  assert 'XLA compiles the step' in out, out
