"""Builds a TargetAssigner from a `TargetAssigner` proto."""
from od_estimator import errors
from od_estimator.builders import box_coder_builder
from od_estimator.builders import matcher_builder
from od_estimator.builders import region_similarity_calculator_builder
from od_estimator.core import target_assigner
from od_estimator.protos import target_assigner_pb2


def build(target_assigner_config, negative_class_weight=1.0):
  """Returns a TargetAssigner for the proto's matcher, similarity and coder.

  Raises:
    ValueError: for a config of another type or a missing part, naming it.
  """
  if not isinstance(target_assigner_config,
                    target_assigner_pb2.TargetAssigner):
    raise ValueError('target_assigner_config must be a TargetAssigner proto, '
                     'got %s' % type(target_assigner_config).__name__)
  for field in ('matcher', 'similarity_calculator', 'box_coder'):
    if not target_assigner_config.HasField(field):
      raise errors.UserInputError('TargetAssigner.%s is not set' % field)
  return target_assigner.TargetAssigner(
      region_similarity_calculator_builder.build(
          target_assigner_config.similarity_calculator),
      matcher_builder.build(target_assigner_config.matcher),
      box_coder_builder.build(target_assigner_config.box_coder),
      negative_class_weight=negative_class_weight)
