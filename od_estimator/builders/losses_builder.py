"""Builds losses, the hard example miner and the random example sampler.

The deprecated `anchorwise_output` fields are ignored, as in the original:
every loss here returns per-anchor values.
"""
from od_estimator import errors
from od_estimator.core import balanced_positive_negative_sampler
from od_estimator.core import losses
from od_estimator.errors import UserInputError
from od_estimator.protos import losses_pb2


def _build_focal(config):
  # An unset alpha means no positive/negative balancing, not the 0.25 default.
  return losses.SigmoidFocalClassificationLoss(
      gamma=config.gamma,
      alpha=config.alpha if config.HasField('alpha') else None)


# Keyed by the `classification_loss` oneof field name; each takes that
# field's message.
_CLASSIFICATION_LOSSES = {
    'weighted_sigmoid':
        lambda config: losses.WeightedSigmoidClassificationLoss(),
    'weighted_sigmoid_focal': _build_focal,
    'weighted_softmax':
        lambda config: losses.WeightedSoftmaxClassificationLoss(
            logit_scale=config.logit_scale),
    'weighted_logits_softmax':
        lambda config: losses.WeightedSoftmaxClassificationAgainstLogitsLoss(
            logit_scale=config.logit_scale),
    'bootstrapped_sigmoid':
        lambda config: losses.BootstrappedSigmoidClassificationLoss(
            alpha=config.alpha,
            bootstrap_type='hard' if config.hard_bootstrap else 'soft'),
    'penalty_reduced_logistic_focal_loss':
        lambda config: losses.PenaltyReducedLogisticFocalLoss(
            alpha=config.alpha, beta=config.beta),
    'weighted_dice_classification_loss':
        lambda config: losses.WeightedDiceClassificationLoss(
            squared_normalization=config.squared_normalization,
            is_prediction_probability=config.is_prediction_probability),
}

# The Faster R-CNN second stage accepts only these; an unset oneof means
# softmax with logit_scale 1.
_FASTER_RCNN_CLASSIFICATION_LOSSES = (
    'weighted_sigmoid', 'weighted_sigmoid_focal', 'weighted_softmax',
    'weighted_logits_softmax')

# Keyed by the `localization_loss` oneof field name.
_LOCALIZATION_LOSSES = {
    'weighted_l2': lambda config: losses.WeightedL2LocalizationLoss(),
    'weighted_smooth_l1':
        lambda config: losses.WeightedSmoothL1LocalizationLoss(
            delta=config.delta),
    'weighted_iou': lambda config: losses.WeightedIOULocalizationLoss(),
    'weighted_giou': lambda config: losses.WeightedGIOULocalizationLoss(),
    'l1_localization_loss': lambda config: losses.L1LocalizationLoss(),
}

_HARD_EXAMPLE_MINER_LOSS_TYPES = {
    losses_pb2.HardExampleMiner.BOTH: 'both',
    losses_pb2.HardExampleMiner.CLASSIFICATION: 'cls',
    losses_pb2.HardExampleMiner.LOCALIZATION: 'loc',
}


def build(loss_config):
  """Builds the losses, weights and optional hard example miner.

  Args:
    loss_config: losses_pb2.Loss.

  Returns:
    classification_loss: losses.Loss.
    localization_loss: losses.Loss.
    classification_weight: float.
    localization_weight: float.
    hard_example_miner: losses.HardExampleMiner, or None.
    random_example_sampler: a BalancedPositiveNegativeSampler when
      random_example_sampler is set, else None.
    expected_loss_weights_fn: always None (the option is rejected).

  Raises:
    ValueError: if loss_config is not a losses_pb2.Loss, a loss is unset or
      unsupported, hard_example_miner is combined with
      weighted_sigmoid_focal, or expected_loss_weights or equalization_loss
      is set.
    UserInputError: if random_example_sampler.positive_sample_fraction is
      outside (0, 1].
  """
  if not isinstance(loss_config, losses_pb2.Loss):
    raise ValueError('loss_config must be a losses_pb2.Loss, got %s' %
                     type(loss_config).__name__)
  if loss_config.expected_loss_weights != losses_pb2.Loss.NONE:
    raise errors.UserInputError(
        'Loss.expected_loss_weights=%s is not supported; only NONE is.' %
        losses_pb2.Loss.ExpectedLossWeights.Name(
            loss_config.expected_loss_weights))
  if loss_config.equalization_loss.weight != 0:
    raise errors.UserInputError('Loss.equalization_loss is not supported.')

  classification_loss = _build_classification_loss(
      loss_config.classification_loss)
  localization_loss = _build_localization_loss(loss_config.localization_loss)
  classification_weight = loss_config.classification_weight
  localization_weight = loss_config.localization_weight

  hard_example_miner = None
  if loss_config.HasField('hard_example_miner'):
    classification_type = loss_config.classification_loss.WhichOneof(
        'classification_loss')
    if classification_type == 'weighted_sigmoid_focal':
      # Focal loss already down-weights easy examples; mining on top of it
      # is not a configuration the original supports.
      raise errors.UserInputError('Loss.hard_example_miner cannot be used with '
                                  'classification_loss.weighted_sigmoid_focal.')
    if classification_type == 'weighted_dice_classification_loss':
      raise errors.UserInputError(
          'Loss.hard_example_miner cannot be used with classification_loss.'
          'weighted_dice_classification_loss: it gives one loss per image and '
          'class, not per anchor.')
    hard_example_miner = build_hard_example_miner(
        loss_config.hard_example_miner, classification_weight,
        localization_weight)
  return (classification_loss, localization_loss, classification_weight,
          localization_weight, hard_example_miner,
          build_random_example_sampler(loss_config), None)


def build_random_example_sampler(loss_config):
  """Returns the Loss's random_example_sampler, or None when unset.

  The sampler keeps every positive anchor and as many randomly chosen
  negatives as make positives positive_sample_fraction of the sampled ones;
  the others get zero loss weight.

  Args:
    loss_config: losses_pb2.Loss.

  Raises:
    UserInputError: if positive_sample_fraction is outside (0, 1].
  """
  if not loss_config.HasField('random_example_sampler'):
    return None
  fraction = loss_config.random_example_sampler.positive_sample_fraction
  if not 0 < fraction <= 1:
    raise UserInputError(
        'Loss.random_example_sampler.positive_sample_fraction must be in '
        '(0, 1], got %g.' % fraction)
  return balanced_positive_negative_sampler.BalancedPositiveNegativeSampler(
      positive_fraction=fraction)


def build_hard_example_miner(config, classification_weight,
                             localization_weight):
  """Builds a HardExampleMiner.

  Args:
    config: losses_pb2.HardExampleMiner. Non-positive num_hard_examples or
      max_negatives_per_positive mean "no limit".
    classification_weight: weight of the classification loss for 'both'.
    localization_weight: weight of the localization loss for 'both'.

  Returns:
    losses.HardExampleMiner.

  Raises:
    ValueError: if config is not a losses_pb2.HardExampleMiner.
  """
  if not isinstance(config, losses_pb2.HardExampleMiner):
    raise ValueError('config must be a losses_pb2.HardExampleMiner, got %s' %
                     type(config).__name__)
  return losses.HardExampleMiner(
      num_hard_examples=(config.num_hard_examples
                         if config.num_hard_examples > 0 else None),
      iou_threshold=config.iou_threshold,
      loss_type=_HARD_EXAMPLE_MINER_LOSS_TYPES[config.loss_type],
      cls_loss_weight=classification_weight,
      loc_loss_weight=localization_weight,
      max_negatives_per_positive=(config.max_negatives_per_positive
                                  if config.max_negatives_per_positive > 0
                                  else None),
      min_negatives_per_image=config.min_negatives_per_image)


def build_faster_rcnn_classification_loss(loss_config):
  """Builds the Faster R-CNN second stage classification loss.

  Args:
    loss_config: losses_pb2.ClassificationLoss; when no loss is set the
      result is softmax with logit_scale 1.

  Returns:
    losses.Loss.

  Raises:
    ValueError: if loss_config is not a losses_pb2.ClassificationLoss, or
      sets a loss the second stage does not support.
  """
  if not isinstance(loss_config, losses_pb2.ClassificationLoss):
    raise ValueError('loss_config must be a losses_pb2.ClassificationLoss, '
                     'got %s' % type(loss_config).__name__)
  loss_type = loss_config.WhichOneof('classification_loss')
  if loss_type is None:
    return losses.WeightedSoftmaxClassificationLoss(logit_scale=1.0)
  if loss_type not in _FASTER_RCNN_CLASSIFICATION_LOSSES:
    raise errors.UserInputError(
        'ClassificationLoss.%s is not supported for the Faster R-CNN second '
        'stage; use one of %s.' %
        (loss_type, ', '.join(_FASTER_RCNN_CLASSIFICATION_LOSSES)))
  return _CLASSIFICATION_LOSSES[loss_type](getattr(loss_config, loss_type))


def _build_classification_loss(loss_config):
  """Builds the loss named by the `classification_loss` oneof.

  Raises:
    ValueError: if the oneof is unset or names an unsupported loss.
  """
  loss_type = loss_config.WhichOneof('classification_loss')
  if loss_type is None:
    raise errors.UserInputError(
        'Loss.classification_loss is empty: set one of %s.' %
        ', '.join(sorted(_CLASSIFICATION_LOSSES)))
  if loss_type not in _CLASSIFICATION_LOSSES:
    raise errors.UserInputError(
        'ClassificationLoss.%s is not supported; use one of %s.'
        % (loss_type, ', '.join(sorted(_CLASSIFICATION_LOSSES))))
  return _CLASSIFICATION_LOSSES[loss_type](getattr(loss_config, loss_type))


def _build_localization_loss(loss_config):
  """Builds the loss named by the `localization_loss` oneof.

  Raises:
    ValueError: if the oneof is unset or names an unsupported loss.
  """
  loss_type = loss_config.WhichOneof('localization_loss')
  if loss_type is None:
    raise errors.UserInputError(
        'Loss.localization_loss is empty: set one of %s.' %
        ', '.join(sorted(_LOCALIZATION_LOSSES)))
  if loss_type not in _LOCALIZATION_LOSSES:
    raise errors.UserInputError(
        'LocalizationLoss.%s is not supported; use one of %s.' %
        (loss_type, ', '.join(sorted(_LOCALIZATION_LOSSES))))
  return _LOCALIZATION_LOSSES[loss_type](getattr(loss_config, loss_type))
