"""Per-anchor localization and classification losses, and hard example mining.

Every loss returns one value per anchor (or per anchor and class) and leaves
the reduction to the caller, which normalizes by the number of matches and
may first hand the per-anchor values to HardExampleMiner.

Localization losses: WeightedL2LocalizationLoss,
WeightedSmoothL1LocalizationLoss, WeightedIOULocalizationLoss,
WeightedGIOULocalizationLoss, L1LocalizationLoss.
Classification losses: WeightedSigmoidClassificationLoss,
SigmoidFocalClassificationLoss, WeightedSoftmaxClassificationLoss,
WeightedSoftmaxClassificationAgainstLogitsLoss,
BootstrappedSigmoidClassificationLoss, PenaltyReducedLogisticFocalLoss,
WeightedDiceClassificationLoss (per image and class, not per anchor).
"""
import abc

import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import hard_example_miner
from od_estimator.core import shape_utils

# Defined in its own module; the original's name is losses.HardExampleMiner.
HardExampleMiner = hard_example_miner.HardExampleMiner


class Loss(abc.ABC):
  """Base class: shared NaN-target and per-image masking, then _compute_loss."""

  def __call__(self,
               prediction_tensor,
               target_tensor,
               ignore_nan_targets=False,
               losses_mask=None,
               scope=None,
               **params):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, ...] float32 predictions.
      target_tensor: [batch, num_anchors, ...] float32 targets.
      ignore_nan_targets: when True, NaN targets are replaced by the
        prediction so they contribute (close to) nothing; used when some
        groundtruth values are missing.
      losses_mask: optional [batch] bool; images where it is False contribute
        nothing (their predictions, targets and weights are zeroed).
      scope: name scope; 'Loss' when None.
      **params: loss-specific keyword arguments, usually `weights`.

    Returns:
      The per-anchor loss tensor described by the subclass.
    """
    with tf.compat.v1.name_scope(scope, 'Loss',
                                 [prediction_tensor, target_tensor]):
      if ignore_nan_targets:
        target_tensor = tf.where(tf.math.is_nan(target_tensor),
                                 prediction_tensor, target_tensor)
      if losses_mask is not None:
        multiplier = self._get_loss_multiplier_for_tensor(
            prediction_tensor, losses_mask)
        prediction_tensor *= multiplier
        target_tensor *= multiplier
        if 'weights' in params:
          weights = tf.convert_to_tensor(params['weights'])
          params['weights'] = weights * self._get_loss_multiplier_for_tensor(
              weights, losses_mask)
      return self._compute_loss(prediction_tensor, target_tensor, **params)

  def _get_loss_multiplier_for_tensor(self, tensor, losses_mask):
    """Returns losses_mask as float32 reshaped to broadcast over `tensor`."""
    shape = [-1] + [1] * (tensor.shape.ndims - 1)
    return tf.cast(tf.reshape(losses_mask, shape), tf.float32)

  @abc.abstractmethod
  def _compute_loss(self, prediction_tensor, target_tensor, **params):
    """Returns the unreduced loss; implemented by subclasses."""


def _indices_to_class_mask(class_indices, num_classes):
  """Returns a [num_classes] float32 vector, 1 at class_indices, else 0."""
  one_hot = tf.one_hot(class_indices, num_classes, dtype=tf.float32)
  # Sum rather than max so an empty index list yields zeros, not -inf.
  return tf.minimum(tf.reduce_sum(one_hot, axis=0), 1.0)


def _restrict_weights_to_classes(weights, class_indices, num_classes):
  """Zeroes `weights` for classes not in class_indices (broadcast to C)."""
  mask = _indices_to_class_mask(class_indices, num_classes)
  return weights * tf.reshape(mask, [1, 1, -1])


class WeightedL2LocalizationLoss(Loss):
  """loss[b, a] = 0.5 * ||weights[b, a] * (prediction - target)[b, a, :]||^2.

  The weight scales the difference before squaring, so it enters squared.
  """

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, code_size] float32 encoded boxes.
      target_tensor: [batch, num_anchors, code_size] float32 targets.
      weights: [batch, num_anchors] float32.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    weighted_diff = (prediction_tensor - target_tensor) * tf.expand_dims(
        weights, 2)
    return tf.reduce_sum(0.5 * tf.square(weighted_diff), axis=2)


class WeightedSmoothL1LocalizationLoss(Loss):
  """Huber loss summed over the box code, times the anchor weight.

  Per coordinate with x = prediction - target: 0.5 * x^2 if |x| <= delta,
  else delta * (|x| - 0.5 * delta) (Fast R-CNN, eq. 3, for delta = 1).
  """

  def __init__(self, delta=1.0):
    """Constructor.

    Args:
      delta: where the loss switches from quadratic to linear.
    """
    super().__init__()
    self._delta = delta

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, code_size] float32 encoded boxes.
      target_tensor: [batch, num_anchors, code_size] float32 targets.
      weights: [batch, num_anchors] float32.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    abs_diff = tf.abs(prediction_tensor - target_tensor)
    # Splitting |x| at delta keeps the gradient of the linear part finite and
    # equal to delta, as tf.losses.huber_loss does.
    quadratic = tf.minimum(abs_diff, self._delta)
    linear = abs_diff - quadratic
    per_coordinate = 0.5 * tf.square(quadratic) + self._delta * linear
    return tf.reduce_sum(per_coordinate * tf.expand_dims(weights, 2), axis=2)


class WeightedIOULocalizationLoss(Loss):
  """loss[b, a] = weights[b, a] * (1 - IOU(prediction[b, a], target[b, a]))."""

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, 4] float32 decoded boxes
        ymin, xmin, ymax, xmax.
      target_tensor: [batch, num_anchors, 4] float32 decoded target boxes.
      weights: [batch, num_anchors] float32.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    return _matched_box_loss(box_list_ops.matched_iou, prediction_tensor,
                             target_tensor, weights)


def _matched_box_loss(similarity_fn, prediction_tensor, target_tensor,
                      weights):
  """weights * (1 - similarity) of the box pairs at the same [b, a]."""
  batch_size, num_anchors, _ = (
      shape_utils.combined_static_and_dynamic_shape(prediction_tensor))
  predicted = box_list.BoxList(tf.reshape(prediction_tensor, [-1, 4]))
  targets = box_list.BoxList(tf.reshape(target_tensor, [-1, 4]))
  per_anchor = 1.0 - similarity_fn(predicted, targets)
  return tf.reshape(per_anchor, [batch_size, num_anchors]) * weights


class WeightedSigmoidClassificationLoss(Loss):
  """Independent sigmoid cross entropy per class, times the weights."""

  def _compute_loss(self, prediction_tensor, target_tensor, weights,
                    class_indices=None):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 one-hot (or
        soft) targets.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32; the latter weighs every class equally.
      class_indices: optional [K] int32; only these classes contribute.

    Returns:
      [batch, num_anchors, num_classes] float32 loss.
    """
    if class_indices is not None:
      weights = _restrict_weights_to_classes(
          weights, class_indices, tf.shape(prediction_tensor)[2])
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=target_tensor, logits=prediction_tensor)
    return cross_entropy * weights


class SigmoidFocalClassificationLoss(Loss):
  """Focal loss (Lin et al., 2017): sigmoid CE scaled by a_t * (1 - p_t)^gamma.

  p_t is the predicted probability of the target value, a_t is alpha for
  positive targets and 1 - alpha for negative ones.

  The gradient is in closed form (autograd's within float rounding, in
  fewer passes over [batch, anchors, classes]); x^1.5 is x * sqrt(x), within
  float rounding of tf.pow and ~20 times cheaper (bench/NOTES.md, 10e).
  """

  def __init__(self, gamma=2.0, alpha=0.25):
    """Constructor.

    Args:
      gamma: focusing exponent; 0 gives plain (alpha-weighted) cross entropy.
      alpha: positive/negative balance, or None for no balancing.
    """
    super().__init__()
    self._gamma = gamma
    self._alpha = alpha

  def _compute_loss(self, prediction_tensor, target_tensor, weights,
                    class_indices=None):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 one-hot targets.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32.
      class_indices: optional [K] int32; only these classes contribute.

    Returns:
      [batch, num_anchors, num_classes] float32 loss.
    """
    if class_indices is not None:
      weights = _restrict_weights_to_classes(
          weights, class_indices, tf.shape(prediction_tensor)[2])
    prediction_tensor = tf.convert_to_tensor(prediction_tensor)
    return tf.custom_gradient(self._loss_and_gradient)(
        prediction_tensor,
        tf.convert_to_tensor(target_tensor, prediction_tensor.dtype),
        tf.convert_to_tensor(weights, prediction_tensor.dtype))

  def _loss_and_gradient(self, logits, targets, weights):
    """(loss, its gradient function) for tf.custom_gradient."""
    gamma, alpha = self._gamma, self._alpha
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=targets, logits=logits)
    probabilities = tf.sigmoid(logits)
    unweighted = cross_entropy
    if gamma:
      # 1 - p_t, with p_t = t * p + (1 - t) * (1 - p).
      remainder = 1.0 - (targets * probabilities +
                         (1.0 - targets) * (1.0 - probabilities))
      # grappler rewrites whole and 0.5 exponents of tf.pow, not 1.5.
      root = tf.sqrt(remainder) if gamma % 1 == 0.5 else None
      modulator = _power(remainder, gamma, root)
      unweighted *= modulator
    focal = unweighted
    if alpha is not None:
      alpha_factor = targets * alpha + (1.0 - targets) * (1.0 - alpha)
      unweighted *= alpha_factor
    loss = unweighted * weights

    def gradient(upstream):
      """d loss / d (logits, targets, weights), upstream times.

      With m = 1 - p_t: d CE / dx = p - t, d CE / dt = -x,
      dm / dx = (1 - 2t) p (1 - p), dm / dt = 1 - 2p, d a_t / dt = 2a - 1.
      A step prunes the targets' and weights' unless they need them.
      """
      scale = upstream * weights
      by_logits = probabilities - targets
      by_targets = -logits
      if gamma:
        by_logits *= modulator
        by_targets *= modulator
        # gamma * CE * m^(gamma - 1), the modulator's derivative times CE.
        slope = cross_entropy * gamma
        if gamma != 1:
          slope *= _power(remainder, gamma - 1, root)
        by_logits += slope * tf.raw_ops.SigmoidGrad(
            y=probabilities, dy=1.0 - 2.0 * targets)
        by_targets += slope * (1.0 - 2.0 * probabilities)
      if alpha is not None:
        by_logits *= alpha_factor
        by_targets = (by_targets * alpha_factor +
                      focal * (2.0 * alpha - 1.0))
      return (by_logits * scale,
              shape_utils.sum_to_shape(by_targets * scale, targets),
              shape_utils.sum_to_shape(unweighted * upstream, weights))

    return loss, gradient


def _power(base, exponent, root):
  """base^exponent; root is sqrt(base) when exponent is a whole number and a
  half (then base^(exponent - 0.5) * root), None otherwise."""
  if root is None:
    return base if exponent == 1 else tf.pow(base, exponent)
  whole = exponent - 0.5
  return root if whole == 0 else _power(base, whole, None) * root


class WeightedSoftmaxClassificationLoss(Loss):
  """Softmax cross entropy over classes of logits / logit_scale."""

  def __init__(self, logit_scale=1.0):
    """Constructor.

    Args:
      logit_scale: logits are divided by it; > 1 flattens the prediction,
        < 1 sharpens it.
    """
    super().__init__()
    self._logit_scale = logit_scale

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 one-hot targets.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32; averaged over classes into one weight per anchor.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    weights = tf.reduce_mean(weights, axis=2)
    logits = tf.divide(prediction_tensor, self._logit_scale,
                       name='scale_logit')
    cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
        labels=target_tensor, logits=logits)
    return cross_entropy * weights


class WeightedSoftmaxClassificationAgainstLogitsLoss(Loss):
  """Softmax cross entropy whose targets are logits (e.g. distillation).

  Both the targets and the predictions are divided by logit_scale; the
  targets then go through a softmax to become a distribution.
  """

  def __init__(self, logit_scale=1.0):
    """Constructor.

    Args:
      logit_scale: both logit tensors are divided by it.
    """
    super().__init__()
    self._logit_scale = logit_scale

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 target logits.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32; averaged over classes into one weight per anchor.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    weights = tf.reduce_mean(weights, axis=2)
    target_distribution = tf.nn.softmax(
        tf.divide(target_tensor, self._logit_scale, name='scale_logits'),
        name='convert_scores')
    logits = tf.divide(prediction_tensor, self._logit_scale,
                       name='scale_logits')
    cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
        labels=target_distribution, logits=logits)
    return cross_entropy * weights


class BootstrappedSigmoidClassificationLoss(Loss):
  """Sigmoid CE against alpha * target + (1 - alpha) * model belief.

  Reed et al., "Training deep neural networks on noisy labels with
  bootstrapping" (2015). 'soft' uses the predicted probabilities as belief,
  'hard' thresholds them at 0.5.
  """

  def __init__(self, alpha, bootstrap_type='soft'):
    """Constructor.

    Args:
      alpha: float in [0, 1], weight of the given labels.
      bootstrap_type: 'soft' or 'hard'.

    Raises:
      ValueError: if bootstrap_type is neither 'soft' nor 'hard'.
    """
    super().__init__()
    if bootstrap_type not in ('soft', 'hard'):
      raise ValueError("bootstrap_type must be 'soft' or 'hard', got %r" %
                       (bootstrap_type,))
    self._alpha = alpha
    self._bootstrap_type = bootstrap_type

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 one-hot targets.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32.

    Returns:
      [batch, num_anchors, num_classes] float32 loss.
    """
    belief = tf.sigmoid(prediction_tensor)
    if self._bootstrap_type == 'hard':
      belief = tf.cast(belief > 0.5, tf.float32)
    bootstrapped = self._alpha * target_tensor + (1.0 - self._alpha) * belief
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=bootstrapped, logits=prediction_tensor)
    return cross_entropy * weights


class PenaltyReducedLogisticFocalLoss(Loss):
  """Per-pixel focal loss of CenterNet ("Objects as Points", eq. 1).

  With p = clip(sigmoid(logit)) and y the (gaussian-splatted) target:
  -(1 - p)^alpha * log(p) where y == 1, otherwise
  -(1 - y)^beta * p^alpha * log(1 - p). Each pixel is treated as an anchor.
  """

  def __init__(self, alpha=2.0, beta=4.0, sigmoid_clip_value=1e-4):
    """Constructor.

    Args:
      alpha: focusing exponent.
      beta: how strongly negatives near a keypoint are discounted.
      sigmoid_clip_value: p is clipped to [v, 1 - v] so the logs stay finite.
    """
    super().__init__()
    self._alpha = alpha
    self._beta = beta
    self._sigmoid_clip_value = sigmoid_clip_value

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits.
      target_tensor: [batch, num_anchors, num_classes] float32 in [0, 1],
        exactly 1 at object centers.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32.

    Returns:
      [batch, num_anchors, num_classes] float32 loss.
    """
    is_center = tf.equal(target_tensor, 1.0)
    p = tf.clip_by_value(tf.sigmoid(prediction_tensor),
                         self._sigmoid_clip_value,
                         1.0 - self._sigmoid_clip_value)
    positive = tf.pow(1.0 - p, self._alpha) * tf.math.log(p)
    negative = (tf.pow(1.0 - target_tensor, self._beta) *
                tf.pow(p, self._alpha) * tf.math.log(1.0 - p))
    return -tf.where(is_center, positive, negative) * weights


class L1LocalizationLoss(Loss):
  """Absolute difference times the weights.

  Like the original, weights of the predictions' rank give the elementwise
  loss (e.g. per pixel, each pixel an anchor). Weights of one rank less
  ([batch, num_anchors] for [batch, num_anchors, code_size] boxes) weigh
  each anchor, and the loss is summed over its code, as the other
  localization losses are.
  """

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors] or [batch, num_anchors,
        code_size] float32.
      target_tensor: float32 of the same shape.
      weights: float32 of the same shape, or [batch, num_anchors].

    Returns:
      float32 loss: elementwise for elementwise weights, else [batch,
      num_anchors].
    """
    weights = tf.convert_to_tensor(weights, tf.float32)
    abs_diff = tf.abs(tf.convert_to_tensor(target_tensor, tf.float32) -
                      tf.convert_to_tensor(prediction_tensor, tf.float32))
    if weights.shape.ndims == abs_diff.shape.ndims - 1:
      return tf.reduce_sum(abs_diff * weights[..., tf.newaxis], axis=-1)
    return abs_diff * weights


class WeightedGIOULocalizationLoss(Loss):
  """loss[b, a] = weights[b, a] * (1 - GIoU(prediction[b, a], target[b, a])).

  Generalized IoU (Rezatofighi et al., CVPR 2019) is in [-1, 1], so the loss
  is in [0, 2] and keeps a gradient for boxes that do not overlap.
  """

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, 4] float32 decoded boxes
        ymin, xmin, ymax, xmax.
      target_tensor: [batch, num_anchors, 4] float32 decoded target boxes.
      weights: [batch, num_anchors] float32.

    Returns:
      [batch, num_anchors] float32 loss.
    """
    return _matched_box_loss(box_list_ops.matched_giou, prediction_tensor,
                             target_tensor, weights)


class WeightedDiceClassificationLoss(Loss):
  """1 - Dice coefficient per image and class, over all anchors (pixels).

  dice[b, c] = 2 * sum_a(p * t) / max(sum_a(p) + sum_a(t), 1) where p are the
  weighted probabilities and t the weighted targets (both squared first with
  squared_normalization). Used for masks, where each anchor is a pixel.
  """

  def __init__(self, squared_normalization=False,
               is_prediction_probability=False):
    """Constructor.

    Args:
      squared_normalization: square probabilities and targets before the
        sums (V-Net's form of the coefficient).
      is_prediction_probability: the predictions are probabilities already,
        not logits.
    """
    super().__init__()
    self._squared_normalization = squared_normalization
    self._is_prediction_probability = is_prediction_probability

  def _compute_loss(self, prediction_tensor, target_tensor, weights,
                    class_indices=None):
    """Computes the loss.

    Args:
      prediction_tensor: [batch, num_anchors, num_classes] float32 logits
        (or probabilities, see the constructor).
      target_tensor: [batch, num_anchors, num_classes] float32 targets.
      weights: [batch, num_anchors, num_classes] or [batch, num_anchors, 1]
        float32.
      class_indices: optional [K] int32; only these classes contribute (the
        others get loss 1).

    Returns:
      [batch, num_classes] float32 loss.
    """
    prediction_tensor, target_tensor, weights = [
        tf.convert_to_tensor(t, tf.float32)
        for t in (prediction_tensor, target_tensor, weights)]
    if class_indices is not None:
      weights = _restrict_weights_to_classes(
          weights, class_indices, tf.shape(prediction_tensor)[2])
    probabilities = (prediction_tensor if self._is_prediction_probability
                     else tf.sigmoid(prediction_tensor))
    if self._squared_normalization:
      probabilities = tf.square(probabilities)
      target_tensor = tf.square(target_tensor)
    probabilities = probabilities * weights
    targets = target_tensor * weights
    intersection = tf.reduce_sum(probabilities * targets, axis=1)
    areas = (tf.reduce_sum(probabilities, axis=1) +
             tf.reduce_sum(targets, axis=1))
    return 1.0 - 2.0 * intersection / tf.maximum(areas, 1.0)
