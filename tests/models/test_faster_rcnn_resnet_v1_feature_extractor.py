"""Faster R-CNN ResNet v1 (50, 101, 152) feature extractors.

The expected ResNet-101 variables are derived from the original's network
definition (tf-slim resnet_v1_101: units per block 3, 4, 23, 3; bottleneck
depths 64, 128, 256, 512, four times that out; a projection shortcut in
each block's first unit; batch norm with gamma), and spot-checked against
names published from model-zoo checkpoints. As in the original, the first
stage builds the whole network, block4 included, so its checkpoints hold
`FirstStageFeatureExtractor/resnet_v1_101/block4/...` too. ResNet-50 and
-152 are the same code with other unit counts, which
tests/test_upstream_faster_rcnn_configs.py checks on each depth's sample
config graph.
"""
import numpy as np
import pytest

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor as resnet
from tests import faster_rcnn_backbones as backbones

_BLOCKS = {'block1': (3, 64), 'block2': (4, 128), 'block3': (23, 256),
           'block4': (3, 512)}
_BN = ('gamma', 'beta', 'moving_mean', 'moving_variance')


def _conv(name, shape):
  variables = {name + '/weights': shape}
  variables.update({'%s/BatchNorm/%s' % (name, v): [shape[-1]] for v in _BN})
  return variables


def _block(block, depth_in):
  """{name: shape} of one block of the original's bottleneck units."""
  num_units, bottleneck = _BLOCKS[block]
  variables = {}
  for unit in range(1, num_units + 1):
    prefix = '%s/unit_%d/bottleneck_v1/' % (block, unit)
    unit_in = depth_in if unit == 1 else 4 * bottleneck
    variables.update(_conv(prefix + 'conv1', [1, 1, unit_in, bottleneck]))
    variables.update(_conv(prefix + 'conv2', [3, 3, bottleneck, bottleneck]))
    variables.update(_conv(prefix + 'conv3', [1, 1, bottleneck,
                                              4 * bottleneck]))
    if unit_in != 4 * bottleneck:
      variables.update(_conv(prefix + 'shortcut',
                             [1, 1, unit_in, 4 * bottleneck]))
  return {'resnet_v1_101/' + k: v for k, v in variables.items()}


def _expected_first_stage():
  variables = {'resnet_v1_101/' + k: v
               for k, v in _conv('conv1', [7, 7, 3, 64]).items()}
  for block, depth_in in (('block1', 64), ('block2', 256), ('block3', 512),
                          ('block4', 1024)):
    variables.update(_block(block, depth_in))
  return variables


@pytest.fixture(scope='module')
def resnet101():
  extractor = resnet.FasterRCNNResnet101FeatureExtractor(
      is_training=True, first_stage_features_stride=16)
  return backbones.build(extractor)


def test_registry_types():
  extractors = faster_rcnn_feature_extractor_registry
  for name, cls in (('faster_rcnn_resnet50',
                     resnet.FasterRCNNResnet50FeatureExtractor),
                    ('faster_rcnn_resnet101',
                     resnet.FasterRCNNResnet101FeatureExtractor),
                    ('faster_rcnn_resnet152',
                     resnet.FasterRCNNResnet152FeatureExtractor)):
    assert extractors.FASTER_RCNN_FEATURE_EXTRACTORS[name] is cls


def test_resnet101_shapes_at_stride_16(resnet101):
  assert resnet101.rpn_feature_map.shape.as_list() == [1, 4, 4, 1024]
  rpn = resnet101.activations['FirstStageFeatureExtractor/resnet_v1_101/block3']
  assert rpn is resnet101.rpn_feature_map
  # block4 keeps the size of the crops (all its units have stride 1).
  assert resnet101.box_classifier_features.shape.as_list() == [1, 4, 4, 2048]


def test_resnet101_variables_match_the_original(resnet101):
  first = resnet101.names(backbones.FIRST)
  second = resnet101.names(backbones.SECOND)
  assert first == _expected_first_stage()
  assert second == _block('block4', 1024)
  assert len(first) == 520 and len(second) == 50
  assert len(resnet101.variables) == 570
  # Names listed from the model zoo's faster_rcnn_resnet101_coco.
  assert first['resnet_v1_101/block3/unit_23/bottleneck_v1/conv3/weights'] == [
      1, 1, 256, 1024]
  assert first['resnet_v1_101/block4/unit_1/bottleneck_v1/shortcut/weights'] \
      == [1, 1, 1024, 2048]
  assert second['resnet_v1_101/block4/unit_1/bottleneck_v1/conv1/weights'] == [
      1, 1, 1024, 512]


def test_resnet101_restore_map_prefers_the_second_stage_block4(resnet101):
  restore = backbones.restore_map(resnet101)
  assert set(restore) == set(_expected_first_stage())
  name = 'resnet_v1_101/block4/unit_2/bottleneck_v1/conv2/weights'
  assert restore[name] == 'SecondStageFeatureExtractor/' + name
  name = 'resnet_v1_101/block3/unit_23/bottleneck_v1/conv3/weights'
  assert restore[name] == 'FirstStageFeatureExtractor/' + name


def test_resnet101_frozen_batch_norm_adds_no_updates(resnet101):
  assert not backbones.update_ops(resnet101)


def test_resnet101_training_steps_decrease_a_toy_loss(resnet101):
  losses = resnet101.losses
  assert np.all(np.isfinite(losses))
  assert losses[-1] < losses[0]


@pytest.fixture(scope='module')
def resnet50_atrous():
  """ResNet-50 at stride 8 with batch norm in training mode."""
  extractor = resnet.FasterRCNNResnet50FeatureExtractor(
      is_training=True, first_stage_features_stride=8,
      batch_norm_trainable=True)
  return backbones.build(extractor, train_steps=2)


def test_resnet50_atrous_shapes(resnet50_atrous):
  assert resnet50_atrous.rpn_feature_map.shape.as_list() == [1, 8, 8, 1024]
  assert resnet50_atrous.box_classifier_features.shape.as_list() == [
      1, 8, 8, 2048]
  # conv1, three convs a unit (16 units), four projection shortcuts.
  assert len(resnet50_atrous.names(backbones.FIRST)) == 5 * (1 + 48 + 4)
  assert len(resnet50_atrous.names(backbones.SECOND)) == 5 * 10


def test_resnet50_trainable_batch_norm_updates_its_statistics(
    resnet50_atrous):
  # Moving mean and variance of each batch norm: 53 in the first stage,
  # 10 in the second.
  assert len(backbones.update_ops(resnet50_atrous)) == 2 * (53 + 10)


def test_resnet50_atrous_training_steps_decrease_a_toy_loss(resnet50_atrous):
  assert resnet50_atrous.losses[-1] < resnet50_atrous.losses[0]


# Frozen batch norm in training: see test_resnet101_frozen_batch_norm_...
@pytest.mark.parametrize('is_training, trainable, updates', [
    (True, True, 20), (False, True, 0)])
def test_batch_norm_trainable_only_when_training(is_training, trainable,
                                                 updates):
  extractor = resnet.FasterRCNNResnet50FeatureExtractor(
      is_training, 16, batch_norm_trainable=trainable)
  assert backbones.second_stage_alone(
      extractor, [1, 4, 4, 1024]).update_ops == updates


def test_weight_decay_regularizes_every_convolution():
  extractor = resnet.FasterRCNNResnet50FeatureExtractor(
      True, 16, weight_decay=1e-4)
  second_stage = backbones.second_stage_alone(extractor, [1, 4, 4, 1024])
  assert second_stage.regularization_losses == 10
  assert second_stage.update_ops == 0


@pytest.mark.parametrize('stride', [4, 32])
def test_unsupported_stride_names_the_config_field(stride):
  with pytest.raises(errors.UserInputError,
                     match=r'model\.faster_rcnn\.feature_extractor\.'
                     r'first_stage_features_stride.*supported: 8, 16'):
    resnet.FasterRCNNResnet50FeatureExtractor(
        is_training=True, first_stage_features_stride=stride)


def test_small_static_image_is_refused():
  extractor = resnet.FasterRCNNResnet50FeatureExtractor(False, 16)
  with pytest.raises(ValueError, match='33'):
    backbones.first_stage_shape(extractor, image_size=32)


def test_preprocess_subtracts_channel_means(execute):
  extractor = resnet.FasterRCNNResnet50FeatureExtractor(False, 16)
  images = np.full([1, 2, 2, 3], 200.0, np.float32)
  out = execute(extractor.preprocess, [images])
  np.testing.assert_allclose(out[0, 0, 0], [76.32, 83.221, 96.061],
                             rtol=1e-5)
  grey = np.full([1, 2, 2, 1], 7.0, np.float32)
  np.testing.assert_array_equal(execute(extractor.preprocess, [grey]), grey)
