"""Second-stage box predictor of R-FCN: position-sensitive score maps (slim).

R-FCN: Dai, Li, He and Sun, https://arxiv.org/abs/1605.06409. The box
classifier features of whole images (not of per-proposal crops) go through a
1x1 convolution to `depth` channels, then two 1x1 convolutions give
position-sensitive score maps: bins_y * bins_x groups of num_classes *
box_code_size box codes, and of num_classes + 1 class logits. Each proposal
reads them by a position-sensitive crop with global pooling: one box code per
class (boxes are never shared across classes) and one logit per class.

Variable names follow the original's checkpoints; the model calls predict
with scope 'SecondStageBoxPredictor', giving e.g.
SecondStageBoxPredictor/reduce_depth/weights [1, 1, channels, depth],
SecondStageBoxPredictor/refined_locations/weights [1, 1, depth,
bins_y * bins_x * num_classes * box_code_size] and
SecondStageBoxPredictor/class_predictions/weights [1, 1, depth,
bins_y * bins_x * (num_classes + 1)], with biases or batch norm as the
conv hyperparameters say.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator.core import box_predictor
from od_estimator.core import position_sensitive_crop
from od_estimator.core import shape_utils

BOX_ENCODINGS = box_predictor.BOX_ENCODINGS
CLASS_PREDICTIONS_WITH_BACKGROUND = (
    box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND)


class RfcnBoxPredictor(box_predictor.BoxPredictor):
  """Box codes and class logits of proposals from position-sensitive maps.

  predict(image_features=[features], num_predictions_per_location=[1],
  scope=..., proposal_boxes=boxes), features being [batch, height, width,
  channels] and boxes [batch, num_proposals, 4] normalized ymin, xmin, ymax,
  xmax.
  """

  def __init__(self, is_training, num_classes, conv_hyperparams_fn,
               num_spatial_bins, depth, crop_size, box_code_size):
    """Constructor.

    Args:
      is_training: whether the predictor is built for training.
      num_classes: number of classes, background excluded.
      conv_hyperparams_fn: callable returning the slim arg_scope of the
        three 1x1 convolutions.
      num_spatial_bins: [bins_y, bins_x] position-sensitive bins per box.
      depth: output channels of the reduce_depth convolution.
      crop_size: [crop_height, crop_width] of the position-sensitive crop,
        multiples of num_spatial_bins.
      box_code_size: size of each box code.
    """
    super().__init__(is_training, num_classes)
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._num_spatial_bins = list(num_spatial_bins)
    self._depth = depth
    self._crop_size = list(crop_size)
    self._box_code_size = box_code_size

  def get_second_stage_prediction_heads(self):
    """Output names of the second stage."""
    return BOX_ENCODINGS, CLASS_PREDICTIONS_WITH_BACKGROUND

  def get_third_stage_prediction_heads(self):
    """R-FCN has no third stage."""
    return []

  def _pooled_scores(self, score_maps, proposal_boxes, scores_per_box):
    """[batch * num_proposals, 1, scores_per_box] pooled from the maps."""
    pooled = position_sensitive_crop.batch_position_sensitive_crop_regions(
        score_maps, proposal_boxes, crop_size=self._crop_size,
        num_spatial_bins=self._num_spatial_bins, global_pool=True)
    batch, num_proposals = (
        shape_utils.combined_static_and_dynamic_shape(proposal_boxes)[:2])
    return tf.reshape(pooled, [batch * num_proposals, 1, scores_per_box])

  def _predict(self, image_features, num_predictions_per_location,
               proposal_boxes):
    """Predicts every proposal's box codes and class logits.

    Args:
      image_features: list of one [batch, height, width, channels] float
        tensor.
      num_predictions_per_location: [1].
      proposal_boxes: [batch, num_proposals, 4] float tensor, normalized
        ymin, xmin, ymax, xmax.

    Returns:
      {BOX_ENCODINGS: [[batch * num_proposals, 1, num_classes,
      box_code_size]], CLASS_PREDICTIONS_WITH_BACKGROUND:
      [[batch * num_proposals, 1, num_classes + 1]]}: one list entry, for
      the one feature map.

    Raises:
      ValueError: for more than one feature map, or a number of predictions
        per location other than 1.
    """
    if len(image_features) != 1:
      raise ValueError('RfcnBoxPredictor takes one feature map, got %d'
                       % len(image_features))
    if list(num_predictions_per_location) != [1]:
      raise ValueError('RfcnBoxPredictor predicts once per proposal: '
                       'num_predictions_per_location must be [1], got %s'
                       % list(num_predictions_per_location))
    bins = self._num_spatial_bins[0] * self._num_spatial_bins[1]
    num_class_slots = self.num_classes + 1
    with slim.arg_scope(self._conv_hyperparams_fn()):
      net = slim.conv2d(image_features[0], self._depth, [1, 1],
                        scope='reduce_depth')
      location_maps = slim.conv2d(
          net, bins * self.num_classes * self._box_code_size, [1, 1],
          activation_fn=None, scope='refined_locations')
      box_encodings = tf.reshape(
          self._pooled_scores(location_maps, proposal_boxes,
                              self.num_classes * self._box_code_size),
          [-1, 1, self.num_classes, self._box_code_size])
      class_maps = slim.conv2d(net, bins * num_class_slots, [1, 1],
                               activation_fn=None, scope='class_predictions')
      class_predictions = self._pooled_scores(class_maps, proposal_boxes,
                                              num_class_slots)
    return {BOX_ENCODINGS: [box_encodings],
            CLASS_PREDICTIONS_WITH_BACKGROUND: [class_predictions]}
