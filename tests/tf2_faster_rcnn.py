"""The original's TF2 Faster R-CNN sample configs, built small once per process.

The faster_rcnn_resnet{50,101,152}_v1_* configs of the TF2 folder with a
64x64 fixed_shape_resizer (variable shapes do not depend on the image size;
the resizer is all that a 1024x1024 config changes from its 640x640 one, so
the two share a build), as inference graphs that predicted once on a
random image (they have the training graph's variables and build in about
60% of its time). `MASKS` adds the
Mask R-CNN head the facts of `<config>.mask` were recorded with
(tests/data/tf2_checkpoint_keys/README.md). Shared by the TF2 config,
checkpoint and training tests.
"""
import collections
import functools

import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.protos import hyperparams_pb2
from od_estimator.protos import model_pb2
from od_estimator.utils import graph_building
from tests import upstream_folder

SIZE = 64
RESNET50 = 'faster_rcnn_resnet50_v1_640x640_coco17_tpu-8'
# Suffix of the facts of a config with the recorded mask head.
MASKS = '.mask'

Built = collections.namedtuple('Built', ['graph', 'model', 'variables'])


def tiny_c4_text(faster_rcnn_fields, train_config):
  """Pipeline text over the RESNET50 sample config making its model tiny
  (64x64, 3 classes, 8 proposals, 5 detections; its static-shape options
  kept), with more of its faster_rcnn fields and its train_config's."""
  return """
model { faster_rcnn {
  num_classes: 3
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: 64 max_dimension: 64 } }
  first_stage_max_proposals: 8
  second_stage_batch_size: 4
  second_stage_post_processing { batch_non_max_suppression {
    max_detections_per_class: 5 max_total_detections: 5 } }
""" + faster_rcnn_fields + """
} }
train_config { """ + train_config + """ }
"""


def facts_name(name):
  """The recorded facts of config `name` (1024x1024 ones are 640x640's)."""
  return name.replace('_1024x1024_', '_640x640_')


def model_config(name, size=SIZE):
  """The model config of `name` (optionally + MASKS) at size x size."""
  config_name, masks, _ = name.partition(MASKS)
  config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(config_name, tf2=True))['model']
  faster_rcnn = config.faster_rcnn
  faster_rcnn.image_resizer.fixed_shape_resizer.height = size
  faster_rcnn.image_resizer.fixed_shape_resizer.width = size
  if masks:
    faster_rcnn.number_of_stages = 3
    predictor = faster_rcnn.second_stage_box_predictor.mask_rcnn_box_predictor
    predictor.predict_instance_masks = True
    predictor.mask_height = predictor.mask_width = 14
    predictor.mask_prediction_num_conv_layers = 2
    predictor.conv_hyperparams.CopyFrom(predictor.fc_hyperparams)
    predictor.conv_hyperparams.op = hyperparams_pb2.Hyperparams.CONV
  return config


def provide_groundtruth(model, size=SIZE):
  """One box of class 3 (and its mask for Mask R-CNN)."""
  masks = None
  if model.mask_branch is not None:
    masks = [tf.ones([1, size, size])]
  model.provide_groundtruth(
      groundtruth_boxes_list=[tf.constant([[0.1, 0.1, 0.6, 0.5]])],
      groundtruth_classes_list=[tf.one_hot([3], model.num_classes)],
      groundtruth_masks_list=masks)


def built(name):
  """Built of config `name` (optionally + MASKS)."""
  return _build(model_config(name).SerializeToString(deterministic=True))


@functools.lru_cache(maxsize=None)
def _build(serialized_model_config):
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    model = model_builder.build(
        model_pb2.DetectionModel.FromString(serialized_model_config),
        is_training=False)
    model.predict(*model.preprocess(
        tf.random.uniform([1, SIZE, SIZE, 3], 0, 255)))
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
  return Built(graph, model, variables)
