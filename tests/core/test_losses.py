"""Losses and the hard example miner against hand-computed numbers."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import losses

LN2, LN3, LN4 = math.log(2.), math.log(3.), math.log(4.)


def _np_sigmoid(x):
  return 1. / (1. + np.exp(-np.asarray(x, np.float64)))


def test_loss_is_abstract():
  with pytest.raises(TypeError):
    losses.Loss()


# ---------------------------------------------------------------- L2 / L1 --


def test_weighted_l2_weights_scale_the_difference(execute):
  prediction = np.array([[[1., 2.], [0., 0.], [5., 5.]]], np.float32)
  target = np.array([[[0., 0.], [0., 3.], [0., 0.]]], np.float32)
  weights = np.array([[2., .5, 0.]], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedL2LocalizationLoss()(
      p, t, weights=w), [prediction, target, weights])
  # Anchor 0: weighted diff (2, 4) -> 0.5 * (4 + 16) = 10.
  # Anchor 1: weighted diff (0, -1.5) -> 0.5 * 2.25 = 1.125.
  # Anchor 2: weight 0 -> 0.
  np.testing.assert_allclose(loss, [[10., 1.125, 0.]], rtol=1e-6)


def test_weighted_l2_ignores_nan_targets(execute):
  prediction = np.array([[[1., 2.]]], np.float32)
  target = np.array([[[np.nan, 0.]]], np.float32)
  weights = np.ones([1, 1], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedL2LocalizationLoss()(
      p, t, ignore_nan_targets=True, weights=w), [prediction, target, weights])
  # The NaN coordinate takes the prediction's value: 0.5 * (0^2 + 2^2) = 2.
  np.testing.assert_allclose(loss, [[2.]])


def test_smooth_l1_quadratic_and_linear_parts(execute):
  # Diffs per anchor: (0.5, 2), (-3, 0), (1, 1) with zero weight.
  prediction = np.array([[[0.5, 2.], [0., 0.], [1., 1.]]], np.float32)
  target = np.array([[[0., 0.], [3., 0.], [0., 0.]]], np.float32)
  weights = np.array([[1., 2., 0.]], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedSmoothL1LocalizationLoss()(
      p, t, weights=w), [prediction, target, weights])
  # delta = 1: |d| < 1 -> 0.5 d^2; else |d| - 0.5.
  # Anchor 0: 0.5 * 0.25 + (2 - 0.5) = 0.125 + 1.5 = 1.625.
  # Anchor 1: 2 * (3 - 0.5) = 5.  Anchor 2: weight 0.
  np.testing.assert_allclose(loss, [[1.625, 5., 0.]], rtol=1e-6)


def test_smooth_l1_with_delta_follows_huber(execute):
  prediction = np.array([[[0.25, 2.]]], np.float32)
  target = np.zeros([1, 1, 2], np.float32)
  weights = np.ones([1, 1], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedSmoothL1LocalizationLoss(
      delta=0.5)(p, t, weights=w), [prediction, target, weights])
  # Huber with delta 0.5 (as tf.losses.huber_loss in the original):
  # 0.25 <= 0.5 -> 0.5 * 0.0625 = 0.03125; 2 > 0.5 -> 0.5 * (2 - 0.25) = 0.875.
  np.testing.assert_allclose(loss, [[0.90625]], rtol=1e-6)


def test_smooth_l1_with_zero_anchors(execute):
  empty = np.zeros([2, 0, 4], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedSmoothL1LocalizationLoss()(
      p, t, weights=w), [empty, empty, np.zeros([2, 0], np.float32)],
                 dynamic=True)
  assert loss.shape == (2, 0)


def test_losses_mask_zeroes_masked_images(execute):
  prediction = np.array([[[2., 0.]], [[2., 0.]]], np.float32)
  target = np.zeros([2, 1, 2], np.float32)
  weights = np.ones([2, 1], np.float32)
  mask = np.array([True, False])
  loss = execute(lambda p, t, w, m: losses.WeightedSmoothL1LocalizationLoss()(
      p, t, losses_mask=m, weights=w), [prediction, target, weights, mask])
  # Image 0: |2| - 0.5 = 1.5; image 1 is masked out.
  np.testing.assert_allclose(loss, [[1.5], [0.]])


def test_iou_loss(execute):
  prediction = np.array([[[0., 0., 2., 2.], [0., 0., 1., 1.],
                          [0., 0., 1., 1.]]], np.float32)
  target = np.array([[[1., 1., 3., 3.], [0., 0., 1., 1.],
                      [5., 5., 6., 6.]]], np.float32)
  weights = np.array([[1., 1., .5]], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedIOULocalizationLoss()(
      p, t, weights=w), [prediction, target, weights])
  # Anchor 0: intersection 1, union 4 + 4 - 1 = 7 -> 1 - 1/7.
  # Anchor 1: identical -> 0.  Anchor 2: disjoint -> 0.5 * (1 - 0).
  np.testing.assert_allclose(loss, [[6. / 7., 0., .5]], rtol=1e-6)


def test_iou_loss_with_zero_anchors_and_dynamic_shape(execute):
  empty = np.zeros([1, 0, 4], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedIOULocalizationLoss()(
      p, t, weights=w), [empty, empty, np.zeros([1, 0], np.float32)],
                 dynamic=True)
  assert loss.shape == (1, 0)


# ---------------------------------------------------------- classification --


def test_sigmoid_cross_entropy_per_class(execute):
  # Logit 0 -> p = 0.5; logit ln 3 -> p = 0.75.
  logits = np.array([[[0., LN3]]], np.float32)
  targets = np.array([[[1., 0.]]], np.float32)
  loss = execute(lambda p, t, w: losses.WeightedSigmoidClassificationLoss()(
      p, t, weights=w), [logits, targets, np.ones([1, 1, 1], np.float32)])
  # -ln(0.5) = ln 2 and -ln(1 - 0.75) = ln 4.
  np.testing.assert_allclose(loss, [[[LN2, LN4]]], rtol=1e-6)


def test_sigmoid_per_class_weights_and_class_indices(execute):
  logits = np.array([[[0., LN3, 0.], [0., 0., 0.]]], np.float32)
  targets = np.array([[[1., 0., 0.], [0., 1., 0.]]], np.float32)
  weights = np.array([[[1., 2., 1.], [0., 0., 0.]]], np.float32)

  def graph(p, t, w):
    loss = losses.WeightedSigmoidClassificationLoss()
    return (loss(p, t, weights=w),
            loss(p, t, weights=w, class_indices=tf.constant([1, 2])))
  loss, restricted = execute(graph, [logits, targets, weights])
  np.testing.assert_allclose(loss, [[[LN2, 2 * LN4, LN2], [0., 0., 0.]]],
                             rtol=1e-6)
  # Class 0 excluded by class_indices.
  np.testing.assert_allclose(restricted, [[[0., 2 * LN4, LN2], [0., 0., 0.]]],
                             rtol=1e-6)


def _np_focal(logits, targets, gamma, alpha):
  """Reference: -a_t * (1 - p_t)^gamma * ln(p_t), p = sigmoid(logit)."""
  p = _np_sigmoid(logits)
  p_t = np.where(targets == 1., p, 1. - p)
  a_t = 1. if alpha is None else np.where(targets == 1., alpha, 1. - alpha)
  return -a_t * (1. - p_t) ** gamma * np.log(p_t)


def test_sigmoid_focal_loss_formula(execute):
  logits = np.array([[[2., -1., .5], [-3., 4., 0.]]], np.float32)
  targets = np.array([[[1., 0., 0.], [0., 0., 1.]]], np.float32)
  weights = np.array([[[1.], [.5]]], np.float32)
  loss = execute(lambda p, t, w: losses.SigmoidFocalClassificationLoss()(
      p, t, weights=w), [logits, targets, weights])
  expected = _np_focal(logits, targets, gamma=2., alpha=.25) * weights
  # Spot check of one entry: logit 2, positive: p = 0.8808,
  # 0.25 * 0.1192^2 * -ln(0.8808) = 0.25 * 0.014209 * 0.126928 = 4.509e-4.
  np.testing.assert_allclose(expected[0, 0, 0], 4.509e-4, rtol=1e-3)
  np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_sigmoid_focal_without_alpha_and_gamma_is_cross_entropy(execute):
  logits = np.array([[[0., LN3]]], np.float32)
  targets = np.array([[[1., 0.]]], np.float32)
  loss = execute(lambda p, t, w: losses.SigmoidFocalClassificationLoss(
      gamma=0., alpha=None)(p, t, weights=w),
                 [logits, targets, np.ones([1, 1, 1], np.float32)])
  np.testing.assert_allclose(loss, [[[LN2, LN4]]], rtol=1e-6)


def _autograd_focal(logits, targets, weights, gamma, alpha):
  """The focal loss as plain ops, for autograd to differentiate."""
  probabilities = tf.sigmoid(logits)
  loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
  if gamma:
    loss *= tf.pow(1.0 - (targets * probabilities +
                          (1.0 - targets) * (1.0 - probabilities)), gamma)
  if alpha is not None:
    loss *= targets * alpha + (1.0 - targets) * (1.0 - alpha)
  return loss * weights


class _AutogradFocalLoss(losses.Loss):
  """The focal loss through Loss.__call__, gradient by autograd."""

  def __init__(self, gamma, alpha):
    super().__init__()
    self._gamma, self._alpha = gamma, alpha

  def _compute_loss(self, prediction_tensor, target_tensor, weights,
                    class_indices=None):
    if class_indices is not None:
      weights = losses._restrict_weights_to_classes(  # pylint: disable=protected-access
          weights, class_indices, tf.shape(prediction_tensor)[2])
    return _autograd_focal(prediction_tensor, target_tensor, weights,
                           self._gamma, self._alpha)


def _focal_inputs(rng, classes=7, anchor_weights=False):
  """Logits over the range sigmoids saturate in (with 0 and +-30), one-hot
  targets with some soft ones, weights per class or per anchor, upstream."""
  shape = [2, 5, classes]
  logits = rng.uniform(-12., 12., shape)
  logits.flat[:3] = [0., 30., -30.]
  targets = np.eye(classes)[rng.integers(0, classes, shape[:2])]
  targets[0, 0] = rng.uniform(0., 1., classes)
  weights = rng.uniform(0., 2., shape[:2] + [1 if anchor_weights else classes])
  upstream = rng.uniform(-1., 1., shape)
  return [a.astype(np.float32) for a in (logits, targets, weights, upstream)]


def _loss_and_gradients(loss, inputs, upstream):
  return [loss] + tf.gradients(loss, inputs, grad_ys=upstream)


def _assert_close_to_autograd(ours, autograd, gamma):
  """Gradients within float rounding; the loss bit for bit, except that
  ours computes x^1.5 as x * sqrt(x) where autograd's side calls tf.pow."""
  if gamma % 1 == .5:
    np.testing.assert_allclose(ours[0], autograd[0], rtol=1e-6)
  else:
    np.testing.assert_array_equal(ours[0], autograd[0])
  for mine, theirs in zip(ours[1:], autograd[1:]):
    np.testing.assert_allclose(mine, theirs, rtol=2e-5,
                               atol=1e-6 * np.abs(theirs).max())


FOCAL_SETTINGS = [(0., None), (0., .25), (1., .25), (1.5, .25), (2., .25),
                  (2., None), (3., 0.), (1.5, 1.), (.5, None), (2.5, .25)]


def test_sigmoid_focal_gradient_is_autograds(execute):
  rng = np.random.default_rng(3)
  cases = [_focal_inputs(rng, anchor_weights=i % 2)
           for i in range(len(FOCAL_SETTINGS))]

  def graph_fn(*tensors):
    results = []
    for (gamma, alpha), index in zip(FOCAL_SETTINGS, range(0, 99, 4)):
      logits, targets, weights, upstream = tensors[index:index + 4]
      ours = losses.SigmoidFocalClassificationLoss(gamma=gamma, alpha=alpha)(
          logits, targets, weights=weights)
      results.append([_loss_and_gradients(loss, [logits, targets, weights],
                                          upstream)
                      for loss in (ours, _autograd_focal(
                          logits, targets, weights, gamma, alpha))])
    return results

  results = execute(graph_fn, [a for case in cases for a in case],
                    dynamic=True)
  for (gamma, _), (ours, autograd) in zip(FOCAL_SETTINGS, results):
    _assert_close_to_autograd(ours, autograd, gamma)


@pytest.mark.parametrize('gamma,alpha,anchor_weights',
                         [(1.5, .25, False), (2., None, True)])
def test_sigmoid_focal_gradient_with_masks_and_nan_targets(
    execute, gamma, alpha, anchor_weights):
  # NaN targets are replaced by the logits: the targets' gradient flows
  # into the logits' one (the focal loss needs the result in [0, 1]).
  # One image masked out, two classes kept; static shapes (a TPU's).
  logits, targets, weights, upstream = _focal_inputs(
      np.random.default_rng(4), anchor_weights=anchor_weights)
  targets[0, 2, 3], logits[0, 2, 3] = np.nan, .4  # becomes a 0.4 target

  def graph_fn(logits, targets, weights, upstream):
    outputs = []
    for loss in (losses.SigmoidFocalClassificationLoss(gamma, alpha),
                 _AutogradFocalLoss(gamma, alpha)):
      value = loss(logits, targets, ignore_nan_targets=True,
                   losses_mask=tf.constant([True, False]), weights=weights,
                   class_indices=tf.constant([1, 3]))
      outputs.append(_loss_and_gradients(value, [logits, weights], upstream))
    return outputs

  ours, autograd = execute(graph_fn, [logits, targets, weights, upstream])
  _assert_close_to_autograd(ours, autograd, gamma)
  # The image that counts has gradient, the NaN target's entry too.
  assert np.abs(ours[1][0]).max() > 0 and ours[1][0, 2, 3] != 0


def test_softmax_with_logit_scale(execute):
  logits = np.array([[[1., 2., 3.], [0., 0., 0.], [5., 0., 0.]]], np.float32)
  targets = np.array([[[1., 0., 0.], [0., 1., 0.], [1., 0., 0.]]], np.float32)
  # Per-class weights are averaged: (1 + 2 + 3) / 3 = 2; zero for anchor 2.
  weights = np.array([[[1., 2., 3.], [1., 1., 1.], [0., 0., 0.]]],
                     np.float32)
  loss = execute(lambda p, t, w: losses.WeightedSoftmaxClassificationLoss(
      logit_scale=2.)(p, t, weights=w), [logits, targets, weights])
  # Anchor 0: scaled logits (0.5, 1, 1.5), target class 0:
  #   -0.5 + ln(e^0.5 + e^1 + e^1.5), times weight 2.
  anchor0 = 2. * (-0.5 + math.log(math.exp(.5) + math.exp(1.) +
                                  math.exp(1.5)))
  # Anchor 1: uniform over 3 classes -> ln 3.
  np.testing.assert_allclose(loss, [[anchor0, LN3, 0.]], rtol=1e-6)


def test_softmax_against_logits(execute):
  # Targets: logits (0, 2 ln 3) / 2 -> softmax (0.25, 0.75).
  # Prediction: logits (2 ln 3, 0) / 2 -> softmax (0.75, 0.25).
  prediction = np.array([[[2 * LN3, 0.]]], np.float32)
  target = np.array([[[0., 2 * LN3]]], np.float32)
  loss = execute(
      lambda p, t, w: losses.WeightedSoftmaxClassificationAgainstLogitsLoss(
          logit_scale=2.)(p, t, weights=w),
      [prediction, target, np.ones([1, 1, 1], np.float32)])
  expected = -(.25 * math.log(.75) + .75 * math.log(.25))
  np.testing.assert_allclose(loss, [[expected]], rtol=1e-6)


@pytest.mark.parametrize('bootstrap_type,belief', [('soft', .75),
                                                   ('hard', 1.)])
def test_bootstrapped_sigmoid(execute, bootstrap_type, belief):
  # Logit ln 3 -> p = 0.75; label 0; alpha 0.5 -> target 0.5 * belief.
  logits = np.array([[[LN3]]], np.float32)
  targets = np.zeros([1, 1, 1], np.float32)
  loss = execute(lambda p, t, w: losses.BootstrappedSigmoidClassificationLoss(
      alpha=.5, bootstrap_type=bootstrap_type)(p, t, weights=w),
                 [logits, targets, np.ones([1, 1, 1], np.float32)])
  target = .5 * belief
  expected = -(target * math.log(.75) + (1. - target) * math.log(.25))
  np.testing.assert_allclose(loss, [[[expected]]], rtol=1e-6)


def test_bootstrapped_sigmoid_rejects_unknown_type():
  with pytest.raises(ValueError, match='bootstrap_type'):
    losses.BootstrappedSigmoidClassificationLoss(alpha=.5,
                                                 bootstrap_type='medium')


def test_penalty_reduced_logistic_focal_loss(execute):
  logits = np.array([[[0.], [LN3], [20.], [-1.]]], np.float32)
  targets = np.array([[[1.], [.5], [0.], [1.]]], np.float32)
  weights = np.array([[[1.], [1.], [1.], [0.]]], np.float32)
  loss = execute(lambda p, t, w: losses.PenaltyReducedLogisticFocalLoss(
      alpha=2., beta=4.)(p, t, weights=w), [logits, targets, weights])
  # Center, p = 0.5: -(0.5)^2 ln 0.5 = 0.25 ln 2.
  # y = 0.5, p = 0.75: -(0.5)^4 * 0.75^2 * ln 0.25 = 0.0625 * 0.5625 * ln 4.
  # y = 0, p clipped to 1 - 1e-4: -(1 - 1e-4)^2 * ln(1e-4).
  # Last anchor has weight 0.
  expected = [.25 * LN2, .0625 * .5625 * LN4,
              -(1. - 1e-4) ** 2 * math.log(1e-4), 0.]
  np.testing.assert_allclose(loss[0, :, 0], expected, rtol=1e-3)


# ---------------------------------------------------------- hard mining --


class _FakeMatch:
  """Match stand-in: anchors >= 0 matched, -1 unmatched, -2 ignored."""

  def __init__(self, match_results):
    self._results = tf.constant(match_results, tf.int32)

  def matched_column_indicator(self):
    return tf.greater_equal(self._results, 0)

  def unmatched_column_indicator(self):
    return tf.equal(self._results, -1)


def _boxlist(rows):
  return box_list.BoxList(
      tf.constant(np.array(rows, np.float32).reshape(-1, 4)))


# Six unit boxes far apart, so NMS never suppresses among them.
_SEPARATE_BOXES = [[0., 10. * i, 1., 10. * i + 1.] for i in range(6)]


def test_miner_single_loss_type(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=1, iou_threshold=1.,
                                    loss_type='cls')
    loc = tf.constant([[100., 90., 80., 0.], [0., 1., 2., 3.]])
    cls = tf.constant([[0., 10., 50., 110.], [0., 6., 5., 4.]])
    boxes = _SEPARATE_BOXES[:4]
    return miner(loc, cls, [_boxlist(boxes), _boxlist(boxes)])
  loc_loss, cls_loss = execute(graph)
  # Image 0 picks anchor 3 (cls 110, loc 0); image 1 anchor 1 (cls 6, loc 1).
  np.testing.assert_allclose([loc_loss, cls_loss], [1., 116.])


def test_miner_both_loss_types(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=1, iou_threshold=1.,
                                    loss_type='both', cls_loss_weight=1.,
                                    loc_loss_weight=.5)
    loc = tf.constant([[100., 90., 80., 0.]])
    cls = tf.constant([[0., 10., 50., 110.]])
    return miner(loc, cls, [_boxlist(_SEPARATE_BOXES[:4])])
  loc_loss, cls_loss = execute(graph)
  # Ranking 1 * cls + 0.5 * loc = (50, 55, 90, 110): anchor 3 wins.
  np.testing.assert_allclose([loc_loss, cls_loss], [0., 110.])


def test_miner_nms_skips_overlapping_boxes(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=2, iou_threshold=.5,
                                    loss_type='cls')
    # Boxes 0 and 1 have IOU 0.9 > 0.5, box 2 is apart.
    boxes = [[0., 0., 1., 1.], [0., 0., 1., .9], [5., 5., 6., 6.]]
    loc = tf.constant([[1., 2., 4.]])
    cls = tf.constant([[5., 4., 3.]])
    return miner(loc, cls, [_boxlist(boxes)])
  loc_loss, cls_loss = execute(graph)
  # Anchor 0 (cls 5) then anchor 1 is suppressed, anchor 2 (cls 3) taken.
  np.testing.assert_allclose([loc_loss, cls_loss], [1. + 4., 5. + 3.])


def test_miner_max_negatives_per_positive(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=None, iou_threshold=1.,
                                    loss_type='cls',
                                    max_negatives_per_positive=1)
    cls = tf.constant([[6., 5., 4., 3., 2., 1.]])
    loc = tf.zeros([1, 6])
    # Positives: anchors 1, 4; negatives: 0, 2, 3; ignored: 5.
    match = _FakeMatch([-1, 0, -1, -1, 1, -2])
    result = miner(loc, cls, [_boxlist(_SEPARATE_BOXES)], [match])
    miner.summarize()
    summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
    return (result, miner._num_positives_list[0],
            miner._num_negatives_list[0], tf.constant(len(summaries)))
  (loc_loss, cls_loss), num_pos, num_neg, num_summaries = execute(graph)
  # Selection order 0..5 (descending loss). 2 positives -> at most 2
  # negatives: 0 and 2 kept, 3 dropped; anchor 5 comes after the cap.
  assert (num_pos, num_neg) == (2, 2)
  np.testing.assert_allclose([loc_loss, cls_loss], [0., 6. + 5. + 4. + 2.])
  assert num_summaries == 2


def test_miner_min_negatives_without_positives(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=None, iou_threshold=1.,
                                    loss_type='cls',
                                    max_negatives_per_positive=3,
                                    min_negatives_per_image=2)
    cls = tf.constant([[1., 6., 5., 4.]])
    match = _FakeMatch([-1, -1, -1, -1])
    return miner(tf.zeros([1, 4]), cls, [_boxlist(_SEPARATE_BOXES[:4])],
                 [match])
  _, cls_loss = execute(graph)
  # No positives: max(2, 3 * 0) = 2 negatives, the two largest: 6 + 5.
  np.testing.assert_allclose(cls_loss, 11.)


def test_miner_with_zero_boxes(execute):
  def graph():
    miner = losses.HardExampleMiner(num_hard_examples=None)
    empty = tf.zeros([1, 0])
    return miner(empty, empty, [_boxlist(np.zeros([0, 4]))])
  np.testing.assert_allclose(execute(graph), [0., 0.])


def test_miner_rejects_inconsistent_inputs():
  with tf.Graph().as_default():
    miner = losses.HardExampleMiner()
    loss = tf.zeros([2, 3])
    boxes = _boxlist(_SEPARATE_BOXES[:3])
    with pytest.raises(ValueError, match='compatible shapes'):
      miner(loss, loss, [boxes])
    with pytest.raises(ValueError, match='must be a list'):
      miner(loss, loss, [boxes, boxes], match_list=(None, None))
    with pytest.raises(ValueError, match='match_list'):
      miner(loss, loss, [boxes, boxes], match_list=[None])
