"""A narrow SSD feature extractor, for tests about what runs around the SSD.

Two 3x3 stride-2 convolutions and one SSD layer on top (16x16 and 8x8 maps
of 64x64 inputs): the MobileNet extractors' structure (strided convs under
the config's conv_hyperparams, batch norm and ReLU6 included, then
multi_resolution_feature_maps) with a few layers instead of dozens, so a
training graph builds in a fraction of the time. The box predictor, anchors,
losses and post-processing stay the config's own. A config takes it with
CONFIG_FIELDS, once registered() has made it type TYPE.
"""
import contextlib

import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_feature_extractor_registry

TYPE = 'narrow_ssd'
NUM_LAYERS = 2
# Nominal depths (before depth_multiplier) of the two convolutions and of
# the SSD layer.
_DEPTHS = (32, 64, 128)
# The model.ssd fields that select it (hparams-override syntax).
CONFIG_FIELDS = ','.join([
    'model.ssd.feature_extractor.type=' + TYPE,
    'model.ssd.feature_extractor.num_layers=%d' % NUM_LAYERS,
    'model.ssd.anchor_generator.ssd_anchor_generator.num_layers=%d' %
    NUM_LAYERS])


class NarrowSSDFeatureExtractor(ssd_feature_extractor.SSDFeatureExtractor):
  """Conv 3x3/2, conv 3x3/2 (the first map), one stride-2 SSD layer."""

  def preprocess(self, resized_inputs):
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    if self._num_layers != NUM_LAYERS:
      raise ValueError('%s builds %d feature maps, not %d.' % (
          TYPE, NUM_LAYERS, self._num_layers))
    depth = feature_map_generators.get_depth_fn(self._depth_multiplier,
                                                self._min_depth)
    with slim.arg_scope(self._conv_hyperparams_fn()):
      with tf.compat.v1.variable_scope('NarrowNet',
                                       reuse=self._reuse_weights):
        net = slim.conv2d(preprocessed_inputs, depth(_DEPTHS[0]), [3, 3],
                          stride=2, scope='Conv_0')
        net = slim.conv2d(net, depth(_DEPTHS[1]), [3, 3], stride=2,
                          scope='Conv_1')
        return self._multi_resolution_feature_maps(
            {'Conv_1': net}, ['Conv_1', ''], [-1, _DEPTHS[2]])


@contextlib.contextmanager
def registered():
  """Context: NarrowSSDFeatureExtractor is SSD feature extractor TYPE."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  TYPE, NarrowSSDFeatureExtractor)
    yield
