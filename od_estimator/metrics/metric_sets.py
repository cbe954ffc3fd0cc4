"""The eval_config.metrics_set names: what each one runs and needs.

Every name the original accepts is in one of three tables: METRIC_SETS (the
evaluator it builds and the eval_config fields passed to it), DEPRECATED
(an older name of one of them) or NOT_YET_SUPPORTED (refused, saying why).
Evaluation (eval_util), the input checks and validate read them from here.
"""
import dataclasses
from typing import Optional, Tuple

from absl import logging

from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_evaluation
from od_estimator.metrics import evaluator_base
from od_estimator.metrics import oid_evaluation
from od_estimator.metrics import pascal_evaluation
from od_estimator.metrics import pascal_mask_evaluation

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

DEFAULT = 'coco_detection_metrics'


@dataclasses.dataclass(frozen=True)
class MetricSet:
  """What one metrics_set name runs and what it needs from the inputs.

  Attributes:
    evaluator: the evaluator class, built with the categories and `options`;
      None for a set not supported yet.
    options: eval_config fields passed to the evaluator as keyword arguments
      of the same names (only these sets honour them).
    needs_masks: the set evaluates instance masks: the eval input must load
      groundtruth masks and the model must predict them.
    unsupported: why the set cannot run yet (when evaluator is None).
  """
  evaluator: Optional[type] = None
  options: Tuple[str, ...] = ()
  needs_masks: bool = False
  unsupported: Optional[str] = None


def _runs(evaluator, options=()):
  return MetricSet(evaluator, options, needs_masks=evaluator.evaluates_masks)


def _not_yet(reason, needs_masks=False):
  return MetricSet(needs_masks=needs_masks, unsupported=reason)


_COCO_PER_CATEGORY = ('include_metrics_per_category',
                      'all_metrics_per_category')

METRIC_SETS = {
    'coco_detection_metrics': _runs(
        coco_evaluation.CocoDetectionEvaluator,
        _COCO_PER_CATEGORY + ('skip_predictions_for_unlabeled_class',
                              'super_categories')),
    'coco_mask_metrics': _runs(coco_evaluation.CocoMaskEvaluator,
                               _COCO_PER_CATEGORY),
    'pascal_voc_detection_metrics': _runs(
        pascal_evaluation.PascalDetectionEvaluator),
    'weighted_pascal_voc_detection_metrics': _runs(
        pascal_evaluation.WeightedPascalDetectionEvaluator),
    'precision_at_recall_detection_metrics': _runs(
        pascal_evaluation.PrecisionAtRecallDetectionEvaluator,
        ('recall_lower_bound', 'recall_upper_bound',
         'skip_predictions_for_unlabeled_class')),
    'oid_V2_detection_metrics': _runs(
        oid_evaluation.OpenImagesDetectionEvaluator),
    'oid_challenge_detection_metrics': _runs(
        oid_evaluation.OpenImagesDetectionChallengeEvaluator),
    'pascal_voc_instance_segmentation_metrics': _runs(
        pascal_mask_evaluation.PascalInstanceSegmentationEvaluator),
    'weighted_pascal_voc_instance_segmentation_metrics': _runs(
        pascal_mask_evaluation.WeightedPascalInstanceSegmentationEvaluator),
    'oid_challenge_segmentation_metrics': _not_yet(
        'is not supported yet (Open Images instance segmentation)',
        needs_masks=True),
    'lvis_mask_metrics': _not_yet(
        'is not supported yet (LVIS mask evaluation)', needs_masks=True),
    'coco_panoptic_metrics': _not_yet(
        'needs panoptic masks, which only a mask model predicts; '
        'od_estimator does not build one yet'),
    'coco_keypoint_metrics': _not_yet(
        'is not supported yet (COCO keypoint evaluation)'),
}

# Older names the original still accepts (some only in its legacy eval.py),
# each with the name that replaced it: same evaluator, same metric names.
DEPRECATED = {
    'open_images_V2_detection_metrics': 'oid_V2_detection_metrics',
    'open_images_metrics': 'oid_V2_detection_metrics',
    'oid_challenge_object_detection_metrics':
        'oid_challenge_detection_metrics',
    'pascal_voc_metrics': 'pascal_voc_detection_metrics',
    'weighted_pascal_voc_metrics': 'weighted_pascal_voc_detection_metrics',
}

# What a mask metrics set tells the user when the eval dict lacks masks.
_MISSING_MASKS = {
    _DET.detection_masks: (
        'detection masks, which the model does not predict',
        'use a Mask R-CNN (mask_rcnn_box_predictor with '
        'predict_instance_masks: true)'),
    _IN.groundtruth_instance_masks: (
        'groundtruth instance masks, which the eval input does not load',
        'set load_instance_masks: true in eval_input_reader'),
}


def supported():
  """The names whose evaluators run, sorted."""
  return sorted(name for name, metric_set in METRIC_SETS.items()
                if metric_set.evaluator)


def configured(eval_config):
  """eval_config.metrics_set as given, or the default."""
  return list(eval_config.metrics_set) or [DEFAULT]


def current_name(name):
  """The name that replaced deprecated `name`, else `name` itself."""
  return DEPRECATED.get(name, name)


def needs_masks(name):
  """Whether metrics set `name` evaluates instance masks (False if unknown)."""
  metric_set = METRIC_SETS.get(current_name(name))
  return bool(metric_set and metric_set.needs_masks)


def honouring(field):
  """The runnable sets that eval_config `field` is passed to."""
  return tuple(name for name, metric_set in METRIC_SETS.items()
               if field in metric_set.options)


def check_metrics_set(name):
  """The current name of eval_config.metrics_set `name`.

  Deprecated names give the name that replaced them (and log a warning).

  Raises:
    config_util.ConfigError: for a name od_estimator cannot evaluate yet
      (saying what it needs) or does not know, listing the accepted names.
  """
  if name in DEPRECATED:
    logging.warning('eval_config.metrics_set %r is deprecated; use %r '
                    'instead (same metrics).', name, DEPRECATED[name])
    return DEPRECATED[name]
  metric_set = METRIC_SETS.get(name)
  if metric_set and metric_set.evaluator:
    return name
  if metric_set:
    problem = 'metrics set %r %s' % (name, metric_set.unsupported)
  else:
    problem = 'unknown metrics set %r' % name
  raise config_util.ConfigError(
      problem, field='eval_config.metrics_set',
      hint='accepted: %s' % ', '.join(supported()))


def super_categories_from_eval_config(eval_config):
  """{super-category: [category names]} from eval_config.super_categories.

  Each map value lists the label map names of the super-category's
  categories, separated by commas.
  """
  return {key: [name.strip() for name in value.split(',') if name.strip()]
          for key, value in sorted(eval_config.super_categories.items())}


def evaluator_options(name, eval_config):
  """Keyword arguments of set `name`'s evaluator, from eval_config."""
  options = {}
  for field in METRIC_SETS[name].options:
    if field == 'super_categories':
      options[field] = super_categories_from_eval_config(eval_config) or None
    else:
      options[field] = getattr(eval_config, field)
  return options


def check_eval_dict(name, eval_dict):
  """Refuses an eval dict without what metrics set `name` evaluates.

  Raises:
    config_util.ConfigError: naming eval_config.metrics_set and what to
      change, for a mask set without groundtruth or detection masks.
  """
  if not needs_masks(name):
    return
  for field in evaluator_base.MASK_FIELDS:
    if eval_dict.get(field) is None:
      what, hint = _MISSING_MASKS[field]
      raise config_util.ConfigError(
          'metrics set %r needs %s' % (name, what),
          field='eval_config.metrics_set', hint=hint)
