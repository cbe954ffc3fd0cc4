"""Builds an anchor generator from an anchor_generator.proto config."""
from od_estimator import errors
from od_estimator.anchor_generators import flexible_grid_anchor_generator
from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.anchor_generators import multiple_grid_anchor_generator
from od_estimator.anchor_generators import multiscale_grid_anchor_generator
from od_estimator.protos import anchor_generator_pb2

# Name of the set `anchor_generator_oneof` field -> function(sub-config).
_BUILDERS = {}


def _register(oneof_field):
  def decorator(fn):
    _BUILDERS[oneof_field] = fn
    return fn
  return decorator


@_register('grid_anchor_generator')
def _build_grid(config):
  return grid_anchor_generator.GridAnchorGenerator(
      scales=[float(scale) for scale in config.scales],
      aspect_ratios=[float(ratio) for ratio in config.aspect_ratios],
      base_anchor_size=[config.height, config.width],
      anchor_stride=[config.height_stride, config.width_stride],
      anchor_offset=[config.height_offset, config.width_offset])


def _pairs(config, y_field, x_field):
  """Zips two repeated fields into (y, x) pairs; None when both are empty."""
  ys = list(getattr(config, y_field))
  xs = list(getattr(config, x_field))
  if len(ys) != len(xs):
    raise errors.UserInputError(
        'SsdAnchorGenerator.%s has %d values but %s has %d; they '
        'must pair up.' % (y_field, len(ys), x_field, len(xs)))
  # An unset height field means "derive from the feature map", as originally.
  return list(zip(ys, xs)) if ys else None


@_register('ssd_anchor_generator')
def _build_ssd(config):
  return multiple_grid_anchor_generator.create_ssd_anchors(
      num_layers=config.num_layers,
      min_scale=config.min_scale,
      max_scale=config.max_scale,
      scales=[float(scale) for scale in config.scales],
      aspect_ratios=[float(ratio) for ratio in config.aspect_ratios],
      interpolated_scale_aspect_ratio=config.interpolated_scale_aspect_ratio,
      base_anchor_size=[config.base_anchor_height, config.base_anchor_width],
      anchor_strides=_pairs(config, 'height_stride', 'width_stride'),
      anchor_offsets=_pairs(config, 'height_offset', 'width_offset'),
      reduce_boxes_in_lowest_layer=config.reduce_boxes_in_lowest_layer)


@_register('multiscale_anchor_generator')
def _build_multiscale(config):
  return multiscale_grid_anchor_generator.MultiscaleGridAnchorGenerator(
      min_level=config.min_level,
      max_level=config.max_level,
      anchor_scale=config.anchor_scale,
      aspect_ratios=[float(ratio) for ratio in config.aspect_ratios],
      scales_per_octave=config.scales_per_octave,
      normalize_coordinates=config.normalize_coordinates)


@_register('flexible_grid_anchor_generator')
def _build_flexible(config):
  base_sizes = []
  aspect_ratios = []
  strides = []
  offsets = []
  for grid in config.anchor_grid:
    base_sizes.append(tuple(grid.base_sizes))
    aspect_ratios.append(tuple(grid.aspect_ratios))
    strides.append((grid.height_stride, grid.width_stride))
    offsets.append((grid.height_offset, grid.width_offset))
  return flexible_grid_anchor_generator.FlexibleGridAnchorGenerator(
      base_sizes, aspect_ratios, strides, offsets,
      normalize_coordinates=config.normalize_coordinates)


def build(anchor_generator_config):
  """Builds the anchor generator an AnchorGenerator proto describes.

  Args:
    anchor_generator_config: anchor_generator_pb2.AnchorGenerator.

  Returns:
    an od_estimator.core.anchor_generator.AnchorGenerator.

  Raises:
    ValueError: if the config has the wrong type or no generator is set.
  """
  if not isinstance(anchor_generator_config,
                    anchor_generator_pb2.AnchorGenerator):
    raise ValueError('anchor_generator_config must be an '
                     'anchor_generator_pb2.AnchorGenerator, got %s.' %
                     type(anchor_generator_config).__name__)
  which = anchor_generator_config.WhichOneof('anchor_generator_oneof')
  if which is None:
    raise errors.UserInputError('Empty anchor generator: AnchorGenerator.'
                                'anchor_generator_oneof is not set.')
  return _BUILDERS[which](getattr(anchor_generator_config, which))
