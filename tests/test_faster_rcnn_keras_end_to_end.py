"""A tiny TF2 Faster R-CNN (C4) end to end through the TF2 commands.

The original's faster_rcnn_resnet50_v1_640x640 sample config (the
faster_rcnn_resnet50_keras extractor, the TF2 heads, its static shapes and
matmul crops) at 64x64 with 3 classes and 8 proposals, on shapes records
the module writes (tiny_tf2_ssd.write_config). In this process:
model_main_tf2 trains it TRAIN_STEPS steps and evaluates the folder with
--checkpoint_dir, exporter_main_v2 exports it, `od-estimator detect` runs
the export, and the export's detections equal Estimator.predict's on one
image; its checkpoint/ckpt-0 has the original's keys. The overfitting run
of a two-stage TF2 model is the FPN one's
(tests/test_faster_rcnn_fpn_end_to_end.py); here the commands.

So that inference on 2 steps' weights is of order one (the Keras ResNet's
batch norm averages with decay 0.997, so after 2 steps its moving
statistics are still the initial ones and the features blow up), training
starts from a backbone whose moving statistics are calibrated
(tiny_faster_rcnn.write_calibrated_checkpoint), at a small learning rate,
with a small second-stage initializer (the class scores are not saturated
and detections pass the score threshold).
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.utils import checkpoint_contents
from tests import command_modules
from tests import event_tags
from tests import image_inputs
from tests import plain_session
from tests import test_exporter_main_v2 as exporter_main_v2
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tf2_checkpoints
from tests import tf2_faster_rcnn
from tests import tiny_faster_rcnn
from tests import tiny_tf2_ssd

TRAIN_STEPS = 2
TOLERANCE = 1e-4
TINY = """
model { faster_rcnn {
  num_classes: 3
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: 64 max_dimension: 64 } }
  first_stage_max_proposals: 8
  second_stage_batch_size: 4
  second_stage_box_predictor { mask_rcnn_box_predictor { fc_hyperparams {
    initializer { truncated_normal_initializer { stddev: 0.001 } } } } }
  second_stage_post_processing { batch_non_max_suppression {
    max_detections_per_class: 5 max_total_detections: 5 } }
} }
train_config {
  batch_size: 1 max_number_of_boxes: 4 fine_tune_checkpoint: "%s"
  optimizer { momentum_optimizer { learning_rate {
    cosine_decay_learning_rate {
      learning_rate_base: 0.0001 warmup_learning_rate: 0.0001 } } } }
}
"""


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """model_main_tf2's training and --checkpoint_dir evaluation, then
  exporter_main_v2's export: {'config', 'model_dir', 'checkpoint',
  'export', name: each command's result}."""
  root = tmp_path_factory.mktemp('faster_rcnn_keras')
  (root / 'backbone').mkdir()
  backbone = tiny_faster_rcnn.write_calibrated_checkpoint(
      root, 'faster_rcnn_resnet50_keras')
  config = tiny_tf2_ssd.write_config(
      root, root / 'data', num_steps=TRAIN_STEPS,
      config=tf2_faster_rcnn.RESNET50, tiny=TINY % backbone)
  model_dir = str(root / 'model')
  common = ['--pipeline_config_path=' + config, '--model_dir=' + model_dir]
  runs = {'training': command_modules.run_command(
      'model_main_tf2', common + ['--record_summaries=false'])}
  runs['evaluation'] = command_modules.run_command(
      'model_main_tf2', common + ['--checkpoint_dir=' + model_dir,
                                  '--eval_timeout=300'])
  export = str(root / 'export')
  runs['export'] = command_modules.run_command('exporter_main_v2', [
      '--input_type=image_tensor', '--pipeline_config_path=' + config,
      '--trained_checkpoint_dir=' + model_dir, '--output_directory=' + export])
  for name, result in runs.items():
    assert result.returncode == 0, (name, result.stderr[-3000:])
  return dict(runs, config=config, model_dir=model_dir, export=export,
              checkpoint=tf.train.latest_checkpoint(model_dir))


def test_model_main_tf2_trains_and_evaluates(trained):
  assert trained['checkpoint'].endswith('-%d' % TRAIN_STEPS)
  with open(trained['config']) as f:
    assert 'faster_rcnn_resnet50_keras' in f.read()
  assert 'Evaluation at step %d:' % TRAIN_STEPS in (
      trained['evaluation'].stdout)
  metrics = event_tags.last_scalars(os.path.join(trained['model_dir'],
                                                 'eval'))
  for tag in ('DetectionBoxes_Precision/mAP',
              'DetectionBoxes_Precision/mAP@.50IOU',
              'DetectionBoxes_Recall/AR@100') + end_to_end.TRAIN_LOSS_TAGS:
    assert np.isfinite(metrics[tag]), (tag, metrics)


@pytest.fixture(scope='module')
def served(trained):
  """The export's outputs on the first test image."""
  return exporter_main_v2.serve(trained['export'], 'image_tensor')


def test_export_serves_the_estimators_detections(trained, served):
  # Both with grappler, as users run them: this model's boxes move by
  # ~1e-3 between the graph's rewrites and none.
  with plain_session.with_grappler():
    predicted = end_to_end.predict(trained, image_inputs.images()[:1])
  assert served['num_detections'][0] > 0
  for key, value in predicted.items():
    np.testing.assert_allclose(served[key], value, atol=TOLERANCE, rtol=0,
                               err_msg=key)


def test_detect_runs_the_export(trained, served, tmp_path):
  exporter_main_v2.check_detect_runs_the_export(trained['export'], served,
                                                tmp_path)


def test_exported_checkpoint_has_the_originals_keys(trained):
  """checkpoint/ckpt-0 keys each value as the original's TF2 checkpoints
  of the sample config do (its recorded facts), not by variable name."""
  prefix = tf.train.latest_checkpoint(os.path.join(trained['export'],
                                                   'checkpoint'))
  assert os.path.basename(prefix) == 'ckpt-0'
  exported = sorted((value.key, value.keras_name)
                    for value in checkpoint_contents.read(prefix)
                    if value.key.startswith('model/'))
  assert exported == sorted(
      (fact.key, fact.keras_name)
      for fact in tf2_checkpoints.facts(tf2_faster_rcnn.RESNET50)
      if fact.key.startswith('model/') and
      '/.OPTIMIZER_SLOT/' not in fact.key)
