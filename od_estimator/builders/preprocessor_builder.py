"""Builds (function, kwargs) preprocessing steps from PreprocessingStep protos.

The returned pair plugs into `preprocessor.preprocess` as one option. The
kwargs carry the same values as the original Object Detection API builder's
for the same proto: steps whose fields map 1:1 onto arguments pass every
field, unset ones with the proto's default (the original passed only the
set fields and relied on the ops' defaults, which match the proto's except
normalize_image's target range, which had none), the others convert fields
(min/max pairs to ranges, repeated SSD operations to per-case lists, ...).
"""
import numpy as np
import tensorflow as tf
from google.protobuf import descriptor

from od_estimator import errors
from od_estimator.core import augment_autoaugment
from od_estimator.core import preprocessor
from od_estimator.protos import preprocessor_pb2

_FLOAT_TYPES = (descriptor.FieldDescriptor.TYPE_FLOAT,)

# Steps of the schema that this package does not implement, with the reason.
_UNSUPPORTED_STEPS = {}

_RESIZE_METHODS = {
    preprocessor_pb2.ResizeImage.AREA: tf.compat.v1.image.ResizeMethod.AREA,
    preprocessor_pb2.ResizeImage.BICUBIC:
        tf.compat.v1.image.ResizeMethod.BICUBIC,
    preprocessor_pb2.ResizeImage.BILINEAR:
        tf.compat.v1.image.ResizeMethod.BILINEAR,
    preprocessor_pb2.ResizeImage.NEAREST_NEIGHBOR:
        tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
}


def _float(value):
  """Proto floats are float32; give back the decimal the config spelled.

  e.g. 0.8 is stored as 0.800000011920929, str(np.float32) restores 0.8.
  """
  return float(str(np.float32(value)))


def _all_fields(config):
  """{field name: value, or its proto default} of a flat step message."""
  kwargs = {}
  for field in config.DESCRIPTOR.fields:
    value = getattr(config, field.name)
    if field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
      value = [_float(v) if field.type in _FLOAT_TYPES else v for v in value]
    elif field.type in _FLOAT_TYPES:
      value = _float(value)
    kwargs[field.name] = value
  return kwargs


def _floats(values):
  return tuple(_float(v) for v in values)


def _pad_color(config, step):
  """pad_color as a float tuple, or None (the op then uses the mean)."""
  if not config.pad_color:
    return None
  if len(config.pad_color) != 3:
    tf.compat.v1.logging.warning('%s.pad_color should have 3 (RGB) values, '
                                 'got %d', step, len(config.pad_color))
  return _floats(config.pad_color)


def _padded_size_ratio(config, step, name):
  values = getattr(config, name)
  if values and len(values) != 2:
    raise errors.UserInputError('%s.%s should have 2 elements if set, got %d' %
                                (step, name, len(values)))
  return _floats(values)


def _normalize_image_args(config):
  for name in ('original_minval', 'original_maxval'):
    if not config.HasField(name):
      raise errors.UserInputError('normalize_image.%s must be set' % name)
  if config.original_minval == config.original_maxval:
    raise errors.UserInputError(
        'normalize_image.original_maxval must differ from '
        'original_minval')
  return _all_fields(config)


def _subtract_channel_mean_args(config):
  if not config.means:
    raise errors.UserInputError('subtract_channel_mean.means must be set')
  return _all_fields(config)


def _flip_args(permutation_name):
  def args(config):
    return {
        permutation_name: tuple(getattr(config, permutation_name)) or None,
        'probability': _float(config.probability),
    }
  return args


def _random_crop_image_args(config):
  return {
      'min_object_covered': _float(config.min_object_covered),
      'aspect_ratio_range': _floats([config.min_aspect_ratio,
                                     config.max_aspect_ratio]),
      'area_range': _floats([config.min_area, config.max_area]),
      'overlap_thresh': _float(config.overlap_thresh),
      'clip_boxes': config.clip_boxes,
      'random_coef': _float(config.random_coef),
  }


def _size_pair(config, prefix):
  """(height, width) from <prefix>_height / _width; both or neither set."""
  height, width = prefix + '_height', prefix + '_width'
  if config.HasField(height) != config.HasField(width):
    raise errors.UserInputError(
        'random_pad_image.%s and %s should be either both set '
        'or both unset' % (height, width))
  if not config.HasField(height):
    return None
  return (getattr(config, height), getattr(config, width))


def _random_pad_image_args(config):
  return {
      'min_image_size': _size_pair(config, 'min_image'),
      'max_image_size': _size_pair(config, 'max_image'),
      'pad_color': _pad_color(config, 'random_pad_image'),
  }


def _random_absolute_pad_image_args(config):
  # Zero padding range would make the random draw empty; 1 means none.
  return {
      'max_height_padding': config.max_height_padding or 1,
      'max_width_padding': config.max_width_padding or 1,
      'pad_color': _pad_color(config, 'random_absolute_pad_image'),
  }


def _random_crop_pad_image_args(config):
  step = 'random_crop_pad_image'
  kwargs = _random_crop_image_args(config)
  kwargs['pad_color'] = _pad_color(config, step)
  for name in ('min_padded_size_ratio', 'max_padded_size_ratio'):
    ratio = _padded_size_ratio(config, step, name)
    if ratio:
      kwargs[name] = ratio
  return kwargs


def _random_resize_method_args(config):
  for name in ('target_height', 'target_width'):
    if getattr(config, name) <= 0:
      raise errors.UserInputError(
          'random_resize_method.%s must be > 0, got %d' %
          (name, getattr(config, name)))
  return {'target_size': [config.target_height, config.target_width]}


def _resize_image_args(config):
  for name in ('new_height', 'new_width'):
    if getattr(config, name) <= 0:
      raise errors.UserInputError('resize_image.%s must be > 0, got %d' %
                                  (name, getattr(config, name)))
  return {
      'new_height': config.new_height,
      'new_width': config.new_width,
      'method': _RESIZE_METHODS[config.method],
  }


def _ssd_operation_lists(operations, with_aspect_ratio=True):
  """Per-case argument lists from repeated SSD*Operation messages."""
  kwargs = {
      'min_object_covered': [_float(op.min_object_covered)
                             for op in operations],
      'area_range': [_floats([op.min_area, op.max_area]) for op in operations],
      'overlap_thresh': [_float(op.overlap_thresh) for op in operations],
      'clip_boxes': [op.clip_boxes for op in operations],
      'random_coef': [_float(op.random_coef) for op in operations],
  }
  if with_aspect_ratio:
    kwargs['aspect_ratio_range'] = [
        _floats([op.min_aspect_ratio, op.max_aspect_ratio])
        for op in operations]
  return kwargs


def _ssd_random_crop_args(config):
  # No operations: the op's built-in 7 SSD cases.
  return _ssd_operation_lists(config.operations) if config.operations else {}


def _ssd_random_crop_pad_args(config):
  if not config.operations:
    return {}
  step = 'ssd_random_crop_pad'
  kwargs = _ssd_operation_lists(config.operations)
  # An operation without ratios gets random_crop_pad_image's defaults (the
  # original passed an empty tuple, which the op cannot use).
  for name, default in (('min_padded_size_ratio', (1.0, 1.0)),
                        ('max_padded_size_ratio', (2.0, 2.0))):
    kwargs[name] = [_padded_size_ratio(op, step, name) or default
                    for op in config.operations]
  kwargs['pad_color'] = [_floats([op.pad_color_r, op.pad_color_g,
                                  op.pad_color_b])
                         for op in config.operations]
  return kwargs


def _ssd_random_crop_fixed_aspect_ratio_args(config):
  if not config.operations:
    # The original dropped an explicit aspect_ratio here; keep it.
    if config.HasField('aspect_ratio'):
      return {'aspect_ratio': _float(config.aspect_ratio)}
    return {}
  kwargs = _ssd_operation_lists(config.operations, with_aspect_ratio=False)
  kwargs['aspect_ratio'] = _float(config.aspect_ratio)
  return kwargs


def _ssd_random_crop_pad_fixed_aspect_ratio_args(config):
  step = 'ssd_random_crop_pad_fixed_aspect_ratio'
  kwargs = {}
  if config.aspect_ratio:
    kwargs['aspect_ratio'] = _float(config.aspect_ratio)
  for name in ('min_padded_size_ratio', 'max_padded_size_ratio'):
    ratio = _padded_size_ratio(config, step, name)
    if ratio:
      kwargs[name] = ratio
  if config.operations:
    kwargs.update(_ssd_operation_lists(config.operations))
  return kwargs


def _random_jitter_boxes_args(config):
  mode = preprocessor_pb2.RandomJitterBoxes.JitterMode.Name(config.jitter_mode)
  return {'ratio': _float(config.ratio), 'jitter_mode': mode.lower()}


def _random_square_crop_by_scale_args(config):
  return {
      'scale_min': _float(config.scale_min),
      'scale_max': _float(config.scale_max),
      'max_border': config.max_border,
      'num_scales': config.num_scales,
  }


def _random_scale_crop_and_pad_to_square_args(config):
  return {
      'scale_min': _float(config.scale_min),
      'scale_max': _float(config.scale_max),
      'output_size': config.output_size,
  }


def _autoaugment_image_args(config):
  supported = sorted(augment_autoaugment.POLICIES)
  if config.policy_name not in supported:
    raise errors.UserInputError(
        'autoaugment_image.policy_name "%s" is not supported; supported: %s'
        % (config.policy_name, ', '.join(supported)))
  return {'policy_name': config.policy_name}


def _drop_label_probabilistically_args(config):
  return {
      'dropped_label': config.label,
      'drop_probability': _float(config.drop_probability),
  }


def _remap_labels_args(config):
  return {
      'original_labels': list(config.original_labels),
      'new_label': config.new_label,
  }


# PreprocessingStep oneof field -> (op, function of the step message that
# returns the op's kwargs).
_STEPS = {
    'normalize_image': (preprocessor.normalize_image, _normalize_image_args),
    'random_pixel_value_scale': (preprocessor.random_pixel_value_scale,
                                 _all_fields),
    'random_image_scale': (preprocessor.random_image_scale, _all_fields),
    'random_rgb_to_gray': (preprocessor.random_rgb_to_gray, _all_fields),
    'random_adjust_brightness': (preprocessor.random_adjust_brightness,
                                 _all_fields),
    'random_adjust_contrast': (preprocessor.random_adjust_contrast,
                               _all_fields),
    'random_adjust_hue': (preprocessor.random_adjust_hue, _all_fields),
    'random_adjust_saturation': (preprocessor.random_adjust_saturation,
                                 _all_fields),
    'random_distort_color': (preprocessor.random_distort_color, _all_fields),
    'random_crop_to_aspect_ratio': (preprocessor.random_crop_to_aspect_ratio,
                                    _all_fields),
    'random_black_patches': (preprocessor.random_black_patches, _all_fields),
    'random_jpeg_quality': (preprocessor.random_jpeg_quality, _all_fields),
    'random_patch_gaussian': (preprocessor.random_patch_gaussian,
                              _all_fields),
    'rgb_to_gray': (preprocessor.rgb_to_gray, _all_fields),
    'scale_boxes_to_pixel_coordinates': (
        preprocessor.scale_boxes_to_pixel_coordinates, _all_fields),
    'subtract_channel_mean': (preprocessor.subtract_channel_mean,
                              _subtract_channel_mean_args),
    'convert_class_logits_to_softmax': (
        preprocessor.convert_class_logits_to_softmax, _all_fields),
    'adjust_gamma': (preprocessor.adjust_gamma, _all_fields),
    'random_horizontal_flip': (preprocessor.random_horizontal_flip,
                               _flip_args('keypoint_flip_permutation')),
    'random_vertical_flip': (preprocessor.random_vertical_flip,
                             _flip_args('keypoint_flip_permutation')),
    'random_rotation90': (preprocessor.random_rotation90,
                          _flip_args('keypoint_rot_permutation')),
    'random_jitter_boxes': (preprocessor.random_jitter_boxes,
                            _random_jitter_boxes_args),
    'random_crop_image': (preprocessor.random_crop_image,
                          _random_crop_image_args),
    'random_pad_image': (preprocessor.random_pad_image,
                         _random_pad_image_args),
    'random_absolute_pad_image': (preprocessor.random_absolute_pad_image,
                                  _random_absolute_pad_image_args),
    'random_crop_pad_image': (preprocessor.random_crop_pad_image,
                              _random_crop_pad_image_args),
    'random_resize_method': (preprocessor.random_resize_method,
                             _random_resize_method_args),
    'resize_image': (preprocessor.resize_image, _resize_image_args),
    'ssd_random_crop': (preprocessor.ssd_random_crop, _ssd_random_crop_args),
    'ssd_random_crop_pad': (preprocessor.ssd_random_crop_pad,
                            _ssd_random_crop_pad_args),
    'ssd_random_crop_fixed_aspect_ratio': (
        preprocessor.ssd_random_crop_fixed_aspect_ratio,
        _ssd_random_crop_fixed_aspect_ratio_args),
    'ssd_random_crop_pad_fixed_aspect_ratio': (
        preprocessor.ssd_random_crop_pad_fixed_aspect_ratio,
        _ssd_random_crop_pad_fixed_aspect_ratio_args),
    'random_square_crop_by_scale': (preprocessor.random_square_crop_by_scale,
                                    _random_square_crop_by_scale_args),
    'random_scale_crop_and_pad_to_square': (
        preprocessor.random_scale_crop_and_pad_to_square,
        _random_scale_crop_and_pad_to_square_args),
    'random_self_concat_image': (preprocessor.random_self_concat_image,
                                 _all_fields),
    'random_downscale_to_target_pixels': (
        preprocessor.random_downscale_to_target_pixels, _all_fields),
    'autoaugment_image': (preprocessor.autoaugment_image,
                          _autoaugment_image_args),
    'drop_label_probabilistically': (preprocessor.drop_label_probabilistically,
                                     _drop_label_probabilistically_args),
    'remap_labels': (preprocessor.remap_labels, _remap_labels_args),
}


def build(preprocessor_step_config):
  """Builds one preprocessing step.

  Args:
    preprocessor_step_config: preprocessor_pb2.PreprocessingStep.

  Returns:
    (function, kwargs): the op from core.preprocessor and the keyword
    arguments to call it with (see preprocessor.preprocess).

  Raises:
    ValueError: if the config is not a PreprocessingStep, no step is set,
      the step is not implemented here, or its fields are invalid.
  """
  if not isinstance(preprocessor_step_config,
                    preprocessor_pb2.PreprocessingStep):
    raise ValueError('preprocessor_step_config must be a '
                     'preprocessor_pb2.PreprocessingStep, got %s.' %
                     type(preprocessor_step_config).__name__)
  step = preprocessor_step_config.WhichOneof('preprocessing_step')
  if step is None:
    raise errors.UserInputError(
        'Empty PreprocessingStep: preprocessing_step is not set.')
  if step not in _STEPS:
    reason = _UNSUPPORTED_STEPS.get(step, 'unknown step')
    raise errors.UserInputError('Preprocessing step %s is not supported (%s).' %
                                (step, reason))
  function, args_fn = _STEPS[step]
  return function, args_fn(getattr(preprocessor_step_config, step))
