"""Every Mask R-CNN config among the original's samples builds.

Each mask_rcnn_* config builds its model for training and inference
(test_upstream_faster_rcnn_configs), and its second-stage predictor, on
features of its backbone's depth, has the original's mask head variables
under SecondStageBoxPredictor/: unnamed convolutions Conv, Conv_1, ..., the
last with one output per class. One whole training graph (reduced input
size, graph construction only) has the mask loss, the same names and the
zoo model's parameter count. Their input readers do not matter here (three
lack load_instance_masks; validate and the launch say so).
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.predictors.heads import mask_head
from od_estimator.utils import graph_building
from tests import upstream_folder
from tests.test_upstream_faster_rcnn_configs import _model_config
from tests.test_upstream_faster_rcnn_configs import _shrunk
from tests.test_upstream_faster_rcnn_configs import REDUCED_SIZE

# Depth of the second-stage features the mask head sees, per extractor.
_BOX_CLASSIFIER_DEPTH = {
    'faster_rcnn_resnet50': 2048,
    'faster_rcnn_resnet101': 2048,
    'faster_rcnn_inception_v2': 1024,
    'faster_rcnn_inception_resnet_v2': 1536,
}


def _is_mask_rcnn(path):
  model = _model_config(path)
  return (model.WhichOneof('model') == 'faster_rcnn' and
          model.faster_rcnn.second_stage_box_predictor
          .mask_rcnn_box_predictor.predict_instance_masks)


MASK_CONFIGS = [path for path in upstream_folder.paths()
                if _is_mask_rcnn(path)]


def test_the_upstream_folder_has_mask_rcnn_configs(upstream_configs):
  assert len(MASK_CONFIGS) >= 5, upstream_configs


def _expected_mask_head(config, channels):
  """{name: shape} of the original's mask convolutions for the config."""
  predictor = config.second_stage_box_predictor.mask_rcnn_box_predictor
  depth = predictor.mask_prediction_conv_depth or mask_head.mask_conv_depth(
      channels, config.num_classes)
  layers = predictor.mask_prediction_num_conv_layers
  expected = {}
  for index in range(layers):
    name = 'SecondStageBoxPredictor/Conv' + ('_%d' % index if index else '')
    outputs = config.num_classes if index == layers - 1 else depth
    expected[name + '/weights'] = [3, 3, channels if index == 0 else depth,
                                   outputs]
    expected[name + '/biases'] = [outputs]
  return expected


def _mask_variables(shapes):
  return {name: shape for name, shape in shapes.items()
          if name.startswith('SecondStageBoxPredictor/Conv')}


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_mask_rcnn))
def test_mask_rcnn_predictor_has_the_original_mask_head(path):
  """The second-stage predictor on features of the backbone's depth."""
  config = _model_config(path).faster_rcnn
  predictor_config = (
      config.second_stage_box_predictor.mask_rcnn_box_predictor)
  channels = _BOX_CLASSIFIER_DEPTH[config.feature_extractor.type]
  with tf.Graph().as_default(), graph_building.identity_equality():
    predictor = box_predictor_builder.build(
        hyperparams_builder.build, config.second_stage_box_predictor, True,
        config.num_classes)
    features = [tf.zeros([2, 3, 3, channels])]
    for stage in (2, 3):
      outputs = predictor.predict(features, [1], prediction_stage=stage,
                                  scope='SecondStageBoxPredictor')
    shapes = {variable.op.name: variable.shape.as_list()
              for variable in tf.compat.v1.global_variables()}
  assert outputs[box_predictor.MASK_PREDICTIONS].shape.as_list() == [
      2, 1, config.num_classes, predictor_config.mask_height,
      predictor_config.mask_width]
  assert _mask_variables(shapes) == _expected_mask_head(config, channels)


def _zoo_parameter_count(shapes):
  """Parameters as OpenVINO's model card of the zoo model counts them.

  Its converted graph folds each batch norm into one bias per channel and
  holds the second-stage extractor twice (proposals, then the mask branch):
  21.772 M for mask_rcnn_inception_v2_coco (13.307 M, and our Faster R-CNN
  count, for faster_rcnn_inception_v2_coco).
  """
  count = 0
  for name, shape in shapes.items():
    if name.endswith(('/moving_mean', '/moving_variance', '/gamma')) or (
        name == 'global_step'):
      continue
    size = int(np.prod(shape))
    count += size
    if name.startswith('SecondStageFeatureExtractor/'):
      count += size
  return count


def test_mask_rcnn_training_graph(upstream_configs):
  """One whole training graph (the lightest backbone): losses and names."""
  path = next(path for path in MASK_CONFIGS if 'inception_v2' in path)
  model_config = _shrunk(path)
  config = model_config.faster_rcnn
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=True)
    model.provide_groundtruth(
        [tf.constant([[0.2, 0.2, 0.7, 0.7]])],
        [tf.one_hot([0], config.num_classes)],
        groundtruth_masks_list=[tf.ones([1, REDUCED_SIZE, REDUCED_SIZE])])
    preprocessed, true_shapes = model.preprocess(
        tf.zeros([1, REDUCED_SIZE, REDUCED_SIZE, 3]))
    predictions = model.predict(preprocessed, true_shapes)
    losses = model.loss(predictions, true_shapes)
    shapes = {variable.op.name: variable.shape.as_list()
              for variable in tf.compat.v1.global_variables()}
  assert _zoo_parameter_count(shapes) == pytest.approx(21.772e6, abs=500)
  assert sorted(losses) == [
      'Loss/BoxClassifierLoss/classification_loss',
      'Loss/BoxClassifierLoss/localization_loss',
      'Loss/BoxClassifierLoss/mask_loss',
      'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']
  assert predictions['mask_predictions'].shape.as_list() == [
      config.second_stage_batch_size, config.num_classes, 15, 15]
  assert _mask_variables(shapes) == _expected_mask_head(config, 1024)
