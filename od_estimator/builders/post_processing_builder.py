"""Builds the NMS and score-conversion callables from a PostProcessing proto.

Calibration: only temperature scaling (and an empty calibration_config) is
supported; the other calibrators raise ValueError naming the field.
"""
import functools

import tensorflow as tf

from od_estimator import errors
from od_estimator.core import batch_post_processing
from od_estimator.protos import post_processing_pb2

# score_converter enum value -> (name, op taking (tensor, name=...)).
_SCORE_CONVERTERS = {
    post_processing_pb2.PostProcessing.IDENTITY: ('identity', tf.identity),
    post_processing_pb2.PostProcessing.SIGMOID: ('sigmoid', tf.sigmoid),
    post_processing_pb2.PostProcessing.SOFTMAX: ('softmax', tf.nn.softmax),
}


def build(post_processing_config):
  """Builds the post-processing callables.

  Args:
    post_processing_config: post_processing_pb2.PostProcessing.

  Returns:
    non_max_suppressor_fn:
      batch_post_processing.batch_multiclass_non_max_suppression with the
      thresholds and sizes of `batch_non_max_suppression` bound;
      called with boxes, scores and optionally clip_window, masks, ...
    score_converter_fn: callable mapping logits to scores (logits are divided
      by logit_scale first, then calibrated if configured).

  Raises:
    ValueError: for a config of the wrong type or an unsupported option.
  """
  if not isinstance(post_processing_config,
                    post_processing_pb2.PostProcessing):
    raise ValueError('post_processing_config must be a '
                     'post_processing_pb2.PostProcessing, got %s' %
                     type(post_processing_config).__name__)
  non_max_suppressor_fn = _build_non_max_suppressor(
      post_processing_config.batch_non_max_suppression)
  score_converter_fn = _build_score_converter(
      post_processing_config.score_converter,
      post_processing_config.logit_scale)
  if post_processing_config.HasField('calibration_config'):
    score_converter_fn = _build_calibrated_score_converter(
        score_converter_fn, post_processing_config.calibration_config)
  return non_max_suppressor_fn, score_converter_fn


def _build_non_max_suppressor(nms_config):
  """Binds a BatchNonMaxSuppression proto to the batch NMS function.

  Raises:
    ValueError: naming the offending field for an iou_threshold outside
      [0, 1], more detections per class than in total, a negative
      soft_nms_sigma or a combination of options NMS cannot run.
  """
  if not 0.0 <= nms_config.iou_threshold <= 1.0:
    raise errors.UserInputError(
        'batch_non_max_suppression.iou_threshold must be in '
        '[0, 1], got %s' % nms_config.iou_threshold)
  if nms_config.max_detections_per_class > nms_config.max_total_detections:
    raise errors.UserInputError(
        'batch_non_max_suppression.max_detections_per_class (%d) '
        'must not exceed max_total_detections (%d)' %
        (nms_config.max_detections_per_class,
                      nms_config.max_total_detections))
  if nms_config.soft_nms_sigma < 0.0:
    raise errors.UserInputError(
        'batch_non_max_suppression.soft_nms_sigma must be '
        'non-negative, got %s' % nms_config.soft_nms_sigma)
  _check_option_combinations(nms_config)
  return functools.partial(
      batch_post_processing.batch_multiclass_non_max_suppression,
      score_thresh=nms_config.score_threshold,
      iou_thresh=nms_config.iou_threshold,
      max_size_per_class=nms_config.max_detections_per_class,
      max_total_size=nms_config.max_total_detections,
      use_static_shapes=nms_config.use_static_shapes,
      use_class_agnostic_nms=nms_config.use_class_agnostic_nms,
      max_classes_per_detection=nms_config.max_classes_per_detection,
      soft_nms_sigma=nms_config.soft_nms_sigma,
      use_partitioned_nms=nms_config.use_partitioned_nms,
      use_combined_nms=nms_config.use_combined_nms,
      change_coordinate_frame=nms_config.change_coordinate_frame,
      use_hard_nms=nms_config.use_hard_nms,
      use_cpu_nms=nms_config.use_cpu_nms)


def _check_option_combinations(nms_config):
  """Rejects option combinations NMS cannot honour, naming the fields.

  The NMS function would fail on most of these only when the graph is built,
  under its own argument names; max_classes_per_detection > 1 it would
  silently ignore outside class-agnostic mode.
  """
  field = 'batch_non_max_suppression.'
  if nms_config.use_combined_nms and nms_config.use_class_agnostic_nms:
    raise errors.UserInputError(field + 'use_combined_nms does not support '
                                'use_class_agnostic_nms')
  if nms_config.max_classes_per_detection > 1:
    raise errors.UserInputError(
        field + 'max_classes_per_detection must be 1 (one class '
        'per detection), got %d' %
        nms_config.max_classes_per_detection)
  if nms_config.soft_nms_sigma > 0.0:
    for other in ('use_static_shapes', 'use_hard_nms', 'use_combined_nms'):
      if getattr(nms_config, other):
        raise errors.UserInputError(
            field + 'soft_nms_sigma (%s) cannot be used with '
            '%s: true' % (nms_config.soft_nms_sigma, other))


def _build_score_converter(score_converter, logit_scale):
  """Returns logits -> op(logits / logit_scale).

  Raises:
    ValueError: for an unknown score_converter or a zero logit_scale.
  """
  if score_converter not in _SCORE_CONVERTERS:
    raise errors.UserInputError('Unknown post_processing.score_converter: %s' %
                                score_converter)
  if logit_scale == 0.0:
    raise errors.UserInputError('post_processing.logit_scale must be non-zero')
  name, convert = _SCORE_CONVERTERS[score_converter]

  def score_converter_fn(logits):
    scaled_logits = tf.multiply(logits, 1.0 / logit_scale,
                                name='scale_logits')
    return convert(scaled_logits, name='convert_scores')

  score_converter_fn.__name__ = '%s_with_logit_scale' % name
  return score_converter_fn


def _build_calibrated_score_converter(score_converter_fn, calibration_config):
  """Adds calibration in front of score_converter_fn.

  Raises:
    ValueError: naming the calibrator field when it is not supported.
  """
  calibrator = calibration_config.WhichOneof('calibrator')
  if calibrator is None:
    return score_converter_fn
  if calibrator != 'temperature_scaling_calibration':
    raise errors.UserInputError(
        'post_processing.calibration_config.%s is not supported '
        '(only temperature_scaling_calibration is)' % calibrator)
  scaler = calibration_config.temperature_scaling_calibration.scaler
  if scaler <= 0.0:
    raise errors.UserInputError(
        'calibration_config.temperature_scaling_calibration.'
        'scaler must be positive, got %s' % scaler)

  # Temperature scaling acts on logits, so it runs before the conversion.
  def calibrated_score_converter_fn(logits):
    calibrated = tf.divide(logits, scaler, name='calibrate_score')
    return score_converter_fn(calibrated)

  calibrated_score_converter_fn.__name__ = (
      'calibrate_with_temperature_scaling_calibration')
  return calibrated_score_converter_fn
