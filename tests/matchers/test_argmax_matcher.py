"""matchers.argmax_matcher: thresholds, ignore band, force match, empty gt."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.matchers import argmax_matcher

# Rows are groundtruth, columns anchors. Per column, best value (row):
#   col0: 3 (row 2), col1: 1 (row 0), col2: 2 (row 1), col3: 3 (row 0),
#   col4: 4 (row 1).
SIMILARITY = np.array([[1, 1, 1, 3, 1],
                       [2, -1, 2, 0, 4],
                       [3, 0, -1, 0, 0]], np.float32)

# Row 1 is nowhere the best. Per column best value (row):
#   col0: 3 (row 2), col1: 1 (row 0), col2: 1 (row 0), col3: 3 (row 0),
#   col4: 1 (row 0). Per row best column: row0 -> col3 (3),
#   row1 -> col1 (0), row2 -> col0 (3).
WEAK_ROW_SIMILARITY = np.array([[1, 1, 1, 3, 1],
                                [-1, 0, -2, -2, -1],
                                [3, 0, -1, 2, 0]], np.float32)


def _run(execute, matcher, similarity, valid_rows=None, dynamic=False):
  if valid_rows is None:
    return execute(lambda s: matcher.match(s).match_results, [similarity],
                   dynamic=dynamic)
  return execute(lambda s, v: matcher.match(s, v).match_results,
                 [similarity, valid_rows], dynamic=dynamic)


@pytest.mark.parametrize('dynamic', [False, True])
def test_no_thresholds_gives_argmax(execute, dynamic):
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=None)
  out = _run(execute, matcher, SIMILARITY, dynamic=dynamic)
  np.testing.assert_array_equal(out, [2, 0, 1, 0, 1])
  assert out.dtype == np.int32


def test_matched_threshold_only(execute):
  # Best values 3, 1, 2, 3, 4 against 3: columns 1 and 2 fall below -> -1;
  # 3 >= 3 is a match.
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=3.)
  out = _run(execute, matcher, SIMILARITY)
  np.testing.assert_array_equal(out, [2, -1, -1, 0, 1])


def test_ignore_band(execute):
  # matched 3, unmatched 2: col1 (1 < 2) unmatched; col2 (2 in [2, 3))
  # ignored.
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=3.,
                                         unmatched_threshold=2.)
  out = execute(
      lambda s: _summary(matcher.match(s)), [SIMILARITY])
  np.testing.assert_array_equal(out['results'], [2, -1, -2, 0, 1])
  np.testing.assert_array_equal(out['matched_cols'], [0, 3, 4])
  np.testing.assert_array_equal(out['matched_rows'], [2, 0, 1])
  np.testing.assert_array_equal(out['unmatched_cols'], [1])
  np.testing.assert_array_equal(out['ignored_cols'], [2])


def _summary(match):
  return {'results': match.match_results,
          'matched_cols': match.matched_column_indices(),
          'matched_rows': match.matched_row_indices(),
          'unmatched_cols': match.unmatched_column_indices(),
          'ignored_cols': match.ignored_column_indices()}


def test_negatives_between_thresholds(execute):
  # negatives_lower_than_unmatched=False swaps the two lower bands: col1
  # (1 < 2) is ignored, col2 (2 in [2, 3)) is a negative.
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=3., unmatched_threshold=2.,
      negatives_lower_than_unmatched=False)
  out = _run(execute, matcher, SIMILARITY)
  np.testing.assert_array_equal(out, [2, -2, -1, 0, 1])


def test_weak_row_unmatched_without_force(execute):
  # matched 2, unmatched 1.5: best values 3, 1, 1, 3, 1 -> [2, -1, -1, 0, -1];
  # row 1 matches nothing.
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=2.,
                                         unmatched_threshold=1.5)
  out = _run(execute, matcher, WEAK_ROW_SIMILARITY)
  np.testing.assert_array_equal(out, [2, -1, -1, 0, -1])


@pytest.mark.parametrize('dynamic', [False, True])
def test_force_match_for_each_row(execute, dynamic):
  # Each row's best column is forced: col3 <- row 0, col1 <- row 1,
  # col0 <- row 2, on top of [2, -1, -1, 0, -1].
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=2., unmatched_threshold=1.5,
      force_match_for_each_row=True)
  out = _run(execute, matcher, WEAK_ROW_SIMILARITY, dynamic=dynamic)
  np.testing.assert_array_equal(out, [2, 1, -1, 0, -1])


def test_force_match_skips_invalid_rows(execute):
  # Row 1 is padding: it is not forced onto col1.
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=2., unmatched_threshold=1.5,
      force_match_for_each_row=True)
  out = _run(execute, matcher, WEAK_ROW_SIMILARITY,
             valid_rows=np.array([True, False, True]))
  np.testing.assert_array_equal(out, [2, -1, -1, 0, -1])


def test_force_match_padded_groundtruth_rows_at_end(execute):
  # Five rows, rows 2 and 4 padding. Valid rows' best columns:
  # row0 -> col3, row1 -> col1 (0 is its max, first at col1), row3 -> col0.
  similarity = np.array([[1, 1, 1, 3, 1],
                         [-1, 0, -2, -2, -1],
                         [0, 0, 0, 0, 0],
                         [3, 0, -1, 2, 0],
                         [0, 0, 0, 0, 0]], np.float32)
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=2., unmatched_threshold=1.5,
      force_match_for_each_row=True)
  out = _run(execute, matcher, similarity,
             valid_rows=np.array([True, True, False, True, False]))
  np.testing.assert_array_equal(out, [3, 1, -1, 0, -1])


def test_force_match_conflict_keeps_lowest_row(execute):
  # Both rows' best column is col0; the lower row wins it, row 1 stays
  # unmatched. col1's best (0.2) is below 0.95 -> -1.
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=0.95,
                                         force_match_for_each_row=True)
  out = _run(execute, matcher, np.array([[0.9, 0.1], [0.8, 0.2]], np.float32))
  np.testing.assert_array_equal(out, [0, -1])


def test_ties_go_to_lowest_row(execute):
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=0.5)
  out = _run(execute, matcher, np.array([[0.7, 0.1], [0.7, 0.1]], np.float32))
  np.testing.assert_array_equal(out, [0, -1])


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('force', [False, True])
def test_empty_groundtruth_all_unmatched(execute, dynamic, force):
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=0.5, unmatched_threshold=0.4,
      force_match_for_each_row=force)
  out = _run(execute, matcher, np.zeros([0, 5], np.float32), dynamic=dynamic)
  np.testing.assert_array_equal(out, [-1] * 5)


def test_no_columns(execute):
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=0.5,
                                         force_match_for_each_row=True)
  out = _run(execute, matcher, np.zeros([3, 0], np.float32))
  assert out.shape == (0,)


@pytest.mark.parametrize('num_rows', [0, 3])
def test_static_shape_kept(num_rows):
  with tf.Graph().as_default():
    matcher = argmax_matcher.ArgMaxMatcher(
        matched_threshold=0.5, unmatched_threshold=0.3,
        force_match_for_each_row=True)
    match = matcher.match(tf.zeros([num_rows, 7]))
    assert match.match_results.shape.as_list() == [7]


def test_matmul_gather(execute):
  matcher = argmax_matcher.ArgMaxMatcher(
      matched_threshold=3., unmatched_threshold=2., use_matmul_gather=True)
  out = execute(lambda s: _summary(matcher.match(s)), [SIMILARITY])
  np.testing.assert_array_equal(out['matched_rows'], [2, 0, 1])


def test_equal_thresholds_leave_no_column_ignored(execute):
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=1.,
                                         unmatched_threshold=1.)
  # Column maxima 2, .5, 1 and 3: at or above 1 matches, below is unmatched.
  similarity = np.array([[2., .5, 0., 3.], [1., .2, 1., 0.]], np.float32)
  np.testing.assert_array_equal(_run(execute, matcher, similarity),
                                [0, -1, 1, 0])


def test_no_matched_threshold_matches_every_column(execute):
  matcher = argmax_matcher.ArgMaxMatcher(matched_threshold=None)
  similarity = np.array([[.1, -5., .3], [.2, -6., .1]], np.float32)
  np.testing.assert_array_equal(_run(execute, matcher, similarity), [1, 0, 0])


@pytest.mark.parametrize('kwargs, message', [
    (dict(matched_threshold=None, unmatched_threshold=0.4),
     'needs matched_threshold'),
    (dict(matched_threshold=0.4, unmatched_threshold=0.5), 'must be <='),
    (dict(matched_threshold=0.5, unmatched_threshold=0.5,
          negatives_lower_than_unmatched=False), 'cannot be equal'),
    (dict(matched_threshold=0.5, negatives_lower_than_unmatched=False),
     'cannot be equal'),
])
def test_invalid_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    argmax_matcher.ArgMaxMatcher(**kwargs)
