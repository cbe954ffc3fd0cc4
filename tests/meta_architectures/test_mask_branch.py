"""MaskBranch: mask targets, the mask loss and detection masks, by hand."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.builders import box_predictor_builder
from od_estimator.core import box_list
from od_estimator.core import box_predictor
from od_estimator.core import region_similarity_calculator
from od_estimator.core import target_assigner
from od_estimator.matchers import argmax_matcher
from od_estimator.meta_architectures import mask_branch
from od_estimator.predictors.heads import mask_head
from od_estimator.core import spatial_transform_ops

NUM_CLASSES = 2
SIZE = 8


def _hyperparams():
  with slim.arg_scope([slim.conv2d]) as scope:
    return scope


def _branch(num_classes=NUM_CLASSES, class_agnostic=False,
            crop_and_resize_fn=spatial_transform_ops.native_crop_and_resize,
            loss_weight=1.0):
  hyperparams = _hyperparams
  predictor = box_predictor_builder.build_mask_rcnn_box_predictor(
      is_training=True, num_classes=num_classes,
      fc_hyperparams_fn=hyperparams, use_dropout=False, dropout_keep_prob=1.0,
      box_code_size=4, third_stage_heads={
          box_predictor.MASK_PREDICTIONS: mask_head.MaskRCNNMaskHead(
              num_classes, hyperparams,
              masks_are_class_agnostic=class_agnostic)})
  assigner = target_assigner.TargetAssigner(
      region_similarity_calculator.IouSimilarity(),
      argmax_matcher.ArgMaxMatcher(0.5, None),
      faster_rcnn_box_coder.FasterRcnnBoxCoder([10.0, 10.0, 5.0, 5.0]))
  return mask_branch.MaskBranch(predictor, assigner, crop_and_resize_fn,
                                num_classes, loss_weight)


def test_refuses_a_predictor_without_mask_head():
  predictor = box_predictor_builder.build_mask_rcnn_box_predictor(
      True, 2, _hyperparams, False, 1.0, 4)
  with pytest.raises(ValueError, match='mask head'):
    mask_branch.MaskBranch(predictor, None, None, 2)


@pytest.mark.parametrize('crop', [spatial_transform_ops.native_crop_and_resize,
                                  spatial_transform_ops.matmul_crop_and_resize])
def test_targets_crop_the_matched_mask(execute, crop):
  """5x5 masks: box [0, 0, 1, 1] at 3x3 samples every other pixel; a box
  to pixel 0.5 at 2x2 reaches the mean of the four corner pixels."""
  masks = np.zeros([2, 5, 5], np.float32)
  masks[0, :2] = 1.0                      # rows 0 and 1
  masks[1] = np.arange(25).reshape(5, 5)  # a ramp, to check the sampling
  boxes = [[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.125, 0.125],
            [0.0, 0.0, 1.0, 1.0]]]

  def graph_fn():
    return _branch(crop_and_resize_fn=crop).targets(
        tf.constant(boxes), tf.constant([[1, 0, -1]]),
        [tf.constant(masks)], [3, 3])

  targets = execute(graph_fn)
  np.testing.assert_allclose(targets[0, 0], masks[1][::2, ::2], atol=1e-5)
  # Proposal 1 (matched to mask 0) spans pixels 0 to 0.5 in 3 samples.
  np.testing.assert_allclose(targets[0, 1], np.ones([3, 3]), atol=1e-6)
  np.testing.assert_allclose(targets[0, 2], np.zeros([3, 3]))
  ramp = execute(lambda: _branch(crop_and_resize_fn=crop).targets(
      tf.constant([[[0.0, 0.0, 0.125, 0.125]]]), tf.constant([[1]]),
      [tf.constant(masks)], [2, 2]))
  np.testing.assert_allclose(ramp[0, 0], [[0.0, 0.5], [2.5, 3.0]],
                             atol=1e-5)


def _groundtruth():
  """One image: a class-1 box (index 0) and a class-2 box with masks."""
  boxes = np.array([[0, 0, 4, 4], [4, 4, 8, 8]], np.float32)
  classes = np.array([[0, 1, 0], [0, 0, 1]], np.float32)
  masks = np.zeros([2, SIZE, SIZE], np.float32)
  # Boxes map to pixels as y * (SIZE - 1) / SIZE: box 0's 2x2 crop samples
  # rows and columns 0 and 3.5, box 1's 3.5 and 7.
  masks[0, :5, :5] = 1.0
  masks[1, 3:, 3:5] = 1.0  # box 1: its right column samples are empty
  return boxes, classes, masks


def _mask_loss(logits_fn, class_agnostic=False, loss_weight=1.0):
  boxes, classes, masks = _groundtruth()
  # Proposals: both groundtruth boxes, one background box, one padding row.
  proposals = np.array([[[0, 0, 4, 4], [4, 4, 8, 8], [0, 5, 2, 8],
                         [0, 0, 0, 0]]], np.float32)
  branch = _branch(class_agnostic=class_agnostic, loss_weight=loss_weight)

  def graph_fn():
    targets = branch.targets(tf.constant(proposals / SIZE),
                             tf.constant([[0, 1, -1, -1]]),
                             [tf.constant(masks)], [2, 2])
    logits = logits_fn(targets)
    return branch.loss(
        logits, tf.constant(proposals), tf.constant([3]),
        tf.constant([[SIZE, SIZE, 3]]), [box_list.BoxList(tf.constant(boxes))],
        [tf.constant(classes)], [tf.ones([2])], [tf.constant(masks)]), targets

  return graph_fn


def _class_logits(targets, class_agnostic=False):
  """[4, num_masks, 2, 2]: +-100 at the target class, noise elsewhere."""
  perfect = 100.0 * (2.0 * targets[0] - 1.0)
  if class_agnostic:
    return perfect[:, tf.newaxis]
  noise = tf.random.normal([4, 2, 2], stddev=5.0, seed=1)
  # Proposal 0 is class 1 (mask 0), proposal 1 class 2 (mask 1).
  first = tf.stack([perfect[0], noise[1], noise[2], noise[3]])
  second = tf.stack([noise[0], perfect[1], noise[2], noise[3]])
  return tf.stack([first, second], axis=1)


@pytest.mark.parametrize('class_agnostic', [False, True])
def test_loss_is_zero_for_a_perfect_prediction(execute, class_agnostic):
  loss, targets = execute(_mask_loss(
      lambda t: _class_logits(t, class_agnostic), class_agnostic))
  np.testing.assert_allclose(targets[0, 0], np.ones([2, 2]))
  np.testing.assert_allclose(targets[0, 1], [[1, 0], [1, 0]], atol=1e-6)
  np.testing.assert_allclose(targets[0, 2:], np.zeros([2, 2, 2]))
  assert loss['Loss/BoxClassifierLoss/mask_loss'] == pytest.approx(
      0.0, abs=1e-6)


def test_loss_is_normalized_per_positive_pixel_and_weighted(execute):
  """Zero logits: log(2) per pixel of the two positives, times the weight."""
  loss, _ = execute(_mask_loss(lambda t: tf.zeros([4, NUM_CLASSES, 2, 2]),
                               loss_weight=4.0))
  assert loss['Loss/BoxClassifierLoss/mask_loss'] == pytest.approx(
      4.0 * np.log(2.0), rel=1e-5)


def test_loss_needs_groundtruth_masks():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='load_instance_masks'):
      _branch().loss(tf.zeros([1, 2, 4, 4]), tf.zeros([1, 1, 4]),
                     tf.constant([1]), tf.constant([[8, 8, 3]]),
                     [box_list.BoxList(tf.zeros([1, 4]))],
                     [tf.constant([[0.0, 1.0, 0.0]])], [tf.ones([1])], None)


def test_detection_masks_take_each_detections_class(execute):
  logits = np.random.RandomState(0).normal(size=[4, 2, 3, 3]).astype(
      np.float32)

  def graph_fn():
    return _branch().detection_masks(tf.constant(logits),
                                     tf.constant([[1.0, 0.0], [0.0, 1.0]]))

  masks = execute(graph_fn)
  sigmoid = 1.0 / (1.0 + np.exp(-logits))
  assert masks.shape == (2, 2, 3, 3)
  np.testing.assert_allclose(
      masks.reshape(4, 3, 3), sigmoid[[0, 1, 2, 3], [1, 0, 0, 1]], rtol=1e-5)


@pytest.mark.parametrize('weights', [[[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]],
                                     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
def test_predict_weighted_rows_equals_predict_on_those_rows(weights):
  """Logits of the rows with weight, zeros elsewhere; also without any."""
  weights = np.asarray(weights, np.float32)
  features = np.random.default_rng(0).normal(
      size=[6, 3, 3, 8]).astype(np.float32)
  with tf.Graph().as_default():
    branch = _branch()
    assert branch.rois_are_independent()
    every_row = branch.predict(tf.constant(features))
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                     reuse=True):
      weighted = branch.predict_weighted_rows(tf.constant(features),
                                              tf.constant(weights))
    gradients = tf.gradients(tf.reduce_sum(weighted),
                             tf.compat.v1.trainable_variables())
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      every_row, weighted, gradients = sess.run(
          [every_row, weighted, gradients])
  assert weighted.shape == every_row.shape
  rows = weights.reshape(-1) != 0
  np.testing.assert_allclose(weighted[rows], every_row[rows], rtol=1e-5)
  assert not weighted[~rows].any()
  assert all(np.isfinite(gradient).all() for gradient in gradients)
  if not rows.any():
    assert not any(gradient.any() for gradient in gradients)
