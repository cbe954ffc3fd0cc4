"""A tiny real NASNet Faster R-CNN end to end: model_main trains and
evaluates it, export_inference_graph exports it, and the export's
detections equal the Estimator's (its PREDICT graph, as model_main's Servo
export of the same checkpoint serves it).

The config is the original's faster_rcnn_nas_coco.config made tiny: the
tiny Faster R-CNN's (64x64 images, 8 proposals) with the NAS config's
differences (NAS_EDITS), trained STEPS steps. No config field sizes NASNet (the original's has none
either), so this module swaps the registry's `faster_rcnn_nas` class for a
reduced NASNet (SMALL: 5 cells of 8 filters, still split before the
second reduction cell) in this process only, and runs the commands here:
model_main and export_inference_graph through their entry functions
(tests/command_modules.py), as `python -m` would. Training starts from a
stand-in for the original's ImageNet NASNet checkpoint (moving averages
only), read through the extractor's classification restore map. The
full-size graph is built by tests/test_upstream_faster_rcnn_configs.py.

Its wall time is that of building NASNet's graphs (~15k ops to train,
whatever the filters): the backbone's, model_main's train, eval and Servo
export and the export's; ~2 minutes on 2 idle cores.
"""
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.checks import config_check
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_nas_feature_extractor as nas
from od_estimator.nets import nasnet
from tests import event_tags
from tests import saved_models
from tests import servo_exports
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_faster_rcnn
from tests import upstream_folder
from tests.command_modules import run_command

# The fewest cells that split as NASNet-A large does (two normal cells
# between the reductions, whose outputs the RPN reads): stem, cell_0,
# reduction_cell_0, cell_1, cell_2 | reduction_cell_1, cell_3, cell_4.
SMALL = dataclasses.replace(nasnet.LARGE, num_cells=5, num_conv_filters=8)
STEPS = 2

# tests/tiny_faster_rcnn.py's config (64x64 images, 8 proposals) where
# faster_rcnn_nas_coco.config differs from it besides the extractor: anchor
# scales, 17x17 crops without max pooling, its train recipe (gradient
# clipping, flips, learning rate schedule, NASNet's classification
# checkpoint) and its metrics set beside COCO's.
NAS_EDITS = (
    ('scales: [0.5, 1.0, 2.0]', 'scales: [0.25, 0.5, 1.0, 2.0]'),
    ('initial_crop_size: 14\n    maxpool_kernel_size: 2\n'
     '    maxpool_stride: 2',
     'initial_crop_size: 17\n    maxpool_kernel_size: 1\n'
     '    maxpool_stride: 1'),
    ('learning_rate { constant_learning_rate { learning_rate: 0.001 } }',
     'learning_rate { manual_step_learning_rate {\n'
     '        initial_learning_rate: 0.0003\n'
     '        schedule { step: 1 learning_rate: 0.00003 } } }'),
    ('metrics_set: "coco_detection_metrics"',
     'metrics_set: "coco_detection_metrics" '
     'metrics_set: "pascal_voc_metrics"'),
)
TRAIN_FIELDS = """
  gradient_clipping_by_norm: 10.0
  num_steps: %d
  data_augmentation_options { random_horizontal_flip {} }
  fine_tune_checkpoint: "%s"
  fine_tune_checkpoint_type: "classification"
"""


class _SmallNASFeatureExtractor(nas.FasterRCNNNASFeatureExtractor):
  """faster_rcnn_nas on the SMALL NASNet."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, config=SMALL, **kwargs)


@pytest.fixture(scope='module')
def small_nasnet():
  """`faster_rcnn_nas` builds the SMALL NASNet while the module runs."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'faster_rcnn_nas', _SmallNASFeatureExtractor)
    yield


def _record_images(pattern):
  """The images of the records matching pattern, [N, 64, 64, 3] uint8."""
  images = []
  for record in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern)):
    encoded = tf.train.Example.FromString(record.numpy()).features.feature[
        'image/encoded'].bytes_list.value[0]
    images.append(tf.io.decode_image(encoded).numpy())
  return np.stack(images)


def _write_config(root):
  """Shapes records, a backbone checkpoint and a NAS config on them; its path.

  The backbone stands in for the original's ImageNet NASNet checkpoint (its
  variables' moving averages): random weights whose batch norm statistics
  are those of the training images, so the briefly trained model's
  inference-mode batch norm keeps its boxes finite.
  """
  checkpoint = str(root / 'backbone' / 'model.ckpt')
  path = tiny_faster_rcnn.write_config(
      root, root / 'data', extractor='faster_rcnn_nas',
      train_fields=TRAIN_FIELDS % (STEPS, checkpoint))
  with open(path) as f:
    text = f.read()
  with open(path, 'w') as f:
    f.write(tiny_faster_rcnn.apply_edits(text, NAS_EDITS))
  written = tiny_faster_rcnn.write_calibrated_checkpoint(
      root, extractor='faster_rcnn_nas', crop_size=17, images=_record_images(
          str(root / 'data' / 'shapes_train.record-*')).astype(np.float32))
  assert written == checkpoint
  return path


@pytest.fixture(scope='module')
def trained(tmp_path_factory, small_nasnet):
  """model_main's run (train STEPS steps, evaluate once); its paths."""
  del small_nasnet  # Only its patch.
  root = tmp_path_factory.mktemp('nas')
  model_dir = str(root / 'model')
  result = run_command('model_main', [
      '--pipeline_config_path=' + _write_config(root),
      '--model_dir=' + model_dir, '--random_seed=1'])
  assert result.returncode == 0, result.stderr[-3000:]
  return {'root': root, 'model_dir': model_dir,
          'config': os.path.join(model_dir, 'pipeline.config'),
          'checkpoint': tf.train.latest_checkpoint(model_dir)}


def test_model_main_trains_and_evaluates_with_coco_metrics(trained):
  assert trained['checkpoint'].endswith('-%d' % STEPS)
  reader = tf.train.load_checkpoint(trained['checkpoint'])
  names = reader.get_variable_to_shape_map()
  # The reduced NASNet under the original's scopes, both stages.
  assert 'FirstStageFeatureExtractor/cell_2/1x1/weights' in names
  assert 'SecondStageFeatureExtractor/reduction_cell_1/1x1/weights' in names
  assert 'SecondStageFeatureExtractor/cell_4/1x1/weights' in names
  # model_main started from the backbone's moving averages.
  backbone = tf.train.load_checkpoint(
      str(trained['root'] / 'backbone' / 'model.ckpt'))
  initial = tf.train.load_checkpoint(
      os.path.join(trained['model_dir'], 'model.ckpt-0'))
  for name in ('cell_2/comb_iter_0/left/bn_sep_5x5_2/moving_mean',
               'reduction_cell_1/1x1/weights'):
    stage = ('FirstStageFeatureExtractor/' if name.startswith('cell_2')
             else 'SecondStageFeatureExtractor/')
    np.testing.assert_array_equal(
        initial.get_tensor(stage + name),
        backbone.get_tensor(name + '/ExponentialMovingAverage'))
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in end_to_end.TRAIN_LOSS_TAGS:
    assert tag in train_tags, (tag, sorted(train_tags))
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionBoxes_Precision/mAP',
              'DetectionBoxes_Precision/mAP@.50IOU',
              'DetectionBoxes_Recall/AR@100',
              'PascalBoxes_Precision/mAP@0.5IOU', 'Loss/total_loss'):
    assert tag in metrics, (tag, sorted(metrics))
    assert np.isfinite(metrics[tag]), (tag, metrics[tag])


def test_export_detections_equal_estimator_predict(trained, tmp_path):
  output = str(tmp_path / 'export')
  result = run_command('export_inference_graph', [
      '--input_type=image_tensor',
      '--pipeline_config_path=' + trained['config'],
      '--trained_checkpoint_prefix=' + trained['checkpoint'],
      '--output_directory=' + output])
  assert result.returncode == 0, result.stderr[-3000:]
  # One image, as the other families compare (see end_to_end.overfit_image).
  image = _record_images(str(trained['root'] / 'data' /
                            'shapes_val.record-*'))[:1]
  served = saved_models.serve(os.path.join(output, 'saved_model'), image)
  # The Estimator's own PREDICT graph on the last checkpoint.
  predicted = servo_exports.predictions(trained['model_dir'], image[0],
                                        STEPS)
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key],
                               atol=end_to_end.TOLERANCE, err_msg=key)
  assert (served['num_detections'] > 0).all()
  assert np.isfinite(served['detection_boxes']).all()


def test_validate_accepts_the_original_config(upstream_configs, monkeypatch):
  del upstream_configs  # Only its skip.
  # The model a user's validate builds: NASNet-A large's extractor.
  monkeypatch.setitem(
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
      'faster_rcnn_nas', nas.FasterRCNNNASFeatureExtractor)
  path = upstream_folder.config_path('faster_rcnn_nas_coco')
  report = config_check.validate(path)
  assert report.errors, 'its PATH_TO_BE_CONFIGURED placeholders'
  unexpected = [str(error) for error in report.errors
                if 'PATH_TO_BE_CONFIGURED' not in str(error)]
  assert not unexpected
