"""ResNet v1 (50, 101, 152) backbones for Faster R-CNN.

He et al., "Deep Residual Learning for Image Recognition",
https://arxiv.org/abs/1512.03385.

The first stage is the whole tf-slim ResNet v1 without its classifier, run
at output stride 16 (or 8, atrous); the proposal features are block3's
output. Building the whole network also creates block4 under
`FirstStageFeatureExtractor/` although nothing reads it: the original did
the same, so its detection checkpoints hold those variables and restore
here with nothing missing on either side. The second stage is block4 again,
at stride 1, under `SecondStageFeatureExtractor/resnet_v1_<n>/block4/`.

Batch norm follows the MSRA-converted classification checkpoints these
models start from: epsilon 1e-5 with a learned scale (gamma), and inputs
have the ImageNet channel means subtracted (no scaling).
"""
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_utils
from tf_slim.nets import resnet_v1

from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.models import feature_map_generators

# ImageNet RGB means of the MSRA ResNet checkpoints, in 0..255 pixels.
_CHANNEL_MEANS = (123.68, 116.779, 103.939)
# Smallest image side for which every stride-2 layer still has input.
_MIN_IMAGE_DIM = 33
_BATCH_NORM_EPSILON = 1e-5


def subtract_channel_means(resized_inputs):
  """ResNet preprocessing: 3-channel images minus the ImageNet means.

  Args:
    resized_inputs: [batch, height, width, channels] float32, 0..255.

  Returns:
    [batch, height, width, channels] float32; inputs whose channel count is
    not 3 pass through unchanged, as in the original.
  """
  if resized_inputs.shape.as_list()[3] == 3:
    return resized_inputs - [[list(_CHANNEL_MEANS)]]
  return resized_inputs


class FasterRCNNResnetV1FeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """ResNet v1 split at block3 / block4 for Faster R-CNN.

  Subclasses set _ARCHITECTURE (the network's scope, as in classification
  checkpoints) and _RESNET_FN (the tf_slim.nets.resnet_v1 constructor).
  """

  _ARCHITECTURE = None
  _RESNET_FN = None
  _FIRST_STAGE_STRIDES = (8, 16)
  # block4's bottleneck units in the second stage.
  _BLOCK4_UNITS = ({'depth': 2048, 'depth_bottleneck': 512, 'stride': 1},) * 3

  def preprocess(self, resized_inputs):
    """Subtracts the ImageNet channel means from 3-channel images.

    Args:
      resized_inputs: [batch, height, width, channels] float32, 0..255.

    Returns:
      [batch, height, width, channels] float32; inputs whose channel count
      is not 3 pass through unchanged, as in the original.
    """
    return subtract_channel_means(resized_inputs)

  def _arg_scope(self):
    """The ResNet arg_scope with this extractor's weight decay."""
    return resnet_utils.resnet_arg_scope(
        weight_decay=self._weight_decay,
        batch_norm_epsilon=_BATCH_NORM_EPSILON,
        batch_norm_scale=True)

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """block3 of the full network at the configured output stride.

    Args:
      preprocessed_inputs: [batch, height, width, channels] float32, height
        and width at least 33.
      scope: the enclosing variable scope's name.

    Returns:
      rpn_feature_map: [batch, ceil(height / stride), ceil(width / stride),
        1024] float32.
      activations: {full scope name of each block and layer: tensor}.

    Raises:
      ValueError: if the input is not 4-D or statically smaller than 33.
    """
    if preprocessed_inputs.shape.rank != 4:
      raise ValueError('preprocessed_inputs must be 4-D, got shape %s' %
                       preprocessed_inputs.shape)
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    with slim.arg_scope(self._arg_scope()):
      with tf.compat.v1.variable_scope(
          self._ARCHITECTURE, reuse=self._reuse_weights) as var_scope:
        _, activations = type(self)._RESNET_FN(
            preprocessed_inputs,
            num_classes=None,
            is_training=self._train_batch_norm,
            global_pool=False,
            output_stride=self._first_stage_features_stride,
            scope=var_scope)
    block3 = '%s/%s/block3' % (scope, self._ARCHITECTURE)
    return activations[block3], activations

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """block4 (_BLOCK4_UNITS: three bottleneck units, stride 1) on the crops.

    Args:
      proposal_feature_maps: [num_proposals, crop_height, crop_width, 1024].
      scope: the enclosing variable scope's name (unused).

    Returns:
      [num_proposals, crop_height, crop_width, 2048] float32.
    """
    block4 = resnet_utils.Block('block4', resnet_v1.bottleneck,
                                list(self._BLOCK4_UNITS))
    with tf.compat.v1.variable_scope(self._ARCHITECTURE,
                                     reuse=self._reuse_weights):
      with slim.arg_scope(self._arg_scope()):
        with slim.arg_scope([slim.batch_norm],
                            is_training=self._train_batch_norm):
          return resnet_utils.stack_blocks_dense(proposal_feature_maps,
                                                 [block4])


class FasterRCNNResnet50FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """`faster_rcnn_resnet50`: ResNet-50 v1."""
  _ARCHITECTURE = 'resnet_v1_50'
  _RESNET_FN = resnet_v1.resnet_v1_50


class FasterRCNNResnet101FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """`faster_rcnn_resnet101`: ResNet-101 v1."""
  _ARCHITECTURE = 'resnet_v1_101'
  _RESNET_FN = resnet_v1.resnet_v1_101


class FasterRCNNResnet152FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """`faster_rcnn_resnet152`: ResNet-152 v1."""
  _ARCHITECTURE = 'resnet_v1_152'
  _RESNET_FN = resnet_v1.resnet_v1_152
