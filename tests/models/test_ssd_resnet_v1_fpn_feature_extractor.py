"""SSD ResNet v1 FPN (RetinaNet) feature extractors.

Expected variable names/shapes and counts were collected by running the TF1
Object Detection API's SSDResnet50V1FpnFeatureExtractor with the same
hyperparams and input; model-zoo checkpoints restore only if they match.
ResNet-50 is built once per file (module fixture) because it is slow.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.models import ssd_resnet_v1_fpn_feature_extractor as fpn
from od_estimator.protos import hyperparams_pb2

# conv_hyperparams of the sample ssd_resnet50_v1_fpn (RetinaNet) config.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.0004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
"""

_PREFIX = 'FeatureExtractor/resnet_v1_50/'

# A representative subset: root, first/last units of each block (bottleneck
# depths 64, 128, 256, 512 -> outputs 256, 512, 1024, 2048), FPN layers.
RESNET50_VARIABLES = {
    'conv1/weights': [7, 7, 3, 64],
    'conv1/BatchNorm/gamma': [64],
    'conv1/BatchNorm/moving_variance': [64],
    'block1/unit_1/bottleneck_v1/shortcut/weights': [1, 1, 64, 256],
    'block1/unit_3/bottleneck_v1/conv2/weights': [3, 3, 64, 64],
    'block2/unit_1/bottleneck_v1/shortcut/weights': [1, 1, 256, 512],
    'block2/unit_4/bottleneck_v1/conv3/weights': [1, 1, 128, 512],
    'block3/unit_6/bottleneck_v1/conv2/weights': [3, 3, 256, 256],
    'block3/unit_6/bottleneck_v1/conv3/BatchNorm/beta': [1024],
    'block4/unit_1/bottleneck_v1/shortcut/weights': [1, 1, 1024, 2048],
    'block4/unit_3/bottleneck_v1/conv3/BatchNorm/moving_variance': [2048],
}

# All FPN variables of levels 3..7: projections of block2/3/4 (512, 1024,
# 2048 channels) with biases, BN-ed smoothing and bottom-up convs.
_BN = ['BatchNorm/gamma', 'BatchNorm/beta', 'BatchNorm/moving_mean',
       'BatchNorm/moving_variance']
FPN_VARIABLES = {
    'fpn/projection_1/weights': [1, 1, 512, 256],
    'fpn/projection_1/biases': [256],
    'fpn/projection_2/weights': [1, 1, 1024, 256],
    'fpn/projection_2/biases': [256],
    'fpn/projection_3/weights': [1, 1, 2048, 256],
    'fpn/projection_3/biases': [256],
}
for _layer in ('smoothing_1', 'smoothing_2', 'bottom_up_block5',
               'bottom_up_block6'):
  FPN_VARIABLES['fpn/%s/weights' % _layer] = [3, 3, 256, 256]
  for _bn in _BN:
    FPN_VARIABLES['fpn/%s/%s' % (_layer, _bn)] = [256]

# Counts from the original: 5 (conv1) + 16 units * 3 convs * 5 + 4
# shortcuts * 5 = 265 ResNet variables, plus the 26 FPN ones above.
NUM_VARIABLES = 291
# One l2 loss per conv kernel: 1 + 16 * 3 + 4 = 53 ResNet + 7 FPN.
NUM_REGULARIZATION_LOSSES = 60


def _conv_hyperparams_fn():
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return hyperparams_builder.build(config, is_training=False)


def _extractor(cls=fpn.SSDResnet50V1FpnFeatureExtractor, **kwargs):
  return cls(is_training=False, depth_multiplier=1.0, min_depth=16,
             pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn(),
             **kwargs)


Built = collections.namedtuple(
    'Built', ['static_shapes', 'variables', 'restore',
              'num_regularization_losses'])


@pytest.fixture(scope='module')
def resnet50():
  """The RetinaNet config's extractor on one 256x256 image, built once."""
  with tf.Graph().as_default():
    extractor = _extractor(override_base_feature_extractor_hyperparams=True)
    images = tf.random.uniform([1, 256, 256, 3], 0, 255)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    restore = {name: var.op.name for name, var in
               extractor.restore_from_classification_checkpoint_fn(
                   'FeatureExtractor').items()}
    losses = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  # Static shapes only: initializing and running ResNet-50 would double the
  # file's run time (the upstream-config test runs the full model).
  return Built([m.shape.as_list() for m in maps], variables, restore,
               len(losses))


def test_feature_map_shapes(resnet50):
  # Level l has stride 2**l: 256 / 8, 16, 32, 64, 128 = 32, 16, 8, 4, 2.
  expected = [[1, 32, 32, 256], [1, 16, 16, 256], [1, 8, 8, 256],
              [1, 4, 4, 256], [1, 2, 2, 256]]
  assert resnet50.static_shapes == expected


def test_variable_names_and_shapes_match_original(resnet50):
  variables = resnet50.variables
  assert len(variables) == NUM_VARIABLES
  assert all(name.startswith(_PREFIX) for name in variables)
  for name, shape in RESNET50_VARIABLES.items():
    assert variables[_PREFIX + name] == shape, name
  fpn_variables = {name[len(_PREFIX):]: shape
                   for name, shape in variables.items()
                   if name.startswith(_PREFIX + 'fpn/')}
  assert fpn_variables == FPN_VARIABLES
  assert resnet50.num_regularization_losses == NUM_REGULARIZATION_LOSSES


def test_classification_restore_names_drop_the_scope(resnet50):
  restore = resnet50.restore
  assert len(restore) == NUM_VARIABLES
  assert restore['resnet_v1_50/conv1/weights'] == _PREFIX + 'conv1/weights'
  for name, variable_name in restore.items():
    assert variable_name == 'FeatureExtractor/' + name


def test_preprocess_subtracts_imagenet_means(execute):
  extractor = _extractor()
  image = np.array([[[[200., 100., 50.], [0., 0., 0.]]]], np.float32)
  # [200 - 123.68, 100 - 116.779, 50 - 103.939] and the negated means.
  expected = np.array([[[[76.32, -16.779, -53.939],
                         [-123.68, -116.779, -103.939]]]], np.float32)
  result = execute(extractor.preprocess, [image])
  np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-5)


def test_preprocess_leaves_non_rgb_inputs_unchanged(execute):
  extractor = _extractor()
  image = np.arange(8, dtype=np.float32).reshape([1, 1, 2, 4])
  np.testing.assert_array_equal(execute(extractor.preprocess, [image]), image)


def test_images_smaller_than_129_are_rejected():
  extractor = _extractor()
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='129'):
      extractor.extract_features(tf.zeros([1, 128, 128, 3]))
    assert not tf.compat.v1.global_variables()


def test_explicit_padding_is_rejected():
  with pytest.raises(ValueError, match='use_explicit_padding'):
    _extractor(use_explicit_padding=True)


@pytest.mark.parametrize('cls, scope', [
    (fpn.SSDResnet50V1FpnFeatureExtractor, 'resnet_v1_50'),
    (fpn.SSDResnet101V1FpnFeatureExtractor, 'resnet_v1_101'),
    (fpn.SSDResnet152V1FpnFeatureExtractor, 'resnet_v1_152'),
])
def test_backbone_scopes(cls, scope):
  extractor = _extractor(cls)
  assert extractor._resnet_scope_name == scope
  assert extractor._fpn_scope_name == 'fpn'


def test_resnet_fn_rejects_classification_heads():
  with tf.Graph().as_default():
    images = tf.zeros([1, 224, 224, 3])
    with pytest.raises(ValueError, match='num_classes'):
      fpn.resnet_v1_50(images, num_classes=1000)
    with pytest.raises(ValueError, match='global_pool'):
      fpn.resnet_v1_50(images, global_pool=True)
    assert not tf.compat.v1.global_variables()


def test_registry_types():
  extractors = ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS
  assert (extractors['ssd_resnet50_v1_fpn'] is
          fpn.SSDResnet50V1FpnFeatureExtractor)
  assert (extractors['ssd_resnet101_v1_fpn'] is
          fpn.SSDResnet101V1FpnFeatureExtractor)
  assert (extractors['ssd_resnet152_v1_fpn'] is
          fpn.SSDResnet152V1FpnFeatureExtractor)
