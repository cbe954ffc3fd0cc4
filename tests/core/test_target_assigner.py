"""target_assigner with real matcher, similarity and box coder."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.box_coders import keypoint_box_coder
from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.core import box_list
from od_estimator.core import region_similarity_calculator as sim
from od_estimator.core import target_assigner as ta
from od_estimator.matchers import argmax_matcher

# Three anchors; groundtruth box 0 equals anchor 0 (IoU 1); box 1 overlaps
# anchor 1 with IoU 0.5 / (1 + 0.5 - ... ) computed below; anchor 2 is alone.
ANCHORS = np.array([[0., 0., .5, .5], [.5, .5, 1., 1.], [0., .5, .5, 1.]],
                   np.float32)
GT = np.array([[0., 0., .5, .5], [.5, .5, .9, .9]], np.float32)
# IoU(gt1, anchor1) = (.4 * .4) / (.25) = 0.64 (gt1 lies inside anchor 1).


def _assigner(negative_class_weight=1.0):
  return ta.TargetAssigner(
      sim.IouSimilarity(),
      argmax_matcher.ArgMaxMatcher(matched_threshold=0.5,
                                   unmatched_threshold=0.4),
      mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1),
      negative_class_weight=negative_class_weight)


def test_assign_class_and_regression_targets(execute):
  def graph(anchors, gt, labels):
    return _assigner(negative_class_weight=0.5).assign(
        box_list.BoxList(anchors), box_list.BoxList(gt), labels,
        unmatched_class_label=tf.constant([1., 0., 0.]))[:4]
  labels = np.array([[0., 1., 0.], [0., 0., 1.]], np.float32)
  cls_t, cls_w, reg_t, reg_w = execute(graph, [ANCHORS, GT, labels])
  np.testing.assert_allclose(cls_t, [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
  # Matched anchors weigh 1; the unmatched one negative_class_weight.
  np.testing.assert_allclose(cls_w, [[1, 1, 1], [1, 1, 1], [.5, .5, .5]])
  np.testing.assert_allclose(reg_w, [1., 1., 0.])
  # Mean/stddev coder: (gt - anchor) / 0.1.
  np.testing.assert_allclose(reg_t, [[0, 0, 0, 0], [0, 0, -1, -1],
                                     [0, 0, 0, 0]], atol=1e-5)


def test_ignored_anchors_get_zero_weights(execute):
  # IoU(gt, anchor0) = .2 * .5 / .25 = 0.4 -> between thresholds 0.3..0.5.
  def graph(anchors, gt):
    assigner = ta.TargetAssigner(
        sim.IouSimilarity(),
        argmax_matcher.ArgMaxMatcher(matched_threshold=0.5,
                                     unmatched_threshold=0.3),
        mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1))
    return assigner.assign(box_list.BoxList(anchors),
                           box_list.BoxList(gt))[:4]
  cls_t, cls_w, _, reg_w = execute(graph, [ANCHORS,
                                           np.array([[0., 0., .2, .5]],
                                                    np.float32)])
  np.testing.assert_allclose(cls_t, [[0.], [0.], [0.]])
  np.testing.assert_allclose(cls_w, [[0.], [1.], [1.]])
  np.testing.assert_allclose(reg_w, [0., 0., 0.])


def test_zero_weight_groundtruth_is_never_matched(execute):
  def graph(anchors, gt, weights):
    return _assigner().assign(box_list.BoxList(anchors), box_list.BoxList(gt),
                              groundtruth_weights=weights)[3]
  reg_w = execute(graph, [ANCHORS, GT, np.array([0., 1.], np.float32)])
  np.testing.assert_allclose(reg_w, [0., 1., 0.])


def test_groundtruth_weights_scale_the_matched_weights(execute):
  def graph(anchors, gt, labels, weights):
    return _assigner(negative_class_weight=0.5).assign(
        box_list.BoxList(anchors), box_list.BoxList(gt), labels,
        groundtruth_weights=weights)[:4]
  labels = np.array([[0., 1.], [0., 1.]], np.float32)
  _, cls_w, _, reg_w = execute(
      graph, [ANCHORS, GT, labels, np.array([.5, .25], np.float32)])
  # Anchors 0 and 1 take their box's weight; anchor 2 is a negative.
  np.testing.assert_allclose(reg_w, [.5, .25, 0.])
  np.testing.assert_allclose(cls_w, [[.5, .5], [.25, .25], [.5, .5]])


def test_thresholded_iou_uses_the_foreground_score(execute):
  # Box 0 has IoU 1 with anchor 0 but foreground score 1 - 0.6 = 0.4, which
  # lands between the thresholds (0.3 <= 0.4 < 0.5): anchor 0 is ignored.
  # Box 1 (score 1, IoU 0.64 > 0.5 with anchor 1) matches anchor 1.
  def graph(anchors, gt, labels):
    boxes = box_list.BoxList(gt)
    assigner = ta.TargetAssigner(
        sim.ThresholdedIouSimilarity(iou_threshold=0.5),
        argmax_matcher.ArgMaxMatcher(matched_threshold=0.5,
                                     unmatched_threshold=0.3),
        mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1))
    outputs = assigner.assign(box_list.BoxList(anchors), boxes, labels)
    assert not boxes.has_field('scores')  # The caller's list is unchanged.
    return outputs[:4] + (outputs[4].match_results,)
  labels = np.array([[.6, .4, 0.], [0., 0., 1.]], np.float32)
  cls_t, cls_w, _, reg_w, match = execute(graph, [ANCHORS, GT, labels])
  np.testing.assert_array_equal(match, [-2, 1, -1])
  np.testing.assert_allclose(cls_t, [[0, 0, 0], [0, 0, 1], [0, 0, 0]])
  np.testing.assert_allclose(cls_w, [[0] * 3, [1] * 3, [1] * 3])
  np.testing.assert_allclose(reg_w, [0., 1., 0.])


def test_keypoints_are_encoded_with_their_box(execute):
  def graph(anchors, gt, keypoints):
    boxes = box_list.BoxList(gt)
    boxes.add_field('keypoints', keypoints)
    assigner = ta.TargetAssigner(
        sim.IouSimilarity(),
        argmax_matcher.ArgMaxMatcher(matched_threshold=0.5),
        keypoint_box_coder.KeypointBoxCoder(num_keypoints=1))
    return assigner.assign(box_list.BoxList(anchors), boxes)[2]
  keypoints = np.array([[[.5, 0.]], [[.7, .7]]], np.float32)
  reg_t = execute(graph, [ANCHORS, GT, keypoints])
  # Anchor 0 = box 0 (centre .25, size .5): box codes 0, keypoint
  # ((.5 - .25) / .5, (0 - .25) / .5). Anchor 1 (centre .75, size .5) vs
  # box 1 (centre .7, size .4): -.1, -.1, ln .8, ln .8 and keypoint
  # (-.1, -.1). Anchor 2 is unmatched: zeros.
  ln8 = np.log(.8)
  np.testing.assert_allclose(
      reg_t, [[0., 0., 0., 0., .5, -.5], [-.1, -.1, ln8, ln8, -.1, -.1],
              [0.] * 6], atol=1e-5)


def test_no_groundtruth_makes_every_anchor_background(execute):
  def graph(anchors, gt, labels):
    # The number of boxes is unknown until run time, as in training.
    gt = tf.compat.v1.placeholder_with_default(gt, [None, 4])
    labels = tf.compat.v1.placeholder_with_default(labels, [None, 3])
    return _assigner().assign(box_list.BoxList(anchors), box_list.BoxList(gt),
                              labels)[:4]
  cls_t, cls_w, reg_t, reg_w = execute(
      graph, [ANCHORS, np.zeros([0, 4], np.float32),
              np.zeros([0, 3], np.float32)])
  np.testing.assert_allclose(cls_t, np.zeros([3, 3]))
  np.testing.assert_allclose(cls_w, np.ones([3, 3]))
  np.testing.assert_allclose(reg_t, np.zeros([3, 4]))
  np.testing.assert_allclose(reg_w, np.zeros([3]))


def test_batch_assign_targets_stacks_and_keeps_static_shapes(execute):
  def graph(anchors, gt0, gt1):
    labels = [tf.constant([[0., 1.], [1., 0.]]), tf.constant([[1., 0.]])]
    outputs = ta.batch_assign_targets(
        _assigner(), box_list.BoxList(anchors),
        [box_list.BoxList(gt0), box_list.BoxList(gt1)], labels)
    assert outputs[0].shape.as_list() == [2, 3, 2]
    assert outputs[2].shape.as_list() == [2, 3, 4]
    return outputs
  cls_t, _, _, reg_w, match = execute(graph, [ANCHORS, GT, GT[1:]])
  np.testing.assert_allclose(cls_t[0], [[0, 1], [1, 0], [0, 0]])
  np.testing.assert_allclose(cls_t[1], [[0, 0], [1, 0], [0, 0]])
  np.testing.assert_allclose(reg_w, [[1, 1, 0], [0, 1, 0]])
  np.testing.assert_array_equal(match, [[0, 1, -1], [-1, 0, -1]])


def test_batch_assign_confidences(execute):
  def graph(anchors, gt):
    # Box 0: class 1 positive, class 2 explicit negative; box 1: no
    # positive class, class 1 explicit negative.
    confidences = tf.constant([[0., 1., -1.], [0., -1., 0.]])
    return ta.batch_assign_confidences(
        _assigner(), box_list.BoxList(anchors), [box_list.BoxList(gt)],
        [confidences], unmatched_class_label=tf.constant([1., 0., 0.]),
        include_background_class=True, implicit_class_weight=0.25)[:4]
  cls_t, cls_w, _, reg_w = execute(graph, [ANCHORS, GT])
  # Anchor 0 (box 0): background 0, class 1, negative class 2 -> 0.
  # Anchor 1 (box 1): no positive -> background 1, negatives zeroed.
  # Anchor 2 unmatched -> background.
  np.testing.assert_allclose(cls_t[0], [[0, 1, 0], [1, 0, 0], [1, 0, 0]])
  np.testing.assert_allclose(reg_w[0], [1., 0., 0.])
  # Explicit entries weigh 1, implicit 0.25; background weighs 1 only for
  # anchors with a positive class.
  np.testing.assert_allclose(cls_w[0], [[1, 1, 1], [.25, 1, .25],
                                        [.25, .25, .25]])


def test_bad_arguments():
  with pytest.raises(ValueError, match='anchors must be a BoxList'):
    _assigner().assign(tf.zeros([3, 4]), box_list.BoxList(tf.zeros([1, 4])))
  with pytest.raises(ValueError, match='one entry per image'):
    ta.batch_assign_targets(_assigner(), box_list.BoxList(tf.zeros([3, 4])),
                            [box_list.BoxList(tf.zeros([1, 4]))], [])


def test_assign_rejects_labels_and_boxes_of_different_lengths(execute):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Unequal shapes'):
      _assigner().assign(box_list.BoxList(tf.constant(ANCHORS)),
                         box_list.BoxList(tf.constant(GT)),
                         tf.ones([3, 2]))
    with pytest.raises(ValueError, match='Unequal shapes'):
      _assigner().assign(box_list.BoxList(tf.constant(ANCHORS)),
                         box_list.BoxList(tf.constant(GT)), tf.ones([2, 3]),
                         unmatched_class_label=tf.constant([1., 0.]))

  def graph(anchors, gt, labels):
    return _assigner().assign(
        box_list.BoxList(tf.reshape(anchors, [-1, 4])),
        box_list.BoxList(tf.reshape(gt, [-1, 4])), labels)[0]
  execute(graph, [ANCHORS, GT, np.ones([2, 2], np.float32)], dynamic=True)
  with pytest.raises(tf.errors.InvalidArgumentError):
    execute(graph, [ANCHORS, GT, np.ones([3, 2], np.float32)], dynamic=True)


def test_batch_assign_confidences_class_agnostic(execute):
  # The original's test_batch_assign_confidences_agnostic.
  def graph(anchors, gt1, gt2):
    return ta.batch_assign_confidences(
        ta.TargetAssigner(
            sim.IouSimilarity(),
            argmax_matcher.ArgMaxMatcher(matched_threshold=0.5,
                                         unmatched_threshold=0.5),
            mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1)),
        box_list.BoxList(anchors),
        [box_list.BoxList(gt1), box_list.BoxList(gt2)], [None, None],
        include_background_class=False, implicit_class_weight=0.5)[:4]
  anchors = np.array([[0, 0, .25, .25], [0, .25, 1, 1], [0, .1, .5, .5],
                      [.75, .75, 1, 1]], np.float32)
  gt1 = np.array([[0., 0., 0.2, 0.2]], np.float32)
  gt2 = np.array([[0, 0.25123152, 1, 1], [0.015789, 0.0985, 0.55789, 0.3842]],
                 np.float32)
  cls_t, cls_w, reg_t, reg_w = execute(graph, [anchors, gt1, gt2])
  np.testing.assert_allclose(cls_t, [[[1], [0], [0], [0]],
                                     [[0], [1], [1], [0]]])
  np.testing.assert_allclose(cls_w, [[[1], [.5], [.5], [.5]],
                                     [[.5], [1], [1], [.5]]])
  np.testing.assert_allclose(
      reg_t, [[[0, 0, -0.5, -0.5], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
              [[0, 0, 0, 0], [0, 0.01231521, 0, 0],
               [0.15789001, -0.01500003, 0.57889998, -1.15799987],
               [0, 0, 0, 0]]], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(reg_w, [[1, 0, 0, 0], [0, 1, 1, 0]])
