"""Per-anchor localization and classification losses, and hard example mining.

Every loss returns one value per anchor (or per anchor and class) and leaves
the reduction to the caller, which normalizes by the number of matches and
may first hand the per-anchor values to HardExampleMiner.

Localization losses: WeightedL2LocalizationLoss,
WeightedSmoothL1LocalizationLoss, WeightedIOULocalizationLoss.
Classification losses: WeightedSigmoidClassificationLoss,
SigmoidFocalClassificationLoss, WeightedSoftmaxClassificationLoss,
WeightedSoftmaxClassificationAgainstLogitsLoss,
BootstrappedSigmoidClassificationLoss, PenaltyReducedLogisticFocalLoss.
"""
import abc

import tensorflow as tf

from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.utils import shape_utils


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
    batch_size, num_anchors, _ = (
        shape_utils.combined_static_and_dynamic_shape(prediction_tensor))
    predicted = box_list.BoxList(tf.reshape(prediction_tensor, [-1, 4]))
    targets = box_list.BoxList(tf.reshape(target_tensor, [-1, 4]))
    per_anchor = 1.0 - box_list_ops.matched_iou(predicted, targets)
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
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=target_tensor, logits=prediction_tensor)
    probabilities = tf.sigmoid(prediction_tensor)
    p_t = (target_tensor * probabilities +
           (1.0 - target_tensor) * (1.0 - probabilities))
    loss = cross_entropy
    if self._gamma:
      loss *= tf.pow(1.0 - p_t, self._gamma)
    if self._alpha is not None:
      loss *= (target_tensor * self._alpha +
               (1.0 - target_tensor) * (1.0 - self._alpha))
    return loss * weights


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


class HardExampleMiner:
  """Keeps, per image, the highest-loss anchors that NMS lets through.

  Anchors are ranked by loss and greedily selected, skipping any whose
  predicted box overlaps an already selected one by more than iou_threshold
  (OHEM, Shrivastava et al. 2016). Optionally the number of negatives kept is
  capped relative to the positives (SSD, Liu et al. 2016: set
  num_hard_examples=None, iou_threshold=1.0, max_negatives_per_positive=3).
  """

  def __init__(self,
               num_hard_examples=64,
               iou_threshold=0.7,
               loss_type='both',
               cls_loss_weight=0.05,
               loc_loss_weight=0.06,
               max_negatives_per_positive=None,
               min_negatives_per_image=0):
    """Constructor.

    Args:
      num_hard_examples: at most this many anchors per image are selected
        before the negative:positive cap; None means no limit.
      iou_threshold: NMS discards a box whose IOU with a selected box is
        above this.
      loss_type: rank by 'cls', 'loc', or 'both' (a weighted sum using
        cls_loss_weight and loc_loss_weight).
      cls_loss_weight: classification weight for loss_type 'both'.
      loc_loss_weight: localization weight for loss_type 'both'.
      max_negatives_per_positive: optional cap on kept negatives per kept
        positive (converted to float); needs match_list at call time.
      min_negatives_per_image: the cap never goes below this, so images
        without positives still contribute negatives.
    """
    self._num_hard_examples = num_hard_examples
    self._iou_threshold = iou_threshold
    self._loss_type = loss_type
    self._cls_loss_weight = cls_loss_weight
    self._loc_loss_weight = loc_loss_weight
    self._max_negatives_per_positive = (
        None if max_negatives_per_positive is None
        else float(max_negatives_per_positive))
    self._min_negatives_per_image = min_negatives_per_image
    self._num_positives_list = None
    self._num_negatives_list = None

  def __call__(self, location_losses, cls_losses, decoded_boxlist_list,
               match_list=None):
    """Sums the localization and classification losses of the mined anchors.

    Args:
      location_losses: [num_images, num_anchors] float32, static num_images.
      cls_losses: [num_images, num_anchors] float32.
      decoded_boxlist_list: list of num_images BoxLists of predicted boxes,
        num_anchors each.
      match_list: optional list of num_images Match objects (columns are
        anchors), telling positives (matched) from negatives (unmatched).

    Returns:
      mined_location_loss: float32 scalar, sum over the selected anchors.
      mined_cls_loss: float32 scalar, sum over the selected anchors.

    Raises:
      ValueError: if the losses and box lists disagree on the number of
        images, or match_list is not a list of that length.
    """
    location_losses = tf.unstack(location_losses)
    cls_losses = tf.unstack(cls_losses)
    num_images = len(decoded_boxlist_list)
    if not match_list:
      match_list = [None] * num_images
    if not len(location_losses) == num_images == len(cls_losses):
      raise ValueError(
          'location_losses (%d images), cls_losses (%d) and '
          'decoded_boxlist_list (%d) do not have compatible shapes.' %
          (len(location_losses), len(cls_losses), num_images))
    if not isinstance(match_list, list):
      raise ValueError('match_list must be a list.')
    if len(match_list) != num_images:
      raise ValueError('match_list must be None or have '
                       'len(decoded_boxlist_list)=%d entries, got %d.' %
                       (num_images, len(match_list)))

    mined_location_losses = []
    mined_cls_losses = []
    num_positives_list = []
    num_negatives_list = []
    for image_index, boxlist in enumerate(decoded_boxlist_list):
      match = match_list[image_index]
      if self._loss_type == 'loc':
        ranking_losses = location_losses[image_index]
      elif self._loss_type == 'both':
        ranking_losses = (cls_losses[image_index] * self._cls_loss_weight +
                          location_losses[image_index] * self._loc_loss_weight)
      else:
        ranking_losses = cls_losses[image_index]
      max_selected = self._num_hard_examples
      if max_selected is None:
        max_selected = boxlist.num_boxes_static()
        if max_selected is None:
          max_selected = boxlist.num_boxes()
      selected = tf.image.non_max_suppression(
          boxlist.get(), ranking_losses, max_selected, self._iou_threshold)
      if self._max_negatives_per_positive is not None and match is not None:
        selected, num_positives, num_negatives = (
            self._subsample_selection_to_desired_neg_pos_ratio(
                selected, match, self._max_negatives_per_positive,
                self._min_negatives_per_image))
        num_positives_list.append(num_positives)
        num_negatives_list.append(num_negatives)
      mined_location_losses.append(
          tf.reduce_sum(tf.gather(location_losses[image_index], selected)))
      mined_cls_losses.append(
          tf.reduce_sum(tf.gather(cls_losses[image_index], selected)))
    if num_positives_list:
      self._num_positives_list = num_positives_list
      self._num_negatives_list = num_negatives_list
    return (tf.reduce_sum(tf.stack(mined_location_losses)),
            tf.reduce_sum(tf.stack(mined_cls_losses)))

  def summarize(self):
    """Adds scalar summaries of the mean mined positives and negatives."""
    if self._num_positives_list and self._num_negatives_list:
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumPositives',
          tf.reduce_mean(tf.cast(self._num_positives_list, tf.float32)))
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumNegatives',
          tf.reduce_mean(tf.cast(self._num_negatives_list, tf.float32)))

  def _subsample_selection_to_desired_neg_pos_ratio(
      self, indices, match, max_negatives_per_positive,
      min_negatives_per_image=0):
    """Keeps all selected positives and the first K selected negatives.

    K = max(min_negatives_per_image,
            floor(max_negatives_per_positive * num_positives)).
    As in the original, an ignored anchor (neither matched nor unmatched) is
    kept when it comes before the K-th negative in selection order, and is
    counted with the negatives.

    Args:
      indices: [M] int32 selected anchor indices, in selection order.
      match: Match object with matched_column_indicator() and
        unmatched_column_indicator() over all anchors.
      max_negatives_per_positive: float.
      min_negatives_per_image: int.

    Returns:
      selected_indices: [M'] int32, M' <= M, order preserved.
      num_positives: int32 scalar.
      num_negatives: int32 scalar.
    """
    positives = tf.gather(match.matched_column_indicator(), indices)
    negatives = tf.gather(match.unmatched_column_indicator(), indices)
    num_positives = tf.reduce_sum(tf.cast(positives, tf.int32))
    max_negatives = tf.maximum(
        min_negatives_per_image,
        tf.cast(max_negatives_per_positive *
                tf.cast(num_positives, tf.float32), tf.int32))
    within_cap = tf.less_equal(tf.cumsum(tf.cast(negatives, tf.int32)),
                               max_negatives)
    keep = tf.reshape(tf.where(tf.logical_or(positives, within_cap)), [-1])
    num_negatives = tf.size(keep) - num_positives
    return tf.gather(indices, keep), num_positives, num_negatives
