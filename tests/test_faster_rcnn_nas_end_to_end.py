"""A tiny real NASNet Faster R-CNN end to end: model_main trains and
evaluates it, export_inference_graph exports it, and the export's
detections equal Estimator.predict's.

The config is the original's faster_rcnn_nas_coco.config made tiny (64x64
images, 8 proposals, 3 steps; its 17x17 crops, anchors, losses and train
recipe kept). No config field sizes NASNet (the original's has none
either), so this module swaps the registry's `faster_rcnn_nas` class for a
reduced NASNet (SMALL: 5 cells of 8 filters, still split before the
second reduction cell) in this process only, and runs the commands here:
model_main and export_inference_graph through their entry functions
(tests/command_modules.py), as `python -m` would. The full-size graph is
built by tests/test_upstream_faster_rcnn_configs.py.
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
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_faster_rcnn
from tests import tiny_ssd
from tests import upstream_folder
from tests.command_modules import run_command

# The fewest cells that split as NASNet-A large does (two normal cells
# between the reductions, whose outputs the RPN reads): stem, cell_0,
# reduction_cell_0, cell_1, cell_2 | reduction_cell_1, cell_3, cell_4.
SMALL = dataclasses.replace(nasnet.LARGE, num_cells=5, num_conv_filters=8)
STEPS = 3

# faster_rcnn_nas_coco.config with tiny sizes: 64x64 images, 8 proposals
# and detections, 3 steps, shapes data; a COCO metrics set beside its own.
CONFIG = """
model {
  faster_rcnn {
    num_classes: 3
    image_resizer { fixed_shape_resizer { height: 64 width: 64 } }
    feature_extractor { type: 'faster_rcnn_nas' }
    first_stage_anchor_generator {
      grid_anchor_generator {
        scales: [0.25, 0.5, 1.0, 2.0]
        aspect_ratios: [0.5, 1.0, 2.0]
        height: 32
        width: 32
        height_stride: 16
        width_stride: 16
      }
    }
    first_stage_box_predictor_conv_hyperparams {
      op: CONV
      regularizer { l2_regularizer { weight: 0.0 } }
      initializer { truncated_normal_initializer { stddev: 0.01 } }
    }
    first_stage_nms_score_threshold: 0.0
    first_stage_nms_iou_threshold: 0.7
    first_stage_max_proposals: 8
    first_stage_localization_loss_weight: 2.0
    first_stage_objectness_loss_weight: 1.0
    second_stage_batch_size: 8
    initial_crop_size: 17
    maxpool_kernel_size: 1
    maxpool_stride: 1
    second_stage_box_predictor {
      mask_rcnn_box_predictor {
        use_dropout: false
        dropout_keep_probability: 1.0
        fc_hyperparams {
          op: FC
          regularizer { l2_regularizer { weight: 0.0 } }
          initializer {
            variance_scaling_initializer {
              factor: 1.0 uniform: true mode: FAN_AVG
            }
          }
        }
      }
    }
    second_stage_post_processing {
      batch_non_max_suppression {
        score_threshold: 0.0
        iou_threshold: 0.6
        max_detections_per_class: 8
        max_total_detections: 8
      }
      score_converter: SOFTMAX
    }
    second_stage_localization_loss_weight: 2.0
    second_stage_classification_loss_weight: 1.0
  }
}
train_config {
  batch_size: 1
  optimizer {
    momentum_optimizer {
      learning_rate {
        manual_step_learning_rate {
          initial_learning_rate: 0.0003
          schedule { step: 2 learning_rate: 0.00003 }
        }
      }
      momentum_optimizer_value: 0.9
    }
    use_moving_average: false
  }
  gradient_clipping_by_norm: 10.0
  num_steps: %(steps)d
  fine_tune_checkpoint: "%(checkpoint)s"
  fine_tune_checkpoint_type: "classification"
  data_augmentation_options { random_horizontal_flip {} }
}
train_input_reader {
  tf_record_input_reader { input_path: "%(train)s" }
  label_map_path: "%(label_map)s"
}
eval_config {
  metrics_set: "coco_detection_metrics"
  metrics_set: "pascal_voc_metrics"
}
eval_input_reader {
  tf_record_input_reader { input_path: "%(val)s" }
  label_map_path: "%(label_map)s"
  shuffle: false
  num_readers: 1
  num_epochs: 1
}
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
  """Shapes records, a backbone checkpoint and CONFIG on them; its path.

  The backbone stands in for the original's ImageNet NASNet checkpoint (its
  variables' moving averages): random weights whose batch norm statistics
  are those of the training images, so the briefly trained model's
  inference-mode batch norm keeps its boxes finite.
  """
  train, val, label_map = tiny_ssd.write_data(root / 'data', num_train=2,
                                              num_val=1)
  checkpoint = tiny_faster_rcnn.write_calibrated_checkpoint(
      root, extractor='faster_rcnn_nas',
      images=_record_images(train).astype(np.float32), crop_size=17)
  path = str(root / 'pipeline.config')
  with open(path, 'w') as f:
    f.write(CONFIG % {'steps': STEPS, 'train': train, 'val': val,
                      'label_map': label_map, 'checkpoint': checkpoint})
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
  for tag in ('Loss/RPNLoss/localization_loss',
              'Loss/RPNLoss/objectness_loss',
              'Loss/BoxClassifierLoss/localization_loss',
              'Loss/BoxClassifierLoss/classification_loss',
              'Loss/total_loss'):
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
  image = _record_images(str(trained['root'] / 'data' /
                            'shapes_val.record-*'))
  served = saved_models.serve(os.path.join(output, 'saved_model'), image)
  predicted = end_to_end.predict(trained, image)
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key],
                               atol=end_to_end.TOLERANCE, err_msg=key)
  assert (served['num_detections'] > 0).all()
  assert np.isfinite(served['detection_boxes']).all()


def test_validate_accepts_the_original_config(upstream_configs):
  del upstream_configs  # Only its skip.
  path = upstream_folder.config_path('faster_rcnn_nas_coco')
  report = config_check.validate(path)
  assert report.errors, 'its PATH_TO_BE_CONFIGURED placeholders'
  unexpected = [str(error) for error in report.errors
                if 'PATH_TO_BE_CONFIGURED' not in str(error)]
  assert not unexpected
