"""A tiny TF2 Faster R-CNN (C4) end to end through the TF2 commands.

The original's faster_rcnn_resnet50_v1_640x640 sample config (the
faster_rcnn_resnet50_keras extractor, the TF2 heads, its static shapes and
matmul crops) at 64x64 with 3 classes and 8 proposals, on shapes records
the module writes (tiny_tf2_ssd.write_config). In this process:
model_main_tf2 trains it TRAIN_STEPS steps and evaluates the folder with
--checkpoint_dir, exporter_main_v2 exports it, `od-estimator detect` runs
the export, and the export's detections equal Estimator.predict's on one
image (and it serves each detection's proposal, detection_anchor_indices);
its checkpoint/ckpt-0 has the original's keys. The config's
extractor type builds tests/tiny_resnet.py's Keras ResNet (one block per
stage at a quarter of the width; the same extractor class, scopes and
object paths) in this process: the pipeline is what this module checks.
ResNet-50's names and restores are tests/test_upstream_tf2_configs.py's,
its training tests/models/test_faster_rcnn_resnet_keras.py's, its object
paths checked here on its recorded names. The overfitting run
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

from od_estimator.export import original_object_paths
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
from tests import tiny_resnet
from tests import tiny_tf2_ssd

EXTRACTOR = 'faster_rcnn_resnet50_keras'
TRAIN_STEPS = 2
TOLERANCE = 1e-4
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
TINY = tf2_faster_rcnn.tiny_c4_text("""
  second_stage_box_predictor { mask_rcnn_box_predictor { fc_hyperparams {
    initializer { truncated_normal_initializer { stddev: 0.001 } } } } }""", """
  batch_size: 1 max_number_of_boxes: 4 fine_tune_checkpoint: "%s"
  optimizer { momentum_optimizer { learning_rate {
    cosine_decay_learning_rate {
      learning_rate_base: 0.0001 warmup_learning_rate: 0.0001 } } } }""")


@pytest.fixture(scope='module')
def tiny_keras_resnet(tiny_resnet_extractors):
  """The config's faster_rcnn_resnet50_keras is the tiny Keras ResNet's."""
  del tiny_resnet_extractors  # Only its registration.
  with tiny_resnet.keras_c4_as(EXTRACTOR):
    yield


@pytest.fixture(scope='module')
def trained(tmp_path_factory, tiny_keras_resnet):
  """model_main_tf2's training and --checkpoint_dir evaluation, then
  exporter_main_v2's export: {'config', 'model_dir', 'checkpoint',
  'export', name: each command's result}."""
  del tiny_keras_resnet  # Only its registration.
  root = tmp_path_factory.mktemp('faster_rcnn_keras')
  (root / 'backbone').mkdir()
  backbone = tiny_faster_rcnn.write_calibrated_checkpoint(
      root, EXTRACTOR)
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
    assert EXTRACTOR in f.read()
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
  # What Estimator.predict leaves out, the original's TF2 exports serve:
  # the proposal each detection refines (float32, as all their outputs).
  assert set(served) - set(predicted) == {'detection_anchor_indices'}
  indices = served['detection_anchor_indices'][0]
  count = int(served['num_detections'][0])
  assert indices.dtype == np.float32
  np.testing.assert_allclose(
      served['detection_multiclass_scores'][0][:count],
      served['raw_detection_scores'][0][indices[:count].astype(int)],
      atol=TOLERANCE, rtol=0)


def test_detect_runs_the_export(trained, served, tmp_path):
  exporter_main_v2.check_detect_runs_the_export(trained['export'], served,
                                                tmp_path)


def _as_built(names):
  """names in an order the model creates them in, as the export passes them:
  conv1_conv before conv1_bn (original_paths puts the blocks' layers in the
  Keras model's order itself)."""
  return sorted(names, key=lambda name: not name.startswith('conv1_conv/'))


def test_exported_checkpoint_has_the_originals_keys(trained):
  """checkpoint/ckpt-0 keys each of the model's values by the original's
  TF2 object path of its name (original_object_paths), not by name."""
  prefix = tf.train.latest_checkpoint(os.path.join(trained['export'],
                                                   'checkpoint'))
  assert os.path.basename(prefix) == 'ckpt-0'
  exported = {value.keras_name: value.key
              for value in checkpoint_contents.read(prefix)
              if value.key.startswith('model/')}
  trained_names = [
      name for name in tf.train.load_checkpoint(
          trained['checkpoint']).get_variable_to_shape_map()
      if name != 'global_step' and not name.endswith('/Momentum')]
  assert sorted(exported) == sorted(trained_names)
  paths = original_object_paths.original_paths(_as_built(trained_names))
  assert exported == {name: paths[name] + _VALUE_SUFFIX
                      for name in trained_names}


@pytest.mark.parametrize('name', [
    tf2_faster_rcnn.RESNET50, tf2_faster_rcnn.RESNET50 + tf2_faster_rcnn.MASKS])
def test_object_paths_of_the_sample_configs_model_are_the_originals(name):
  """The paths of the sample config's model (ResNet-50's blocks: the
  tiny model's numbering over one block per stage, at full length), and
  of its Mask R-CNN form (the mask head's), are the original's keys of
  its values (its recorded facts). Our names are the facts'
  (tests/test_upstream_tf2_configs.py)."""
  facts = tf2_checkpoints.model_lines(tf2_checkpoints.facts(name))
  names = _as_built([fact.keras_name for fact in facts])
  paths = original_object_paths.original_paths(names)
  assert {fact.keras_name: fact.key for fact in facts} == {
      name: path + _VALUE_SUFFIX for name, path in paths.items()}
  # With use_dropout, the original's box and class heads have a dropout
  # layer between their flatten and dense layers.
  dropout = original_object_paths.original_paths(
      names, second_stage_dropout=True)
  moved = {name: path for name, path in dropout.items()
           if path != paths[name]}
  assert len(moved) == 4 and all(
      path.startswith('model/_mask_rcnn_box_predictor/_') and
      path.replace('_layers/2/', '_layers/1/') == paths[name]
      for name, path in moved.items())
