"""A tiny real Faster R-CNN pipeline config (64x64, 8 proposals) for tests.

A backbone trained from scratch for a few steps with frozen batch norm
(the original's setting) has activations of ~1e5, and box codes that large
decode to infinite boxes. write_calibrated_checkpoint writes a stand-in for
a classification checkpoint instead: random weights whose batch norm moving
statistics are those of the layers' own activations, so the network stays
in range, as a pretrained one does.

write_overfit_config writes a set and a recipe (heads trained on such a
checkpoint's fixed features) that model_main overfits in a few dozen steps.
"""
import os

import numpy as np
from PIL import Image
from PIL import ImageDraw
import tensorflow as tf

from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.models import faster_rcnn_feature_extractor as base
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.utils import graph_building
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


def batch_norm_layer(op, layers):
  """The variable path (one of `layers`) of a batch norm op's layer."""
  # Its offset (beta), read from the layer's variable.
  offset = op.inputs[2].op
  while offset.type in ('Identity', 'ReadVariableOp') and offset.inputs:
    offset = offset.inputs[0].op
  if offset.name.endswith('/beta') and offset.name[:-5] in layers:
    return offset.name[:-5]
  # Name scopes may repeat the backbone's name (resnet_v1_50/
  # resnet_v1_50/...): the layer is the longest variable path the op's
  # path ends with, within the same stage (Keras-named extractors'
  # variables have no stage: conv1_bn/...).
  path = op.name.rsplit('/', 1)[0]
  stage = path.split('/', 1)[0]
  return max((name for name in layers
              if name.startswith(stage + '/') and
              path.endswith(name[len(stage):]) or
              path.endswith('/' + name)), key=len)


def calibrating_assignments(graph):
  """Ops setting each batch norm's moving mean and variance of the graph to
  the statistics of the batch it normalizes (the graph's batch norms built
  in training mode, on the batch to calibrate on)."""
  return [assignment for op, variables in batch_norms(graph)
          for assignment in (variables[0].assign(op.outputs[1]),
                             variables[1].assign(op.outputs[2]))]


def batch_norms(graph):
  """[(batch norm op, (its moving mean, its moving variance))] of the
  graph."""
  variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
  layers = [name[:-len('/moving_mean')] for name in variables
            if name.endswith('/moving_mean')]
  found = []
  for op in graph.get_operations():
    if op.type in _BATCH_NORMS:
      layer = batch_norm_layer(op, layers)
      found.append((op, (variables[layer + '/moving_mean'],
                         variables[layer + '/moving_variance'])))
  return found


def write_calibrated_checkpoint(directory,
                                extractor='faster_rcnn_resnet50', size=64,
                                images=None, crop_size=14):
  """Writes a classification-style checkpoint of the extractor's backbone.

  Its batch norm moving means and variances are the batch statistics of
  one batch (the second stage sees the first stage's map resized to its
  crop size and max-pooled), so inference-mode batch norm normalizes.

  Args:
    directory: the checkpoint goes to directory/backbone/model.ckpt.
    extractor: a Faster R-CNN feature extractor type.
    size: height and width of the random batch.
    images: optional [N, height, width, 3] float images to calibrate on
      instead of random ones (a model fine-tuned on them keeps activations
      of order one, as a pretrained network on its own data).
    crop_size: the model's initial_crop_size (maxpool kernel and stride 2).

  Returns:
    The checkpoint prefix (names as in a classification checkpoint).
  """
  extractor_class = (
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS[
          extractor])
  with tf.Graph().as_default() as graph, graph_building.identity_equality():
    tf.compat.v1.set_random_seed(1)
    feature_extractor = extractor_class(True, 16, batch_norm_trainable=True)
    images = feature_extractor.preprocess(
        tf.random.uniform([2, size, size, 3], 0.0, 255.0, seed=1)
        if images is None else tf.constant(images, tf.float32))
    features, _ = feature_extractor.extract_proposal_features(
        images, scope=base.FIRST_STAGE_SCOPE)
    # As the second stage sees it: a crop, 2x2 max-pooled.
    feature_extractor.extract_box_classifier_features(
        tf.nn.max_pool2d(tf.image.resize(features, [crop_size, crop_size]),
                         2, 2, 'VALID'), scope=base.SECOND_STAGE_SCOPE)
    assignments = calibrating_assignments(graph)
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


# The overfitting recipe (write_overfit_config): CONFIG's model with one
# anchor shape per scale of the shapes, a first-stage minibatch small enough
# for an image's few positive anchors to weigh, a wider RPN conv (the
# objectness predictor learns ~16x faster on 512 inputs than on 32) and
# small crops. Adam trains the heads only (the RPN conv and both box
# predictors, "Predictor" covering a mask head's SecondStageBoxPredictor/
# Conv* too) on the calibrated backbone's fixed features.
OVERFIT_EDITS = (
    ('scales: [0.5, 1.0, 2.0]\n        aspect_ratios: [0.5, 1.0, 2.0]',
     'scales: [0.75, 1.0, 1.25]\n        aspect_ratios: [1.0]'),
    ('first_stage_box_predictor_depth: 32',
     'first_stage_box_predictor_depth: 512'),
    ('initial_crop_size: 14', 'initial_crop_size: 6'),
    ('momentum_optimizer {\n'
     '      learning_rate { constant_learning_rate { learning_rate: 0.001 } }\n'
     '      momentum_optimizer_value: 0.9\n    }',
     'adam_optimizer {\n'
     '      learning_rate { constant_learning_rate { learning_rate: 0.001 } }'
     '\n    }'),
    ('num_examples: 4', 'num_examples: 2'),
)


# The overfitting set: (class id, top, left) of a 32-pixel shape per 64x64
# image, each on an anchor (anchor centres lie every 16 pixels from 0): a
# red circle and a blue square on dark noise.
OVERFIT_SHAPES = ((1, 16, 32), (2, 16, 0))
_OVERFIT_COLOURS = {1: (220, 60, 40), 2: (40, 90, 230)}
OVERFIT_SIDE = 32


def overfit_frame(label, top, left, size, rng):
  """(uint8 image, [1, 4] box, [1, size, size] uint8 mask) of one shape on
  noise; the mask is the shape's own pixels (a disc for the circle)."""
  image = Image.fromarray(
      rng.normal(40, 12, size=(size, size, 3)).clip(0, 255).astype(np.uint8))
  mask = Image.new('L', (size, size))
  corners = (left, top, left + OVERFIT_SIDE - 1, top + OVERFIT_SIDE - 1)
  for canvas, fill in ((image, _OVERFIT_COLOURS[label]), (mask, 1)):
    draw = ImageDraw.Draw(canvas)
    (draw.ellipse if label == 1 else draw.rectangle)(corners, fill=fill)
  box = np.array([[top, left, top + OVERFIT_SIDE, left + OVERFIT_SIDE]],
                 np.float32) / size
  return np.array(image), box, np.array(mask)[np.newaxis]


def write_overfit_examples(data_dir, frames):
  """Writes the frames as tf.Examples into data_dir/shapes.record.

  Args:
    data_dir: an existing folder.
    frames: (image, box, label, mask) per image, as overfit_frame's.

  Returns:
    The record's path.
  """
  record = os.path.join(str(data_dir), 'shapes.record')
  with tf.io.TFRecordWriter(record) as writer:
    for index, (image, box, label, mask) in enumerate(frames):
      writer.write(create_synthetic_tf_record.make_example(
          image, box, np.array([label]), mask, index).SerializeToString())
  return record


def apply_edits(text, edits):
  """text with each (old, new) replaced; old must occur exactly once."""
  for old, new in edits:
    if text.count(old) != 1:
      raise ValueError('tiny_faster_rcnn.CONFIG changed: %r' % old)
    text = text.replace(old, new)
  return text


def overfit_frames(size=64):
  """[(uint8 image, box, label, mask)] of OVERFIT_SHAPES, the same each call."""
  rng = np.random.default_rng(3)
  return [(image, box, label, mask) for label, top, left in OVERFIT_SHAPES
          for image, box, mask in [overfit_frame(label, top, left, size, rng)]]


def write_overfit_backbone(directory, size=64,
                           extractor='faster_rcnn_resnet50'):
  """write_calibrated_checkpoint of the extractor on overfit_frames (the
  recipe's crop); the checkpoint prefix. Every family's overfit run of that
  extractor can start from one."""
  return write_calibrated_checkpoint(
      directory, extractor, size=size, crop_size=6, images=np.stack(
          [frame[0] for frame in overfit_frames(size)]).astype(np.float32))


# What the recipe trains (update_trainable_variables): the heads.
OVERFIT_TRAINABLE = ('Predictor', '^Conv/')


def write_overfit_config(directory, data_dir, size=64, model_fields='',
                         edits=(), write_records=write_overfit_examples,
                         backbone=None, fine_tune=True,
                         trainable=OVERFIT_TRAINABLE,
                         extractor='faster_rcnn_resnet50'):
  """A small set a Faster R-CNN overfits in a few dozen steps.

  The OVERFIT_SHAPES images in one TFRecord that both training and
  evaluation read; the checkpoint is calibrated on those images, so frozen
  batch norm normalizes them in training and evaluation alike.

  Args:
    directory: where pipeline.config and the checkpoint go.
    data_dir: where the TFRecord and label map go.
    size: height and width of the images.
    model_fields: more model.faster_rcnn fields, as text.
    edits: more (old, new) replacements of the config's text, after
      OVERFIT_EDITS (tiny_mask_rcnn.write_overfit_config adds the masks).
    write_records: function of (data_dir, [(image, box, label, mask)]) that
      writes the images' records and returns their path
      (write_overfit_examples: tf.Examples).
    backbone: write_overfit_backbone's checkpoint prefix (for `size`) to
      start from; None writes one into `directory`.
    fine_tune: start from that checkpoint (else from scratch: a model of
      another backbone, tests/tiny_faster_rcnn_fpn.py).
    trainable: the update_trainable_variables patterns.
    extractor: model.faster_rcnn.feature_extractor.type (a slim ResNet v1's
      when fine_tune).

  Returns:
    The pipeline.config path.
  """
  tf.io.gfile.makedirs(str(data_dir))
  label_map = os.path.join(str(data_dir), 'label_map.pbtxt')
  with open(label_map, 'w') as f:
    f.write(create_synthetic_tf_record.label_map_text())
  record = write_records(data_dir, overfit_frames(size))
  train_fields = ' '.join('update_trainable_variables: "%s"' % pattern
                          for pattern in trainable)
  if fine_tune:
    train_fields += (
        ' fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: '
        '"classification"' % (backbone or
                              write_overfit_backbone(directory, size,
                                                     extractor)))
  text = CONFIG % {
      'train': record, 'val': record, 'label_map': label_map,
      'extractor': extractor,
      'model_fields': 'first_stage_minibatch_size: 16 ' + model_fields,
      'batch_size': len(OVERFIT_SHAPES), 'train_fields': train_fields}
  text = apply_edits(text, OVERFIT_EDITS + tuple(edits))
  path = os.path.join(str(directory), 'pipeline.config')
  with open(path, 'w') as f:
    f.write(text)
  return path
