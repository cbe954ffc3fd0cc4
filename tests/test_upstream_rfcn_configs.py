"""The original's R-FCN sample configs build, with its variable names.

Each rfcn_* config builds its model for training and inference
(test_upstream_faster_rcnn_configs). Here each builds a whole graph at a
reduced input size (graph construction only), the COCO one for training
with the Faster R-CNN losses and the Pets one for inference with its
detections: the second stage of ResNet-101 (block4) runs once on the whole
first-stage feature map, and the position-sensitive predictor's variables
are those of the original, under SecondStageBoxPredictor/.
"""
import os

import pytest

from tests import test_upstream_faster_rcnn_configs as frcnn_configs
from tests import upstream_folder

REDUCED_SIZE = frcnn_configs.REDUCED_SIZE


def _is_rfcn(path):
  return os.path.basename(path).startswith('rfcn_')


RFCN_CONFIGS = [path for path in upstream_folder.paths() if _is_rfcn(path)]


def test_the_upstream_folder_has_rfcn_configs(upstream_configs):
  assert len(RFCN_CONFIGS) == 2, upstream_configs


def _expected_predictor(config):
  """{name: shape} of the original's R-FCN second-stage predictor."""
  predictor = config.second_stage_box_predictor.rfcn_box_predictor
  bins = predictor.num_spatial_bins_height * predictor.num_spatial_bins_width
  outputs = {'reduce_depth': predictor.depth,
             'refined_locations': (bins * config.num_classes *
                                   predictor.box_code_size),
             'class_predictions': bins * (config.num_classes + 1)}
  inputs = {'reduce_depth': 2048, 'refined_locations': predictor.depth,
            'class_predictions': predictor.depth}
  expected = {}
  for name, depth in outputs.items():
    prefix = 'SecondStageBoxPredictor/' + name
    expected[prefix + '/weights'] = [1, 1, inputs[name], depth]
    expected[prefix + '/biases'] = [depth]
  return expected


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_rfcn))
def test_rfcn_graph_has_the_original_variables(path):
  is_training = 'coco' in os.path.basename(path)
  config = frcnn_configs._model_config(path).faster_rcnn
  predictions, outputs, shapes = frcnn_configs.build_reduced_graph(
      path, is_training)
  num_proposals = frcnn_configs.checked_num_proposals(config, outputs,
                                                     is_training)
  # Whole-image second-stage features (stride 16), not per-proposal crops.
  assert predictions['box_classifier_features'].shape.as_list() == [
      1, REDUCED_SIZE // 16, REDUCED_SIZE // 16, 2048]
  assert predictions['refined_box_encodings'].shape.as_list() == [
      num_proposals, config.num_classes, 4]
  assert predictions['class_predictions_with_background'].shape.as_list() == [
      num_proposals, config.num_classes + 1]
  second_stage = {name: shape for name, shape in shapes.items()
                  if name.startswith('SecondStageBoxPredictor/')}
  assert second_stage == _expected_predictor(config)
  assert shapes['SecondStageFeatureExtractor/resnet_v1_101/block4/unit_1/'
                'bottleneck_v1/conv1/weights'] == [1, 1, 1024, 512]
  assert shapes['FirstStageFeatureExtractor/resnet_v1_101/block3/unit_23/'
                'bottleneck_v1/conv3/weights'] == [1, 1, 256, 1024]
