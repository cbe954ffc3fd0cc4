"""Builds box predictors from `BoxPredictor` protos.

    box_predictor = box_predictor_builder.build(
        hyperparams_builder.build, config.box_predictor, is_training=True,
        num_classes=90)

Supports the `convolutional_box_predictor` and
`weight_shared_convolutional_box_predictor` oneof choices (tf-slim layers
with the original's variable names), `mask_rcnn_box_predictor`, the second
stage of Faster R-CNN (with predict_instance_masks, the Mask R-CNN mask head
as its third-stage head) and `rfcn_box_predictor`, R-FCN's second stage
(position-sensitive score maps). build_rpn_box_predictor makes the Faster
R-CNN first stage's objectness predictor, which has no config message of its
own. With keras_layer_names=True all but R-FCN's take the names of the
original's TF2 Keras predictors (two_stage_keras_names for Faster R-CNN's).
"""
import collections
import functools

import tensorflow as tf

from od_estimator import errors
from od_estimator.errors import UserInputError
from od_estimator.predictors import convolutional_box_predictor
from od_estimator.predictors import mask_rcnn_box_predictor
from od_estimator.predictors import rfcn_box_predictor
from od_estimator.predictors import two_stage_keras_names
from od_estimator.predictors.heads import box_head
from od_estimator.predictors.heads import class_head
from od_estimator.predictors.heads import mask_head
from od_estimator.protos import box_predictor_pb2
from od_estimator.protos import hyperparams_pb2

BoxEncodingsClipRange = collections.namedtuple('BoxEncodingsClipRange',
                                               ['min', 'max'])

_WEIGHT_SHARED = box_predictor_pb2.WeightSharedConvolutionalBoxPredictor


def build_convolutional_box_predictor(is_training,
                                      num_classes,
                                      conv_hyperparams_fn,
                                      min_depth,
                                      max_depth,
                                      num_layers_before_predictor,
                                      use_dropout,
                                      dropout_keep_prob,
                                      kernel_size,
                                      box_code_size,
                                      apply_sigmoid_to_scores=False,
                                      add_background_class=True,
                                      class_prediction_bias_init=0.0,
                                      use_depthwise=False,
                                      box_encodings_clip_range=None,
                                      keras_layer_names=False,
                                      keras_name='BoxPredictor'):
  """Returns a ConvolutionalBoxPredictor with convolutional box/class heads.

  Args:
    is_training: whether the predictor is built for training.
    num_classes: number of classes, background excluded.
    conv_hyperparams_fn: callable returning the slim arg_scope for convs.
    min_depth: minimum depth of the convolutions inserted before the heads.
    max_depth: maximum depth of those convolutions (0: none inserted).
    num_layers_before_predictor: number of inserted 1x1 convolutions.
    use_dropout: apply dropout before the class head.
    dropout_keep_prob: keep probability for that dropout.
    kernel_size: spatial size of the prediction convolutions.
    box_code_size: size of one box encoding.
    apply_sigmoid_to_scores: return sigmoid scores instead of logits.
    add_background_class: add an implicit background class slot.
    class_prediction_bias_init: initial bias of the class logits.
    use_depthwise: SSDLite depthwise + 1x1 prediction layers.
    box_encodings_clip_range: optional BoxEncodingsClipRange.
    keras_layer_names: variable names of the original's Keras predictor.
    keras_name: that predictor's name (see ConvolutionalBoxPredictor).
  """
  box_prediction_head = box_head.ConvolutionalBoxHead(
      is_training=is_training,
      box_code_size=box_code_size,
      kernel_size=kernel_size,
      use_depthwise=use_depthwise,
      box_encodings_clip_range=box_encodings_clip_range)
  class_prediction_head = class_head.ConvolutionalClassHead(
      is_training=is_training,
      num_class_slots=num_classes + 1 if add_background_class else num_classes,
      use_dropout=use_dropout,
      dropout_keep_prob=dropout_keep_prob,
      kernel_size=kernel_size,
      apply_sigmoid_to_scores=apply_sigmoid_to_scores,
      class_prediction_bias_init=class_prediction_bias_init,
      use_depthwise=use_depthwise)
  return convolutional_box_predictor.ConvolutionalBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      box_prediction_head=box_prediction_head,
      class_prediction_head=class_prediction_head,
      other_heads={},
      conv_hyperparams_fn=conv_hyperparams_fn,
      num_layers_before_predictor=num_layers_before_predictor,
      min_depth=min_depth,
      max_depth=max_depth,
      keras_layer_names=keras_layer_names,
      keras_name=keras_name)


def build_weight_shared_convolutional_box_predictor(
    is_training,
    num_classes,
    conv_hyperparams_fn,
    depth,
    num_layers_before_predictor,
    box_code_size,
    kernel_size=3,
    add_background_class=True,
    class_prediction_bias_init=0.0,
    use_dropout=False,
    dropout_keep_prob=0.8,
    share_prediction_tower=False,
    apply_batch_norm=True,
    use_depthwise=False,
    score_converter_fn=tf.identity,
    box_encodings_clip_range=None,
    keyword_args=None,
    keras_layer_names=False,
    tower_activation_fn=tf.nn.relu6):
  """Returns a WeightSharedConvolutionalBoxPredictor with shared heads.

  Args:
    is_training: whether the predictor is built for training.
    num_classes: number of classes, background excluded.
    conv_hyperparams_fn: callable returning the slim arg_scope for convs.
    depth: depth of the tower convolutions.
    num_layers_before_predictor: convolutions per tower.
    box_code_size: size of one box encoding.
    kernel_size: spatial size of tower and prediction convolutions.
    add_background_class: add an implicit background class slot.
    class_prediction_bias_init: initial bias of the class logits.
    use_dropout: apply dropout before the class prediction layer.
    dropout_keep_prob: keep probability for that dropout.
    share_prediction_tower: one tower feeds both heads.
    apply_batch_norm: batch-normalize the tower convolutions.
    use_depthwise: depthwise separable convolutions.
    score_converter_fn: elementwise function applied to the class logits.
    box_encodings_clip_range: optional BoxEncodingsClipRange.
    keyword_args: unused; accepted for the original's signature.
    keras_layer_names: variable names of the original's Keras predictor.
    tower_activation_fn: activation of the tower convolutions.
  """
  del keyword_args  # The original ignores it too.
  box_prediction_head = box_head.WeightSharedConvolutionalBoxHead(
      box_code_size=box_code_size,
      kernel_size=kernel_size,
      use_depthwise=use_depthwise,
      box_encodings_clip_range=box_encodings_clip_range)
  class_prediction_head = class_head.WeightSharedConvolutionalClassHead(
      num_class_slots=num_classes + 1 if add_background_class else num_classes,
      kernel_size=kernel_size,
      class_prediction_bias_init=class_prediction_bias_init,
      use_dropout=use_dropout,
      dropout_keep_prob=dropout_keep_prob,
      use_depthwise=use_depthwise,
      score_converter_fn=score_converter_fn)
  return convolutional_box_predictor.WeightSharedConvolutionalBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      box_prediction_head=box_prediction_head,
      class_prediction_head=class_prediction_head,
      other_heads={},
      conv_hyperparams_fn=conv_hyperparams_fn,
      depth=depth,
      num_layers_before_predictor=num_layers_before_predictor,
      kernel_size=kernel_size,
      apply_batch_norm=apply_batch_norm,
      share_prediction_tower=share_prediction_tower,
      use_depthwise=use_depthwise,
      keras_layer_names=keras_layer_names,
      tower_activation_fn=tower_activation_fn)


def build_rpn_box_predictor(is_training, conv_hyperparams_fn, box_code_size=4,
                            keras_layer_names=False):
  """Returns the Faster R-CNN first stage's box and objectness predictor.

  A ConvolutionalBoxPredictor of 1x1 prediction convolutions straight on the
  RPN features, with one class so two objectness logits (background,
  object) per anchor, as the original builds it. Called with scope
  'FirstStageBoxPredictor' on one feature map it creates
  FirstStageBoxPredictor/BoxEncodingPredictor/{weights,biases} [1, 1,
  depth, anchors * box_code_size] and FirstStageBoxPredictor/ClassPredictor/
  {weights,biases} [1, 1, depth, anchors * 2]; with keras_layer_names
  FirstStageBoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/
  {kernel,bias} and FirstStageBoxPredictor/ConvolutionalClassHead_0/
  ClassPredictor/{kernel,bias}.

  Args:
    is_training: whether the predictor is built for training.
    conv_hyperparams_fn: callable returning the slim arg_scope of the
      first_stage_box_predictor_conv_hyperparams.
    box_code_size: size of one box encoding (the box coder's code size).
    keras_layer_names: variable names of the original's Keras predictor.
  """
  return build_convolutional_box_predictor(
      is_training=is_training,
      num_classes=1,
      conv_hyperparams_fn=conv_hyperparams_fn,
      min_depth=0,
      max_depth=0,
      num_layers_before_predictor=0,
      use_dropout=False,
      dropout_keep_prob=1.0,
      kernel_size=1,
      box_code_size=box_code_size,
      apply_sigmoid_to_scores=False,
      keras_layer_names=keras_layer_names,
      keras_name='')


def build_mask_rcnn_box_predictor(is_training,
                                  num_classes,
                                  fc_hyperparams_fn,
                                  use_dropout,
                                  dropout_keep_prob,
                                  box_code_size,
                                  add_background_class=True,
                                  share_box_across_classes=False,
                                  third_stage_heads=None,
                                  renaming=None):
  """Returns a MaskRCNNBoxPredictor with fully connected box/class heads.

  Args:
    is_training: whether the predictor is built for training.
    num_classes: number of classes, background excluded.
    fc_hyperparams_fn: callable returning the slim arg_scope for
      slim.fully_connected.
    use_dropout: apply dropout to the pooled ROI features.
    dropout_keep_prob: keep probability for that dropout.
    box_code_size: size of one box encoding.
    add_background_class: add an implicit background class slot.
    share_box_across_classes: one box per ROI instead of one per class.
    third_stage_heads: optional dict from output name to a head run by
      predict(..., prediction_stage=3).
    renaming: optional variable renaming (see MaskRCNNBoxPredictor).
  """
  box_prediction_head = box_head.MaskRCNNBoxHead(
      is_training=is_training,
      num_classes=num_classes,
      fc_hyperparams_fn=fc_hyperparams_fn,
      use_dropout=use_dropout,
      dropout_keep_prob=dropout_keep_prob,
      box_code_size=box_code_size,
      share_box_across_classes=share_box_across_classes)
  class_prediction_head = class_head.MaskRCNNClassHead(
      is_training=is_training,
      num_class_slots=num_classes + 1 if add_background_class else num_classes,
      fc_hyperparams_fn=fc_hyperparams_fn,
      use_dropout=use_dropout,
      dropout_keep_prob=dropout_keep_prob)
  return mask_rcnn_box_predictor.MaskRCNNBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      box_prediction_head=box_prediction_head,
      class_prediction_head=class_prediction_head,
      third_stage_heads=third_stage_heads or {},
      renaming=renaming)


def build_score_converter(score_converter_config, is_training):
  """Returns the class score converter for a weight shared predictor.

  SIGMOID converts only at inference: training losses take logits, and
  leaving the sigmoid out of the training graph keeps it TPU friendly.

  Args:
    score_converter_config: a WeightSharedConvolutionalBoxPredictor
      .ScoreConverter enum value.
    is_training: whether the predictor is built for training.

  Raises:
    ValueError: for an unknown enum value.
  """
  if score_converter_config == _WEIGHT_SHARED.IDENTITY:
    return tf.identity
  if score_converter_config == _WEIGHT_SHARED.SIGMOID:
    return tf.identity if is_training else tf.sigmoid
  raise errors.UserInputError(
      'Unknown weight_shared_convolutional_box_predictor'
      '.score_converter: %r' % score_converter_config)


def _clip_range(config):
  if not config.HasField('box_encodings_clip_range'):
    return None
  return BoxEncodingsClipRange(min=config.box_encodings_clip_range.min,
                               max=config.box_encodings_clip_range.max)


def _check_depthwise_kernel(oneof, config):
  if config.use_depthwise and config.kernel_size == 1:
    raise errors.UserInputError('%s.use_depthwise needs kernel_size > 1, got '
                                'kernel_size: 1' % oneof)


def _build_convolutional(argscope_fn, config, is_training, num_classes,
                         add_background_class, keras_layer_names):
  _check_depthwise_kernel('convolutional_box_predictor', config)
  return build_convolutional_box_predictor(
      is_training=is_training,
      num_classes=num_classes,
      add_background_class=add_background_class,
      conv_hyperparams_fn=argscope_fn(config.conv_hyperparams, is_training),
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      box_code_size=config.box_code_size,
      kernel_size=config.kernel_size,
      num_layers_before_predictor=config.num_layers_before_predictor,
      min_depth=config.min_depth,
      max_depth=config.max_depth,
      apply_sigmoid_to_scores=config.apply_sigmoid_to_scores,
      class_prediction_bias_init=config.class_prediction_bias_init,
      use_depthwise=config.use_depthwise,
      box_encodings_clip_range=_clip_range(config),
      keras_layer_names=keras_layer_names)


def _keras_tower_activation(conv_hyperparams_fn):
  """The Keras predictor's tower activation: the conv_hyperparams one."""
  activation_fn = getattr(conv_hyperparams_fn, 'activation_fn', tf.nn.relu6)
  return activation_fn or tf.identity


def _build_weight_shared(argscope_fn, config, is_training, num_classes,
                         add_background_class, keras_layer_names):
  oneof = 'weight_shared_convolutional_box_predictor'
  # Both options only change the original's Keras predictor; its slim
  # predictor, which checkpoints come from, has no such layers.
  for field in ('apply_conv_hyperparams_to_heads',
                'apply_conv_hyperparams_pointwise'):
    if getattr(config, field):
      raise errors.UserInputError(
          '%s.%s applies to Keras models only; od_estimator '
          'builds tf-slim (TF1) models. Remove it.'
          % (oneof, field))
  _check_depthwise_kernel(oneof, config)
  # The Keras predictor keeps its tower biases under force_use_bias.
  bias_kwargs = ({'allow_force_use_bias': True} if keras_layer_names and
                 config.conv_hyperparams.force_use_bias else {})
  conv_hyperparams_fn = argscope_fn(config.conv_hyperparams, is_training,
                                    **bias_kwargs)
  return build_weight_shared_convolutional_box_predictor(
      is_training=is_training,
      num_classes=num_classes,
      add_background_class=add_background_class,
      conv_hyperparams_fn=conv_hyperparams_fn,
      depth=config.depth,
      num_layers_before_predictor=config.num_layers_before_predictor,
      box_code_size=config.box_code_size,
      kernel_size=config.kernel_size,
      class_prediction_bias_init=config.class_prediction_bias_init,
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      share_prediction_tower=config.share_prediction_tower,
      # Tower batch norm follows the hyperparams' normalizer.
      apply_batch_norm=config.conv_hyperparams.HasField('batch_norm'),
      use_depthwise=config.use_depthwise,
      score_converter_fn=build_score_converter(config.score_converter,
                                               is_training),
      box_encodings_clip_range=_clip_range(config),
      keras_layer_names=keras_layer_names,
      tower_activation_fn=(_keras_tower_activation(conv_hyperparams_fn)
                           if keras_layer_names else tf.nn.relu6))


# Fields of MaskRCNNBoxPredictor that only a mask head uses.
_MASK_FIELDS = ('conv_hyperparams', 'mask_height', 'mask_width',
                'mask_prediction_num_conv_layers', 'mask_prediction_conv_depth',
                'masks_are_class_agnostic', 'convolve_then_upsample_masks')


def _check_mask_rcnn_fields(config):
  """Raises UserInputError for options that cannot be honoured."""
  oneof = 'mask_rcnn_box_predictor'
  if config.predict_keypoints:
    raise UserInputError(
        '%s.predict_keypoints: keypoint heads are not supported (the '
        "original never built one either); remove it." % oneof)
  if config.predict_instance_masks:
    if not config.HasField('conv_hyperparams'):
      raise UserInputError(
          '%s.conv_hyperparams is required with predict_instance_masks: '
          'it configures the mask head\'s convolutions.' % oneof)
    if min(config.mask_height, config.mask_width,
           config.mask_prediction_num_conv_layers) < 1:
      raise UserInputError(
          '%s: mask_height, mask_width and mask_prediction_num_conv_layers '
          'must be >= 1, got %d, %d and %d.' % (
              oneof, config.mask_height, config.mask_width,
              config.mask_prediction_num_conv_layers))
  else:
    for field in _MASK_FIELDS:
      if config.HasField(field):
        raise UserInputError(
            '%s.%s configures the mask head, which is only built with '
            'predict_instance_masks: true; set that or remove %s.'
            % (oneof, field, field))
  if config.fc_hyperparams.op != hyperparams_pb2.Hyperparams.FC:
    raise UserInputError(
        '%s.fc_hyperparams must set op: FC: the second-stage heads are '
        'fully connected layers, and hyperparameters for convolutions would '
        'apply to none of them.' % oneof)
  if config.use_dropout and not 0 < config.dropout_keep_probability <= 1:
    raise UserInputError(
        '%s.dropout_keep_probability must be in (0, 1] with use_dropout, '
        'got %g.' % (oneof, config.dropout_keep_probability))


def _keras_mask_rcnn_renaming(config):
  """Renaming to the original's Keras second-stage names (its TF2 models).

  Raises:
    UserInputError: for batch norm in fc_hyperparams, which the Keras heads
      apply after a dense layer with a bias (slim's has none).
  """
  if config.fc_hyperparams.HasField('batch_norm'):
    raise UserInputError(
        'mask_rcnn_box_predictor.fc_hyperparams.batch_norm is not supported '
        'with the TF2 (_keras) feature extractors; remove it.')
  mask_layers = ()
  if config.predict_instance_masks:
    mask_layers = two_stage_keras_names.mask_head_layers(
        config.mask_prediction_num_conv_layers,
        config.convolve_then_upsample_masks)
  return functools.partial(two_stage_keras_names.second_stage_name,
                           mask_layers=mask_layers)


def _build_mask_rcnn(argscope_fn, config, is_training, num_classes,
                     add_background_class, keras_layer_names):
  _check_mask_rcnn_fields(config)
  renaming = _keras_mask_rcnn_renaming(config) if keras_layer_names else None
  third_stage_heads = {}
  if config.predict_instance_masks:
    third_stage_heads[mask_rcnn_box_predictor.MASK_PREDICTIONS] = (
        mask_head.MaskRCNNMaskHead(
            num_classes=num_classes,
            conv_hyperparams_fn=argscope_fn(config.conv_hyperparams,
                                            is_training),
            mask_height=config.mask_height,
            mask_width=config.mask_width,
            mask_prediction_num_conv_layers=(
                config.mask_prediction_num_conv_layers),
            mask_prediction_conv_depth=config.mask_prediction_conv_depth,
            masks_are_class_agnostic=config.masks_are_class_agnostic,
            convolve_then_upsample=config.convolve_then_upsample_masks))
  return build_mask_rcnn_box_predictor(
      is_training=is_training,
      num_classes=num_classes,
      fc_hyperparams_fn=argscope_fn(config.fc_hyperparams, is_training),
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      box_code_size=config.box_code_size,
      add_background_class=add_background_class,
      share_box_across_classes=config.share_box_across_classes,
      third_stage_heads=third_stage_heads,
      renaming=renaming)


def _check_rfcn_fields(config):
  """Raises UserInputError for options that cannot be honoured."""
  oneof = 'rfcn_box_predictor'
  if not config.HasField('conv_hyperparams'):
    raise UserInputError(
        '%s.conv_hyperparams is required: it configures the reduce_depth, '
        'refined_locations and class_predictions convolutions.' % oneof)
  if config.conv_hyperparams.op != hyperparams_pb2.Hyperparams.CONV:
    raise UserInputError(
        '%s.conv_hyperparams must set op: CONV: the position-sensitive score '
        'maps are 1x1 convolutions, and hyperparameters for fully connected '
        'layers would apply to none of them.' % oneof)
  for field in ('num_spatial_bins_height', 'num_spatial_bins_width', 'depth',
                'box_code_size', 'crop_height', 'crop_width'):
    if getattr(config, field) < 1:
      raise UserInputError('%s.%s must be >= 1, got %d.'
                           % (oneof, field, getattr(config, field)))
  for crop, bins in (('crop_height', 'num_spatial_bins_height'),
                     ('crop_width', 'num_spatial_bins_width')):
    if getattr(config, crop) % getattr(config, bins):
      raise UserInputError(
          '%s.%s (%d) must be a multiple of %s (%d): each spatial bin is '
          'cropped to an equal share of the crop.' % (
              oneof, crop, getattr(config, crop), bins,
              getattr(config, bins)))


def _build_rfcn(argscope_fn, config, is_training, num_classes,
                add_background_class, keras_layer_names):
  # As for mask_rcnn_box_predictor, only the slim (TF1) names exist.
  del keras_layer_names
  if not add_background_class:
    raise ValueError('rfcn_box_predictor always predicts a background '
                     'class; add_background_class must be True.')
  _check_rfcn_fields(config)
  return rfcn_box_predictor.RfcnBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      conv_hyperparams_fn=argscope_fn(config.conv_hyperparams, is_training),
      num_spatial_bins=[config.num_spatial_bins_height,
                        config.num_spatial_bins_width],
      depth=config.depth,
      crop_size=[config.crop_height, config.crop_width],
      box_code_size=config.box_code_size)


_BUILDERS = {
    'convolutional_box_predictor': _build_convolutional,
    'weight_shared_convolutional_box_predictor': _build_weight_shared,
    'mask_rcnn_box_predictor': _build_mask_rcnn,
    'rfcn_box_predictor': _build_rfcn,
}


def build(argscope_fn, box_predictor_config, is_training, num_classes,
          add_background_class=True, keras_layer_names=False):
  """Builds a box predictor from its config.

  Args:
    argscope_fn: function (hyperparams_pb2.Hyperparams, is_training) ->
      callable returning a slim arg_scope, i.e. hyperparams_builder.build.
    box_predictor_config: box_predictor_pb2.BoxPredictor.
    is_training: whether the model is built for training.
    num_classes: number of classes, background excluded.
    add_background_class: add an implicit background class slot.
    keras_layer_names: build the original's Keras predictor instead (the
      same layers, named as in its TF2 checkpoints); the model builder sets
      it for feature extractor types ending in '_keras'. Not for
      rfcn_box_predictor, which keeps its slim names.

  Returns:
    A box_predictor.BoxPredictor.

  Raises:
    ValueError: for a config of another type, an unset box_predictor_oneof,
      or options that cannot be honoured (naming the field); UserInputError
      (a ValueError) for those of mask_rcnn_box_predictor and
      rfcn_box_predictor.
  """
  if not isinstance(box_predictor_config, box_predictor_pb2.BoxPredictor):
    raise ValueError('box_predictor_config must be a BoxPredictor proto, got '
                     '%s' % type(box_predictor_config).__name__)
  oneof = box_predictor_config.WhichOneof('box_predictor_oneof')
  if oneof not in _BUILDERS:
    raise errors.UserInputError('box_predictor.box_predictor_oneof is not set.')
  return _BUILDERS[oneof](argscope_fn, getattr(box_predictor_config, oneof),
                          is_training, num_classes, add_background_class,
                          keras_layer_names)
