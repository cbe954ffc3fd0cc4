"""Builds the image resizing function from an image_resizer.proto config.

The returned callable is `fn(image, masks=None)` with image [H, W, C]; it
returns `[resized_image, true_image_shape]`, or `[resized_image,
resized_masks, true_image_shape]` when masks are given (see
od_estimator.core.image_resizing).
"""
import functools

import tensorflow as tf

from od_estimator import errors
from od_estimator.core import image_resizing
from od_estimator.protos import image_resizer_pb2

_RESIZE_METHODS = {
    image_resizer_pb2.BILINEAR: image_resizing.ResizeMethod.BILINEAR,
    image_resizer_pb2.NEAREST_NEIGHBOR:
        image_resizing.ResizeMethod.NEAREST_NEIGHBOR,
    image_resizer_pb2.BICUBIC: image_resizing.ResizeMethod.BICUBIC,
    image_resizer_pb2.AREA: image_resizing.ResizeMethod.AREA,
}

# Name of the set `image_resizer_oneof` field -> function(sub-config)
# returning (resizer_fn, convert_to_grayscale).
_BUILDERS = {}


def _register(oneof_field):
  def decorator(fn):
    _BUILDERS[oneof_field] = fn
    return fn
  return decorator


def _resize_method(config, oneof_field):
  if config.resize_method not in _RESIZE_METHODS:
    raise errors.UserInputError('Unknown %s.resize_method: %d' %
                                (oneof_field, config.resize_method))
  return _RESIZE_METHODS[config.resize_method]


@_register('keep_aspect_ratio_resizer')
def _build_keep_aspect_ratio(config):
  if config.min_dimension > config.max_dimension:
    raise errors.UserInputError(
        'keep_aspect_ratio_resizer.min_dimension (%d) must not '
        'exceed max_dimension (%d).' %
        (config.min_dimension, config.max_dimension))
  pad_value = tuple(config.per_channel_pad_value) or (0, 0, 0)
  return functools.partial(
      image_resizing.resize_to_range,
      min_dimension=config.min_dimension,
      max_dimension=config.max_dimension,
      method=_resize_method(config, 'keep_aspect_ratio_resizer'),
      pad_to_max_dimension=config.pad_to_max_dimension,
      per_channel_pad_value=pad_value)


@_register('fixed_shape_resizer')
def _build_fixed_shape(config):
  return functools.partial(
      image_resizing.resize_image,
      new_height=config.height,
      new_width=config.width,
      method=_resize_method(config, 'fixed_shape_resizer'))


@_register('identity_resizer')
def _build_identity(config):
  del config

  def identity_resizer(image, masks=None, **kwargs):
    del kwargs
    if masks is None:
      return [image, tf.shape(image)]
    return [image, masks, tf.shape(image)]

  return identity_resizer


@_register('conditional_shape_resizer')
def _build_conditional_shape(config):
  conditions = image_resizer_pb2.ConditionalShapeResizer
  method = _resize_method(config, 'conditional_shape_resizer')
  if config.condition == conditions.GREATER:
    return functools.partial(image_resizing.resize_to_max_dimension,
                             max_dimension=config.size_threshold,
                             method=method)
  if config.condition == conditions.SMALLER:
    return functools.partial(image_resizing.resize_to_min_dimension,
                             min_dimension=config.size_threshold,
                             method=method)
  raise errors.UserInputError(
      'conditional_shape_resizer.condition must be GREATER or '
      'SMALLER, got %s.' %
      conditions.ResizeCondition.Name(config.condition))


@_register('pad_to_multiple_resizer')
def _build_pad_to_multiple(config):
  if config.multiple < 1:
    raise errors.UserInputError(
        'pad_to_multiple_resizer.multiple must be >= 1, got %d.'
        % config.multiple)
  return functools.partial(image_resizing.resize_pad_to_multiple,
                           multiple=config.multiple)


def _with_grayscale(resizer_fn):
  """Wraps resizer_fn to convert its RGB output to one gray channel."""

  def grayscale_resizer(image, masks=None):
    outputs = list(resizer_fn(image, masks))
    outputs[0] = image_resizing.rgb_to_gray(outputs[0])
    outputs[-1] = tf.concat([outputs[-1][:-1], [1]], axis=0)
    return outputs

  return grayscale_resizer


def build(image_resizer_config):
  """Builds the resize callable.

  Args:
    image_resizer_config: image_resizer_pb2.ImageResizer.

  Returns:
    fn(image, masks=None) -> [resized_image, (resized_masks,)
    true_image_shape]. With convert_to_grayscale the image is resized first
    and then converted, so resized_image has 1 channel and true_image_shape
    ends in 1.

  Raises:
    ValueError: for a config of the wrong type, no resizer set, or an
      invalid option (naming the field).
  """
  if not isinstance(image_resizer_config, image_resizer_pb2.ImageResizer):
    raise ValueError('image_resizer_config must be an '
                     'image_resizer_pb2.ImageResizer, got %s' %
                     type(image_resizer_config).__name__)
  oneof = image_resizer_config.WhichOneof('image_resizer_oneof')
  if oneof not in _BUILDERS:
    raise errors.UserInputError(
        'ImageResizer.image_resizer_oneof is not set; choose '
        'one of %s.' % ', '.join(sorted(_BUILDERS)))
  config = getattr(image_resizer_config, oneof)
  resizer_fn = _BUILDERS[oneof](config)
  if getattr(config, 'convert_to_grayscale', False):
    return _with_grayscale(resizer_fn)
  return resizer_fn
