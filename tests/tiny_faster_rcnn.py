"""A tiny real Faster R-CNN pipeline config (64x64, 8 proposals) for tests.

A backbone trained from scratch for a few steps with frozen batch norm
(the original's setting) has activations of ~1e5, and box codes that large
decode to infinite boxes. write_calibrated_checkpoint writes a stand-in for
a classification checkpoint instead: random weights whose batch norm moving
statistics are those of the layers' own activations, so the network stays
in range, as a pretrained one does.
"""
import os

import tensorflow as tf

from od_estimator.models import faster_rcnn_feature_extractor as base
from od_estimator.models import faster_rcnn_feature_extractor_registry
from tests import tiny_ssd

_BATCH_NORMS = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')

CONFIG = """
model {
  faster_rcnn {
    num_classes: 3
    image_resizer { fixed_shape_resizer { height: 64 width: 64 } }
    feature_extractor {
      type: '%(extractor)s'
      first_stage_features_stride: 16
    }
    first_stage_anchor_generator {
      grid_anchor_generator {
        scales: [0.5, 1.0, 2.0]
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
    first_stage_box_predictor_depth: 32
    first_stage_nms_score_threshold: 0.0
    first_stage_nms_iou_threshold: 0.7
    first_stage_max_proposals: 8
    first_stage_localization_loss_weight: 2.0
    first_stage_objectness_loss_weight: 1.0
    initial_crop_size: 14
    maxpool_kernel_size: 2
    maxpool_stride: 2
    second_stage_batch_size: 8
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
        max_detections_per_class: 10
        max_total_detections: 10
      }
      score_converter: SOFTMAX
    }
    second_stage_localization_loss_weight: 2.0
    second_stage_classification_loss_weight: 1.0
    %(model_fields)s
  }
}
train_config {
  batch_size: %(batch_size)d
  optimizer {
    momentum_optimizer {
      learning_rate { constant_learning_rate { learning_rate: 0.001 } }
      momentum_optimizer_value: 0.9
    }
    use_moving_average: false
  }
  %(train_fields)s
}
train_input_reader {
  tf_record_input_reader { input_path: "%(train)s" }
  label_map_path: "%(label_map)s"
  max_number_of_boxes: 8
}
eval_config { metrics_set: "coco_detection_metrics" num_examples: 4 }
eval_input_reader {
  tf_record_input_reader { input_path: "%(val)s" }
  label_map_path: "%(label_map)s"
  shuffle: false
  num_readers: 1
}
"""


def write_calibrated_checkpoint(directory,
                                extractor='faster_rcnn_resnet50', size=64):
  """Writes a classification-style checkpoint of the extractor's backbone.

  Its batch norm moving means and variances are the batch statistics of
  one random batch (the second stage sees the first stage's map, resized
  to its crop size), so inference-mode batch norm normalizes.

  Returns:
    The checkpoint prefix (names as in a classification checkpoint).
  """
  extractor_class = (
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS[
          extractor])
  with tf.Graph().as_default() as graph:
    feature_extractor = extractor_class(True, 16, batch_norm_trainable=True)
    images = feature_extractor.preprocess(
        tf.random.uniform([2, size, size, 3], 0.0, 255.0, seed=1))
    features, _ = feature_extractor.extract_proposal_features(
        images, scope=base.FIRST_STAGE_SCOPE)
    feature_extractor.extract_box_classifier_features(
        tf.image.resize(features, [7, 7]), scope=base.SECOND_STAGE_SCOPE)
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
    layers = [name[:-len('/moving_mean')] for name in variables
              if name.endswith('/moving_mean')]
    assignments = []
    for op in graph.get_operations():
      if op.type in _BATCH_NORMS:
        # Name scopes may repeat the backbone's name (resnet_v1_50/
        # resnet_v1_50/...): the layer is the longest variable path the op's
        # path ends with, within the same stage.
        path = op.name.rsplit('/', 1)[0]
        stage = path.split('/', 1)[0]
        layer = max((name for name in layers
                     if name.startswith(stage + '/') and
                     path.endswith(name[len(stage):])), key=len)
        assignments += [
            variables[layer + '/moving_mean'].assign(op.outputs[1]),
            variables[layer + '/moving_variance'].assign(op.outputs[2])]
    saver = tf.compat.v1.train.Saver(
        feature_extractor.restore_from_classification_checkpoint_fn(
            base.FIRST_STAGE_SCOPE, base.SECOND_STAGE_SCOPE))
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(assignments)
      return saver.save(session, os.path.join(str(directory), 'backbone',
                                              'model.ckpt'))


def write_config(directory, data_dir, extractor='faster_rcnn_resnet50',
                 model_fields='', batch_size=1, train_fields=''):
  """Writes CONFIG pointed at generated shapes data; returns its path.

  Args:
    directory: where pipeline.config goes.
    data_dir: where the TFRecords and label map go.
    extractor: model.faster_rcnn.feature_extractor.type.
    model_fields: more model.faster_rcnn fields, as text.
    batch_size: train_config.batch_size.
    train_fields: more train_config fields, as text.
  """
  train, val, label_map = tiny_ssd.write_data(data_dir, num_train=4,
                                              num_val=4)
  path = os.path.join(str(directory), 'pipeline.config')
  with open(path, 'w') as f:
    f.write(CONFIG % {'train': train, 'val': val, 'label_map': label_map,
                      'extractor': extractor, 'model_fields': model_fields,
                      'batch_size': batch_size,
                      'train_fields': train_fields})
  return path
