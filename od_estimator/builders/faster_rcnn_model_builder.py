"""Builds a FasterRCNNMetaArch and its parts from a `faster_rcnn` config.

The parts (region_proposal_network.RegionProposalNetwork, and with more
stages box_classifier.BoxClassifier and mask_branch.MaskBranch) are built
here and handed to the meta-architecture; both stages' target assigners
come from target_assigner_builder.

The feature extractor class comes from
od_estimator.models.faster_rcnn_feature_extractor_registry by its config
`type` (e.g. "faster_rcnn_resnet101"); the config fields it takes beyond
the stride and batch_norm_trainable (its CONFIG_FIELDS: conv_hyperparams,
fpn, ...) are passed to it, and refused for the others. A feature pyramid
extractor (fpn) gives the first stage one map per level: its anchors come
from a multiscale_anchor_generator of the same levels, and the ROI crop
takes each proposal from its level. Fixed choices follow the original:
both stages encode boxes with FasterRcnnBoxCoder(10, 10, 5, 5) and match by
IoU with an argmax matcher (anchors: matched >= 0.7, unmatched < 0.3, every
groundtruth box forced to its best anchor; proposals: matched >= 0.5); the
RPN's losses are smooth L1 and softmax, its predictor a 1x1 convolutional
box predictor with one class (objectness).

Context R-CNN is a context_config: the box classifier then adds to each ROI
crop its attention into the image's context features (context_rcnn_lib),
as the original's first Context R-CNN (its sample configs and zoo
checkpoint); the attention variants of its later versions are refused by
name. output_final_box_features adds detection_features to the detections.
The original's TF2 extractor types (ending in `_keras`) bring the TF2 names
of the shared heads (predictors/two_stage_keras_names.py).
R-FCN is a second_stage_box_predictor of type rfcn_box_predictor: the box
classifier then has no ROI crop (box_classifier.BoxClassifier). Mask R-CNN
is number_of_stages 3 with predict_instance_masks in the
mask_rcnn_box_predictor. resize_masks needs no work here: mask targets are
cropped from the groundtruth masks with normalized boxes, whatever their
resolution.
"""
import functools

from od_estimator.builders import anchor_generator_builder
from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.builders import image_resizer_builder
from od_estimator.builders import losses_builder
from od_estimator.builders import post_processing_builder
from od_estimator.builders import target_assigner_builder
from od_estimator.core import balanced_positive_negative_sampler as sampler
from od_estimator.core import batch_post_processing
from od_estimator.core import spatial_transform_ops
from od_estimator.errors import UserInputError
from od_estimator.meta_architectures import box_classifier
from od_estimator.meta_architectures import context_rcnn_lib
from od_estimator.meta_architectures import faster_rcnn_meta_arch
from od_estimator.meta_architectures import mask_branch
from od_estimator.meta_architectures import region_proposal_network
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.predictors import two_stage_keras_names
from od_estimator.protos import faster_rcnn_pb2
from od_estimator.protos import target_assigner_pb2

_FRCNN = 'model.faster_rcnn'
_FE = _FRCNN + '.feature_extractor'
_CONTEXT = _FRCNN + '.context_config'
_BOX_CODER_SCALES = (10.0, 10.0, 5.0, 5.0)
# Extractor types of the original that this version does not build yet.
_LATER_EXTRACTORS = {
    'faster_rcnn_pnas': 'PNASNet (faster_rcnn_pnas) comes later',
}
# Set fields this version cannot honour -> why.
_UNSUPPORTED_FIELDS = {
    'output_final_box_rpn_features': 'box feature outputs are not built',
    'return_raw_detections_during_predict':
        'raw detections come from postprocess (raw_detection_boxes/scores)',
}


def _check_config(config):
  """Raises UserInputError naming a field this version cannot honour."""
  if config.num_classes <= 0:
    raise UserInputError('%s.num_classes must be > 0, got %d.' %
                         (_FRCNN, config.num_classes))
  if config.number_of_stages not in (1, 2, 3):
    raise UserInputError(
        '%s.number_of_stages: %d is not supported; use 1 (RPN only), 2 '
        '(Faster R-CNN) or 3 (Mask R-CNN).' % (_FRCNN,
                                               config.number_of_stages))
  for field, why in _UNSUPPORTED_FIELDS.items():
    if config.HasField(field) and getattr(config, field):
      raise UserInputError('%s.%s is not supported: %s.' % (_FRCNN, field,
                                                             why))
  _check_extractor_fields(config)
  _check_anchor_generator(config)
  if not 0.0 <= config.first_stage_nms_iou_threshold <= 1.0:
    raise UserInputError('%s.first_stage_nms_iou_threshold must be in [0, 1], '
                         'got %g.' % (_FRCNN,
                                      config.first_stage_nms_iou_threshold))
  if config.HasField('context_config'):
    _check_context(config)
  if config.output_final_box_features and (
      config.number_of_stages != 2 or config.HasField('context_config') or
      config.second_stage_box_predictor.HasField('rfcn_box_predictor')):
    raise UserInputError(
        '%s.output_final_box_features is supported for a two-stage Faster '
        'R-CNN with a mask_rcnn_box_predictor and no context_config (the '
        'detections\' features are cropped and extracted again).' % _FRCNN)
  if config.number_of_stages > 1:
    _check_second_stage(config)


def _extractor_fields(config):
  """The extra config fields the extractor type takes (() if unknown)."""
  extractor_class = (
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS
      .get(config.feature_extractor.type))
  return extractor_class.CONFIG_FIELDS if extractor_class else ()


def _takes_pyramid(config):
  return 'fpn' in _extractor_fields(config)


def _check_extractor_fields(config):
  """Raises UserInputError for a set field the extractor type lacks."""
  extractor = config.feature_extractor
  taken = _extractor_fields(config)
  if extractor.HasField('fpn') and 'fpn' not in taken:
    raise UserInputError(
        '%s.fpn is not supported by type %r; the feature pyramid types are '
        'faster_rcnn_resnet{50,101,152}_fpn_keras.' % (_FE, extractor.type))
  if 'fpn' in taken and not extractor.HasField('fpn'):
    raise UserInputError('%s.fpn must be set for type %r (its pyramid '
                         'levels).' % (_FE, extractor.type))
  for field in ('conv_hyperparams',
                'override_base_feature_extractor_hyperparams'):
    if (field not in taken and extractor.HasField(field) and
        getattr(extractor, field)):
      raise UserInputError(
          '%s.%s is not supported by type %r: the tf-slim Faster R-CNN '
          'extractors use their own hyperparameters, as in the original.'
          % (_FE, field, extractor.type))


def _check_anchor_generator(config):
  """Raises UserInputError unless the first-stage anchors fit the maps.

  One feature map takes grid_anchor_generator; a pyramid (fpn) takes
  multiscale_anchor_generator over its levels.
  """
  generator = config.first_stage_anchor_generator
  anchors = generator.WhichOneof('anchor_generator_oneof')
  if not _takes_pyramid(config):
    if anchors != 'grid_anchor_generator':
      raise UserInputError(
          '%s.first_stage_anchor_generator: %s is not supported with one '
          'feature map (type %r); use grid_anchor_generator.' % (
              _FRCNN, anchors or 'nothing set',
              config.feature_extractor.type))
    return
  if anchors != 'multiscale_anchor_generator':
    raise UserInputError(
        '%s.first_stage_anchor_generator: %s is not supported with a '
        'feature pyramid (type %r); use multiscale_anchor_generator.' % (
            _FRCNN, anchors or 'nothing set', config.feature_extractor.type))
  fpn = config.feature_extractor.fpn
  multiscale = generator.multiscale_anchor_generator
  if (multiscale.min_level, multiscale.max_level) != (fpn.min_level,
                                                      fpn.max_level):
    raise UserInputError(
        '%s.first_stage_anchor_generator.multiscale_anchor_generator: '
        'levels %d..%d must be the feature_extractor.fpn levels %d..%d.' % (
            _FRCNN, multiscale.min_level, multiscale.max_level,
            fpn.min_level, fpn.max_level))
  if multiscale.normalize_coordinates:
    raise UserInputError(
        '%s.first_stage_anchor_generator.multiscale_anchor_generator.'
        'normalize_coordinates must be false: first-stage anchors are in '
        'pixels.' % _FRCNN)


# context_config fields of the original's later attention variants -> the
# value that means the first Context R-CNN's single attention block.
_CONTEXT_VARIANT_FIELDS = {
    'use_self_attention': False,
    'use_long_term_attention': True,
    'self_attention_in_sequence': False,
    'num_attention_heads': 1,
    'num_attention_layers': 1,
}
_CONTEXT_POSITIVE_FIELDS = ('max_num_context_features',
                            'context_feature_length',
                            'attention_bottleneck_dimension',
                            'attention_temperature')


def _check_context(config):
  """Raises UserInputError for a Context R-CNN that cannot be honoured."""
  if (config.number_of_stages != 2 or
      config.second_stage_box_predictor.HasField('rfcn_box_predictor')):
    raise UserInputError(
        '%s: Context R-CNN is a two-stage Faster R-CNN with a '
        'mask_rcnn_box_predictor; with number_of_stages %d and %s it is not '
        'supported.' % (_CONTEXT, config.number_of_stages,
                        config.second_stage_box_predictor.WhichOneof(
                            'box_predictor_oneof')))
  context = config.context_config
  for field in _CONTEXT_POSITIVE_FIELDS:
    if getattr(context, field) <= 0:
      raise UserInputError('%s.%s must be > 0, got %g.' % (
          _CONTEXT, field, getattr(context, field)))
  for field, supported in _CONTEXT_VARIANT_FIELDS.items():
    if getattr(context, field) != supported:
      raise UserInputError(
          '%s.%s: %s is not supported; the attention is one block of one '
          'head into the context features (%s: %s, as the sample configs '
          'and the zoo checkpoint).' % (
              _CONTEXT, field, str(getattr(context, field)).lower(), field,
              str(supported).lower()))
  if context.HasField('attention_position'):
    raise UserInputError(
        '%s.attention_position: %s is not supported; leave it unset: the '
        'attention then applies to the ROI crops before the max pool, as in '
        'the sample configs and the zoo checkpoint (the original\'s later '
        'POST_RPN and POST_BOX_CLASSIFIER placements are not built).' % (
            _CONTEXT, faster_rcnn_pb2.AttentionPosition.Name(
                context.attention_position)))


# Fields of the ROI crop, which R-FCN does not make (its crop size is
# rfcn_box_predictor.crop_height and crop_width).
_ROI_CROP_FIELDS = ('initial_crop_size', 'maxpool_kernel_size',
                    'maxpool_stride')


def _check_rfcn_stages(config):
  """Raises UserInputError for R-FCN options that cannot be honoured."""
  if config.number_of_stages != 2:
    raise UserInputError(
        '%s: R-FCN (second_stage_box_predictor.rfcn_box_predictor) has two '
        'stages and no mask head; number_of_stages %d is not supported.'
        % (_FRCNN, config.number_of_stages))
  for field in _ROI_CROP_FIELDS:
    if config.HasField(field):
      raise UserInputError(
          '%s.%s configures the ROI crop of Faster R-CNN, which R-FCN does '
          'not make (its position-sensitive crop is sized by '
          'rfcn_box_predictor.crop_height and crop_width); remove it.'
          % (_FRCNN, field))


def _check_second_stage(config):
  predictor = config.second_stage_box_predictor.WhichOneof(
      'box_predictor_oneof')
  if predictor == 'rfcn_box_predictor':
    _check_rfcn_stages(config)
    return
  if predictor != 'mask_rcnn_box_predictor':
    raise UserInputError(
        '%s.second_stage_box_predictor: %s is not supported; use '
        'mask_rcnn_box_predictor or rfcn_box_predictor.'
        % (_FRCNN, predictor or 'nothing set'))
  masks = (config.second_stage_box_predictor.mask_rcnn_box_predictor
           .predict_instance_masks)
  if masks != (config.number_of_stages == 3):
    raise UserInputError(
        '%s: Mask R-CNN is number_of_stages: 3 with second_stage_box_predictor'
        '.mask_rcnn_box_predictor.predict_instance_masks: true; one without '
        'the other is not supported (number_of_stages %d, '
        'predict_instance_masks %s).' % (_FRCNN, config.number_of_stages,
                                         str(masks).lower()))
  if config.initial_crop_size <= 0:
    raise UserInputError('%s.initial_crop_size must be > 0, got %d.' %
                         (_FRCNN, config.initial_crop_size))
  if config.maxpool_kernel_size > 0 and config.maxpool_stride <= 0:
    raise UserInputError('%s.maxpool_stride must be > 0 with a max pool, got '
                         '%d.' % (_FRCNN, config.maxpool_stride))


def _build_feature_extractor(config, is_training):
  """The registered extractor of config.feature_extractor.type."""
  extractor = config.feature_extractor
  extractors = (
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS)
  if extractor.type in _LATER_EXTRACTORS:
    raise UserInputError('%s.type %r is not supported yet: %s.' % (
        _FE, extractor.type, _LATER_EXTRACTORS[extractor.type]))
  if extractor.type not in extractors:
    raise UserInputError('%s.type %r is not supported; available types: %s' %
                         (_FE, extractor.type, ', '.join(sorted(extractors))))
  extractor_class = extractors[extractor.type]
  return extractor_class(
      is_training, extractor.first_stage_features_stride,
      batch_norm_trainable=extractor.batch_norm_trainable,
      **_extractor_kwargs(extractor, extractor_class.CONFIG_FIELDS,
                          is_training))


def _extractor_kwargs(extractor, fields, is_training):
  """Keyword arguments of the extra config fields an extractor takes."""
  kwargs = {}
  if 'conv_hyperparams' in fields and extractor.HasField('conv_hyperparams'):
    # Batch norm trains only with batch_norm_trainable, as in the original.
    kwargs['conv_hyperparams_fn'] = hyperparams_builder.build(
        extractor.conv_hyperparams,
        is_training and extractor.batch_norm_trainable)
  if 'override_base_feature_extractor_hyperparams' in fields:
    kwargs['override_base_feature_extractor_hyperparams'] = (
        extractor.override_base_feature_extractor_hyperparams)
  if 'fpn' in fields:
    kwargs.update(fpn_min_level=extractor.fpn.min_level,
                  fpn_max_level=extractor.fpn.max_level,
                  additional_layer_depth=extractor.fpn.additional_layer_depth)
  if 'pad_to_multiple' in fields:
    kwargs['pad_to_multiple'] = extractor.pad_to_multiple
  return kwargs


def _target_assigner(matched_threshold, unmatched_threshold,
                     force_match_for_each_row, use_matmul_gather):
  """An IoU / argmax TargetAssigner with the Faster R-CNN box coder."""
  config = target_assigner_pb2.TargetAssigner()
  config.similarity_calculator.iou_similarity.SetInParent()
  matcher = config.matcher.argmax_matcher
  matcher.matched_threshold = matched_threshold
  matcher.unmatched_threshold = unmatched_threshold
  matcher.force_match_for_each_row = force_match_for_each_row
  matcher.use_matmul_gather = use_matmul_gather
  coder = config.box_coder.faster_rcnn_box_coder
  (coder.y_scale, coder.x_scale, coder.height_scale,
   coder.width_scale) = _BOX_CODER_SCALES
  return target_assigner_builder.build(config)


def _build_first_stage(config, is_training, use_static_shapes, layer_names):
  """FirstStageParams of the region proposal network."""
  if is_training and config.second_stage_batch_size > (
      config.first_stage_max_proposals) and config.number_of_stages > 1:
    raise UserInputError(
        '%s.second_stage_batch_size (%d) must not exceed '
        'first_stage_max_proposals (%d).' % (
            _FRCNN, config.second_stage_batch_size,
            config.first_stage_max_proposals))
  anchor_generator = anchor_generator_builder.build(
      config.first_stage_anchor_generator)
  conv_hyperparams_fn = hyperparams_builder.build(
      config.first_stage_box_predictor_conv_hyperparams, is_training)
  return region_proposal_network.FirstStageParams(
      anchor_generator=anchor_generator,
      conv_hyperparams_fn=conv_hyperparams_fn,
      box_predictor=box_predictor_builder.build_rpn_box_predictor(
          is_training, conv_hyperparams_fn,
          box_code_size=len(_BOX_CODER_SCALES),
          keras_layer_names=layer_names.keras),
      target_assigner=_target_assigner(
          0.7, 0.3, True, config.use_matmul_gather_in_matcher),
      sampler=sampler.BalancedPositiveNegativeSampler(
          positive_fraction=config.first_stage_positive_balance_fraction,
          is_static=(config.use_static_balanced_label_sampler and
                     use_static_shapes)),
      nms_fn=functools.partial(
          batch_post_processing.batch_multiclass_non_max_suppression,
          score_thresh=config.first_stage_nms_score_threshold,
          iou_thresh=config.first_stage_nms_iou_threshold,
          max_size_per_class=config.first_stage_max_proposals,
          max_total_size=config.first_stage_max_proposals,
          use_static_shapes=use_static_shapes,
          use_partitioned_nms=config.use_partitioned_nms_in_first_stage,
          use_combined_nms=config.use_combined_nms_in_first_stage),
      kernel_size=config.first_stage_box_predictor_kernel_size,
      depth=config.first_stage_box_predictor_depth,
      atrous_rate=config.first_stage_atrous_rate,
      minibatch_size=config.first_stage_minibatch_size,
      max_proposals=config.first_stage_max_proposals,
      localization_loss_weight=config.first_stage_localization_loss_weight,
      objectness_loss_weight=config.first_stage_objectness_loss_weight,
      clip_anchors_to_image=config.clip_anchors_to_image,
      layer_names=layer_names)


def _build_roi_crop(config):
  """RoiCropParams, or None for R-FCN, whose predictor reads the proposals.

  R-FCN's position-sensitive crop chooses its form itself, as in the
  original: matrix products when every shape is static (so with
  use_static_shapes), whatever use_matmul_crop_and_resize says.
  """
  if config.second_stage_box_predictor.HasField('rfcn_box_predictor'):
    return None
  return box_classifier.RoiCropParams(
      crop_and_resize_fn=(spatial_transform_ops.matmul_crop_and_resize
                          if config.use_matmul_crop_and_resize else
                          spatial_transform_ops.native_crop_and_resize),
      initial_crop_size=config.initial_crop_size,
      maxpool_kernel_size=config.maxpool_kernel_size,
      maxpool_stride=config.maxpool_stride)


def _build_second_stage(config, is_training, use_static_shapes, layer_names):
  """(RoiCropParams or None, SecondStageParams) of the box classifier."""
  roi_crop = _build_roi_crop(config)
  nms_fn, score_conversion_fn = post_processing_builder.build(
      config.second_stage_post_processing)
  localization_weight = config.second_stage_localization_loss_weight
  classification_weight = config.second_stage_classification_loss_weight
  hard_example_miner = None
  if config.HasField('hard_example_miner'):
    hard_example_miner = losses_builder.build_hard_example_miner(
        config.hard_example_miner, classification_weight,
        localization_weight)
  second_stage = box_classifier.SecondStageParams(
      box_predictor=box_predictor_builder.build(
          hyperparams_builder.build, config.second_stage_box_predictor,
          is_training=is_training, num_classes=config.num_classes,
          keras_layer_names=layer_names.keras),
      target_assigner=_target_assigner(
          0.5, 0.5, False, config.use_matmul_gather_in_matcher),
      sampler=sampler.BalancedPositiveNegativeSampler(
          positive_fraction=config.second_stage_balance_fraction,
          is_static=(config.use_static_balanced_label_sampler and
                     use_static_shapes)),
      nms_fn=nms_fn,
      score_conversion_fn=score_conversion_fn,
      classification_loss=losses_builder.build_faster_rcnn_classification_loss(
          config.second_stage_classification_loss),
      batch_size=config.second_stage_batch_size,
      localization_loss_weight=localization_weight,
      classification_loss_weight=classification_weight,
      hard_example_miner=hard_example_miner,
      mask_loss_weight=config.second_stage_mask_prediction_loss_weight)
  return roi_crop, second_stage


def _second_stage_parts(config, roi_crop, second_stage, box_coder,
                        is_training, use_static_shapes):
  """(BoxClassifier, MaskBranch or None) of a two- or three-stage model."""
  context = None
  if config.HasField('context_config'):
    context = context_rcnn_lib.ContextParams(
        bottleneck_dimension=(
            config.context_config.attention_bottleneck_dimension),
        temperature=config.context_config.attention_temperature,
        context_feature_length=config.context_config.context_feature_length)
  classifier = box_classifier.BoxClassifier(
      second_stage, roi_crop, config.num_classes, box_coder, is_training,
      use_static_shapes, context)
  if config.number_of_stages < 3:
    return classifier, None
  return classifier, mask_branch.MaskBranch(
      second_stage.box_predictor, second_stage.target_assigner,
      roi_crop.crop_and_resize_fn, config.num_classes,
      second_stage.mask_loss_weight)


def build(config, is_training, add_summaries=True):
  """Builds a FasterRCNNMetaArch and its parts from a faster_rcnn config.

  The parts' settings are built in the order their config errors are
  reported: second stage, feature extractor, image resizer, first stage.

  Args:
    config: faster_rcnn_pb2.FasterRcnn.
    is_training: whether the model is built for training.
    add_summaries: whether the model may add tf summaries.

  Returns:
    A FasterRCNNMetaArch.

  Raises:
    UserInputError: naming a field that is set but cannot be honoured, or
      an unknown feature extractor type.
  """
  _check_config(config)
  # Static shapes hold in training, and in evaluation only when asked for.
  use_static_shapes = config.use_static_shapes and (
      is_training or config.use_static_shapes_for_eval)
  layer_names = two_stage_keras_names.for_feature_extractor(
      config.feature_extractor.type)
  roi_crop = second_stage = None
  if config.number_of_stages > 1:
    roi_crop, second_stage = _build_second_stage(
        config, is_training, use_static_shapes, layer_names)
  feature_extractor = _build_feature_extractor(config, is_training)
  model_params = faster_rcnn_meta_arch.ModelParams(
      num_classes=config.num_classes,
      image_resizer_fn=image_resizer_builder.build(config.image_resizer),
      number_of_stages=config.number_of_stages,
      use_static_shapes=use_static_shapes,
      inplace_batchnorm_update=config.inplace_batchnorm_update,
      output_final_box_features=config.output_final_box_features)
  rpn = region_proposal_network.RegionProposalNetwork(
      _build_first_stage(config, is_training, use_static_shapes,
                         layer_names),
      is_training, use_static_shapes, model_params.parallel_iterations)
  classifier = branch = None
  if config.number_of_stages > 1:
    classifier, branch = _second_stage_parts(
        config, roi_crop, second_stage, rpn.box_coder, is_training,
        use_static_shapes)
  return faster_rcnn_meta_arch.FasterRCNNMetaArch(
      is_training, feature_extractor, model_params, rpn, classifier, branch,
      add_summaries=add_summaries)
