"""region_similarity_calculator_builder: from text protos."""
import pytest
from google.protobuf import text_format

from od_estimator.builders import region_similarity_calculator_builder
from od_estimator.core import region_similarity_calculator as rsc
from od_estimator.protos import region_similarity_calculator_pb2


def _build(text):
  return region_similarity_calculator_builder.build(text_format.Parse(
      text, region_similarity_calculator_pb2.RegionSimilarityCalculator()))


@pytest.mark.parametrize('text, cls', [
    ('iou_similarity {\n}', rsc.IouSimilarity),
    ('ioa_similarity {\n}', rsc.IoaSimilarity),
    ('neg_sq_dist_similarity {\n}', rsc.NegSqDistSimilarity),
])
def test_simple_calculators(text, cls):
  assert type(_build(text)) is cls  # pylint: disable=unidiomatic-typecheck


def test_thresholded_iou():
  calculator = _build("""
    thresholded_iou_similarity {
      iou_threshold: 0.3
    }
  """)
  assert isinstance(calculator, rsc.ThresholdedIouSimilarity)
  assert calculator._iou_threshold == pytest.approx(0.3)
  # The proto default (0.5) applies, not the class default (0).
  calculator = _build('thresholded_iou_similarity {}')
  assert calculator._iou_threshold == pytest.approx(0.5)


def test_empty_and_wrong_type():
  with pytest.raises(ValueError, match='region_similarity'):
    region_similarity_calculator_builder.build(
        region_similarity_calculator_pb2.RegionSimilarityCalculator())
  with pytest.raises(ValueError, match='RegionSimilarityCalculator'):
    region_similarity_calculator_builder.build(None)
