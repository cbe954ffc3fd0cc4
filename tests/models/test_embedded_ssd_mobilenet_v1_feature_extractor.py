"""Embedded SSD MobileNet v1 feature extractor: input checks, shapes, names.

Expected names/shapes match the TF1 Object Detection API's
EmbeddedSSDMobileNetV1FeatureExtractor on the same inputs.
"""
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import embedded_ssd_mobilenet_v1_feature_extractor

_PREFIX = 'FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_'


def _conv_hyperparams_fn():
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      normalizer_fn=slim.batch_norm,
                      weights_regularizer=slim.l2_regularizer(0.1)) as scope:
    return scope


def _extractor(pad_to_multiple=1):
  return (embedded_ssd_mobilenet_v1_feature_extractor
          .EmbeddedSSDMobileNetV1FeatureExtractor(
              is_training=False, depth_multiplier=0.25, min_depth=16,
              pad_to_multiple=pad_to_multiple,
              conv_hyperparams_fn=_conv_hyperparams_fn))


def test_pad_to_multiple_must_be_1():
  with pytest.raises(ValueError, match='pad_to_multiple'):
    _extractor(pad_to_multiple=32)


def test_image_must_be_256():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='image size must be = 256'):
      _extractor().extract_features(tf.zeros([1, 256, 300, 3]))


def test_shapes_and_names():
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = _extractor().extract_features(tf.zeros([1, 256, 256, 3]))
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    regularized = [loss.name for loss in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)]
  # Strides 16 and 32 (16, 8), then SAME stride-2 3x3, 3x3, 2x2 convs.
  # Depths 512 * 0.25, 1024 * 0.25, then 512/256/256 * 0.25.
  assert [m.shape.as_list() for m in maps] == [
      [1, 16, 16, 128], [1, 8, 8, 256], [1, 4, 4, 128], [1, 2, 2, 64],
      [1, 1, 1, 64]]
  extra = {k: v for k, v in variables.items() if k.startswith(_PREFIX) and
           k.endswith('weights')}
  assert extra == {
      _PREFIX + '1_Conv2d_2_1x1_64/weights': [1, 1, 256, 64],
      _PREFIX + '2_Conv2d_2_3x3_s2_128/weights': [3, 3, 64, 128],
      _PREFIX + '1_Conv2d_3_1x1_32/weights': [1, 1, 128, 32],
      _PREFIX + '2_Conv2d_3_3x3_s2_64/weights': [3, 3, 32, 64],
      _PREFIX + '1_Conv2d_4_1x1_32/weights': [1, 1, 64, 32],
      _PREFIX + '2_Conv2d_4_2x2_s2_64/weights': [2, 2, 32, 64]}
  # Unlike the other SSD MobileNet v1 extractors, backbone depthwise
  # weights are not regularized.
  assert not any('_depthwise/' in name for name in regularized)
  assert any('Conv2d_1_pointwise/' in name for name in regularized)


@pytest.mark.parametrize('num_layers', [4, 6])
def test_num_layers_other_than_five_is_refused(num_layers):
  # Five maps are always built: another count cannot be honoured.
  with pytest.raises(ValueError, match='num_layers.*always builds 5'):
    (embedded_ssd_mobilenet_v1_feature_extractor
     .EmbeddedSSDMobileNetV1FeatureExtractor(
         is_training=False, depth_multiplier=0.25, min_depth=16,
         pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn,
         num_layers=num_layers))


def test_num_layers_five_builds_five_maps():
  extractor = (embedded_ssd_mobilenet_v1_feature_extractor
               .EmbeddedSSDMobileNetV1FeatureExtractor(
                   is_training=False, depth_multiplier=0.25, min_depth=16,
                   pad_to_multiple=1, conv_hyperparams_fn=_conv_hyperparams_fn,
                   num_layers=5))
  with tf.Graph().as_default():
    maps = extractor.extract_features(tf.zeros([1, 256, 256, 3]))
  assert len(maps) == 5
