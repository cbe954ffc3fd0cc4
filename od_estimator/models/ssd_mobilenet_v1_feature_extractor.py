"""SSD feature extractor on MobileNet v1 (config type 'ssd_mobilenet_v1').

Variables live under `<meta-arch scope>/MobilenetV1/`: the backbone as in
the slim classification checkpoints (`MobilenetV1/Conv2d_0/weights`, ...) and
the extra SSD layers named by `multi_resolution_feature_maps`, e.g.
`FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512`.
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v1

# Smallest image side the backbone accepts (its total stride is 32).
_MIN_IMAGE_DIM = 33


class SSDMobileNetV1FeatureExtractor(ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps from Conv2d_11/13_pointwise plus four stride-2 layers.

  Subclasses reuse `_mobilenet_v1_end_points` and replace `_feature_maps`.
  Constructor arguments are those of SSDFeatureExtractor.
  """

  # Scope of the backbone and the extra layers, below the meta-arch scope.
  _SCOPE = 'MobilenetV1'
  # The original regularizes depthwise weights in the SSD extractors.
  _REGULARIZE_DEPTHWISE = True
  # Replacement of mobilenet_v1.MOBILENETV1_CONV_DEFS, None for the default.
  _conv_defs = None

  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] pixels from [0, 255] to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33.

    Returns:
      List of [batch, h_i, w_i, d_i] float32 feature maps, finest first.

    Raises:
      ValueError: if the static image size is below 33.
    """
    preprocessed_inputs = self._check_inputs(preprocessed_inputs)
    with tf.compat.v1.variable_scope(self._SCOPE,
                                     reuse=self._reuse_weights) as scope:
      image_features = self._mobilenet_v1_end_points(preprocessed_inputs,
                                                     scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        return self._feature_maps(image_features)

  def _check_inputs(self, preprocessed_inputs):
    return feature_map_generators.check_min_image_dim(_MIN_IMAGE_DIM,
                                                      preprocessed_inputs)

  def _backbone_hyperparams(self):
    """Extra arg_scope on the backbone: the SSD one when overriding."""
    if self._override_base_feature_extractor_hyperparams:
      return slim.arg_scope(self._conv_hyperparams_fn())
    return contextlib.nullcontext()

  def _mobilenet_v1_end_points(self, preprocessed_inputs, scope):
    """Runs MobileNet v1 up to Conv2d_13_pointwise inside `scope`.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 images.
      scope: the already entered VariableScope to build the net in.

    Returns:
      dict {end point name: [batch, h, w, d] tensor}.
    """
    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(
        is_training=None, regularize_depthwise=self._REGULARIZE_DEPTHWISE)):
      with self._backbone_hyperparams():
        _, image_features = mobilenet_v1.mobilenet_v1_base(
            feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                   self._pad_to_multiple),
            final_endpoint='Conv2d_13_pointwise',
            min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier,
            conv_defs=self._conv_defs,
            use_explicit_padding=self._use_explicit_padding,
            scope=scope)
    return image_features

  def _feature_maps(self, image_features):
    """Adds the SSD layers (inside the conv_hyperparams arg_scope)."""
    layout = {
        'from_layer': ['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', '',
                       '', ''][:self._num_layers],
        'layer_depth': [-1, -1, 512, 256, 256, 128][:self._num_layers],
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    feature_maps = feature_map_generators.multi_resolution_feature_maps(
        feature_map_layout=layout,
        depth_multiplier=self._depth_multiplier,
        min_depth=self._min_depth,
        insert_1x1_conv=True,
        image_features=image_features)
    return list(feature_maps.values())
