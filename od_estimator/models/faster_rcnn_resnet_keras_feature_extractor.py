"""Faster R-CNN on the Keras ResNet v1 layout (faster_rcnn_resnet*_keras).

The original builds these types only in TF2, on its Keras ResNet50/101/152
(see nets/resnet_v1_keras.py), not on slim's resnet_v1_<d>: the first stage
is conv1 .. conv4 (output stride 16), the second stage conv5 on every
crop. Unlike the slim extractors (conv5 at stride 1 on the crops), conv5's
first block keeps its stride 2, so a 7x7 pooled crop becomes 4x4 box
classifier features. Each layer exists once: conv5 is not built in the
first stage. Variables take the Keras names at the graph's root, with
neither stage scope, so the original's TF2 checkpoints restore:

  conv1_conv/kernel, conv1_bn/{gamma,beta,moving_mean,moving_variance}
  conv<s>_block<b>_<k>_{conv,bn}/...   s = 2..4 (first stage), 5 (second)

The layers have the original's settings: no bias, batch norm with decay
0.997 and epsilon 1e-5, variance scaling initializer, the extractor's
weight decay as a Keras l2 (0 unless set in code, as in the original).
Inputs have the ImageNet channel means subtracted, as the slim extractors.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor
from od_estimator.models import keras_named_feature_extractor
from od_estimator.nets import resnet_v1_keras

# Stage of the proposal features; the box classifier runs the next one.
_PROPOSAL_STAGE = 4


class FasterRCNNResnetKerasFeatureExtractor(
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    faster_rcnn_resnet_v1_feature_extractor.FasterRCNNResnetV1FeatureExtractor):
  """Keras-layout ResNet v1 split at conv4 / conv5 for Faster R-CNN.

  Subclasses set _ARCHITECTURE (resnet_v1_keras model name).
  """

  _FIRST_STAGE_STRIDES = (16,)

  def _stages(self, inputs, first_stage, last_stage):
    """Stages first_stage..last_stage of the ResNet, with Keras root names."""
    with self._keras_named(lambda name: name), \
        tf.compat.v1.variable_scope(
            tf.compat.v1.get_variable_scope(), reuse=self._reuse_weights,
            auxiliary_name_scope=False), \
        slim.arg_scope(resnet_v1_keras.default_arg_scope(
            self._weight_decay)), \
        slim.arg_scope([slim.batch_norm],
                       is_training=self._train_batch_norm):
      return resnet_v1_keras.resnet_v1(
          inputs, model_name=self._ARCHITECTURE, first_stage=first_stage,
          last_stage=last_stage)

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """conv4's output (stride 16).

    Args:
      preprocessed_inputs: [batch, height, width, channels] float32.
      scope: the enclosing variable scope's name (unused: root names).

    Returns:
      rpn_feature_map: [batch, ceil(height / 16), ceil(width / 16), 1024].
      activations: {end point: tensor} of conv1 .. conv4.

    Raises:
      ValueError: if the input is not 4-D.
    """
    del scope
    if preprocessed_inputs.shape.rank != 4:
      raise ValueError('preprocessed_inputs must be 4-D, got shape %s' %
                       preprocessed_inputs.shape)
    activations = self._stages(preprocessed_inputs, 1, _PROPOSAL_STAGE)
    last = resnet_v1_keras.output_layer_names(self._ARCHITECTURE)[
        _PROPOSAL_STAGE - 2]
    return activations[last], activations

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """conv5 (its first block at stride 2) on the crops.

    Args:
      proposal_feature_maps: [num_proposals, crop_height, crop_width, 1024].
      scope: the enclosing variable scope's name (unused: root names).

    Returns:
      [num_proposals, ceil(crop_height / 2), ceil(crop_width / 2), 2048].
    """
    del scope
    activations = self._stages(proposal_feature_maps, _PROPOSAL_STAGE + 1,
                               _PROPOSAL_STAGE + 1)
    return activations[resnet_v1_keras.output_layer_names(
        self._ARCHITECTURE)[-1]]


class FasterRCNNResnet50KerasFeatureExtractor(
    FasterRCNNResnetKerasFeatureExtractor):
  """`faster_rcnn_resnet50_keras`."""
  _ARCHITECTURE = 'resnet_v1_50'


class FasterRCNNResnet101KerasFeatureExtractor(
    FasterRCNNResnetKerasFeatureExtractor):
  """`faster_rcnn_resnet101_keras`."""
  _ARCHITECTURE = 'resnet_v1_101'


class FasterRCNNResnet152KerasFeatureExtractor(
    FasterRCNNResnetKerasFeatureExtractor):
  """`faster_rcnn_resnet152_keras`."""
  _ARCHITECTURE = 'resnet_v1_152'
