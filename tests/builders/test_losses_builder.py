"""losses_builder from text protos written like the original's samples."""
import math

import numpy as np
import pytest
from google.protobuf import text_format

from od_estimator.builders import losses_builder
from od_estimator.core import balanced_positive_negative_sampler
from od_estimator.core import losses
from od_estimator.errors import UserInputError
from od_estimator.protos import losses_pb2

# The `loss` block of ssd_mobilenet_v1_coco.config.
SSD_MOBILENET_V1_LOSS = """
  classification_loss {
    weighted_sigmoid {
    }
  }
  localization_loss {
    weighted_smooth_l1 {
    }
  }
  hard_example_miner {
    num_hard_examples: 3000
    iou_threshold: 0.99
    loss_type: CLASSIFICATION
    max_negatives_per_positive: 3
    min_negatives_per_image: 0
  }
  classification_weight: 1.0
  localization_weight: 1.0
"""

# The `loss` block of the RetinaNet-style *_fpn_*_sync.config samples.
FOCAL_LOSS = """
  classification_loss {
    weighted_sigmoid_focal {
      alpha: 0.25
      gamma: 2.0
    }
  }
  localization_loss {
    weighted_smooth_l1 {
    }
  }
  classification_weight: 1.0
  localization_weight: 1.0
"""


def _loss_config(text):
  return text_format.Merge(text, losses_pb2.Loss())


def _classification_config(text):
  return text_format.Merge(text, losses_pb2.ClassificationLoss())


def test_ssd_mobilenet_v1_loss_block():
  (cls_loss, loc_loss, cls_weight, loc_weight, miner, sampler,
   expected_fn) = losses_builder.build(_loss_config(SSD_MOBILENET_V1_LOSS))
  assert isinstance(cls_loss, losses.WeightedSigmoidClassificationLoss)
  assert isinstance(loc_loss, losses.WeightedSmoothL1LocalizationLoss)
  assert loc_loss._delta == pytest.approx(1.)
  assert (cls_weight, loc_weight) == (1., 1.)
  assert sampler is None and expected_fn is None
  assert isinstance(miner, losses.HardExampleMiner)
  assert miner._num_hard_examples == 3000
  assert miner._iou_threshold == pytest.approx(.99)
  assert miner._loss_type == 'cls'
  assert miner._max_negatives_per_positive == 3.
  assert miner._min_negatives_per_image == 0


def test_focal_loss_block_and_its_value(execute):
  cls_loss, loc_loss, _, _, miner, _, _ = losses_builder.build(
      _loss_config(FOCAL_LOSS))
  assert isinstance(cls_loss, losses.SigmoidFocalClassificationLoss)
  assert miner is None
  # Logit 0 (p = 0.5), positive: 0.25 * 0.5^2 * ln 2.
  value = execute(lambda p, t, w: cls_loss(p, t, weights=w),
                  [np.zeros([1, 1, 1], np.float32),
                   np.ones([1, 1, 1], np.float32),
                   np.ones([1, 1, 1], np.float32)])
  np.testing.assert_allclose(value, [[[.25 * .25 * math.log(2.)]]],
                             rtol=1e-6)


def test_focal_loss_without_alpha_has_no_balancing():
  config = _loss_config("""
    classification_loss { weighted_sigmoid_focal { gamma: 1.5 } }
    localization_loss { weighted_l2 { } }
  """)
  cls_loss, loc_loss = losses_builder.build(config)[:2]
  assert cls_loss._alpha is None
  assert cls_loss._gamma == pytest.approx(1.5)
  assert isinstance(loc_loss, losses.WeightedL2LocalizationLoss)


@pytest.mark.parametrize('text,loss_class,attributes', [
    ('weighted_softmax { logit_scale: 2.0 }',
     losses.WeightedSoftmaxClassificationLoss, {'_logit_scale': 2.}),
    ('weighted_logits_softmax { logit_scale: 3.0 }',
     losses.WeightedSoftmaxClassificationAgainstLogitsLoss,
     {'_logit_scale': 3.}),
    ('bootstrapped_sigmoid { alpha: 0.5 hard_bootstrap: true }',
     losses.BootstrappedSigmoidClassificationLoss,
     {'_alpha': .5, '_bootstrap_type': 'hard'}),
    ('bootstrapped_sigmoid { alpha: 0.5 }',
     losses.BootstrappedSigmoidClassificationLoss,
     {'_bootstrap_type': 'soft'}),
    ('penalty_reduced_logistic_focal_loss { alpha: 2.0 beta: 4.0 }',
     losses.PenaltyReducedLogisticFocalLoss, {'_alpha': 2., '_beta': 4.}),
])
def test_classification_losses(text, loss_class, attributes):
  config = _loss_config('classification_loss { %s } '
                        'localization_loss { weighted_iou { } }' % text)
  cls_loss, loc_loss = losses_builder.build(config)[:2]
  assert isinstance(cls_loss, loss_class)
  assert isinstance(loc_loss, losses.WeightedIOULocalizationLoss)
  for name, value in attributes.items():
    assert getattr(cls_loss, name) == value


def test_localization_weights_and_smooth_l1_delta():
  config = _loss_config("""
    classification_loss { weighted_sigmoid { } }
    localization_loss {
      weighted_smooth_l1 { delta: 0.1 anchorwise_output: true }
    }
    classification_weight: 0.5
    localization_weight: 2.0
  """)
  _, loc_loss, cls_weight, loc_weight = losses_builder.build(config)[:4]
  assert loc_loss._delta == pytest.approx(.1)
  assert (cls_weight, loc_weight) == (.5, 2.)


def test_hard_example_miner_defaults_and_unlimited_values():
  # Defaults: 64 examples, IOU 0.7, BOTH. Zeros mean "no limit".
  config = _loss_config("""
    classification_loss { weighted_softmax { } }
    localization_loss { weighted_smooth_l1 { } }
    hard_example_miner { }
    classification_weight: 0.2
    localization_weight: 0.3
  """)
  miner = losses_builder.build(config)[4]
  assert miner._num_hard_examples == 64
  assert miner._iou_threshold == pytest.approx(.7)
  assert miner._loss_type == 'both'
  assert miner._max_negatives_per_positive is None
  assert miner._cls_loss_weight == pytest.approx(.2)
  assert miner._loc_loss_weight == pytest.approx(.3)

  miner_config = text_format.Merge(
      'num_hard_examples: 0 loss_type: LOCALIZATION',
      losses_pb2.HardExampleMiner())
  miner = losses_builder.build_hard_example_miner(miner_config, 1., 1.)
  assert miner._num_hard_examples is None
  assert miner._loss_type == 'loc'


def test_faster_rcnn_classification_loss():
  build = losses_builder.build_faster_rcnn_classification_loss
  default = build(losses_pb2.ClassificationLoss())
  assert isinstance(default, losses.WeightedSoftmaxClassificationLoss)
  assert default._logit_scale == 1.
  sigmoid = build(_classification_config('weighted_sigmoid { }'))
  assert isinstance(sigmoid, losses.WeightedSigmoidClassificationLoss)
  focal = build(_classification_config(
      'weighted_sigmoid_focal { gamma: 1.0 alpha: 0.5 }'))
  assert (focal._gamma, focal._alpha) == (1., .5)
  scaled = build(_classification_config(
      'weighted_logits_softmax { logit_scale: 4.0 }'))
  assert isinstance(scaled,
                    losses.WeightedSoftmaxClassificationAgainstLogitsLoss)
  assert scaled._logit_scale == 4.


def test_l1_giou_and_dice_losses():
  (classification, localization, _, _, _, _, _) = losses_builder.build(
      _loss_config('classification_loss { weighted_dice_classification_loss {'
                   ' squared_normalization: true } } '
                   'localization_loss { l1_localization_loss { } }'))
  assert isinstance(classification, losses.WeightedDiceClassificationLoss)
  assert classification._squared_normalization
  assert not classification._is_prediction_probability
  assert isinstance(localization, losses.L1LocalizationLoss)
  localization = losses_builder.build(_loss_config(
      'classification_loss { weighted_sigmoid { } } '
      'localization_loss { weighted_giou { } }'))[1]
  assert isinstance(localization, losses.WeightedGIOULocalizationLoss)


@pytest.mark.parametrize('text,field', [
    ('localization_loss { weighted_l2 { } }', 'classification_loss'),
    ('classification_loss { weighted_sigmoid { } }', 'localization_loss'),
    ('classification_loss { weighted_dice_classification_loss { } } '
     'localization_loss { weighted_l2 { } } hard_example_miner { }',
     'hard_example_miner cannot be used with classification_loss.'
     'weighted_dice_classification_loss'),
    ('classification_loss { weighted_sigmoid { } } '
     'localization_loss { weighted_l2 { } } '
     'expected_loss_weights: EXPECTED_SAMPLING', 'expected_loss_weights'),
    ('classification_loss { weighted_sigmoid { } } '
     'localization_loss { weighted_l2 { } } '
     'equalization_loss { weight: 1.0 }', 'equalization_loss'),
    ('classification_loss { weighted_sigmoid_focal { } } '
     'localization_loss { weighted_l2 { } } hard_example_miner { }',
     'hard_example_miner'),
])
def test_rejected_configs_name_the_field(text, field):
  with pytest.raises(ValueError, match=field):
    losses_builder.build(_loss_config(text))


def test_rejects_wrong_message_types():
  with pytest.raises(ValueError, match='losses_pb2.Loss'):
    losses_builder.build(losses_pb2.ClassificationLoss())
  with pytest.raises(ValueError, match='ClassificationLoss'):
    losses_builder.build_faster_rcnn_classification_loss(losses_pb2.Loss())
  with pytest.raises(ValueError, match='HardExampleMiner'):
    losses_builder.build_hard_example_miner(losses_pb2.Loss(), 1., 1.)
  with pytest.raises(ValueError, match='bootstrapped_sigmoid'):
    losses_builder.build_faster_rcnn_classification_loss(
        _classification_config('bootstrapped_sigmoid { alpha: 0.5 }'))


_SAMPLER_LOSS = """
  classification_loss { weighted_sigmoid { } }
  localization_loss { weighted_smooth_l1 { } }
  random_example_sampler { %s }
"""


def test_random_example_sampler():
  built = losses_builder.build(_loss_config(
      _SAMPLER_LOSS % 'positive_sample_fraction: 0.25'))
  sampler = built[5]
  assert isinstance(sampler, balanced_positive_negative_sampler
                    .BalancedPositiveNegativeSampler)
  assert sampler.positive_fraction == 0.25 and not sampler.is_static
  # An empty block takes the proto default fraction, 0.01.
  default = losses_builder.build(_loss_config(_SAMPLER_LOSS % ''))[5]
  assert default.positive_fraction == pytest.approx(0.01)


@pytest.mark.parametrize('fraction', [0.0, -0.5, 1.5])
def test_random_example_sampler_rejects_bad_fraction(fraction):
  with pytest.raises(UserInputError,
                     match=r'random_example_sampler.positive_sample_fraction'):
    losses_builder.build(_loss_config(
        _SAMPLER_LOSS % ('positive_sample_fraction: %g' % fraction)))
