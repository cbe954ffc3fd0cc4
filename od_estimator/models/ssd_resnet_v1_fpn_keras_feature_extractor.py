"""SSD FPN on the Keras ResNet v1 layout (ssd_resnet{50,101,152}_v1_fpn_keras).

The original builds these types only in TF2. Their backbone is the Keras
ResNet50/101/152 application (see nets/resnet_v1_keras.py), not slim's
resnet_v1_<d>, and their FPN passes each level's smoothed map (not the raw sum) on to the
next finer level. We build the same computation with tf-slim layers and the
Keras variable names, so the original's TF2 checkpoints restore:

  conv1_conv/kernel, conv<s>_block<b>_<k>_{conv,bn}/...   (backbone)
  ResNet<d>V1_FPN/FeatureMaps/top_down/projection_<n>/{kernel,bias}
  ResNet<d>V1_FPN/FeatureMaps/top_down/smoothing_<n>_{conv,batchnorm}/...
  ResNet<d>V1_FPN/bottom_up_block<l>_{conv,batchnorm}/...   (levels 6, 7)

where <d> is the depth (50, 101, 152); only the number of blocks per stage
differs.

FPN level l (2..5) is built on stage conv<l>; its stride is 2**l.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import feature_map_generators
from od_estimator.models import keras_fpn
from od_estimator.models import keras_named_feature_extractor
from od_estimator.models import ssd_feature_extractor
from od_estimator.models import ssd_fpn_feature_extractor
from od_estimator.nets import resnet_v1_keras

# Smallest image side accepted, as in the original.
_MIN_IMAGE_DIM = 129
# Highest FPN level the backbone provides (stage conv5).
_BASE_MAX_LEVEL = 5
# The backbone's weight decay when conv_hyperparams do not override it.
_WEIGHT_DECAY = 0.0001


def backbone_layers(conv_hyperparams_fn, override_hyperparams):
  """(arg_scope context, activation_fn, use_batch_norm) of a Keras ResNet.

  Args:
    conv_hyperparams_fn: callable returning the conv_hyperparams' slim
      arg_scope.
    override_hyperparams: override_base_feature_extractor_hyperparams: the
      backbone's layers are built from conv_hyperparams instead of the
      original's Keras ResNet defaults.
  """
  if not override_hyperparams:
    return (slim.arg_scope(resnet_v1_keras.default_arg_scope(_WEIGHT_DECAY)),
            tf.nn.relu, True)
  batch_norm_args, activation_fn = (
      keras_named_feature_extractor.overriding_hyperparams(
          conv_hyperparams_fn))
  return (slim.arg_scope(conv_hyperparams_fn()), activation_fn,
          batch_norm_args is not None)


class SSDResNetV1FpnKerasFeatureExtractor(
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    ssd_fpn_feature_extractor.SSDFpnFeatureExtractorMixin,
    ssd_feature_extractor.ImageNetMeanSubtractedInputsMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """SSD FPN feature extractor on a Keras-layout ResNet v1.

  FPN levels 2..5 are stages conv2..conv5.
  """

  # (resnet_v1_keras model name, Keras name of the extractor); subclasses.
  _BACKBONE = None

  def __init__(self,
               is_training,
               depth_multiplier,
               min_depth,
               pad_to_multiple,
               conv_hyperparams_fn,
               fpn_min_level=3,
               fpn_max_level=7,
               additional_layer_depth=256,
               reuse_weights=None,
               use_explicit_padding=False,
               use_depthwise=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Arguments are those of SSDFpnFeatureExtractorMixin without
    use_native_resize_op; use_explicit_padding and use_depthwise must be
    False (as the original), and override_base_feature_extractor_hyperparams
    builds the backbone's layers from conv_hyperparams.

    Raises:
      ValueError: for use_explicit_padding, use_depthwise or FPN levels out
        of range.
    """
    super().__init__(
        is_training, depth_multiplier, min_depth, pad_to_multiple,
        conv_hyperparams_fn,
        fpn_min_level=fpn_min_level,
        fpn_max_level=fpn_max_level,
        additional_layer_depth=additional_layer_depth,
        reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def _check_arguments(self):
    """Raises ValueError for options the Keras extractor does not have."""
    if self._use_explicit_padding:
      raise errors.UserInputError(
          'model.ssd.feature_extractor.use_explicit_padding is '
          'not supported by the Keras ResNet v1 FPN extractors.')
    if self._use_depthwise:
      raise errors.UserInputError(
          'model.ssd.feature_extractor.use_depthwise is not '
          'supported by the Keras ResNet v1 FPN extractors.')
    if not 2 <= self._fpn_min_level <= min(self._fpn_max_level,
                                           _BASE_MAX_LEVEL):
      raise errors.UserInputError(
          'model.ssd.feature_extractor.fpn: min_level must be in [2, '
          'min(max_level, 5)], got min_level=%d, max_level=%d.' % (
              self._fpn_min_level, self._fpn_max_level))

  def _backbone_features(self, preprocessed_inputs):
    """ResNet outputs of levels fpn_min_level..min(fpn_max_level, 5)."""
    model_name, _ = self._BACKBONE
    hyperparams_scope, activation_fn, use_batch_norm = backbone_layers(
        self._conv_hyperparams_fn,
        self._override_base_feature_extractor_hyperparams)
    with hyperparams_scope:
      end_points = resnet_v1_keras.resnet_v1(
          feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                 self._pad_to_multiple),
          model_name=model_name,
          depth_multiplier=self._depth_multiplier,
          min_depth=self._min_depth,
          activation_fn=activation_fn,
          use_batch_norm=use_batch_norm)
    layer_names = resnet_v1_keras.output_layer_names(model_name)
    base_max_level = min(self._fpn_max_level, _BASE_MAX_LEVEL)
    return [end_points[layer_names[level - 2]]
            for level in range(self._fpn_min_level, base_max_level + 1)]

  def extract_features(self, preprocessed_inputs):
    """Builds the FPN feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 129.

    Returns:
      List of fpn_max_level - fpn_min_level + 1 tensors [batch,
      height / 2**l, width / 2**l, depth], l = fpn_min_level..fpn_max_level,
      for inputs whose size is a multiple of 2**fpn_max_level.

    Raises:
      ValueError: if the static image size is below 129.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    # The backbone already has Keras names and the FPN is renamed below;
    # both then move from the caller's scope to the graph's root.
    with self._keras_named(lambda name: name), \
        tf.compat.v1.variable_scope(
            tf.compat.v1.get_variable_scope(), reuse=self._reuse_weights,
            auxiliary_name_scope=False):
      features = self._backbone_features(preprocessed_inputs)
      base_max_level = min(self._fpn_max_level, _BASE_MAX_LEVEL)
      with keras_fpn.renamed(use_depthwise=False), \
          slim.arg_scope(self._conv_hyperparams_fn()), \
          tf.compat.v1.variable_scope(self._BACKBONE[1]):
        return keras_fpn.feature_maps(
            features, self._fpn_depth(),
            ['bottom_up_block%d' % level
             for level in range(base_max_level, self._fpn_max_level)],
            use_depthwise=False)


class SSDResNet50V1FpnKerasFeatureExtractor(
    SSDResNetV1FpnKerasFeatureExtractor):
  """'ssd_resnet50_v1_fpn_keras'."""
  _BACKBONE = ('resnet_v1_50', 'ResNet50V1_FPN')


class SSDResNet101V1FpnKerasFeatureExtractor(
    SSDResNetV1FpnKerasFeatureExtractor):
  """'ssd_resnet101_v1_fpn_keras'."""
  _BACKBONE = ('resnet_v1_101', 'ResNet101V1_FPN')


class SSDResNet152V1FpnKerasFeatureExtractor(
    SSDResNetV1FpnKerasFeatureExtractor):
  """'ssd_resnet152_v1_fpn_keras'."""
  _BACKBONE = ('resnet_v1_152', 'ResNet152V1_FPN')
