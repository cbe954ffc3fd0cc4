"""SSD feature extractors on MobileNet v3 ('ssd_mobilenet_v3_large', '_small').

The backbone is built in `<meta-arch scope>/MobilenetV3/` with the slim
checkpoint names (`MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights`,
...); the SSD layers are named by `multi_resolution_feature_maps` after the
last backbone map, e.g. `MobilenetV3/layer_17_2_Conv2d_2_3x3_s2_512/weights`.
The MobileNet EdgeTPU extractor (ssd_mobilenet_edgetpu_feature_extractor.py)
shares the base class. Unlike the original, num_layers is honoured (the
original always built 6 maps). There is no use_hardswish argument: the
backbone's activations come from its conv defs, as in the original.
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v3

# Smallest image side accepted, as the original (the total stride is 32).
_MIN_IMAGE_DIM = 33


class SSDMobileNetV3FeatureExtractorBase(
    ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps from two backbone end points plus stride-2 layers.

  Subclasses set the class attributes below. Constructor arguments are those
  of SSDFeatureExtractor.
  """

  # Backbone conv defs (mobilenet_v3.*).
  _conv_defs = None
  # The two end points feeding the first two maps; the backbone stops at
  # the second.
  _from_layers = None
  # Variable scope of the backbone and SSD layers.
  _scope_name = 'MobilenetV3'

  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] pixels from [0, 255] to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33.

    Returns:
      List of num_layers [batch, h_i, w_i, d_i] float32 maps, finest first.

    Raises:
      ValueError: if the static image size is below 33.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    with tf.compat.v1.variable_scope(self._scope_name,
                                     reuse=self._reuse_weights) as scope, \
        slim.arg_scope(mobilenet_v3.training_scope(is_training=None,
                                                   bn_decay=0.9997)):
      # is_training=None: the meta-architecture's batch norm scope decides.
      image_features = self._backbone_end_points(preprocessed_inputs, scope)
      # Entered inside the training scope, so that conv_hyperparams_fn's
      # arg_scope dict extends it rather than replacing it.
      with slim.arg_scope(self._conv_hyperparams_fn()):
        return self._feature_maps(image_features)

  def _backbone_end_points(self, preprocessed_inputs, scope):
    """Runs the backbone up to the second SSD end point inside `scope`."""
    with (slim.arg_scope(self._conv_hyperparams_fn())
          if self._override_base_feature_extractor_hyperparams else
          contextlib.nullcontext()):
      _, image_features = mobilenet_v3.mobilenet_base(
          feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                 self._pad_to_multiple),
          conv_defs=self._conv_defs,
          final_endpoint=self._from_layers[1],
          depth_multiplier=self._depth_multiplier,
          min_depth=self._min_depth,
          use_explicit_padding=self._use_explicit_padding,
          scope=scope)
    return image_features

  def _feature_maps(self, image_features):
    """Adds the SSD layers (in the caller's conv_hyperparams arg_scope)."""
    layout = {
        'from_layer': (list(self._from_layers) +
                       [''] * 4)[:self._num_layers],
        'layer_depth': [-1, -1, 512, 256, 256, 128][:self._num_layers],
        'use_depthwise': self._use_depthwise,
        'use_explicit_padding': self._use_explicit_padding,
    }
    feature_maps = feature_map_generators.multi_resolution_feature_maps(
        feature_map_layout=layout,
        depth_multiplier=self._depth_multiplier,
        min_depth=self._min_depth,
        insert_1x1_conv=True,
        image_features=image_features)
    return list(feature_maps.values())


class SSDMobileNetV3LargeFeatureExtractor(SSDMobileNetV3FeatureExtractorBase):
  """MobileNet v3 large: maps from layer_14's expansion and layer_17."""

  _conv_defs = mobilenet_v3.V3_LARGE_DETECTION
  _from_layers = ('layer_14/expansion_output', 'layer_17')


class SSDMobileNetV3SmallFeatureExtractor(SSDMobileNetV3FeatureExtractorBase):
  """MobileNet v3 small: maps from layer_10's expansion and layer_13."""

  _conv_defs = mobilenet_v3.V3_SMALL_DETECTION
  _from_layers = ('layer_10/expansion_output', 'layer_13')
