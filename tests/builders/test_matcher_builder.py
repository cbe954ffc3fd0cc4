"""matcher_builder: matchers built from text protos like the sample configs."""
import numpy as np
import pytest
from google.protobuf import text_format

from od_estimator.builders import matcher_builder
from od_estimator.matchers import argmax_matcher
from od_estimator.matchers import bipartite_matcher
from od_estimator.protos import matcher_pb2


def _build(text):
  return matcher_builder.build(text_format.Parse(text, matcher_pb2.Matcher()))


def test_argmax_ssd_sample():
  matcher = _build("""
    argmax_matcher {
      matched_threshold: 0.5
      unmatched_threshold: 0.5
      ignore_thresholds: false
      negatives_lower_than_unmatched: true
      force_match_for_each_row: true
      use_matmul_gather: true
    }
  """)
  assert isinstance(matcher, argmax_matcher.ArgMaxMatcher)
  assert matcher._matched_threshold == pytest.approx(0.5)
  assert matcher._unmatched_threshold == pytest.approx(0.5)
  assert matcher._negatives_lower_than_unmatched
  assert matcher._force_match_for_each_row
  assert matcher._use_matmul_gather


def test_argmax_defaults():
  matcher = _build('argmax_matcher {}')
  assert matcher._matched_threshold == pytest.approx(0.5)
  assert matcher._unmatched_threshold == pytest.approx(0.5)
  assert matcher._negatives_lower_than_unmatched
  assert not matcher._force_match_for_each_row
  assert not matcher._use_matmul_gather


def test_argmax_custom_fields(execute):
  matcher = _build("""
    argmax_matcher {
      matched_threshold: 0.7
      unmatched_threshold: 0.3
      negatives_lower_than_unmatched: false
      force_match_for_each_row: true
    }
  """)
  assert matcher._matched_threshold == pytest.approx(0.7)
  assert matcher._unmatched_threshold == pytest.approx(0.3)
  assert not matcher._negatives_lower_than_unmatched
  # Column bests 0.8 (row 0), 0.5 (row 0), 0.2 (row 1): matched, then the
  # middle band is a negative (-1), below 0.3 ignored (-2). Row 1's best
  # column is col 2 (0.2), forced to match.
  similarity = np.array([[0.8, 0.5, 0.1], [0.1, 0.1, 0.2]], np.float32)
  out = execute(lambda s: matcher.match(s).match_results, [similarity])
  np.testing.assert_array_equal(out, [0, -1, 1])


def test_argmax_ignore_thresholds(execute):
  matcher = _build("""
    argmax_matcher {
      matched_threshold: 0.9
      unmatched_threshold: 0.8
      ignore_thresholds: true
    }
  """)
  assert matcher._matched_threshold is None
  assert matcher._unmatched_threshold is None
  # Every column goes to its argmax row however weak.
  out = execute(lambda s: matcher.match(s).match_results,
                [np.array([[0.1, 0.0], [0.0, 0.2]], np.float32)])
  np.testing.assert_array_equal(out, [0, 1])


@pytest.mark.parametrize('text', [
    'argmax_matcher { matched_threshold: 0.4 unmatched_threshold: 0.6 }',
    'argmax_matcher { negatives_lower_than_unmatched: false }',
])
def test_argmax_inconsistent_thresholds(text):
  with pytest.raises(ValueError, match='ArgMaxMatcher.matched_threshold'):
    _build(text)


def test_bipartite():
  matcher = _build('bipartite_matcher {\n}')
  assert isinstance(matcher, bipartite_matcher.GreedyBipartiteMatcher)
  assert not matcher._use_matmul_gather
  matcher = _build('bipartite_matcher { use_matmul_gather: true }')
  assert matcher._use_matmul_gather


def test_empty_and_wrong_type():
  with pytest.raises(ValueError, match='matcher_oneof'):
    matcher_builder.build(matcher_pb2.Matcher())
  with pytest.raises(ValueError, match='Matcher'):
    matcher_builder.build('argmax_matcher {}')
