"""NASNet-A large backbone for Faster R-CNN (`faster_rcnn_nas`).

Zoph et al., https://arxiv.org/abs/1707.07012. The first stage is the
classification network up to the normal cell before the second reduction
(`Cell_11` in NASNet-A large, output stride 16); its feature map
concatenates the last two cells (2 x 2016 channels), the two inputs the
next cell reads. The second stage splits the crops back into those two
and runs the rest: `reduction_cell_1`, cells 12 to 17 and a final ReLU
(`final_layer`), without pooling or logits.

Batch norm follows the original's modes. The first stage runs it in
training mode whenever the detector trains (the original's classification
network sets the mode from is_training itself, over the detector's
setting); the second stage in the batch_norm_trainable mode. Drop path
applies in both stages when training. The convolutions take the
classification network's weight decay (5e-5), as in the original.

The zoo's classification checkpoint holds only the exponential moving
averages of its variables, read by restore_from_classification_checkpoint_fn.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.nets import nasnet


class FasterRCNNNASFeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """`faster_rcnn_nas`: split before the last reduction cell."""

  _FIRST_STAGE_STRIDES = (16,)

  def __init__(self, is_training, first_stage_features_stride,
               batch_norm_trainable=False, reuse_weights=None,
               weight_decay=0.0, config=nasnet.LARGE):
    """Creates the extractor.

    Args:
      is_training: see FasterRCNNFeatureExtractor.
      first_stage_features_stride: 16.
      batch_norm_trainable: the second stage's batch norm mode.
      reuse_weights: see FasterRCNNFeatureExtractor.
      weight_decay: unused: NASNet keeps its own (see module docstring).
      config: the NASNet (tests build smaller ones); it needs at least two
        reduction cells.
    """
    super().__init__(is_training, first_stage_features_stride,
                     batch_norm_trainable, reuse_weights, weight_decay)
    self._config = config
    # The first normal cell of the second stage (12 for NASNet-A large).
    self._split = nasnet.reduction_layers(config.num_cells,
                                          config.num_reduction_layers)[1]

  def preprocess(self, resized_inputs):
    """Maps [batch, height, width, 3] pixels in 0..255 to [-1, 1]."""
    return faster_rcnn_feature_extractor.scale_to_minus_one_one(
        resized_inputs)

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """The network up to Cell_11.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 of a fixed
        size (the cells need static spatial shapes).
      scope: the enclosing variable scope's name (unused).

    Returns:
      rpn_feature_map: [batch, ~height / 16, ~width / 16, 4032] float32,
        Cell_10 and Cell_11 concatenated.
      activations: {end point name, e.g. 'Cell_11': tensor}.

    Raises:
      ValueError: if the input is not 4-D.
      UserInputError: if its height or width is not static.
    """
    if preprocessed_inputs.shape.rank != 4:
      raise ValueError('preprocessed_inputs must be 4-D, got shape %s' %
                       preprocessed_inputs.shape)
    if None in preprocessed_inputs.shape.as_list()[1:3]:
      raise errors.UserInputError(
          'model.faster_rcnn.image_resizer: faster_rcnn_nas needs a '
          'fixed_shape_resizer (NASNet cells need static image sizes, as in '
          'the original); got images of shape %s.' %
          preprocessed_inputs.shape)
    with slim.arg_scope(nasnet.nasnet_large_arg_scope()):
      with slim.arg_scope([slim.conv2d, slim.batch_norm,
                           slim.separable_conv2d],
                          reuse=self._reuse_weights):
        _, end_points = nasnet.nasnet(
            preprocessed_inputs, config=self._config, num_classes=None,
            is_training=self._is_training,
            final_endpoint='Cell_%d' % (self._split - 1))
    rpn_feature_map = tf.concat([end_points['Cell_%d' % (self._split - 2)],
                                 end_points['Cell_%d' % (self._split - 1)]],
                                3)
    return rpn_feature_map, end_points

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """reduction_cell_1, cells 12.. and the final ReLU on the crops.

    Args:
      proposal_feature_maps: [num_proposals, crop_height, crop_width, 4032].
      scope: the enclosing variable scope's name (unused).

    Returns:
      [num_proposals, ceil(crop_height / 2), ceil(crop_width / 2), 4032]
      float32 (9 x 9 for the sample config's 17 x 17 crops).
    """
    hidden_previous, hidden = tf.split(proposal_feature_maps, 2, axis=3)
    with slim.arg_scope(nasnet.nasnet_large_arg_scope()):
      with slim.arg_scope([slim.batch_norm],
                          is_training=self._train_batch_norm):
        # Counted by drop path: the stem cells and the first reduction.
        net, _ = nasnet.build_cells(
            [None, hidden_previous, hidden], self._config, self._is_training,
            start_cell_num=self._split,
            true_cell_num=self._split + nasnet.NUM_STEM_CELLS + 1,
            filter_scaling=self._config.filter_scaling_rate)
    with tf.compat.v1.variable_scope('final_layer'):
      return tf.nn.relu(net)

  def restore_from_classification_checkpoint_fn(
      self, first_stage_feature_extractor_scope,
      second_stage_feature_extractor_scope):
    """{`<name>/ExponentialMovingAverage`: variable} of both stages.

    The NASNet classification checkpoints hold only the moving averages of
    their variables; both stages drop their scope and read those.

    Args:
      first_stage_feature_extractor_scope: e.g. FIRST_STAGE_SCOPE.
      second_stage_feature_extractor_scope: e.g. SECOND_STAGE_SCOPE.

    Returns:
      {checkpoint variable name: tf.Variable}.
    """
    variables = super().restore_from_classification_checkpoint_fn(
        first_stage_feature_extractor_scope,
        second_stage_feature_extractor_scope)
    return {name + '/ExponentialMovingAverage': variable
            for name, variable in variables.items()}
