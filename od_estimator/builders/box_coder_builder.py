"""Builds a BoxCoder from a box_coder_pb2.BoxCoder config."""
from od_estimator import errors
from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.box_coders import keypoint_box_coder
from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.box_coders import square_box_coder
from od_estimator.protos import box_coder_pb2


def _scale_factors(config, field_names):
  """Returns the named scale fields as a list, each checked to be > 0."""
  factors = []
  for name in field_names:
    value = getattr(config, name)
    if value <= 0:
      raise errors.UserInputError('%s.%s must be > 0, got %s' %
                                  (config.DESCRIPTOR.name, name, value))
    factors.append(value)
  return factors


_BOX_SCALES = ('y_scale', 'x_scale', 'height_scale', 'width_scale')


def _build_mean_stddev(config):
  if config.stddev <= 0:
    raise errors.UserInputError(
        'MeanStddevBoxCoder.stddev must be > 0, got %s' %
        config.stddev)
  return mean_stddev_box_coder.MeanStddevBoxCoder(stddev=config.stddev)


# Keyed by the `box_coder_oneof` field name; each takes that field's message.
_BUILDERS = {
    'faster_rcnn_box_coder':
        lambda config: faster_rcnn_box_coder.FasterRcnnBoxCoder(
            scale_factors=_scale_factors(config, _BOX_SCALES)),
    'keypoint_box_coder':
        lambda config: keypoint_box_coder.KeypointBoxCoder(
            config.num_keypoints,
            scale_factors=_scale_factors(config, _BOX_SCALES)),
    'mean_stddev_box_coder': _build_mean_stddev,
    'square_box_coder':
        lambda config: square_box_coder.SquareBoxCoder(
            scale_factors=_scale_factors(
                config, ('y_scale', 'x_scale', 'length_scale'))),
}


def build(box_coder_config):
  """Builds a box coder.

  Args:
    box_coder_config: box_coder_pb2.BoxCoder.

  Returns:
    core.box_coder.BoxCoder.

  Raises:
    ValueError: if the config is not a BoxCoder proto, the oneof is unset, or
      a scale (or stddev) is not positive.
  """
  if not isinstance(box_coder_config, box_coder_pb2.BoxCoder):
    raise ValueError('box_coder_config must be a box_coder_pb2.BoxCoder, '
                     'got %s.' % type(box_coder_config).__name__)
  which = box_coder_config.WhichOneof('box_coder_oneof')
  if which is None:
    raise errors.UserInputError(
        'Empty box coder: BoxCoder.box_coder_oneof is not set.')
  return _BUILDERS[which](getattr(box_coder_config, which))
