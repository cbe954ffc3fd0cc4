"""SSD feature extractor on MobileNet v2 (config type 'ssd_mobilenet_v2').

Variables live under `<meta-arch scope>/MobilenetV2/`: the backbone as in
the slim classification checkpoints (`MobilenetV2/Conv/weights`,
`MobilenetV2/expanded_conv_1/expand/weights`, ...) and the extra SSD layers
named by `multi_resolution_feature_maps`, e.g.
`FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights`.
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v2

# Smallest image side the backbone accepts (its total stride is 32).
_MIN_IMAGE_DIM = 33


def _backbone_arg_scope():
  # is_training=None: batch norm mode comes from the caller's arg_scope (the
  # SSD meta-architecture sets slim.batch_norm's is_training).
  return mobilenet_v2.training_scope(is_training=None, bn_decay=0.9997)


class SSDMobileNetV2FeatureExtractor(ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps from layer_15's expansion and layer_19 plus stride-2 layers.

  Subclasses reuse `_mobilenet_v2_end_points` and replace `_feature_maps`.
  Constructor arguments are those of SSDFeatureExtractor.
  """

  # Replacement of mobilenet_v2.V2_DEF, None for the default.
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
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    with tf.compat.v1.variable_scope('MobilenetV2',
                                     reuse=self._reuse_weights) as scope:
      image_features = self._mobilenet_v2_end_points(preprocessed_inputs,
                                                     scope)
      with self._extra_layers_scope():
        return self._feature_maps(image_features)

  @contextlib.contextmanager
  def _extra_layers_scope(self):
    """arg_scope of the SSD layers.

    As the original, they are built inside the backbone's training scope
    too; conv_hyperparams_fn, entered last, takes precedence.
    """
    with slim.arg_scope(_backbone_arg_scope()), \
        slim.arg_scope(self._conv_hyperparams_fn()):
      yield

  def _mobilenet_v2_end_points(self, preprocessed_inputs, scope):
    """Runs MobileNet v2 up to layer_19 inside `scope`.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 images.
      scope: the already entered VariableScope to build the net in.

    Returns:
      dict {end point name: [batch, h, w, d] tensor}.
    """
    with slim.arg_scope(_backbone_arg_scope()):
      # Built here, inside the backbone's scope: entering a slim scope dict
      # replaces the current scope, so it must already hold the backbone's.
      with (slim.arg_scope(self._conv_hyperparams_fn())
            if self._override_base_feature_extractor_hyperparams else
            contextlib.nullcontext()):
        _, image_features = mobilenet_v2.mobilenet_base(
            feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                   self._pad_to_multiple),
            final_endpoint='layer_19',
            depth_multiplier=self._depth_multiplier,
            min_depth=self._min_depth,
            conv_defs=self._conv_defs,
            use_explicit_padding=self._use_explicit_padding,
            scope=scope)
    return image_features

  def _feature_maps(self, image_features):
    """Adds the SSD layers (inside the conv_hyperparams arg_scope)."""
    layout = {
        'from_layer': ['layer_15/expansion_output', 'layer_19', '', '', '',
                       ''][:self._num_layers],
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
