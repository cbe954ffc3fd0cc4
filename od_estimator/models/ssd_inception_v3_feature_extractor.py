"""SSD feature extractor on Inception v3 (config type 'ssd_inception_v3').

Variables live under `<meta-arch scope>/InceptionV3/`: the backbone named as
in the slim classification checkpoints (`InceptionV3/Conv2d_1a_3x3/...`,
`InceptionV3/Mixed_7c/Branch_3/...`) and the extra SSD layers named by
`multi_resolution_feature_maps`, e.g.
`FeatureExtractor/InceptionV3/Mixed_7c_2_Conv2d_3_3x3_s2_512`.
"""
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v3

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor

# Guard of the original on the unpadded input.
_MIN_IMAGE_DIM = 33
# Smallest padded input the backbone can take: its VALID convolutions and
# pools shrink 75 pixels to 7 at Mixed_5d, 3 at Mixed_6e and 1 at Mixed_7c.
_MIN_BACKBONE_DIM = 75


class SSDInceptionV3FeatureExtractor(ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps from Mixed_5d (stride 8), Mixed_6e (16) and Mixed_7c (32) plus
  three stride-2 layers of nominal depth 512, 256, 128.

  The slim Inception v3 has no arg_scope of its own here (batch norm,
  activation, initializer), so the SSD conv_hyperparams are applied to the
  backbone as well: override_base_feature_extractor_hyperparams is implied.
  """

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor; arguments as in SSDFeatureExtractor.
    """
    super().__init__(
        is_training=is_training,
        depth_multiplier=depth_multiplier,
        min_depth=min_depth,
        pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    ssd_feature_extractor.always_override_base_hyperparams(
        self, 'ssd_inception_v3')

  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] pixels from [0, 255] to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33, and at least 75
        after padding to pad_to_multiple.

    Returns:
      List of [batch, h_i, w_i, d_i] float32 feature maps, finest first.

    Raises:
      ValueError: if the static image size is below 33, or below 75 after
        padding (where the original fails inside the backbone instead).
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    padded_inputs = feature_map_generators.check_min_image_dim(
        _MIN_BACKBONE_DIM, feature_map_generators.pad_to_multiple(
            preprocessed_inputs, self._pad_to_multiple))
    layout = {
        'from_layer': ['Mixed_5d', 'Mixed_6e', 'Mixed_7c', '', '', ''
                      ][:self._num_layers],
        'layer_depth': [-1, -1, -1, 512, 256, 128][:self._num_layers],
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    # The hyperparams dict replaces any enclosing arg_scope, so it is entered
    # first and covers both the backbone and the extra layers.
    with slim.arg_scope(self._conv_hyperparams_fn()):
      with tf.compat.v1.variable_scope('InceptionV3',
                                       reuse=self._reuse_weights) as scope:
        _, image_features = inception_v3.inception_v3_base(
            padded_inputs,
            final_endpoint='Mixed_7c',
            min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier,
            scope=scope)
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            feature_map_layout=layout,
            depth_multiplier=self._depth_multiplier,
            min_depth=self._min_depth,
            insert_1x1_conv=True,
            image_features=image_features)
    return list(feature_maps.values())
