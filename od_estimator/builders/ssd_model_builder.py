"""Builds an SSDMetaArch and its parts from a model.proto `ssd` config.

The feature extractor class comes from
od_estimator.models.ssd_feature_extractor_registry by its config `type`
string (e.g. "ssd_mobilenet_v2").
"""
import inspect

from od_estimator import errors
from od_estimator.builders import anchor_generator_builder
from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.builders import image_resizer_builder
from od_estimator.builders import losses_builder
from od_estimator.builders import post_processing_builder
from od_estimator.builders import target_assigner_builder
from od_estimator.meta_architectures import ssd_loss
from od_estimator.meta_architectures import ssd_meta_arch
from od_estimator.models import ssd_feature_extractor_registry


_FE = 'model.ssd.feature_extractor'


def _takes_arguments(extractor_class, names):
  """Whether extractor_class's constructor accepts all these keywords."""
  parameters = inspect.signature(extractor_class.__init__).parameters
  if any(p.kind == inspect.Parameter.VAR_KEYWORD
         for p in parameters.values()):
    return True
  return set(names) <= set(parameters)


def _feature_pyramid_kwargs(feature_extractor_config):
  """Constructor arguments for the fpn / bifpn oneof, keyed by proto path."""
  pyramid = feature_extractor_config.WhichOneof('feature_pyramid_oneof')
  if pyramid == 'fpn':
    fpn = feature_extractor_config.fpn
    return 'fpn', {'fpn_min_level': fpn.min_level,
                   'fpn_max_level': fpn.max_level,
                   'additional_layer_depth': fpn.additional_layer_depth}
  if pyramid == 'bifpn':
    bifpn = feature_extractor_config.bifpn
    return 'bifpn', {'bifpn_min_level': bifpn.min_level,
                     'bifpn_max_level': bifpn.max_level,
                     'bifpn_num_iterations': bifpn.num_iterations,
                     'bifpn_num_filters': bifpn.num_filters,
                     'bifpn_combine_method': bifpn.combine_method,
                     'use_native_resize_op': bifpn.use_native_resize_op}
  return None, {}


def _optional_extractor_kwargs(feature_extractor_config):
  """Set optional fields -> (proto field name, constructor kwargs)."""
  optional = []
  pyramid, pyramid_kwargs = _feature_pyramid_kwargs(feature_extractor_config)
  if pyramid:
    optional.append((pyramid, pyramid_kwargs))
  # Like the original, these are passed only when the config sets them, so
  # extractors without the argument keep working with default configs.
  for field in ('num_layers', 'replace_preprocessor_with_placeholder',
                'spaghettinet_arch_name'):
    if feature_extractor_config.HasField(field):
      optional.append((field, {field: getattr(feature_extractor_config,
                                              field)}))
  # The original never passes use_hardswish; we do when the extractor can
  # honour it rather than silently dropping it.
  if feature_extractor_config.use_hardswish:
    optional.append(('use_hardswish', {'use_hardswish': True}))
  return optional


def _build_ssd_feature_extractor(feature_extractor_config, is_training,
                                 freeze_batchnorm, reuse_weights=None):
  """Instantiates the registered SSD feature extractor of the config's type.

  Args:
    feature_extractor_config: ssd_pb2.SsdFeatureExtractor.
    is_training: whether the model is built for training.
    freeze_batchnorm: of a Keras (`_keras`) type, the batch norm of the
      layers built from conv_hyperparams is frozen too (see
      _batch_norm_trains); the meta-architecture sets the mode of the rest.
    reuse_weights: variable reuse of the extractor's scope.

  Returns:
    An SSDFeatureExtractor.

  Raises:
    UserInputError: for an unknown type (listing the known ones).
    ValueError: for a set field the extractor's constructor does not take.
  """
  feature_type = feature_extractor_config.type
  extractors = ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS
  if feature_type not in extractors:
    raise errors.UserInputError(
        '%s.type %r is not supported; available types: %s' %
        (_FE, feature_type, ', '.join(sorted(extractors)) or '(none)'))
  extractor_class = extractors[feature_type]
  kwargs = {
      'is_training': is_training,
      'depth_multiplier': feature_extractor_config.depth_multiplier,
      'min_depth': feature_extractor_config.min_depth,
      'pad_to_multiple': feature_extractor_config.pad_to_multiple,
      'conv_hyperparams_fn': hyperparams_builder.build(
          feature_extractor_config.conv_hyperparams,
          _batch_norm_trains(is_training, feature_type, freeze_batchnorm),
          allow_force_use_bias=getattr(extractor_class,
                                       'honours_force_use_bias', False)),
      'reuse_weights': reuse_weights,
      'use_explicit_padding': feature_extractor_config.use_explicit_padding,
      'use_depthwise': feature_extractor_config.use_depthwise,
      'override_base_feature_extractor_hyperparams': (
          feature_extractor_config.override_base_feature_extractor_hyperparams),
  }
  for field, field_kwargs in _optional_extractor_kwargs(
      feature_extractor_config):
    if not _takes_arguments(extractor_class, field_kwargs):
      raise ValueError('%s.%s is not supported by feature extractor %r.' %
                       (_FE, field, feature_type))
    kwargs.update(field_kwargs)
  return extractor_class(**kwargs)


def _batch_norm_trains(is_training, feature_type, freeze_batchnorm):
  """Whether the batch norm of conv_hyperparams' layers trains.

  freeze_batchnorm freezes every batch norm of the original's Keras (TF2)
  models (`_keras` types), the BiFPN's or FPN's and the box predictor's
  too; in its slim (TF1) models only those without hyperparams of their
  own (the backbone's), whose mode the meta-architecture sets.
  """
  return is_training and not (freeze_batchnorm and
                              feature_type.endswith('_keras'))


def _check_ssd_config(ssd_config):
  """Raises ValueError naming an ssd field this version cannot honour."""
  if ssd_config.HasField('mask_head_config'):
    raise ValueError('model.ssd.mask_head_config is not supported (SSD mask '
                     'heads are not implemented).')
  if ssd_config.num_classes <= 0:
    raise ValueError('model.ssd.num_classes must be > 0, got %d.' %
                     ssd_config.num_classes)


def _build_loss(ssd_config, target_assigner, num_classes, is_training,
                add_summaries):
  """The SSDLoss part: target assignment and the losses of ssd_config.loss."""
  (classification_loss, localization_loss, classification_weight,
   localization_weight, hard_example_miner, random_example_sampler,
   expected_loss_weights_fn) = losses_builder.build(ssd_config.loss)
  params = ssd_loss.SSDLossParams(
      target_assigner=target_assigner,
      classification_loss=classification_loss,
      localization_loss=localization_loss,
      classification_loss_weight=classification_weight,
      localization_loss_weight=localization_weight,
      normalize_loss_by_num_matches=ssd_config.normalize_loss_by_num_matches,
      normalize_loc_loss_by_codesize=ssd_config.normalize_loc_loss_by_codesize,
      encode_background_as_zeros=ssd_config.encode_background_as_zeros,
      hard_example_miner=hard_example_miner,
      random_example_sampler=random_example_sampler,
      expected_loss_weights_fn=expected_loss_weights_fn,
      use_confidences_as_targets=ssd_config.use_confidences_as_targets,
      implicit_example_weight=ssd_config.implicit_example_weight,
      add_summaries=add_summaries)
  return ssd_loss.SSDLoss(params, num_classes, is_training,
                          add_background_class=ssd_config.add_background_class)


def build(ssd_config, is_training, add_summaries):
  """Builds an SSDMetaArch from an ssd_pb2.Ssd config.

  The parts are built in the order their config errors are reported:
  feature extractor, target assigner, box predictor, post-processing,
  losses, anchor generator, image resizer.
  """
  _check_ssd_config(ssd_config)
  feature_extractor = _build_ssd_feature_extractor(
      feature_extractor_config=ssd_config.feature_extractor,
      is_training=is_training,
      freeze_batchnorm=ssd_config.freeze_batchnorm)
  target_assigner = target_assigner_builder.build_from_fields(
      ssd_config, negative_class_weight=ssd_config.negative_class_weight)
  # The original's '*_keras' types are TF2 models; their predictors' variable
  # names differ from the slim ones.
  batch_norm_trains = _batch_norm_trains(
      is_training, ssd_config.feature_extractor.type,
      ssd_config.freeze_batchnorm)
  box_predictor = box_predictor_builder.build(
      lambda config, training, **kwargs: hyperparams_builder.build(
          config, training and batch_norm_trains, **kwargs),
      ssd_config.box_predictor, is_training,
      ssd_config.num_classes, ssd_config.add_background_class,
      keras_layer_names=ssd_config.feature_extractor.type.endswith('_keras'))
  non_max_suppression_fn, score_conversion_fn = post_processing_builder.build(
      ssd_config.post_processing)
  loss = _build_loss(ssd_config, target_assigner, box_predictor.num_classes,
                     is_training, add_summaries)
  head = ssd_meta_arch.HeadParams(
      anchor_generator=anchor_generator_builder.build(
          ssd_config.anchor_generator),
      box_predictor=box_predictor,
      box_coder=target_assigner.box_coder,
      non_max_suppression_fn=non_max_suppression_fn,
      score_conversion_fn=score_conversion_fn)
  model_params = ssd_meta_arch.ModelParams(
      image_resizer_fn=image_resizer_builder.build(ssd_config.image_resizer),
      add_background_class=ssd_config.add_background_class,
      explicit_background_class=ssd_config.explicit_background_class,
      freeze_batchnorm=ssd_config.freeze_batchnorm,
      inplace_batchnorm_update=ssd_config.inplace_batchnorm_update,
      return_raw_detections_during_predict=(
          ssd_config.return_raw_detections_during_predict))
  return ssd_meta_arch.SSDMetaArch(is_training, feature_extractor,
                                   model_params, head, loss)
