"""Faster R-CNN on a ResNet v1 feature pyramid (faster_rcnn_resnet*_fpn_keras).

Lin et al., "Feature Pyramid Networks for Object Detection",
https://arxiv.org/abs/1612.03144.

The original builds these types only in TF2, as Keras models. The first
stage is the Keras ResNet (nets/resnet_v1_keras.py) padded to a multiple of
pad_to_multiple, with the Keras FPN of the SSD FPN extractors on stages
conv<fpn_min_level>..conv5 (models/keras_fpn.py) and stride-2 layers above
up to fpn_max_level: a list of maps of additional_layer_depth channels,
finest first, from which the RPN proposes (one anchor grid per level) and
each proposal is cropped at its own level (core/multilevel_crop). The
second stage is the FPN box head: the flattened crop through two fully
connected layers of 1024 ReLU units, with a batch norm (conv_hyperparams')
between them; the box classifier features are [proposals, 1, 1, 1024].

We build the same computation with tf-slim layers and the original's TF2
variable names (tests/data/tf2_checkpoint_keys/ records them), none of them
under the two stage scopes:

  conv1_conv/kernel, conv<s>_block<b>_<k>_{conv,bn}/...   (backbone)
  private__resnet_fpn/FeatureMaps/top_down/projection_<n>/{kernel,bias}
  private__resnet_fpn/FeatureMaps/top_down/smoothing_<n>_{conv,batchnorm}/...
  private__resnet_fpn/bottom_up_block<l>_{conv,batchnorm}/...  (levels > 5)
  dense/{kernel,bias}, freezable_batch_norm/..., dense_1/{kernel,bias}
                                                         (box head)

(`private__resnet_fpn` is the name Keras gives the original's pyramid
layer; `dense`, `dense_1` and `freezable_batch_norm` those of its box head's
unnamed layers.)
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor
from od_estimator.models import feature_map_generators
from od_estimator.models import keras_fpn
from od_estimator.models import keras_named_feature_extractor
from od_estimator.models import ssd_resnet_v1_fpn_keras_feature_extractor
from od_estimator.nets import resnet_v1_keras
from od_estimator.utils import keras_names

_FPN_SCOPE = 'private__resnet_fpn'
# Highest pyramid level the backbone provides (stage conv5).
_BASE_MAX_LEVEL = 5
_BOX_HEAD_UNITS = 1024
# The box head's Keras layer names.
_BOX_HEAD_LAYERS = ('dense', 'freezable_batch_norm', 'dense_1')
_FIELD = faster_rcnn_feature_extractor.CONFIG_FIELD


def _keras_weight_name(name):
  """'<layer>/weights' -> '<layer>/kernel' (batch norm names are kept)."""
  return '%s/%s' % keras_names.split_variable(name)


def _dense(net, scope):
  """A Keras Dense layer of the box head: glorot uniform, ReLU, no decay."""
  return slim.fully_connected(
      net, _BOX_HEAD_UNITS, activation_fn=tf.nn.relu, normalizer_fn=None,
      weights_initializer=tf.compat.v1.glorot_uniform_initializer(),
      weights_regularizer=None, biases_initializer=tf.zeros_initializer(),
      scope=scope)


class FasterRCNNResnetV1FpnKerasFeatureExtractor(
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """A Keras-layout ResNet v1 FPN for Faster R-CNN; subclasses set _MODEL."""

  # nets/resnet_v1_keras model name.
  _MODEL = None
  _FIRST_STAGE_STRIDES = (8, 16)
  # FasterRcnnFeatureExtractor fields the builder passes as keyword
  # arguments (see faster_rcnn_model_builder).
  CONFIG_FIELDS = ('conv_hyperparams',
                   'override_base_feature_extractor_hyperparams', 'fpn',
                   'pad_to_multiple')

  def __init__(self, is_training, first_stage_features_stride,
               batch_norm_trainable=False, reuse_weights=None,
               weight_decay=0.0, conv_hyperparams_fn=None,
               override_base_feature_extractor_hyperparams=False,
               fpn_min_level=2, fpn_max_level=6, additional_layer_depth=256,
               pad_to_multiple=32, depth_multiplier=1.0, min_depth=8):
    """Creates the extractor.

    Args:
      is_training, first_stage_features_stride (8 or 16, unused by the
        pyramid, as in the original), batch_norm_trainable, reuse_weights,
        weight_decay: see FasterRCNNFeatureExtractor.
      conv_hyperparams_fn: callable returning the slim arg_scope of the
        feature_extractor.conv_hyperparams (built for batch norm training
        when batch_norm_trainable): the FPN's layers and the box head's
        batch norm.
      override_base_feature_extractor_hyperparams: build the backbone's
        layers from conv_hyperparams too (else the Keras ResNet defaults).
      fpn_min_level: finest pyramid level, 2..5 (stage conv<level>).
      fpn_max_level: coarsest level; levels above 5 are stride-2 layers.
      additional_layer_depth: channels of every pyramid map.
      pad_to_multiple: the images are zero-padded (bottom, right) to a
        multiple of it.
      depth_multiplier, min_depth: the backbone's width (tests build tiny
        ones; the configs have no such field).

    Raises:
      UserInputError: without conv_hyperparams, or for FPN levels out of
        range.
    """
    super().__init__(is_training, first_stage_features_stride,
                     batch_norm_trainable, reuse_weights, weight_decay)
    if conv_hyperparams_fn is None:
      raise errors.UserInputError(
          '%s.conv_hyperparams must be set for %s: they build the feature '
          'pyramid\'s layers.' % (_FIELD, type(self).__name__))
    if not 2 <= fpn_min_level <= min(fpn_max_level, _BASE_MAX_LEVEL):
      raise errors.UserInputError(
          '%s.fpn: min_level must be in [2, min(max_level, 5)], got '
          'min_level=%d, max_level=%d.' % (_FIELD, fpn_min_level,
                                           fpn_max_level))
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._override_hyperparams = override_base_feature_extractor_hyperparams
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._pad_to_multiple = pad_to_multiple
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth

  @property
  def pyramid_levels(self):
    """(min_level, max_level) of the first stage's maps."""
    return self._fpn_min_level, self._fpn_max_level

  def preprocess(self, resized_inputs):
    """Subtracts the ImageNet channel means, as the original's ResNets."""
    return faster_rcnn_resnet_v1_feature_extractor.subtract_channel_means(
        resized_inputs)

  @contextlib.contextmanager
  def _named_from_root(self, rename_fn=lambda name: name):
    """Context: variables built inside get rename_fn(name) (Keras names),
    moved from the stage's scope to the graph's root; batch norm trains
    only with batch_norm_trainable (the Keras ResNet defaults say nothing
    of it)."""
    with self._keras_named(rename_fn), tf.compat.v1.variable_scope(
        tf.compat.v1.get_variable_scope(), reuse=self._reuse_weights,
        auxiliary_name_scope=False), slim.arg_scope(
            [slim.batch_norm], is_training=self._train_batch_norm):
      yield

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """The pyramid: fpn_max_level - fpn_min_level + 1 maps, finest first."""
    del scope
    base_max_level = min(self._fpn_max_level, _BASE_MAX_LEVEL)
    with self._named_from_root():
      # Made here, the backbone's arg_scope keeps the batch norm mode.
      hyperparams_scope, activation_fn, use_batch_norm = (
          ssd_resnet_v1_fpn_keras_feature_extractor.backbone_layers(
              self._conv_hyperparams_fn, self._override_hyperparams))
      with hyperparams_scope:
        end_points = resnet_v1_keras.resnet_v1(
            feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                   self._pad_to_multiple),
            model_name=self._MODEL, depth_multiplier=self._depth_multiplier,
            min_depth=self._min_depth, activation_fn=activation_fn,
            use_batch_norm=use_batch_norm)
      layer_names = resnet_v1_keras.output_layer_names(self._MODEL)
      features = [end_points[layer_names[level - 2]]
                  for level in range(self._fpn_min_level, base_max_level + 1)]
      with keras_fpn.renamed(use_depthwise=False), \
          slim.arg_scope(self._conv_hyperparams_fn()), \
          tf.compat.v1.variable_scope(_FPN_SCOPE):
        maps = keras_fpn.feature_maps(
            features, self._additional_layer_depth,
            ['bottom_up_block%d' % level
             for level in range(base_max_level, self._fpn_max_level)],
            use_depthwise=False)
    return maps, end_points

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """[proposals, 1, 1, 1024] features of the FPN box head."""
    del scope
    batch_norm_args, _ = keras_named_feature_extractor.overriding_hyperparams(
        self._conv_hyperparams_fn)
    dense, batch_norm, dense_1 = _BOX_HEAD_LAYERS
    with self._named_from_root(_keras_weight_name), \
        slim.arg_scope(self._conv_hyperparams_fn()):
      net = _dense(slim.flatten(proposal_feature_maps), dense)
      # [proposals, 1, 1, units]: slim normalizes rank 4 as Keras does.
      net = net[:, tf.newaxis, tf.newaxis, :]
      if batch_norm_args is not None:
        net = slim.batch_norm(net, activation_fn=None, scope=batch_norm)
      return _dense(net, dense_1)

  def restore_from_classification_checkpoint_fn(
      self, first_stage_feature_extractor_scope,
      second_stage_feature_extractor_scope):
    """{Keras name: variable} of the backbone, as a classification
    checkpoint names it (the pyramid and box head are not in one)."""
    del first_stage_feature_extractor_scope
    own = super().restore_from_classification_checkpoint_fn(
        second_stage_feature_extractor_scope)
    return {name: variable for name, variable in own.items()
            if not name.startswith(_FPN_SCOPE + '/') and
            name.split('/')[0] not in _BOX_HEAD_LAYERS}


class FasterRCNNResnet50FpnKerasFeatureExtractor(
    FasterRCNNResnetV1FpnKerasFeatureExtractor):
  """'faster_rcnn_resnet50_fpn_keras'."""
  _MODEL = 'resnet_v1_50'


class FasterRCNNResnet101FpnKerasFeatureExtractor(
    FasterRCNNResnetV1FpnKerasFeatureExtractor):
  """'faster_rcnn_resnet101_fpn_keras'."""
  _MODEL = 'resnet_v1_101'


class FasterRCNNResnet152FpnKerasFeatureExtractor(
    FasterRCNNResnetV1FpnKerasFeatureExtractor):
  """'faster_rcnn_resnet152_fpn_keras'."""
  _MODEL = 'resnet_v1_152'
