"""L1, GIoU and Dice losses, called as the original's tests call them."""
import numpy as np
import pytest

from od_estimator.core import losses


def _logit(probability):
  return np.log(probability / (1. - probability))


def test_l1_elementwise_weights(execute):
  out = execute(lambda: losses.L1LocalizationLoss()._compute_loss(
      [[0.1, 0.2], [0.7, 0.5]], [[0.9, 1.0], [0.1, 0.4]],
      [[1.0, 0.0], [1.0, 1.0]]))
  np.testing.assert_allclose(out, [[0.8, 0.0], [0.6, 0.1]], rtol=1e-6)


def test_l1_per_anchor_weights_sum_over_the_code(execute):
  prediction = np.array([[[0., 0., 1., 1.], [0., 0., 0., 0.]]], np.float32)
  target = np.array([[[0., 1., 1., 3.], [1., 1., 1., 1.]]], np.float32)
  out = execute(lambda p, t: losses.L1LocalizationLoss()(
      p, t, weights=np.array([[2., 0.]], np.float32)),
                [prediction, target])
  np.testing.assert_allclose(out, [[6., 0.]])


def test_giou_loss(execute):
  prediction = np.array([[[0., 0., 1., 1.], [0., 0., 1., 1.],
                          [0., 0., 0., 0.]]], np.float32)
  target = np.array([[[0., 0., 1., 1.], [2., 2., 3., 3.],
                      [0., 0., 0., 0.]]], np.float32)
  out = execute(lambda p, t: losses.WeightedGIOULocalizationLoss()(
      p, t, weights=np.array([[1., 2., 1.]], np.float32)),
                [prediction, target])
  # Disjoint unit boxes: IoU 0, enclosing 9, union 2 -> GIoU -7/9.
  # Zero-area pair: GIoU 0, so loss 1.
  np.testing.assert_allclose(out, [[0., 2. * (1. + 7. / 9.), 1.]], rtol=1e-6)


def _dice_inputs():
  pred = np.zeros((2, 3, 4), dtype=np.float32)
  target = np.zeros((2, 3, 4), dtype=np.float32)
  pred[0, 1, 0] = _logit(0.9)
  pred[0, 2, 0] = _logit(0.1)
  pred[0, 2, 2] = _logit(0.5)
  pred[0, 1, 3] = _logit(0.1)
  pred[1, 2, 3] = _logit(0.2)
  pred[1, 1, 1] = _logit(0.3)
  pred[1, 0, 2] = _logit(0.1)
  target[0, 1, 0] = 1.0
  target[0, 2, 2] = 1.0
  target[0, 1, 3] = 1.0
  target[1, 2, 3] = 1.0
  return pred, target


@pytest.mark.parametrize('case', ['all', 'weights', 'class_indices'])
def test_dice_loss(execute, case):
  pred, target = _dice_inputs()
  weights = np.ones_like(target)
  if case == 'weights':
    weights[:, :, 0] = 0.0
  class_indices = [0] if case == 'class_indices' else None
  loss = losses.WeightedDiceClassificationLoss(squared_normalization=False)
  out = execute(lambda: loss._compute_loss(pred, target, weights,
                                           class_indices=class_indices))
  # Zero logits are probability 0.5; a class without target is dice 0.
  dice = np.zeros((2, 4))
  if case != 'weights':
    dice[0, 0] = 2 * 0.9 / (0.9 + 0.1 + 0.5 + 1)
  if case != 'class_indices':
    dice[0, 2] = 2 * 0.5 / 2.5
    dice[0, 3] = 2 * 0.1 / 2.1
    dice[1, 3] = 2 * 0.2 / 2.2
  np.testing.assert_allclose(out, 1 - dice, rtol=1e-6)
  assert np.count_nonzero(target) == 4  # inputs are not modified in place


def test_dice_loss_squared_and_probabilities(execute):
  probabilities = np.array([[[0.5], [1.0]]], np.float32)
  target = np.array([[[1.0], [1.0]]], np.float32)
  loss = losses.WeightedDiceClassificationLoss(
      squared_normalization=True, is_prediction_probability=True)
  out = execute(lambda: loss(probabilities, target,
                             weights=np.ones_like(target)))
  # 2 * (0.25 + 1) / (0.25 + 1 + 2).
  np.testing.assert_allclose(out, [[1 - 2.5 / 3.25]], rtol=1e-6)
