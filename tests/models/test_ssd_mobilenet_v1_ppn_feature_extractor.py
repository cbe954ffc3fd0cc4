"""SSD MobileNet v1 PPN feature extractor: shapes, values and names."""
import numpy as np
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import ssd_mobilenet_v1_ppn_feature_extractor


def _conv_hyperparams_fn():
  with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu6) as scope:
    return scope


def test_pooling_pyramid(execute):
  def graph_fn(images):
    extractor = (ssd_mobilenet_v1_ppn_feature_extractor
                 .SSDMobileNetV1PpnFeatureExtractor(
                     is_training=False, depth_multiplier=0.25, min_depth=16,
                     pad_to_multiple=1,
                     conv_hyperparams_fn=_conv_hyperparams_fn))
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    names = [v.op.name for v in tf.compat.v1.global_variables()]
    # No extra variables: 27 backbone convs (Conv2d_0 + 13 depthwise +
    # 13 pointwise) x (weights, BN beta, gamma, moving mean, variance).
    assert len(names) == 27 * 5
    assert all(name.startswith('FeatureExtractor/MobilenetV1/Conv2d_')
               for name in names)
    return maps

  images = np.random.RandomState(0).uniform(0, 255, [2, 64, 64, 3])
  maps = execute(graph_fn, [images.astype(np.float32)])
  # Conv2d_11_pointwise: stride 16, 512 * 0.25 = 128 channels; then five
  # SAME 2x2 stride-2 max pools: 4 -> 2 -> 1 -> 1 -> 1 -> 1.
  assert [m.shape for m in maps] == [
      (2, 4, 4, 128), (2, 2, 2, 128), (2, 1, 1, 128), (2, 1, 1, 128),
      (2, 1, 1, 128), (2, 1, 1, 128)]
  np.testing.assert_array_equal(
      maps[1], maps[0].reshape([2, 2, 2, 2, 2, 128]).max(axis=(2, 4)))
  np.testing.assert_array_equal(maps[2], maps[0].max(axis=(1, 2),
                                                     keepdims=True))
  np.testing.assert_array_equal(maps[5], maps[2])
