"""Faster R-CNN Inception-ResNet v2 feature extractor.

Built once, at output stride 8 as in every sample config that uses it
(the `_atrous` ones). Expected names follow the original: batch norm
without gamma on every convolution except each residual block's linear
`Conv2d_1x1` projection, which has a bias instead; the second stage's
block8 stack is `Repeat`, restored from the classification network's
`Repeat_2`.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_inception_resnet_v2_feature_extractor as irv2
from od_estimator.nets import inception_resnet_v2
from tests import fast_graphs
from tests import faster_rcnn_backbones as backbones

_BN = ('beta', 'moving_mean', 'moving_variance')


def _convs(prefix, layers, projection_depth=None):
  """{prefix/layer/...: shape} of batch-normed convs (+ the projection)."""
  variables = {}
  for layer, shape in layers:
    variables['%s/%s/weights' % (prefix, layer)] = shape
    variables.update({'%s/%s/BatchNorm/%s' % (prefix, layer, v): [shape[-1]]
                      for v in _BN})
  if projection_depth:
    variables[prefix + '/Conv2d_1x1/weights'] = [1, 1, projection_depth[0],
                                                 projection_depth[1]]
    variables[prefix + '/Conv2d_1x1/biases'] = [projection_depth[1]]
  return variables


BLOCK17_20 = _convs('InceptionResnetV2/Repeat_1/block17_20', [
    ('Branch_0/Conv2d_1x1', [1, 1, 1088, 192]),
    ('Branch_1/Conv2d_0a_1x1', [1, 1, 1088, 128]),
    ('Branch_1/Conv2d_0b_1x7', [1, 7, 128, 160]),
    ('Branch_1/Conv2d_0c_7x1', [7, 1, 160, 192]),
], projection_depth=(384, 1088))
MIXED_7A = _convs('InceptionResnetV2/Mixed_7a', [
    ('Branch_0/Conv2d_0a_1x1', [1, 1, 1088, 256]),
    ('Branch_0/Conv2d_1a_3x3', [3, 3, 256, 384]),
    ('Branch_1/Conv2d_0a_1x1', [1, 1, 1088, 256]),
    ('Branch_1/Conv2d_1a_3x3', [3, 3, 256, 288]),
    ('Branch_2/Conv2d_0a_1x1', [1, 1, 1088, 256]),
    ('Branch_2/Conv2d_0b_3x3', [3, 3, 256, 288]),
    ('Branch_2/Conv2d_1a_3x3', [3, 3, 288, 320]),
])


def _block8(prefix):
  return _convs(prefix, [
      ('Branch_0/Conv2d_1x1', [1, 1, 2080, 192]),
      ('Branch_1/Conv2d_0a_1x1', [1, 1, 2080, 192]),
      ('Branch_1/Conv2d_0b_1x3', [1, 3, 192, 224]),
      ('Branch_1/Conv2d_0c_3x1', [3, 1, 224, 256]),
  ], projection_depth=(448, 2080))


@pytest.fixture(scope='module')
def atrous():
  extractor = irv2.FasterRCNNInceptionResnetV2FeatureExtractor(
      is_training=True, first_stage_features_stride=8)
  return backbones.build(extractor, train_steps=2)


def test_registry_type():
  assert (faster_rcnn_feature_extractor_registry
          .FASTER_RCNN_FEATURE_EXTRACTORS['faster_rcnn_inception_resnet_v2']
          is irv2.FasterRCNNInceptionResnetV2FeatureExtractor)


def test_shapes_at_stride_8(atrous):
  assert atrous.rpn_feature_map.shape.as_list() == [1, 8, 8, 1088]
  assert atrous.activations['PreAuxLogits'] is atrous.rpn_feature_map
  # 'VALID' reductions (17 x 17 crops: test_trainable_batch_norm_...).
  assert atrous.box_classifier_features.shape.as_list() == [1, 3, 3, 1536]


def test_block17_convolutions_are_atrous_at_stride_8(atrous):
  # A dilated convolution is built as SpaceToBatchND (block = the rate),
  # Conv2D, BatchToSpaceND.
  layer = 'Repeat_1/block17_3/Branch_1/Conv2d_0b_1x7/'
  space_to_batch = [op for op in atrous.graph.get_operations()
                    if op.type == 'SpaceToBatchND' and layer in op.name
                    and not op.name.startswith('gradients/')]
  assert len(space_to_batch) == 1
  np.testing.assert_array_equal(
      tf.get_static_value(space_to_batch[0].inputs[1]), [2, 2])


def test_variables_match_the_original(atrous):
  first = atrous.names(backbones.FIRST)
  second = atrous.names(backbones.SECOND)
  stem = 'InceptionResnetV2/Conv2d_1a_3x3'
  assert {k: v for k, v in first.items() if k.startswith(stem)} == {
      stem + '/weights': [3, 3, 3, 32],
      **{stem + '/BatchNorm/' + v: [32] for v in _BN}}
  assert {k: v for k, v in first.items()
          if '/block17_20/' in k} == BLOCK17_20
  assert first['InceptionResnetV2/Repeat/block35_10/Conv2d_1x1/weights'] == [
      1, 1, 128, 320]
  assert {k: v for k, v in second.items() if '/Mixed_7a/' in k} == MIXED_7A
  assert {k: v for k, v in second.items()
          if '/block8_9/' in k} == _block8('InceptionResnetV2/Repeat/block8_9')
  assert {k: v for k, v in second.items()
          if '/Block8/' in k} == _block8('InceptionResnetV2/Block8')
  assert second['InceptionResnetV2/Conv2d_7b_1x1/weights'] == [
      1, 1, 2080, 1536]
  # Stem 5 + Mixed_5b 7 + Mixed_6a 4 convolutions; 10 block35 (6 convs and
  # a projection) and 20 block17 (4 and a projection).
  assert len(first) == 4 * 16 + 10 * (4 * 6 + 2) + 20 * (4 * 4 + 2)
  # Mixed_7a 7 + Conv2d_7b_1x1; 9 + 1 block8 (4 convs and a projection).
  assert len(second) == 4 * 8 + 10 * (4 * 4 + 2)
  assert len(atrous.variables) == 896


def test_restore_map_renames_the_second_stage_repeat(atrous):
  restore = backbones.restore_map(atrous)
  assert len(restore) == 896
  second = 'SecondStageFeatureExtractor/InceptionResnetV2/'
  first = 'FirstStageFeatureExtractor/InceptionResnetV2/'
  expected = {
      'InceptionResnetV2/Repeat_2/block8_1/Conv2d_1x1/weights':
          second + 'Repeat/block8_1/Conv2d_1x1/weights',
      'InceptionResnetV2/Repeat_2/block8_9/Branch_1/Conv2d_0c_3x1/BatchNorm/'
      'beta': second + 'Repeat/block8_9/Branch_1/Conv2d_0c_3x1/BatchNorm/beta',
      'InceptionResnetV2/Block8/Conv2d_1x1/biases':
          second + 'Block8/Conv2d_1x1/biases',
      'InceptionResnetV2/Mixed_7a/Branch_0/Conv2d_1a_3x3/weights':
          second + 'Mixed_7a/Branch_0/Conv2d_1a_3x3/weights',
      'InceptionResnetV2/Repeat/block35_1/Conv2d_1x1/weights':
          first + 'Repeat/block35_1/Conv2d_1x1/weights',
      'InceptionResnetV2/Repeat_1/block17_20/Conv2d_1x1/biases':
          first + 'Repeat_1/block17_20/Conv2d_1x1/biases',
  }
  for name, variable in expected.items():
    assert restore[name] == variable
  assert not [name for name in restore if 'Repeat/block8' in name]


def test_frozen_batch_norm_adds_no_updates(atrous):
  assert not backbones.update_ops(atrous)


def test_training_steps_decrease_a_toy_loss(atrous):
  assert np.all(np.isfinite(atrous.losses))
  assert atrous.losses[-1] < atrous.losses[0]


def test_output_stride_16_is_set_at_mixed_6a():
  # Stride 8 is the module fixture's; Mixed_6a decides between the two.
  with fast_graphs.new_graph():
    net, end_points = inception_resnet_v2.inception_resnet_v2_base(
        tf.zeros([1, 64, 64, 3]), final_endpoint='Mixed_6a',
        output_stride=16, align_feature_maps=True)
    assert net.shape.as_list() == [1, 4, 4, 1088]
    assert end_points['Mixed_5b'].shape.as_list() == [1, 8, 8, 320]


def test_valid_padding_follows_the_classification_sizes():
  with fast_graphs.new_graph():
    _, end_points = inception_resnet_v2.inception_resnet_v2_base(
        tf.zeros([1, 75, 75, 3]), final_endpoint='Mixed_5b')
    shapes = {k: v.shape.as_list()[1:] for k, v in end_points.items()}
  # 75 -> 37 -> 35 -> 35 -> 17 -> 17 -> 15 -> 7, as 299 -> ... -> 35.
  assert shapes == {
      'Conv2d_1a_3x3': [37, 37, 32], 'Conv2d_2a_3x3': [35, 35, 32],
      'Conv2d_2b_3x3': [35, 35, 64], 'MaxPool_3a_3x3': [17, 17, 64],
      'Conv2d_3b_1x1': [17, 17, 80], 'Conv2d_4a_3x3': [15, 15, 192],
      'MaxPool_5a_3x3': [7, 7, 192], 'Mixed_5b': [7, 7, 320]}


def test_classification_network_names_its_block8_stack_repeat_2():
  with fast_graphs.new_graph():
    with tf.compat.v1.variable_scope('InceptionResnetV2'):
      net = inception_resnet_v2.mixed_7a(tf.zeros([1, 5, 5, 1088]))
      inception_resnet_v2.block8_stack(net)
    names = {v.op.name for v in tf.compat.v1.global_variables()}
  assert 'InceptionResnetV2/Repeat_2/block8_9/Conv2d_1x1/biases' in names
  assert 'InceptionResnetV2/Conv2d_7b_1x1/weights' in names


@pytest.mark.parametrize('kwargs, message', [
    ({'output_stride': 32}, 'output_stride must be 8 or 16'),
    ({'output_stride': 8, 'final_endpoint': 'Mixed_7a'}, 'up to PreAuxLogits'),
    ({'final_endpoint': 'Logits'}, 'not one of'),
])
def test_base_rejects_what_it_cannot_build(kwargs, message):
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match=message):
      inception_resnet_v2.inception_resnet_v2_base(tf.zeros([1, 64, 64, 3]),
                                                   **kwargs)


def test_trainable_batch_norm_and_weight_decay():
  extractor = irv2.FasterRCNNInceptionResnetV2FeatureExtractor(
      True, 16, batch_norm_trainable=True, weight_decay=1e-4)
  second_stage = backbones.second_stage_alone(extractor, [1, 17, 17, 1088])
  # The sample configs crop 17 x 17: 'VALID' reductions give 8 x 8.
  assert second_stage.shape == [1, 8, 8, 1536]
  # Moving mean and variance of Mixed_7a's 7, 10 block8's 4 and Conv2d_7b.
  assert second_stage.update_ops == 2 * (7 + 10 * 4 + 1)
  # Weights and the projections' biases: 8 + 10 * 5 + 10.
  assert second_stage.regularization_losses == 68


def test_unsupported_stride_names_the_config_field():
  with pytest.raises(errors.UserInputError,
                     match=r'model\.faster_rcnn\.feature_extractor\.'
                     r'first_stage_features_stride.*supported: 8, 16'):
    irv2.FasterRCNNInceptionResnetV2FeatureExtractor(True, 32)


def test_preprocess_maps_pixels_to_minus_one_one(execute):
  extractor = irv2.FasterRCNNInceptionResnetV2FeatureExtractor(False, 16)
  images = np.array([0.0, 127.5, 255.0], np.float32).reshape([1, 1, 3, 1])
  np.testing.assert_allclose(
      execute(extractor.preprocess, [images]).ravel(), [-1, 0, 1], atol=1e-6)
