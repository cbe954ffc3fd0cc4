"""Builds a DetectionModel from a model.proto `DetectionModel` config.

One registry, META_ARCH_BUILDER_MAP, maps the `model` oneof's field to the
builder of that meta-architecture family (one module per family:
ssd_model_builder, ...). A family the registry refuses raises a clear
error naming it.
"""
from od_estimator.builders import faster_rcnn_model_builder
from od_estimator.builders import ssd_model_builder
from od_estimator.errors import UserInputError
from od_estimator.protos import model_pb2


def _unsupported(message):
  """A registry entry that refuses its family with `message`."""
  def build_fn(config, is_training, add_summaries):
    del config, is_training, add_summaries
    raise UserInputError(message)
  build_fn.refusal = message
  return build_fn


# `model` oneof field -> fn(sub-config, is_training, add_summaries).
META_ARCH_BUILDER_MAP = {
    'ssd': ssd_model_builder.build,
    'faster_rcnn': faster_rcnn_model_builder.build,
    'center_net': _unsupported(
        'model.center_net is not supported: od_estimator builds ssd and '
        'faster_rcnn models (CenterNet, a TF2-only family of the original, '
        'is not provided).'),
    'experimental_model': _unsupported(
        'model.experimental_model is not supported: od_estimator builds ssd '
        'and faster_rcnn models.'),
}


def build(model_config, is_training, add_summaries=True):
  """Builds the detection model a DetectionModel proto describes.

  Args:
    model_config: model_pb2.DetectionModel.
    is_training: whether the model is built for training.
    add_summaries: whether the model adds tf summaries.

  Returns:
    A DetectionModel of the configured family.

  Raises:
    ValueError: for a config of another type, no meta-architecture set, or
      a meta-architecture or option that is not supported (naming it).
  """
  if not isinstance(model_config, model_pb2.DetectionModel):
    raise ValueError('model_config must be a model_pb2.DetectionModel, got %s'
                     % type(model_config).__name__)
  meta_architecture = model_config.WhichOneof('model')
  if meta_architecture not in META_ARCH_BUILDER_MAP:
    raise UserInputError('model: no meta-architecture set (expected one of '
                         'model.%s).' % ', model.'.join(
                             supported_meta_architectures()))
  return META_ARCH_BUILDER_MAP[meta_architecture](
      getattr(model_config, meta_architecture), is_training, add_summaries)


def supported_meta_architectures():
  """The `model` oneof fields whose family this version builds."""
  return tuple(name for name, build_fn in META_ARCH_BUILDER_MAP.items()
               if not hasattr(build_fn, 'refusal'))
