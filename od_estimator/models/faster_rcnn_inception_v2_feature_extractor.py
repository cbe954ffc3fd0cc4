"""Inception v2 backbone for Faster R-CNN.

Szegedy et al., "Rethinking the Inception Architecture for Computer Vision",
https://arxiv.org/abs/1512.00567.

The first stage is tf-slim's Inception v2 up to Mixed_4e (output stride 16)
under `FirstStageFeatureExtractor/InceptionV2/`; the second stage is
Mixed_5a, Mixed_5b and Mixed_5c under `SecondStageFeatureExtractor/
InceptionV2/`, with the layer scopes and depths of the classification
network so that both classification and detection checkpoints restore.
Batch norm has a learned scale (gamma), decay 0.9997 and epsilon 0.001;
inputs are mapped to [-1, 1].
"""
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v2

from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.models import feature_map_generators

_MIN_IMAGE_DIM = 33
_BATCH_NORM_DECAY = 0.9997
_BATCH_NORM_EPSILON = 0.001

# The second stage, one entry per mixed block: its branches in
# concatenation order, each a list of (layer scope, depth before the depth
# multiplier, kernel, stride, truncated-normal stddev of the initializer or
# None for slim's default). Layers whose scope starts with MaxPool or
# AvgPool are pools (depth None). Depths and initializers are those of the
# Inception v2 classification network.
_SECOND_STAGE_BLOCKS = (
    ('Mixed_5a', (
        (('Conv2d_0a_1x1', 128, 1, 1, 0.09),
         ('Conv2d_1a_3x3', 192, 3, 2, None)),
        (('Conv2d_0a_1x1', 192, 1, 1, 0.09),
         ('Conv2d_0b_3x3', 256, 3, 1, None),
         ('Conv2d_1a_3x3', 256, 3, 2, None)),
        (('MaxPool_1a_3x3', None, 3, 2, None),),
    )),
    ('Mixed_5b', (
        (('Conv2d_0a_1x1', 352, 1, 1, None),),
        (('Conv2d_0a_1x1', 192, 1, 1, 0.09),
         ('Conv2d_0b_3x3', 320, 3, 1, None)),
        (('Conv2d_0a_1x1', 160, 1, 1, 0.09),
         ('Conv2d_0b_3x3', 224, 3, 1, None),
         ('Conv2d_0c_3x3', 224, 3, 1, None)),
        (('AvgPool_0a_3x3', None, 3, 1, None),
         ('Conv2d_0b_1x1', 128, 1, 1, 0.1)),
    )),
    ('Mixed_5c', (
        (('Conv2d_0a_1x1', 352, 1, 1, None),),
        (('Conv2d_0a_1x1', 192, 1, 1, 0.09),
         ('Conv2d_0b_3x3', 320, 3, 1, None)),
        (('Conv2d_0a_1x1', 192, 1, 1, 0.09),
         ('Conv2d_0b_3x3', 224, 3, 1, None),
         ('Conv2d_0c_3x3', 224, 3, 1, None)),
        (('MaxPool_0a_3x3', None, 3, 1, None),
         ('Conv2d_0b_1x1', 128, 1, 1, 0.1)),
    )),
)


class FasterRCNNInceptionV2FeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """`faster_rcnn_inception_v2`: Inception v2 split at Mixed_4e / Mixed_5a."""

  _FIRST_STAGE_STRIDES = (16,)

  def __init__(self, is_training, first_stage_features_stride,
               batch_norm_trainable=False, reuse_weights=None,
               weight_decay=0.0, depth_multiplier=1.0, min_depth=16):
    """See FasterRCNNFeatureExtractor.

    Args:
      is_training: see the base class.
      first_stage_features_stride: must be 16 (Inception v2 has no atrous
        form; the original accepted 8 and still produced stride 16).
      batch_norm_trainable: see the base class.
      reuse_weights: see the base class.
      weight_decay: L2 weight decay of the convolutions (the original
        accepted and ignored it; 0, its only value there, adds nothing).
      depth_multiplier: float > 0 scaling every layer's depth.
      min_depth: smallest depth a layer is scaled down to.

    Raises:
      UserInputError: for a stride other than 16.
    """
    super().__init__(is_training, first_stage_features_stride,
                     batch_norm_trainable, reuse_weights, weight_decay)
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth

  def preprocess(self, resized_inputs):
    """Maps [batch, height, width, 3] pixels in 0..255 to [-1, 1]."""
    return faster_rcnn_feature_extractor.scale_to_minus_one_one(
        resized_inputs)

  def _depth(self, depth):
    return max(int(depth * self._depth_multiplier), self._min_depth)

  def _arg_scope(self):
    """Batch norm (and weight decay) on every convolution."""
    return slim.arg_scope(
        [slim.conv2d, slim.separable_conv2d],
        weights_regularizer=slim.l2_regularizer(self._weight_decay),
        normalizer_fn=slim.batch_norm,
        normalizer_params={
            'is_training': self._train_batch_norm,
            'scale': True,
            'decay': _BATCH_NORM_DECAY,
            'epsilon': _BATCH_NORM_EPSILON,
        })

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """Inception v2 up to Mixed_4e.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32, height and
        width at least 33.
      scope: the enclosing variable scope's name (unused).

    Returns:
      rpn_feature_map: [batch, ceil(height / 16), ceil(width / 16),
        depth(576)] float32.
      activations: {end point name, e.g. 'Mixed_4e': tensor}.

    Raises:
      ValueError: if the input is not 4-D or statically smaller than 33.
    """
    preprocessed_inputs.shape.assert_has_rank(4)
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    with tf.compat.v1.variable_scope(
        'InceptionV2', reuse=self._reuse_weights) as var_scope:
      with self._arg_scope():
        _, activations = inception_v2.inception_v2_base(
            preprocessed_inputs,
            final_endpoint='Mixed_4e',
            min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier,
            scope=var_scope)
    return activations['Mixed_4e'], activations

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Mixed_5a (stride 2), Mixed_5b and Mixed_5c on the crops.

    Args:
      proposal_feature_maps: [num_proposals, crop_height, crop_width, depth].
      scope: the enclosing variable scope's name (unused).

    Returns:
      [num_proposals, ceil(crop_height / 2), ceil(crop_width / 2),
       depth(1024)] float32.
    """
    net = proposal_feature_maps
    with tf.compat.v1.variable_scope('InceptionV2',
                                     reuse=self._reuse_weights):
      with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                          stride=1, padding='SAME'), self._arg_scope():
        for block_scope, branches in _SECOND_STAGE_BLOCKS:
          with tf.compat.v1.variable_scope(block_scope):
            net = tf.concat(
                [self._branch(net, 'Branch_%d' % index, layers)
                 for index, layers in enumerate(branches)], axis=3)
    return net

  def _branch(self, net, branch_scope, layers):
    """One branch of a mixed block: its layers applied in order."""
    with tf.compat.v1.variable_scope(branch_scope):
      for layer_scope, depth, kernel, stride, stddev in layers:
        if layer_scope.startswith('MaxPool'):
          net = slim.max_pool2d(net, kernel, stride=stride, scope=layer_scope)
        elif layer_scope.startswith('AvgPool'):
          net = slim.avg_pool2d(net, kernel, stride=stride, scope=layer_scope)
        else:
          initializer = {}
          if stddev is not None:
            initializer['weights_initializer'] = (
                tf.compat.v1.truncated_normal_initializer(0.0, stddev))
          net = slim.conv2d(net, self._depth(depth), kernel, stride=stride,
                            scope=layer_scope, **initializer)
    return net
