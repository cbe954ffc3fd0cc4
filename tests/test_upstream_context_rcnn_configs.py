"""The original's Context R-CNN sample configs build, with its names.

Each context_rcnn_* config builds its model for training and inference
(test_upstream_faster_rcnn_configs). Here each builds a whole graph at a
reduced input size (graph construction only) on context features of the
config's shape, the first for training with the Faster R-CNN losses and the
_sync one for inference with its detections, and the attention block's
variables as the original's zoo checkpoint names them (projections of the
1024-deep ResNet-101 crops and of the context features to
attention_bottleneck_dimension, and back to 1024).
"""
import os

import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from tests import test_upstream_faster_rcnn_configs as frcnn_configs
from tests import upstream_folder

_CROP_DEPTH = 1024  # ResNet-101's block3, the first-stage features.


def _is_context_rcnn(path):
  return os.path.basename(path).startswith('context_rcnn_')


CONTEXT_CONFIGS = [path for path in upstream_folder.paths()
                   if _is_context_rcnn(path)]


def test_the_upstream_folder_has_context_rcnn_configs(upstream_configs):
  assert len(CONTEXT_CONFIGS) == 2, upstream_configs


def _expected_attention(context):
  """{name: shape} of the original's attention block variables."""
  expected = {}
  bottleneck = context.attention_bottleneck_dimension
  for scope, inputs, outputs in (
      ('AttentionBlock/fully_connected', _CROP_DEPTH, bottleneck),
      ('AttentionBlock/fully_connected_1', context.context_feature_length,
       bottleneck),
      ('AttentionBlock/fully_connected_2', context.context_feature_length,
       bottleneck),
      ('fully_connected', bottleneck, _CROP_DEPTH)):
    expected[scope + '/weights'] = [inputs, outputs]
    for name in ('beta', 'gamma', 'moving_mean', 'moving_variance'):
      expected['%s/BatchNorm/%s' % (scope, name)] = [outputs]
  return expected


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_context_rcnn))
def test_context_rcnn_graph_has_the_original_variables(path):
  config = frcnn_configs._model_config(path).faster_rcnn
  context = config.context_config
  assert (context.max_num_context_features,
          context.context_feature_length) == (2000, 2057)

  def features():
    return {
        fields.InputDataFields.context_features: tf.zeros(
            [1, context.max_num_context_features,
             context.context_feature_length]),
        fields.InputDataFields.valid_context_size: tf.constant([3]),
    }

  is_training = not path.endswith('_sync.config')
  predictions, outputs, shapes = frcnn_configs.build_reduced_graph(
      path, is_training, side_input_features=features)
  num_proposals = frcnn_configs.checked_num_proposals(config, outputs,
                                                     is_training)
  attention = {name: shape for name, shape in shapes.items()
               if name.startswith(('AttentionBlock/', 'fully_connected/'))}
  assert attention == _expected_attention(context)
  assert predictions['class_predictions_with_background'].shape.as_list() == [
      num_proposals, config.num_classes + 1]
  assert shapes['SecondStageBoxPredictor/ClassPredictor/weights'] == [
      2048, config.num_classes + 1]


@pytest.mark.parametrize('path', upstream_folder.params(keep=_is_context_rcnn))
def test_context_rcnn_needs_its_side_inputs(path):
  with pytest.raises(ValueError, match='context_features'):
    frcnn_configs.build_reduced_graph(path, is_training=True)
