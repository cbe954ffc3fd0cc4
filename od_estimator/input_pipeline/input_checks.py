"""Config checks of the input readers (the input functions and validate).

Input options this version would not honour, and readers that do not load
what the model or the metrics need, are refused naming the field.
"""
from od_estimator.config import config_util
from od_estimator.metrics import metric_sets

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


def is_context_rcnn(model_config):
  """Whether a model_pb2.DetectionModel is a Context R-CNN.

  As the original's model builder: a faster_rcnn with context_config.
  """
  return (model_config.WhichOneof('model') == 'faster_rcnn' and
          model_config.faster_rcnn.HasField('context_config'))


def _check_context_features(input_config, field, model_config):
  """Context features are read exactly when the model attends over them.

  Another model would silently ignore them; a Context R-CNN fed without
  them has nothing to attend to (the original fails in the model).
  """
  if model_config is None:
    return
  context_model = is_context_rcnn(model_config)
  if input_config.load_context_features and not context_model:
    raise config_util.ConfigError(
        'context features are read only by Context R-CNN (a faster_rcnn '
        'with context_config), and this model is not one, so it would '
        'ignore them', field=field + '.load_context_features',
        hint='remove load_context_features, or add context_config { '
        'max_num_context_features: ... context_feature_length: ... } to '
        'model.faster_rcnn')
  if context_model and not input_config.load_context_features:
    raise config_util.ConfigError(
        'model.faster_rcnn.context_config makes the model a Context R-CNN, '
        'which attends over the context features of each image, but %s '
        'does not load them' % field,
        field=field + '.load_context_features',
        hint='add load_context_features: true to %s' % field)


def _check_frame_index(input_config, field):
  """Refuses a frame_index no frame has, or one evaluation would ignore."""
  index = input_config.frame_index
  if index < -1:
    raise config_util.ConfigError(
        'frame_index %d is not a frame: frames count from 0, and -1 picks '
        'one at random' % index, field=field + '.frame_index',
        hint='set a frame number, or -1 (the default)')
  if index != -1 and field.startswith('eval_input_reader'):
    # The original ignores it there.
    raise config_util.ConfigError(
        'frame_index picks the one frame of each tf.SequenceExample that '
        'training reads; evaluation reads every frame',
        field=field + '.frame_index',
        hint='remove frame_index from %s' % field)


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
    config_util.ConfigError: naming the field, for load_context_features
      without a Context R-CNN model and a Context R-CNN reader without
      them (see _check_context_features), for a frame_index below -1 or
      on an eval_input_reader (evaluation reads every frame), for
      train_config.use_multiclass_scores without load_multiclass_scores
      (the one-hot labels would be trained on), and
      for a reader without load_instance_masks feeding a mask model or a
      mask metrics set.
  """
  _check_instance_masks_loaded(input_config, field, model_config,
                               metrics_sets)
  _check_context_features(input_config, field, model_config)
  _check_frame_index(input_config, field)
  if (train_config is not None and train_config.use_multiclass_scores and
      not input_config.load_multiclass_scores):
    raise config_util.ConfigError(
        'training on multiclass scores needs them decoded, but %s.'
        'load_multiclass_scores is false, so the one-hot labels would be '
        'used instead' % field, field='train_config.use_multiclass_scores',
        hint='set %s.load_multiclass_scores: true, or remove '
        'use_multiclass_scores' % field)
