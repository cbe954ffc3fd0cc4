"""SSDLoss, the part alone, on random and hand-made predictions.

Anchors are the four quadrants of the unit square (fakes.QUADRANT_ANCHORS),
the box coder MeanStddevBoxCoder(stddev=0.1): code = (box - anchor) / 0.1.
Anchors match a groundtruth box at IoU >= 0.5.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.core import box_list
from od_estimator.core import losses
from od_estimator.core import region_similarity_calculator
from od_estimator.core import target_assigner
from od_estimator.matchers import argmax_matcher
from od_estimator.meta_architectures import ssd_loss
from tests import fakes

NUM_CLASSES = 2
BATCH = 2
NUM_ANCHORS = len(fakes.QUADRANT_ANCHORS)
LOSS_KEYS = ['Loss/classification_loss', 'Loss/localization_loss']
# Image 0: a class-0 box on anchor 0; image 1: a class-1 box on anchor 3.
GT_BOXES = [np.array([fakes.QUADRANT_ANCHORS[0]], np.float32),
            np.array([fakes.QUADRANT_ANCHORS[3]], np.float32)]
GT_CLASSES = [np.array([[1.0, 0.0]], np.float32),
              np.array([[0.0, 1.0]], np.float32)]
POSITIVES = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], bool)
NO_BOXES = [np.zeros([0, 4], np.float32)] * BATCH
NO_CLASSES = [np.zeros([0, NUM_CLASSES], np.float32)] * BATCH


def _random_predictions(seed):
  rng = np.random.RandomState(seed)
  return (rng.uniform(-1, 1, [BATCH, NUM_ANCHORS, 4]).astype(np.float32),
          rng.uniform(-3, 3, [BATCH, NUM_ANCHORS, NUM_CLASSES + 1]).astype(
              np.float32))


def _sigmoid_cross_entropy(logits, labels):
  return (np.maximum(logits, 0) - logits * labels +
          np.log1p(np.exp(-np.abs(logits))))


def _targets(positives, background=1.0):
  """[BATCH, anchors, classes + 1] one-hot targets of GT_CLASSES."""
  targets = np.zeros([BATCH, NUM_ANCHORS, NUM_CLASSES + 1], np.float32)
  targets[:, :, 0] = background
  if positives:
    targets[0, 0] = [0.0, 1.0, 0.0]
    targets[1, 3] = [0.0, 0.0, 1.0]
  return targets


def _part(**params):
  """An SSDLoss; params override SSDLossParams fields."""
  return ssd_loss.SSDLoss(
      ssd_loss.SSDLossParams(
          target_assigner=target_assigner.TargetAssigner(
              region_similarity_calculator.IouSimilarity(),
              argmax_matcher.ArgMaxMatcher(0.5, 0.5),
              mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1)),
          classification_loss=losses.WeightedSigmoidClassificationLoss(),
          localization_loss=losses.WeightedSmoothL1LocalizationLoss(),
          **params),
      NUM_CLASSES, is_training=True)


def _anchors():
  return box_list.BoxList(tf.constant(fakes.QUADRANT_ANCHORS))


def _losses(execute, codes, logits, gt_boxes=GT_BOXES, gt_classes=GT_CLASSES,
            **params):
  """Runs SSDLoss.loss; params override SSDLossParams fields."""
  def graph(codes, logits, *groundtruth):
    loss_dict = _part(**params).loss(
        codes, logits, _anchors(), list(groundtruth[:BATCH]),
        list(groundtruth[BATCH:]))
    assert sorted(loss_dict) == LOSS_KEYS
    return loss_dict
  return execute(graph, [codes, logits] + list(gt_boxes) + list(gt_classes))


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_losses_are_finite_scalars_on_random_inputs(execute, seed):
  codes, logits = _random_predictions(seed)
  rng = np.random.RandomState(seed + 10)
  corners = np.sort(rng.uniform(0, 1, [BATCH, 3, 2, 2]), axis=2)
  # ymin, xmin, ymax, xmax from sorted (y, x) pairs.
  boxes = [np.concatenate([c[:, 0], c[:, 1]], axis=1).astype(np.float32)
           for c in corners]
  classes = [np.eye(NUM_CLASSES, dtype=np.float32)[
      rng.randint(NUM_CLASSES, size=3)] for _ in range(BATCH)]
  loss_dict = _losses(execute, codes, logits, boxes, classes)
  for value in loss_dict.values():
    assert np.shape(value) == ()
    assert np.isfinite(value) and value >= 0


def test_a_value_computed_by_hand(execute):
  """Zero logits: every (anchor, class) entry costs log 2. Anchor 0 of
  image 0 predicts code [0, 0, 0, 0.5] for a target of 0: smooth L1 0.5 *
  0.5^2 = 0.125. Two matches normalize, the weights scale, and the box
  code size (4) divides the localization loss."""
  codes = np.zeros([BATCH, NUM_ANCHORS, 4], np.float32)
  codes[0, 0, 3] = 0.5
  logits = np.zeros([BATCH, NUM_ANCHORS, NUM_CLASSES + 1], np.float32)
  loss_dict = _losses(execute, codes, logits, classification_loss_weight=0.5,
                      localization_loss_weight=2.0,
                      normalize_loc_loss_by_codesize=True)
  entries = BATCH * NUM_ANCHORS * (NUM_CLASSES + 1)
  assert loss_dict['Loss/classification_loss'] == pytest.approx(
      0.5 * entries * np.log(2.0) / 2, rel=1e-6)
  assert loss_dict['Loss/localization_loss'] == pytest.approx(
      2.0 * 0.125 / (2 * 4), rel=1e-6)


@pytest.mark.parametrize('normalize', [True, False])
def test_hard_example_mining_keeps_the_normalizer_and_drops_easy_negatives(
    execute, normalize):
  """The normalizer is the number of matched anchors (2) with and without
  mining, or 1 when normalization is off; mining keeps each image's
  positive and its hardest negative (max_negatives_per_positive 1; IoU
  threshold 1 suppresses nothing)."""
  codes, logits = _random_predictions(3)
  per_anchor = _sigmoid_cross_entropy(logits, _targets(True)).sum(axis=2)
  mined = 0.0
  for image in range(BATCH):
    mined += per_anchor[image][POSITIVES[image]].sum()
    mined += per_anchor[image][~POSITIVES[image]].max()
  normalizer = 2.0 if normalize else 1.0
  plain = _losses(execute, codes, logits,
                  normalize_loss_by_num_matches=normalize)
  hard = _losses(execute, codes, logits,
                 normalize_loss_by_num_matches=normalize,
                 hard_example_miner=losses.HardExampleMiner(
                     num_hard_examples=None, iou_threshold=1.0,
                     loss_type='cls', max_negatives_per_positive=1))
  assert plain['Loss/classification_loss'] == pytest.approx(
      per_anchor.sum() / normalizer, rel=1e-5)
  assert hard['Loss/classification_loss'] == pytest.approx(
      mined / normalizer, rel=1e-5)
  # Only positives regress: mining leaves the localization loss alone.
  assert hard['Loss/localization_loss'] == pytest.approx(
      plain['Loss/localization_loss'], rel=1e-6)


@pytest.mark.parametrize('encode_background_as_zeros', [False, True])
def test_no_groundtruth_is_all_background_normalized_by_one(
    execute, encode_background_as_zeros):
  codes, logits = _random_predictions(4)
  loss_dict = _losses(execute, codes, logits, NO_BOXES, NO_CLASSES,
                      encode_background_as_zeros=encode_background_as_zeros)
  background = 0.0 if encode_background_as_zeros else 1.0
  assert loss_dict['Loss/localization_loss'] == 0.0
  assert loss_dict['Loss/classification_loss'] == pytest.approx(
      _sigmoid_cross_entropy(logits, _targets(False, background)).sum(),
      rel=1e-5)


@pytest.mark.parametrize('add_summaries', [True, False])
def test_target_assignment_summaries_follow_add_summaries(add_summaries):
  with tf.Graph().as_default():
    codes, logits = _random_predictions(5)
    _part(add_summaries=add_summaries).loss(
        tf.constant(codes), tf.constant(logits), _anchors(),
        [tf.constant(boxes) for boxes in GT_BOXES],
        [tf.constant(classes) for classes in GT_CLASSES])
    summaries = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.SUMMARIES)
  assert len(summaries) == (5 if add_summaries else 0)


def test_decoding_inverts_the_box_coder(execute):
  anchors = np.array(fakes.QUADRANT_ANCHORS, np.float32)
  codes, _ = _random_predictions(6)

  def graph(codes, anchors):
    return ssd_loss.batch_decode(
        mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1), codes,
        anchors)[0]
  np.testing.assert_allclose(execute(graph, [codes, anchors]),
                             anchors + 0.1 * codes, rtol=1e-5, atol=1e-6)


def _padding_part(**matcher_args):
  """EfficientDet-D0's target assignment and losses (IoU, argmax 0.5 with
  force matching and matmul gathers, focal loss); matcher_args override."""
  matcher_args = dict(dict(matched_threshold=0.5, unmatched_threshold=0.5,
                           force_match_for_each_row=True,
                           use_matmul_gather=True), **matcher_args)
  return ssd_loss.SSDLoss(
      ssd_loss.SSDLossParams(
          target_assigner=target_assigner.TargetAssigner(
              region_similarity_calculator.IouSimilarity(),
              argmax_matcher.ArgMaxMatcher(**matcher_args),
              mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1)),
          classification_loss=losses.SigmoidFocalClassificationLoss(
              gamma=1.5, alpha=0.25),
          localization_loss=losses.WeightedSmoothL1LocalizationLoss(),
          normalize_loss_by_num_matches=True,
          normalize_loc_loss_by_codesize=True),
      NUM_CLASSES, is_training=True, add_background_class=False)


def test_groundtruth_padding_changes_no_loss_or_gradient_bit(execute):
  """model_fn slices the padding off in training when the loss says it is
  ignored: the losses and their gradients are then bit for bit those of the
  padded lists (image 1 has no box at all)."""
  rng = np.random.RandomState(7)
  num_anchors, padded = 300, 20
  centers = rng.uniform(0, 1, [num_anchors, 2])
  sizes = rng.uniform(0.05, 0.5, [num_anchors, 2])
  anchors = np.clip(np.concatenate([centers - sizes / 2, centers + sizes / 2],
                                   axis=1), 0, 1).astype(np.float32)
  # Real boxes: anchors slightly moved (matches above 0.5 and forced ones).
  real = [np.clip(anchors[rng.choice(num_anchors, 5, replace=False)] +
                  rng.uniform(-0.05, 0.05, [5, 4]), 0, 1).astype(np.float32),
          np.zeros([0, 4], np.float32)]
  codes = rng.uniform(-1, 1, [BATCH, num_anchors, 4]).astype(np.float32)
  logits = rng.uniform(-5, 2, [BATCH, num_anchors, NUM_CLASSES]).astype(
      np.float32)
  real_classes = [np.eye(NUM_CLASSES, dtype=np.float32)[
      rng.randint(NUM_CLASSES, size=len(image))] for image in real]

  def losses_and_gradients(pad):
    boxes, classes, weights = [], [], []
    for image, one_hot in zip(real, real_classes):
      count = len(image)
      rows = padded if pad else count
      boxes.append(np.pad(image, [[0, rows - count], [0, 0]]))
      classes.append(np.pad(one_hot, [[0, rows - count], [0, 0]]))
      weights.append(np.pad(np.ones([count], np.float32), [[0, rows - count]]))

    def graph(codes, logits, *groundtruth):
      # Rows unknown until run time, as model_fn's sliced lists.
      groundtruth = [tf.compat.v1.placeholder_with_default(
          tensor, [None] + tensor.shape.as_list()[1:])
                     for tensor in groundtruth]
      loss_dict = _padding_part().loss(
          codes, logits, box_list.BoxList(tf.constant(anchors)),
          list(groundtruth[:BATCH]), list(groundtruth[BATCH:2 * BATCH]),
          groundtruth_weights_list=list(groundtruth[2 * BATCH:]))
      total = tf.add_n(list(loss_dict.values()))
      return loss_dict, tf.gradients(total, [codes, logits])
    return execute(graph, [codes, logits] + boxes + classes + weights)

  padded_losses, padded_gradients = losses_and_gradients(pad=True)
  losses_, gradients = losses_and_gradients(pad=False)
  assert padded_losses['Loss/localization_loss'] > 0
  for key in LOSS_KEYS:
    np.testing.assert_array_equal(padded_losses[key], losses_[key])
  for padded_gradient, gradient in zip(padded_gradients, gradients):
    np.testing.assert_array_equal(padded_gradient, gradient)


@pytest.mark.parametrize('matcher_args,ignored', [
    ({}, True),
    ({'matched_threshold': None, 'unmatched_threshold': None}, False),
    ({'unmatched_threshold': 0.0}, False),
    ({'unmatched_threshold': 0.4, 'negatives_lower_than_unmatched': False},
     False),
])
def test_which_target_assignments_ignore_groundtruth_padding(matcher_args,
                                                             ignored):
  assert _padding_part(**matcher_args).ignores_groundtruth_padding() is ignored
