"""SSD feature extractors on Inception v2 and v3 ('ssd_inception_v2/v3').

Variables live under `<meta-arch scope>/InceptionV2/` or `.../InceptionV3/`:
the backbone named as in the slim classification checkpoints
(`InceptionV2/Conv2d_1a_7x7/...`, `InceptionV3/Mixed_7c/Branch_3/...`) and
the extra SSD layers named by `multi_resolution_feature_maps`, e.g.
`FeatureExtractor/InceptionV2/Mixed_5c_2_Conv2d_2_3x3_s2_512` or
`FeatureExtractor/InceptionV3/Mixed_7c_2_Conv2d_3_3x3_s2_512`.

The slim Inception networks have no arg_scope of their own (batch norm,
activation, initializer), so the SSD conv_hyperparams are applied to the
backbone as well: override_base_feature_extractor_hyperparams is implied.
"""
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v2
from tf_slim.nets import inception_v3

from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor

# Guard of the original on the unpadded input.
_MIN_IMAGE_DIM = 33


class _SSDInceptionFeatureExtractor(
    ssd_feature_extractor.SymmetricRangeInputsMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """Backbone end points as the first maps, then stride-2 extra layers.

  Subclasses set the config type, the backbone's scope and base function,
  its last end point, the feature layout and the smallest padded input the
  backbone's VALID convolutions accept. Constructor arguments are those of
  SSDFeatureExtractor.
  """
  _TYPE = None
  _SCOPE = None
  _BASE_FN = None
  _FINAL_ENDPOINT = None
  _FROM_LAYER = None
  _LAYER_DEPTH = None
  _MIN_BACKBONE_DIM = _MIN_IMAGE_DIM

  def _check_arguments(self):
    """The backbone always takes conv_hyperparams (see module docstring)."""
    ssd_feature_extractor.always_override_base_hyperparams(self, self._TYPE)

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33, and at least the
        backbone's minimum after padding to pad_to_multiple.

    Returns:
      List of [batch, h_i, w_i, d_i] float32 feature maps, finest first.

    Raises:
      ValueError: if the static image size is too small (where the original
        fails inside the backbone instead).
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    padded_inputs = feature_map_generators.check_min_image_dim(
        self._MIN_BACKBONE_DIM, feature_map_generators.pad_to_multiple(
            preprocessed_inputs, self._pad_to_multiple))
    # The hyperparams dict replaces any enclosing arg_scope, so it is entered
    # first and covers both the backbone and the extra layers.
    with slim.arg_scope(self._conv_hyperparams_fn()):
      with tf.compat.v1.variable_scope(self._SCOPE,
                                       reuse=self._reuse_weights) as scope:
        _, image_features = type(self)._BASE_FN(
            padded_inputs,
            final_endpoint=self._FINAL_ENDPOINT,
            min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier,
            scope=scope)
        return self._multi_resolution_feature_maps(
            image_features, self._FROM_LAYER[:self._num_layers],
            self._LAYER_DEPTH[:self._num_layers])


class SSDInceptionV2FeatureExtractor(_SSDInceptionFeatureExtractor):
  """Maps from Mixed_4c (stride 16) and Mixed_5c (stride 32) plus four
  stride-2 layers of nominal depth 512, 256, 256, 128."""
  _TYPE = 'ssd_inception_v2'
  _SCOPE = 'InceptionV2'
  _BASE_FN = inception_v2.inception_v2_base
  _FINAL_ENDPOINT = 'Mixed_5c'
  _FROM_LAYER = ['Mixed_4c', 'Mixed_5c', '', '', '', '']
  _LAYER_DEPTH = [-1, -1, 512, 256, 256, 128]


class SSDInceptionV3FeatureExtractor(_SSDInceptionFeatureExtractor):
  """Maps from Mixed_5d (stride 8), Mixed_6e (16) and Mixed_7c (32) plus
  three stride-2 layers of nominal depth 512, 256, 128."""
  _TYPE = 'ssd_inception_v3'
  _SCOPE = 'InceptionV3'
  _BASE_FN = inception_v3.inception_v3_base
  _FINAL_ENDPOINT = 'Mixed_7c'
  _FROM_LAYER = ['Mixed_5d', 'Mixed_6e', 'Mixed_7c', '', '', '']
  _LAYER_DEPTH = [-1, -1, -1, 512, 256, 128]
  # Its VALID convolutions and pools shrink 75 pixels to 7 at Mixed_5d, 3 at
  # Mixed_6e and 1 at Mixed_7c.
  _MIN_BACKBONE_DIM = 75
