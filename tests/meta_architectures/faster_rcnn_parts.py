"""Tiny Faster R-CNN parts at 32x32 pixels for the parts' and model's tests.

Grid anchors are 16x16 squares of one scale and aspect ratio (base size
16, stride 16, offset 8) on a 2x2 feature map: the four quadrants of the
image. Import as `from tests.meta_architectures import faster_rcnn_parts`.
"""
import functools

import tensorflow as tf
import tf_slim as slim

from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.builders import box_predictor_builder
from od_estimator.core import balanced_positive_negative_sampler as sampler
from od_estimator.core import box_predictor
from od_estimator.core import losses
from od_estimator.core import batch_post_processing
from od_estimator.core import region_similarity_calculator
from od_estimator.core import spatial_transform_ops
from od_estimator.core import target_assigner
from od_estimator.matchers import argmax_matcher
from od_estimator.meta_architectures import box_classifier
from od_estimator.meta_architectures import mask_branch
from od_estimator.meta_architectures import region_proposal_network
from od_estimator.predictors.heads import mask_head
from tests import fakes

NUM_CLASSES = 2
IMAGE_SIZE = 32
MAX_PROPOSALS = 4
SECOND_STAGE_BATCH = 3
MASK_SIZE = 6
# The anchors of a 2x2 feature map at stride 16: the image's quadrants.
QUADRANTS = [[0, 0, 16, 16], [0, 16, 16, 32], [16, 0, 32, 16],
             [16, 16, 32, 32]]


def make_target_assigner(matched, unmatched, force_match, use_static_shapes):
  return target_assigner.TargetAssigner(
      region_similarity_calculator.IouSimilarity(),
      argmax_matcher.ArgMaxMatcher(matched, unmatched,
                                   force_match_for_each_row=force_match,
                                   use_matmul_gather=use_static_shapes),
      faster_rcnn_box_coder.FasterRcnnBoxCoder([10.0, 10.0, 5.0, 5.0]))


def conv_hyperparams():
  with slim.arg_scope([slim.conv2d], activation_fn=None) as scope:
    return scope


def fc_hyperparams():
  with slim.arg_scope([slim.fully_connected]) as scope:
    return scope


def mask_rcnn_box_predictor(is_training):
  """The real second-stage predictor with a 2-layer mask head (Mask R-CNN)."""
  return box_predictor_builder.build_mask_rcnn_box_predictor(
      is_training, NUM_CLASSES, fc_hyperparams, False, 1.0, 4,
      third_stage_heads={box_predictor.MASK_PREDICTIONS:
                         mask_head.MaskRCNNMaskHead(
                             NUM_CLASSES, conv_hyperparams,
                             mask_height=MASK_SIZE, mask_width=MASK_SIZE,
                             mask_prediction_conv_depth=4)})


def _nms(use_static_shapes, **thresholds):
  return functools.partial(
      batch_post_processing.batch_multiclass_non_max_suppression,
      use_static_shapes=use_static_shapes, **thresholds)


def rpn(is_training=True, use_static_shapes=False,
        clip_anchors_to_image=False, anchor_size=16, minibatch_size=4):
  """A RegionProposalNetwork on grid anchors of anchor_size pixels."""
  params = region_proposal_network.FirstStageParams(
      anchor_generator=grid_anchor_generator.GridAnchorGenerator(
          scales=[1.0], aspect_ratios=[1.0],
          base_anchor_size=[anchor_size, anchor_size],
          anchor_stride=[16, 16], anchor_offset=[8, 8]),
      conv_hyperparams_fn=conv_hyperparams,
      box_predictor=box_predictor_builder.build_rpn_box_predictor(
          is_training, conv_hyperparams),
      target_assigner=make_target_assigner(0.7, 0.3, True,
                                           use_static_shapes),
      sampler=sampler.BalancedPositiveNegativeSampler(
          0.5, is_static=use_static_shapes),
      nms_fn=_nms(use_static_shapes, score_thresh=0.0, iou_thresh=0.7,
                  max_size_per_class=MAX_PROPOSALS,
                  max_total_size=MAX_PROPOSALS),
      kernel_size=3, depth=4, minibatch_size=minibatch_size,
      max_proposals=MAX_PROPOSALS,
      clip_anchors_to_image=clip_anchors_to_image)
  return region_proposal_network.RegionProposalNetwork(
      params, is_training, use_static_shapes)


def second_stage_parts(is_training=True, use_static_shapes=False,
                       hard_example_miner=None, with_masks=False,
                       batch_size=SECOND_STAGE_BATCH, context=None):
  """(BoxClassifier, MaskBranch or None) with the RPN's box coder.

  context: optional context_rcnn_lib.ContextParams (Context R-CNN).
  """
  roi_crop = box_classifier.RoiCropParams(
      crop_and_resize_fn=(spatial_transform_ops.matmul_crop_and_resize
                          if use_static_shapes else
                          spatial_transform_ops.native_crop_and_resize),
      initial_crop_size=4, maxpool_kernel_size=2, maxpool_stride=2)
  params = box_classifier.SecondStageParams(
      box_predictor=(
          mask_rcnn_box_predictor(is_training) if with_masks
          else fakes.FakeSecondStageBoxPredictor(is_training, NUM_CLASSES)),
      target_assigner=make_target_assigner(0.5, None, False,
                                           use_static_shapes),
      sampler=sampler.BalancedPositiveNegativeSampler(
          0.5, is_static=use_static_shapes),
      nms_fn=_nms(use_static_shapes, score_thresh=0.0, iou_thresh=0.6,
                  max_size_per_class=5, max_total_size=5),
      score_conversion_fn=tf.nn.softmax,
      classification_loss=losses.WeightedSoftmaxClassificationLoss(),
      batch_size=batch_size, hard_example_miner=hard_example_miner)
  classifier = box_classifier.BoxClassifier(
      params, roi_crop, NUM_CLASSES, params.target_assigner.box_coder,
      is_training, use_static_shapes, context)
  if not with_masks:
    return classifier, None
  return classifier, mask_branch.MaskBranch(
      params.box_predictor, params.target_assigner,
      roi_crop.crop_and_resize_fn, NUM_CLASSES, params.mask_loss_weight)
