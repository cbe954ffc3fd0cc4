"""Mask R-CNN mask head (tf-slim), the third-stage head of MaskRCNNBoxPredictor.

He et al., "Mask R-CNN", https://arxiv.org/abs/1703.06870. For every ROI it
predicts mask logits of mask_height x mask_width, one per class (or a single
class-agnostic one), from the second-stage box classifier features.

Layer names are those of the original's TF1 checkpoints: unnamed slim
convolutions, so under the predictor's scope they are Conv, Conv_1, ...,
the last one (linear, num_masks outputs) included, e.g. for
mask_prediction_num_conv_layers 4: SecondStageBoxPredictor/Conv ... /Conv_3.
"""
import math

import tensorflow as tf
import tf_slim as slim
from tf_slim.ops import arg_scope as arg_scope_lib

from od_estimator.models import feature_map_generators


def mask_conv_depth(num_feature_channels, num_classes, class_weight=3.0,
                    feature_weight=2.0):
  """The original's automatic depth (mask_prediction_conv_depth 0).

  A power of two: the weighted mean, in log2 space, of the feature channels
  (weight 2) and the number of classes (weight 3), rounded.
  """
  log_depth = round(
      (math.log2(num_feature_channels) * feature_weight +
       math.log2(num_classes) * class_weight) / (feature_weight + class_weight))
  return int(2 ** log_depth)


class MaskRCNNMaskHead:
  """Convolutional mask head over ROI features."""

  def __init__(self, num_classes, conv_hyperparams_fn, mask_height=15,
               mask_width=15, mask_prediction_num_conv_layers=2,
               mask_prediction_conv_depth=256, masks_are_class_agnostic=False,
               convolve_then_upsample=False):
    """Constructor.

    Args:
      num_classes: number of classes, background excluded.
      conv_hyperparams_fn: callable returning the slim arg_scope of the
        convolutions (hyperparams_builder.build of conv_hyperparams).
      mask_height, mask_width: size of the predicted masks.
      mask_prediction_num_conv_layers: convolutions including the last
        (prediction) one.
      mask_prediction_conv_depth: depth of the hidden convolutions; 0 picks
        it from the feature depth and the number of classes (mask_conv_depth).
      masks_are_class_agnostic: one mask per ROI instead of one per class.
      convolve_then_upsample: convolve at the feature resolution, then
        upsample (nearest neighbour, an integer factor) and convolve once
        more, instead of resizing the features (bilinear) to the mask size
        first.

    Raises:
      ValueError: without conv_hyperparams_fn or with fewer than one layer.
    """
    if conv_hyperparams_fn is None:
      raise ValueError('The mask head needs conv_hyperparams.')
    if mask_prediction_num_conv_layers < 1:
      raise ValueError('mask_prediction_num_conv_layers must be >= 1, got %d'
                       % mask_prediction_num_conv_layers)
    self._num_classes = num_classes
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._mask_height = mask_height
    self._mask_width = mask_width
    # The original's attribute names: its builder tests read them.
    self._mask_prediction_num_conv_layers = mask_prediction_num_conv_layers
    self._mask_prediction_conv_depth = mask_prediction_conv_depth
    self._masks_are_class_agnostic = masks_are_class_agnostic
    self._num_masks = 1 if masks_are_class_agnostic else num_classes
    self._convolve_then_upsample = convolve_then_upsample

  @property
  def num_masks(self):
    return self._num_masks

  def mixes_rois(self):
    """Whether a ROI's logits may depend on the other ROIs of the batch.

    True with batch norm computing batch statistics (training mode, under
    the arg scopes in force where this is called) or a normalizer not known
    to be per-ROI; False when every ROI's logits are its own (no
    normalizer, group norm, or batch norm with moving statistics).
    """
    with slim.arg_scope(self._conv_hyperparams_fn()):
      scope = arg_scope_lib.current_arg_scope()
    normalizer = scope.get(arg_scope_lib.arg_scope_func_key(slim.conv2d),
                           {}).get('normalizer_fn')
    if normalizer is None or normalizer is slim.group_norm:
      return False
    if normalizer is slim.batch_norm:
      return scope.get(arg_scope_lib.arg_scope_func_key(slim.batch_norm),
                       {}).get('is_training', True)
    return True

  def predict(self, features, num_predictions_per_location=1):
    """Predicts mask logits for every ROI.

    Args:
      features: [num_rois, height, width, channels] float tensor (static
        spatial size and channels).
      num_predictions_per_location: must be 1.

    Returns:
      [num_rois, 1, num_masks, mask_height, mask_width] float logits.

    Raises:
      ValueError: if num_predictions_per_location is not 1, or (with
        convolve_then_upsample) the mask size is not an integer multiple of
        the feature size.
    """
    if num_predictions_per_location != 1:
      raise ValueError('MaskRCNNMaskHead predicts once per ROI '
                       '(num_predictions_per_location=1), got %d'
                       % num_predictions_per_location)
    depth = self._mask_prediction_conv_depth or mask_conv_depth(
        features.shape.as_list()[3], self._num_classes)
    with slim.arg_scope(self._conv_hyperparams_fn()):
      if not self._convolve_then_upsample:
        features = tf.compat.v1.image.resize_bilinear(
            features, [self._mask_height, self._mask_width],
            align_corners=True)
      for _ in range(self._mask_prediction_num_conv_layers - 1):
        features = slim.conv2d(features, num_outputs=depth,
                               kernel_size=[3, 3])
      if self._convolve_then_upsample:
        height, width = features.shape.as_list()[1:3]
        if self._mask_height % height or self._mask_width % width:
          raise ValueError(
              'convolve_then_upsample_masks needs a mask size that is a '
              'multiple of the ROI feature size %dx%d, got %dx%d.' % (
                  height, width, self._mask_height, self._mask_width))
        features = feature_map_generators.nearest_neighbor_upsampling(
            features, height_scale=self._mask_height // height,
            width_scale=self._mask_width // width)
        features = slim.conv2d(features, num_outputs=depth,
                               kernel_size=[3, 3])
      mask_logits = slim.conv2d(features, num_outputs=self._num_masks,
                                activation_fn=None, normalizer_fn=None,
                                kernel_size=[3, 3])
    return tf.expand_dims(tf.transpose(mask_logits, perm=[0, 3, 1, 2]),
                          axis=1, name='MaskPredictor')
