"""The Faster R-CNN ResNet v1 FPN Keras extractors (*_fpn_keras).

The original's FPN config builds at 128x128 (its shapes do not depend on the
size) with the original's TF2 names and shapes of every variable: backbone,
pyramid, box head (tests/data/tf2_checkpoint_keys/faster_rcnn_resnet50_v1_
fpn_640x640_coco17_tpu-8.model.txt) and the RPN and box predictors (the
shared heads' names); its prediction shapes are the original's
there, it fine-tunes from the original's TF2 ResNet-50 classification
checkpoint layout, and exporter_main_v2's checkpoint/ckpt-0 of it has the
original's keys.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.estimator import fine_tune
from od_estimator.models import (
    faster_rcnn_resnet_v1_fpn_keras_feature_extractor as fpn_keras)
from od_estimator.protos import train_pb2
from tests import fast_graphs
from tests import tf2_checkpoints
from tests import upstream_folder

CONFIG = 'faster_rcnn_resnet50_v1_fpn_640x640_coco17_tpu-8'
# The TF2 ResNet-50 classification checkpoint's layout, as recorded.
_CLASSIFICATION = 'ssd_resnet50_v1_fpn_640x640_coco17_tpu-8.classification'
_SIZE = 128
# Names of the RPN and the box predictors (the shared heads), outside the
# extractor.
_HEADS = ('FirstStageBoxPredictor/', 'RPNConv/',
          'mask_rcnn_keras_box_predictor/')


def _conv_hyperparams():
  """Conv + batch norm + ReLU6; the batch norm mode is the caller's."""
  with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm,
                      activation_fn=tf.nn.relu6) as scope:
    return scope


@pytest.fixture(scope='module')
def built():
  """The config's training graph at 128x128: (variables, predictions,
  detection restore map, model, graph)."""
  path = upstream_folder.require(tf2=True) + '/' + CONFIG + '.config'
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  resizer = model_config.faster_rcnn.image_resizer.keep_aspect_ratio_resizer
  resizer.min_dimension = resizer.max_dimension = _SIZE
  model_config.faster_rcnn.first_stage_max_proposals = 20
  model_config.faster_rcnn.second_stage_batch_size = 8
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(model_config, is_training=True)
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])] * 2,
                              [tf.one_hot([0], 90)] * 2)
    images, shapes = model.preprocess(
        tf.random.uniform([2, _SIZE, _SIZE, 3], 0, 255))
    predictions = model.predict(images, shapes)
    model.loss(predictions, shapes)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    restore = model.restore_map('detection')
    return variables, predictions, restore, model, graph


def test_backbone_pyramid_and_box_head_have_the_original_names(built):
  variables, _, restore, _, _ = built
  # The RPN and box predictors too: the shared heads' TF2 names
  # (predictors/two_stage_keras_names), a first-stage head per level.
  assert variables == {fact.keras_name: fact.shape
                       for fact in tf2_checkpoints.facts(CONFIG + '.model')}
  ours = {name: shape for name, shape in variables.items()
          if not name.startswith(_HEADS)}
  assert 'private__resnet_fpn/bottom_up_block5_conv/kernel' in ours
  # A detection checkpoint restores the extractor: all of it, by name.
  assert sorted(restore) == sorted(ours)


def test_exported_checkpoint_has_the_originals_keys(built, tmp_path):
  """exporter_main_v2's checkpoint/ckpt-0 keys each value as the original
  saves it (its recorded keys), so its TF2 code restores it, and our
  fine-tuning reads it back."""
  _, _, _, model, graph = built
  # The sample config's second stage has no dropout (model_config None).
  assert tf2_checkpoints.write_exported(graph, model, None, str(tmp_path)) == {
      fact.key: fact.keras_name
      for fact in tf2_checkpoints.facts(CONFIG + '.model')}


def test_predictions_have_the_original_shapes(built):
  _, predictions, _, _, _ = built
  # Levels 2..6 of a 128x128 image, 6 anchors per cell (3 ratios x 2
  # scales): 6 * (32**2 + 16**2 + 8**2 + 4**2 + 2**2) = 8184.
  assert [f.shape.as_list() for f in predictions['rpn_features_to_crop']] == [
      [2, side, side, 256] for side in (32, 16, 8, 4, 2)]
  assert predictions['anchors'].shape.as_list() == [8184, 4]
  assert predictions['rpn_box_encodings'].shape.as_list() == [2, 8184, 4]
  assert predictions['box_classifier_features'].shape.as_list() == [
      16, 1, 1, 1024]


def test_restores_the_backbone_from_a_tf2_classification_checkpoint(
    built, tmp_path):
  """The layout of the original's TF2 `resnet50.ckpt-1` (the SSD ResNet-50
  FPN's classification facts: the same Keras backbone): every backbone
  variable restored, value i + 1 for the i-th."""
  _, _, _, model, graph = built
  lines = tf2_checkpoints.facts(_CLASSIFICATION)
  index = {fact.key: i + 1 for i, fact in enumerate(lines)}
  prefix = tf2_checkpoints.write(str(tmp_path / 'resnet50'), lines,
                                 lambda fact: np.full(fact.shape,
                                                      index[fact.key]))
  with graph.as_default():
    available = fine_tune.restore_map(model, train_pb2.TrainConfig(
        fine_tune_checkpoint=prefix,
        fine_tune_checkpoint_type='classification',
        fine_tune_checkpoint_version=train_pb2.CheckpointVersion.V2))
    restored = sorted(variable.op.name for variable in available.values())
    backbone = sorted(model.restore_map('classification'))
  assert restored == backbone
  assert len(backbone) == len(lines) - 1  # save_counter
  assert 'conv5_block3_3_bn/moving_variance' in backbone
  assert not [name for name in backbone
              if name.startswith(('private__resnet_fpn/', 'dense'))]


def _batch_norm_modes(graph):
  return {op.get_attr('is_training') for op in graph.get_operations()
          if op.type.startswith('FusedBatchNorm')}


def test_batch_norm_trains_only_when_trainable(built):
  """batch_norm_trainable: true in the sample config's training graph; a
  frozen one (without override_base_feature_extractor_hyperparams: the
  backbone's Keras defaults) keeps every batch norm in inference mode."""
  assert _batch_norm_modes(built[-1]) == {True}
  with fast_graphs.new_graph() as graph:
    extractor = fpn_keras.FasterRCNNResnet50FpnKerasFeatureExtractor(
        True, 16, batch_norm_trainable=False,
        conv_hyperparams_fn=_conv_hyperparams, fpn_max_level=5)
    with slim.arg_scope([slim.batch_norm], is_training=True):
      extractor.extract_proposal_features(
          tf.zeros([1, 64, 64, 3]), scope='FirstStageFeatureExtractor')
  assert _batch_norm_modes(graph) == {False}


def test_needs_conv_hyperparams_and_valid_levels():
  with pytest.raises(errors.UserInputError, match='conv_hyperparams'):
    fpn_keras.FasterRCNNResnet50FpnKerasFeatureExtractor(False, 16)
  with pytest.raises(errors.UserInputError, match='min_level'):
    fpn_keras.FasterRCNNResnet50FpnKerasFeatureExtractor(
        False, 16, conv_hyperparams_fn=_conv_hyperparams, fpn_min_level=1)
