"""The original's Keras FPN layers (TF2 extractors), built with slim.

The `*_fpn_keras` extractors share the Keras top-down path of the original
(each level's smoothed map, not the raw sum, goes on to the next finer
level) and its stride-2 layers above the backbone. Their variables, below
the extractor's Keras name:

  FeatureMaps/top_down/projection_<n>/{kernel,bias}
  FeatureMaps/top_down/smoothing_<n>_{conv,batchnorm}/...
  <coarse layer>_{conv,batchnorm}/...

With use_depthwise (FPN-lite) the 3x3 convs are separable and named
`<layer>_depthwise_conv/{depthwise,pointwise}_kernel`.
"""
import functools

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.utils import keras_names


def _conv3x3(use_depthwise):
  """The 3x3 conv layer function (conv2d or separable_conv2d)."""
  if use_depthwise:
    return functools.partial(slim.separable_conv2d, depth_multiplier=1)
  return slim.conv2d


def _top_down(features, depth, use_depthwise):
  """The Keras FPN top-down path; features are finest first.

  Each finer level adds its 1x1 projection to the upsampled output of the
  coarser level and is smoothed by a 3x3 conv + batch norm + activation.
  The coarsest is the projection.

  Returns:
    List of [batch, h_i, w_i, depth] tensors, finest first.
  """
  conv3x3 = _conv3x3(use_depthwise)

  def project(net, level):
    return slim.conv2d(net, depth, [1, 1], activation_fn=None,
                       normalizer_fn=None, scope='projection_%d' % level)

  outputs = [project(features[-1], len(features))]
  for level in reversed(range(len(features) - 1)):
    top_down = feature_map_generators.nearest_neighbor_upsampling(
        outputs[-1], scale=2)
    top_down += project(features[level], level + 1)
    outputs.append(conv3x3(top_down, depth, [3, 3],
                           scope='smoothing_%d' % (level + 1)))
  return outputs[::-1]


def feature_maps(features, depth, coarse_layer_names, use_depthwise):
  """Top-down path, then one stride-2 layer per coarse layer name.

  Build it in the conv_hyperparams arg_scope, under `renamed` of the same
  use_depthwise.

  Args:
    features: backbone maps of the FPN's base levels, finest first.
    depth: depth of every output map.
    coarse_layer_names: scope names of the levels above the backbone's.
    use_depthwise: separable 3x3 convs (FPN-lite).

  Returns:
    List of len(features) + len(coarse_layer_names) maps, finest first.
  """
  with tf.compat.v1.variable_scope('FeatureMaps/top_down'):
    maps = _top_down(features, depth, use_depthwise)
  net = maps[-1]
  for name in coarse_layer_names:
    net = _conv3x3(use_depthwise)(net, depth, [3, 3], stride=2,
                                  padding='SAME', scope=name)
    maps.append(net)
  return maps


def variable_name(name, use_depthwise):
  """Keras name of an FPN variable (slim name below the FPN's scope)."""
  layer = name.split('/')[-2]
  if layer.startswith('projection_'):
    return keras_names.keras_layer_variable(name)
  conv_suffix = '_depthwise_conv' if use_depthwise else '_conv'
  return keras_names.keras_layer_variable(name, conv_suffix, '_batchnorm')


def renamed(use_depthwise):
  """Context: FPN variables built inside get their Keras names."""
  return keras_names.renamed_variables(
      functools.partial(variable_name, use_depthwise=use_depthwise))
