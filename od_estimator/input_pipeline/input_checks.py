"""Config checks of the input readers (the input functions and validate).

Input options this version would not honour, and readers that do not load
what the model or the metrics need, are refused naming the field.
"""
from od_estimator.config import config_util
from od_estimator.metrics import metric_sets
from od_estimator.protos import input_reader_pb2

_PREDICT_MASKS_FIELD = ('model.faster_rcnn.second_stage_box_predictor.'
                        'mask_rcnn_box_predictor.predict_instance_masks')


def predicts_instance_masks(model_config):
  """Whether a model_pb2.DetectionModel is a Mask R-CNN (predicts masks)."""
  if model_config.WhichOneof('model') != 'faster_rcnn':
    return False
  predictor = model_config.faster_rcnn.second_stage_box_predictor
  return (predictor.WhichOneof('box_predictor_oneof') ==
          'mask_rcnn_box_predictor' and
          predictor.mask_rcnn_box_predictor.predict_instance_masks)


def _check_instance_masks_loaded(input_config, field, model_config,
                                 metrics_sets):
  """Refuses a reader without masks that a mask model or metric needs.

  The original fails on such configs deep in training (no groundtruth
  masks for the mask loss) or evaluation; three of its five mask_rcnn_*
  sample configs are like that.
  """
  if input_config.load_instance_masks:
    return
  if model_config is not None and predicts_instance_masks(model_config):
    why = 'the model predicts instance masks (%s: true)' % (
        _PREDICT_MASKS_FIELD)
  else:
    needing = [name for name in metrics_sets
               if metric_sets.needs_masks(name)]
    if not needing:
      return
    why = 'eval_config.metrics_set %s evaluates instance masks' % (
        ', '.join(needing))
  raise config_util.ConfigError(
      '%s, but %s does not load the groundtruth masks' % (why, field),
      field=field + '.load_instance_masks',
      hint='add load_instance_masks: true to %s, and mask_type: PNG_MASKS '
      'for PNG-encoded masks such as create_coco_tf_record --include_masks '
      'writes' % field)


def check_input_options(input_config, field, train_config=None,
                        model_config=None, metrics_sets=()):
  """Refuses input options this version would not honour.

  Args:
    input_config: input_reader_pb2.InputReader.
    field: where it sits in the pipeline config, e.g. 'train_input_reader'.
    train_config: train_pb2.TrainConfig when `input_config` feeds training.
    model_config: model_pb2.DetectionModel the reader feeds, or None.
    metrics_sets: eval_config.metrics_set when `input_config` feeds
      evaluation.

  Raises:
    config_util.ConfigError: naming the field, for input_type
      TF_SEQUENCE_EXAMPLE and load_context_features
      (Context R-CNN), for train_config.use_multiclass_scores without
      load_multiclass_scores (the one-hot labels would be trained on), and
      for a reader without load_instance_masks feeding a mask model or a
      mask metrics set.
  """
  _check_instance_masks_loaded(input_config, field, model_config,
                               metrics_sets)
  if input_config.input_type == input_reader_pb2.TF_SEQUENCE_EXAMPLE:
    # The decoder reads them; the input functions do not pick frames yet.
    raise config_util.ConfigError(
        'the train and eval input functions read tf.Examples only; '
        'TF_SEQUENCE_EXAMPLE records (Context R-CNN) are not supported by '
        'them yet', field=field + '.input_type',
        hint='write tf.Examples (input_type: TF_EXAMPLE)')
  if input_config.load_context_features:
    raise config_util.ConfigError(
        'context features are read only by Context R-CNN, which is not '
        'supported yet', field=field + '.load_context_features',
        hint='remove load_context_features')
  if (train_config is not None and train_config.use_multiclass_scores and
      not input_config.load_multiclass_scores):
    raise config_util.ConfigError(
        'training on multiclass scores needs them decoded, but %s.'
        'load_multiclass_scores is false, so the one-hot labels would be '
        'used instead' % field, field='train_config.use_multiclass_scores',
        hint='set %s.load_multiclass_scores: true, or remove '
        'use_multiclass_scores' % field)
