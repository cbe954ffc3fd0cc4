"""Every plain Faster R-CNN config among the original's samples builds.

Every config builds its model (the Mask R-CNN and R-FCN ones too). One
config per backbone (extractor type, stride and atrous rate) also builds
its graph at a reduced input size
(graph construction only: the big backbones are slow to build), the
training graph with its losses and the inference graph with its detections
on alternate backbones, and its variables are checked against the
original's names and shapes (NASNet's graph is the slowest to build).
Mask R-CNN has tests/test_upstream_mask_rcnn_configs.py, R-FCN
tests/test_upstream_rfcn_configs.py, Context R-CNN
tests/test_upstream_context_rcnn_configs.py.
"""
import functools
import os

import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.protos import model_pb2
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import nasnet_large
from tests import upstream_folder

REDUCED_SIZE = 64
_MAX_CLASSES_FOR_INFERENCE = 100


@functools.lru_cache(maxsize=None)
def _parsed_model_config(path):
  return config_util.get_configs_from_pipeline_file(path)['model']


def _model_config(path):
  """A copy of the config's model (callers may edit it)."""
  model_config = model_pb2.DetectionModel()
  model_config.CopyFrom(_parsed_model_config(path))
  return model_config


def _is_two_stage(path):
  return _model_config(path).WhichOneof('model') == 'faster_rcnn'


def _is_plain(path):
  """Faster R-CNN without masks, R-FCN or context (their own modules)."""
  return _is_two_stage(path) and not os.path.basename(path).startswith(
      ('mask_rcnn_', 'rfcn_', 'context_rcnn_'))


PLAIN_CONFIGS = [path for path in upstream_folder.paths() if _is_plain(path)]


def _backbone(path):
  config = _model_config(path).faster_rcnn
  return (config.feature_extractor.type,
          config.feature_extractor.first_stage_features_stride,
          config.first_stage_atrous_rate)


# The first config of each backbone, in file name order.
GRAPH_CONFIGS = list({_backbone(path): path
                      for path in reversed(PLAIN_CONFIGS)}.values())[::-1]


def _shrunk(path):
  """The config's model with a small fixed input size."""
  model_config = _model_config(path)
  resizer = model_config.faster_rcnn.image_resizer
  resizer.fixed_shape_resizer.height = REDUCED_SIZE
  resizer.fixed_shape_resizer.width = REDUCED_SIZE
  return model_config


def test_the_upstream_folder_has_faster_rcnn_configs(upstream_configs):
  assert len(PLAIN_CONFIGS) >= 18, upstream_configs
  assert len(GRAPH_CONFIGS) >= 6, GRAPH_CONFIGS


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_two_stage))
@pytest.mark.parametrize('is_training', [True, False])
def test_faster_rcnn_config_builds_its_model(path, is_training):
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(_model_config(path), is_training=is_training)
  assert model.num_classes == _model_config(path).faster_rcnn.num_classes


LOSS_KEYS = ['Loss/BoxClassifierLoss/classification_loss',
             'Loss/BoxClassifierLoss/localization_loss',
             'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']


def build_reduced_graph(path, is_training, side_input_features=None):
  """Builds the config's model graph on one REDUCED_SIZE image.

  Args:
    path: the config.
    is_training: build the training graph (losses) or inference graph.
    side_input_features: fn() -> features dict the model's side inputs
      come from (get_side_inputs), built in the graph.

  Returns:
    (predictions, outputs, {variable name: shape}): outputs are the losses
    (with one groundtruth box) in training, the detections otherwise.
  """
  model_config = _shrunk(path)
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=is_training)
    if is_training:
      model.provide_groundtruth(
          [tf.constant([[0.2, 0.2, 0.7, 0.7]])],
          [tf.one_hot([0], model_config.faster_rcnn.num_classes)])
    preprocessed, true_shapes = model.preprocess(
        tf.zeros([1, REDUCED_SIZE, REDUCED_SIZE, 3]))
    side_inputs = model.get_side_inputs(
        side_input_features() if side_input_features else {})
    predictions = model.predict(preprocessed, true_shapes, **side_inputs)
    if is_training:
      outputs = model.loss(predictions, true_shapes)
    else:
      outputs = model.postprocess(predictions, true_shapes)
    shapes = {variable.op.name: variable.shape.as_list()
              for variable in tf.compat.v1.global_variables()}
  return predictions, outputs, shapes


def checked_num_proposals(config, outputs, is_training):
  """Checks build_reduced_graph's outputs: the losses or detections.

  Returns:
    The proposals per image the second stage saw.
  """
  if is_training:
    assert sorted(outputs) == LOSS_KEYS
    return config.second_stage_batch_size
  assert outputs['detection_boxes'].shape.as_list()[-1] == 4
  return config.first_stage_max_proposals


@pytest.mark.parametrize('path', upstream_folder.params(
    keep=lambda path: path in GRAPH_CONFIGS))
def test_faster_rcnn_graph_has_the_original_variables(path):
  config = _model_config(path).faster_rcnn
  # Inference graphs alternate with training graphs, except for configs of
  # hundreds of classes: batch NMS builds one suppression per class.
  is_training = (GRAPH_CONFIGS.index(path) % 2 == 0 or
                 config.num_classes > _MAX_CLASSES_FOR_INFERENCE)
  _, outputs, shapes = build_reduced_graph(path, is_training)
  if is_training:
    assert sorted(outputs) == LOSS_KEYS
  else:
    assert outputs['detection_boxes'].shape.as_list()[-1] == 4

  num_anchors = (len(config.first_stage_anchor_generator
                     .grid_anchor_generator.scales) *
                 len(config.first_stage_anchor_generator
                     .grid_anchor_generator.aspect_ratios))
  rpn_kernel = config.first_stage_box_predictor_kernel_size
  assert shapes['Conv/weights'][:2] == [rpn_kernel, rpn_kernel]
  assert shapes['Conv/weights'][3] == config.first_stage_box_predictor_depth
  assert shapes['FirstStageBoxPredictor/BoxEncodingPredictor/weights'] == [
      1, 1, config.first_stage_box_predictor_depth, num_anchors * 4]
  assert shapes['FirstStageBoxPredictor/ClassPredictor/weights'] == [
      1, 1, config.first_stage_box_predictor_depth, num_anchors * 2]
  box_weights = shapes['SecondStageBoxPredictor/BoxEncodingPredictor/weights']
  class_weights = shapes['SecondStageBoxPredictor/ClassPredictor/weights']
  assert box_weights[1] == config.num_classes * 4
  assert class_weights[1] == config.num_classes + 1
  assert box_weights[0] == class_weights[0]
  if config.feature_extractor.type.startswith('faster_rcnn_resnet'):
    assert class_weights[0] == 2048
    # The units of each depth's block3 (3, 4 and 3 in the other blocks).
    depth = config.feature_extractor.type[len('faster_rcnn_resnet'):]
    units = {name.split('/unit_')[1].split('/')[0] for name in shapes
             if '/resnet_v1_%s/block3/unit_' % depth in name}
    assert len(units) == {'50': 6, '101': 23, '152': 36}[depth], units
  if config.feature_extractor.type == 'faster_rcnn_nas':
    # Six states of 672 filters (cell_17), as NASNet-A large's final layer.
    assert class_weights[0] == 4032
    for name, shape in nasnet_large.CELL_VARIABLES.items():
      stage = ('SecondStageFeatureExtractor' if name.startswith(
          ('reduction_cell_1/', 'cell_12/', 'cell_13/', 'cell_14/',
           'cell_15/', 'cell_16/', 'cell_17/')) else
               'FirstStageFeatureExtractor')
      assert shapes.get('%s/%s' % (stage, name)) == shape, name
  assert any(name.startswith('FirstStageFeatureExtractor/')
             for name in shapes)
  assert any(name.startswith('SecondStageFeatureExtractor/')
             for name in shapes)
