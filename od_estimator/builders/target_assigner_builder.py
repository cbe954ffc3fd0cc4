"""Builds TargetAssigners from config: the one place a model's are built.

build() takes a `TargetAssigner` proto (faster_rcnn_model_builder writes the
original's fixed choices for both stages as one); build_from_fields() takes
any config holding the same three fields, similarity_calculator, matcher
and box_coder, as model.ssd does.
"""
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
  return build_from_fields(target_assigner_config, negative_class_weight)


def build_from_fields(config, negative_class_weight=1.0):
  """A TargetAssigner from config's similarity_calculator, matcher, box_coder.

  Args:
    config: a message with those three fields (target_assigner_pb2.
      TargetAssigner, ssd_pb2.Ssd).
    negative_class_weight: classification weight of unmatched anchors.

  Raises:
    ValueError: naming a part that is unset or invalid (its builder's
      error).
  """
  box_coder = box_coder_builder.build(config.box_coder)
  return target_assigner.TargetAssigner(
      region_similarity_calculator_builder.build(
          config.similarity_calculator),
      matcher_builder.build(config.matcher), box_coder,
      negative_class_weight=negative_class_weight)
