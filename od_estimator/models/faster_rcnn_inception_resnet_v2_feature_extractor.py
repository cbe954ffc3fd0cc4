"""Inception-ResNet v2 backbone for Faster R-CNN.

Szegedy et al., https://arxiv.org/abs/1602.07261; as a detector backbone,
Huang et al., "Speed/accuracy trade-offs for modern convolutional object
detectors", https://arxiv.org/abs/1611.10012.

The first stage is the network up to PreAuxLogits (the block17 stack) with
'SAME' reductions so features stay aligned with the image, at output
stride 16 or, atrous, 8. The second stage rebuilds the rest of the network
(Mixed_7a with 'VALID' reductions, the block8 stack, Block8,
Conv2d_7b_1x1) on the crops. Its block8 stack is scoped `Repeat` (the
first repeat under `SecondStageFeatureExtractor/InceptionResnetV2`), where
the classification network has `Repeat_2`; the classification restore map
renames it. Inputs are mapped to [-1, 1].
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.nets import inception_resnet_v2

_SCOPE = 'InceptionResnetV2'
# The second stage's block8 stack and its name in classification checkpoints.
_SECOND_STAGE_REPEAT = 'Repeat'
_CLASSIFICATION_REPEAT = 'Repeat_2'


class FasterRCNNInceptionResnetV2FeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """`faster_rcnn_inception_resnet_v2`: split at PreAuxLogits / Mixed_7a."""

  _FIRST_STAGE_STRIDES = (8, 16)
  # Padding of the second stage's reductions (Mixed_7a) and scope of its
  # block8 stack.
  _SECOND_STAGE_PADDING = 'VALID'
  _SECOND_STAGE_REPEAT = _SECOND_STAGE_REPEAT

  def preprocess(self, resized_inputs):
    """Maps [batch, height, width, 3] pixels in 0..255 to [-1, 1]."""
    return faster_rcnn_feature_extractor.scale_to_minus_one_one(
        resized_inputs)

  def _arg_scope(self):
    """The classification arg_scope, batch norm in this extractor's mode."""
    return slim.arg_scope(
        [slim.batch_norm], is_training=self._train_batch_norm)

  def _variable_naming(self):
    """Context in which both stages create their variables: slim names."""
    return contextlib.nullcontext()

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """The network up to PreAuxLogits.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32.
      scope: the enclosing variable scope's name (unused).

    Returns:
      rpn_feature_map: [batch, ceil(height / stride), ceil(width / stride),
        1088] float32.
      activations: {end point name, e.g. 'PreAuxLogits': tensor}.

    Raises:
      ValueError: if the input is not 4-D.
    """
    if preprocessed_inputs.shape.rank != 4:
      raise ValueError('preprocessed_inputs must be 4-D, got shape %s' %
                       preprocessed_inputs.shape)
    with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope(
        weight_decay=self._weight_decay)), self._arg_scope(), \
        self._variable_naming():
      with tf.compat.v1.variable_scope(
          _SCOPE, reuse=self._reuse_weights) as var_scope:
        return inception_resnet_v2.inception_resnet_v2_base(
            preprocessed_inputs, final_endpoint='PreAuxLogits',
            output_stride=self._first_stage_features_stride,
            align_feature_maps=True, scope=var_scope)

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Mixed_7a, the block8 stack, Block8 and Conv2d_7b_1x1 on the crops.

    Args:
      proposal_feature_maps: [num_proposals, crop_height, crop_width, 1088].
      scope: the enclosing variable scope's name (unused).

    Returns:
      [num_proposals, height, width, 1536] float32: (crop_height - 1) // 2
      by (crop_width - 1) // 2 with 'VALID' reductions (8 x 8 for the
      sample configs' 17 x 17 crops), half the crop rounded up with 'SAME'.
    """
    with self._variable_naming(), tf.compat.v1.variable_scope(
        _SCOPE, reuse=self._reuse_weights):
      with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope(
          weight_decay=self._weight_decay)), self._arg_scope():
        net = inception_resnet_v2.mixed_7a(proposal_feature_maps,
                                           self._SECOND_STAGE_PADDING)
        return inception_resnet_v2.block8_stack(net,
                                                self._SECOND_STAGE_REPEAT)

  def restore_from_classification_checkpoint_fn(
      self, first_stage_feature_extractor_scope,
      second_stage_feature_extractor_scope):
    """{classification checkpoint name: variable}, second stage renamed.

    Both stages drop their scope; the second stage's
    `InceptionResnetV2/Repeat/...` becomes `InceptionResnetV2/Repeat_2/...`,
    the block8 stack's name in the classification network.

    Args:
      first_stage_feature_extractor_scope: e.g. FIRST_STAGE_SCOPE.
      second_stage_feature_extractor_scope: e.g. SECOND_STAGE_SCOPE.

    Returns:
      {checkpoint variable name: tf.Variable}.
    """
    variables_to_restore = faster_rcnn_feature_extractor.variables_under_scope(
        first_stage_feature_extractor_scope)
    second_stage = faster_rcnn_feature_extractor.variables_under_scope(
        second_stage_feature_extractor_scope)
    repeat = '%s/%s/' % (_SCOPE, _SECOND_STAGE_REPEAT)
    for name, variable in second_stage.items():
      if name.startswith(repeat):
        name = '%s/%s/%s' % (_SCOPE, _CLASSIFICATION_REPEAT,
                             name[len(repeat):])
      variables_to_restore[name] = variable
    return variables_to_restore
