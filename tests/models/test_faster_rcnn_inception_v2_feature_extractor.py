"""Faster R-CNN Inception v2 feature extractor.

The expected variables follow the original's network: tf-slim's
inception_v2_base up to Mixed_4e in the first stage (a separable 7x7 stem
with depthwise multiplier 8), and the second stage's Mixed_5a/5b/5c with
the depths of the original's `_extract_box_classifier_features`; every
convolution has batch norm with gamma and no bias. Names such as
`SecondStageFeatureExtractor/InceptionV2/Mixed_5a/Branch_0/Conv2d_0a_1x1/
weights` appear in restore logs of the model zoo's
faster_rcnn_inception_v2_coco checkpoint.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v2 as tf_slim_inception_v2

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_inception_v2_feature_extractor as inception
from tests import fast_graphs
from tests import faster_rcnn_backbones as backbones

_BN = ('gamma', 'beta', 'moving_mean', 'moving_variance')


def _convs(block, layers):
  """{InceptionV2/block/layer/...: shape} of convolutions with batch norm."""
  variables = {}
  for layer, shape in layers:
    prefix = 'InceptionV2/%s/%s/' % (block, layer)
    variables[prefix + 'weights'] = shape
    variables.update({prefix + 'BatchNorm/' + v: [shape[-1]] for v in _BN})
  return variables


MIXED_4E = _convs('Mixed_4e', [
    ('Branch_0/Conv2d_0a_1x1', [1, 1, 576, 96]),
    ('Branch_1/Conv2d_0a_1x1', [1, 1, 576, 128]),
    ('Branch_1/Conv2d_0b_3x3', [3, 3, 128, 192]),
    ('Branch_2/Conv2d_0a_1x1', [1, 1, 576, 160]),
    ('Branch_2/Conv2d_0b_3x3', [3, 3, 160, 192]),
    ('Branch_2/Conv2d_0c_3x3', [3, 3, 192, 192]),
    ('Branch_3/Conv2d_0b_1x1', [1, 1, 576, 96]),
])
MIXED_5A = _convs('Mixed_5a', [
    ('Branch_0/Conv2d_0a_1x1', [1, 1, 576, 128]),
    ('Branch_0/Conv2d_1a_3x3', [3, 3, 128, 192]),
    ('Branch_1/Conv2d_0a_1x1', [1, 1, 576, 192]),
    ('Branch_1/Conv2d_0b_3x3', [3, 3, 192, 256]),
    ('Branch_1/Conv2d_1a_3x3', [3, 3, 256, 256]),
])


def _mixed_5bc(block, branch_2_reduce):
  return _convs(block, [
      ('Branch_0/Conv2d_0a_1x1', [1, 1, 1024, 352]),
      ('Branch_1/Conv2d_0a_1x1', [1, 1, 1024, 192]),
      ('Branch_1/Conv2d_0b_3x3', [3, 3, 192, 320]),
      ('Branch_2/Conv2d_0a_1x1', [1, 1, 1024, branch_2_reduce]),
      ('Branch_2/Conv2d_0b_3x3', [3, 3, branch_2_reduce, 224]),
      ('Branch_2/Conv2d_0c_3x3', [3, 3, 224, 224]),
      ('Branch_3/Conv2d_0b_1x1', [1, 1, 1024, 128]),
  ])


SECOND_STAGE = dict(MIXED_5A, **_mixed_5bc('Mixed_5b', 160),
                    **_mixed_5bc('Mixed_5c', 192))


@pytest.fixture(scope='module')
def inception_v2():
  extractor = inception.FasterRCNNInceptionV2FeatureExtractor(
      is_training=True, first_stage_features_stride=16)
  return backbones.build(extractor)


def test_registry_type():
  assert (faster_rcnn_feature_extractor_registry
          .FASTER_RCNN_FEATURE_EXTRACTORS['faster_rcnn_inception_v2']
          is inception.FasterRCNNInceptionV2FeatureExtractor)


def test_shapes(inception_v2):
  assert inception_v2.rpn_feature_map.shape.as_list() == [1, 4, 4, 576]
  assert inception_v2.activations['Mixed_4e'] is inception_v2.rpn_feature_map
  # Mixed_5a halves the crops ('SAME' padding: 14 x 14 crops give 7 x 7).
  assert inception_v2.box_classifier_features.shape.as_list() == [
      1, 2, 2, 1024]


def test_variables_match_the_original(inception_v2):
  first = inception_v2.names(backbones.FIRST)
  second = inception_v2.names(backbones.SECOND)
  assert second == SECOND_STAGE
  assert {k: v for k, v in first.items() if '/Mixed_4e/' in k} == MIXED_4E
  stem = 'InceptionV2/Conv2d_1a_7x7/'
  assert {k: v for k, v in first.items() if k.startswith(stem)} == dict(
      {stem + 'depthwise_weights': [7, 7, 3, 8],
       stem + 'pointwise_weights': [1, 1, 24, 64]},
      **{stem + 'BatchNorm/' + v: [64] for v in _BN})
  assert not [k for k in first if 'Mixed_5' in k]
  # Stem (6) + Conv2d_2b/2c + 3b, 3c, 4a..4e: 49 convolutions of 5 each.
  assert len(first) == 6 + 5 * 49
  assert len(second) == 5 * 19
  assert len(inception_v2.variables) == 346


def test_restore_map_drops_the_stage_scopes(inception_v2):
  restore = backbones.restore_map(inception_v2)
  assert len(restore) == 346
  name = 'InceptionV2/Mixed_5a/Branch_0/Conv2d_0a_1x1/weights'
  assert restore[name] == 'SecondStageFeatureExtractor/' + name
  name = 'InceptionV2/Mixed_4e/Branch_3/Conv2d_0b_1x1/BatchNorm/gamma'
  assert restore[name] == 'FirstStageFeatureExtractor/' + name


def test_frozen_batch_norm_adds_no_updates(inception_v2):
  assert not backbones.update_ops(inception_v2)


def test_training_steps_decrease_a_toy_loss(inception_v2):
  assert np.all(np.isfinite(inception_v2.losses))
  assert inception_v2.losses[-1] < inception_v2.losses[0]


# Frozen batch norm in training: see test_frozen_batch_norm_adds_no_updates.
@pytest.mark.parametrize('is_training, trainable, updates', [
    (True, True, 2 * 19), (False, True, 0)])
def test_batch_norm_trainable_only_when_training(is_training, trainable,
                                                 updates):
  extractor = inception.FasterRCNNInceptionV2FeatureExtractor(
      is_training, 16, batch_norm_trainable=trainable)
  assert backbones.second_stage_alone(
      extractor, [1, 4, 4, 576]).update_ops == updates


@pytest.mark.parametrize('weight_decay, losses', [(0.0, 0), (1e-4, 19)])
def test_weight_decay(weight_decay, losses):
  extractor = inception.FasterRCNNInceptionV2FeatureExtractor(
      True, 16, weight_decay=weight_decay)
  assert backbones.second_stage_alone(
      extractor, [1, 4, 4, 576]).regularization_losses == losses


def test_depth_multiplier_and_min_depth():
  extractor = inception.FasterRCNNInceptionV2FeatureExtractor(
      False, 16, depth_multiplier=0.25, min_depth=48)
  assert backbones.first_stage_shape(extractor) == [1, 4, 4, 48 * 4]
  # Mixed_5c's branches: 352/4 = 88, 320/4 = 80, 224/4 = 56, and
  # 128/4 = 32 raised to the minimum 48.
  second_stage = backbones.second_stage_alone(extractor, [1, 14, 14, 192])
  assert second_stage.shape == [1, 7, 7, 88 + 80 + 56 + 48]


def test_stride_8_is_refused_naming_the_config_field():
  with pytest.raises(errors.UserInputError,
                     match=r'model\.faster_rcnn\.feature_extractor\.'
                     r'first_stage_features_stride.*supported: 16'):
    inception.FasterRCNNInceptionV2FeatureExtractor(True, 8)


def test_preprocess_maps_pixels_to_minus_one_one(execute):
  extractor = inception.FasterRCNNInceptionV2FeatureExtractor(False, 16)
  images = np.array([0.0, 127.5, 255.0], np.float32).reshape([1, 1, 3, 1])
  np.testing.assert_allclose(
      execute(extractor.preprocess, [images]).ravel(), [-1, 0, 1], atol=1e-6)


def test_restore_map_matches_the_classification_network(inception_v2):
  # tf-slim's own Inception v2 to Mixed_5c, as classification checkpoints
  # were trained: every name and shape the detector restores is there. Its
  # batch norm has no gamma (the detector's does, initialised to one), and
  # its arg_scope leaves the separable stem without batch norm, where the
  # original's detector (and its zoo checkpoints) normalize it.
  stem = 'InceptionV2/Conv2d_1a_7x7/'
  with fast_graphs.new_graph():
    with slim.arg_scope(tf_slim_inception_v2.inception_v2_arg_scope()):
      tf_slim_inception_v2.inception_v2_base(tf.zeros([1, 64, 64, 3]),
                                             scope='InceptionV2')
    classification = {v.op.name: v.shape.as_list()
                      for v in tf.compat.v1.global_variables()
                      if not v.op.name.startswith(stem)}
  restore = {name: inception_v2.variables[variable] for name, variable in
             backbones.restore_map(inception_v2).items()
             if not name.endswith('/gamma') and not name.startswith(stem)}
  assert restore == classification
