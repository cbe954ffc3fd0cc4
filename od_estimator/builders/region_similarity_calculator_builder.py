"""Builds a RegionSimilarityCalculator from its proto config."""
from od_estimator import errors
from od_estimator.core import region_similarity_calculator
from od_estimator.protos import region_similarity_calculator_pb2

# Keyed by the `region_similarity` oneof field name; each takes that field's
# message.
_BUILDERS = {
    'iou_similarity':
        lambda config: region_similarity_calculator.IouSimilarity(),
    'ioa_similarity':
        lambda config: region_similarity_calculator.IoaSimilarity(),
    'neg_sq_dist_similarity':
        lambda config: region_similarity_calculator.NegSqDistSimilarity(),
    'thresholded_iou_similarity':
        lambda config: region_similarity_calculator.ThresholdedIouSimilarity(
            iou_threshold=config.iou_threshold),
}


def build(region_similarity_calculator_config):
  """Builds a region similarity calculator.

  Args:
    region_similarity_calculator_config:
      region_similarity_calculator_pb2.RegionSimilarityCalculator.

  Returns:
    core.region_similarity_calculator.RegionSimilarityCalculator.

  Raises:
    ValueError: if the config has the wrong type or the oneof is unset.
  """
  expected_type = region_similarity_calculator_pb2.RegionSimilarityCalculator
  if not isinstance(region_similarity_calculator_config, expected_type):
    raise ValueError(
        'region_similarity_calculator_config must be a '
        'region_similarity_calculator_pb2.RegionSimilarityCalculator, got %s.'
        % type(region_similarity_calculator_config).__name__)
  which = region_similarity_calculator_config.WhichOneof('region_similarity')
  if which is None:
    raise errors.UserInputError(
        'Empty region similarity calculator: '
        'RegionSimilarityCalculator.region_similarity is not '
        'set.')
  return _BUILDERS[which](getattr(region_similarity_calculator_config, which))
