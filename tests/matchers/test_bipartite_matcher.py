"""matchers.bipartite_matcher: greedy one-to-one matching."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.matchers import bipartite_matcher

SIMILARITY = np.array([[0.50, 0.1, 0.8],
                       [0.15, 0.2, 0.3]], np.float32)


def _run(execute, similarity, valid_rows=None, dynamic=False,
         use_matmul_gather=False):
  matcher = bipartite_matcher.GreedyBipartiteMatcher(use_matmul_gather)
  if valid_rows is None:
    return execute(lambda s: matcher.match(s).match_results, [similarity],
                   dynamic=dynamic)
  return execute(lambda s, v: matcher.match(s, v).match_results,
                 [similarity, valid_rows], dynamic=dynamic)


@pytest.mark.parametrize('dynamic', [False, True])
def test_all_rows_valid(execute, dynamic):
  # Global max 0.8 pairs row 0 with col 2; row 1's best remaining column is
  # col 1 (0.2 > 0.15); col 0 is left over.
  out = _run(execute, SIMILARITY, np.array([True, True]), dynamic=dynamic)
  np.testing.assert_array_equal(out, [-1, 1, 0])
  assert out.dtype == np.int32


def test_valid_rows_default_to_all(execute):
  np.testing.assert_array_equal(_run(execute, SIMILARITY), [-1, 1, 0])


def test_zero_valid_rows(execute):
  out = _run(execute, SIMILARITY, np.array([False, False]))
  np.testing.assert_array_equal(out, [-1, -1, -1])


def test_only_first_row_valid(execute):
  out = _run(execute, SIMILARITY, np.array([True, False]))
  np.testing.assert_array_equal(out, [-1, -1, 0])


def test_only_last_row_valid_reports_its_own_index(execute):
  # Row 1 (the valid one) takes its best column, col 2 (0.8).
  out = _run(execute, SIMILARITY[::-1].copy(), np.array([False, True]))
  np.testing.assert_array_equal(out, [-1, -1, 1])


def test_greedy_not_optimal(execute):
  # Greedy takes 0.9 (row 0, col 0) first, leaving row 1 with col 1 (0.1),
  # although row0-col1 + row1-col0 = 1.5 would beat 0.9 + 0.1 = 1.0.
  out = _run(execute, np.array([[0.9, 0.8], [0.7, 0.1]], np.float32))
  np.testing.assert_array_equal(out, [0, 1])


def test_more_rows_than_columns(execute):
  # 0.95 (row 2, col 1) first; then col 0's best among rows 0, 1 is row 1.
  similarity = np.array([[0.1, 0.9], [0.8, 0.7], [0.6, 0.95]], np.float32)
  np.testing.assert_array_equal(_run(execute, similarity), [1, 2])


def test_ties_prefer_lowest_row_then_column(execute):
  out = _run(execute, np.full([2, 3], 0.5, np.float32))
  # (0, 0) first, then (1, 1); col 2 left over.
  np.testing.assert_array_equal(out, [0, 1, -1])


def test_minus_infinity_similarities_still_match(execute):
  out = _run(execute, np.array([[-np.inf, -np.inf]], np.float32))
  np.testing.assert_array_equal(out, [0, -1])


@pytest.mark.parametrize('dynamic', [False, True])
def test_no_rows(execute, dynamic):
  out = _run(execute, np.zeros([0, 3], np.float32), dynamic=dynamic)
  np.testing.assert_array_equal(out, [-1, -1, -1])


def test_no_columns(execute):
  out = _run(execute, np.zeros([2, 0], np.float32))
  assert out.shape == (0,)


def test_static_shape_and_matmul_gather(execute):
  with tf.Graph().as_default():
    match = bipartite_matcher.GreedyBipartiteMatcher().match(
        tf.constant(SIMILARITY))
    assert match.match_results.shape.as_list() == [3]
  out = execute(
      lambda s: bipartite_matcher.GreedyBipartiteMatcher(
          use_matmul_gather=True).match(s).matched_row_indices(),
      [SIMILARITY])
  # Matched columns 1, 2 belong to rows 1, 0.
  np.testing.assert_array_equal(out, [1, 0])


def test_random_against_numpy_reference(execute):
  rng = np.random.RandomState(0)
  similarity = rng.uniform(size=[6, 9]).astype(np.float32)
  valid_rows = np.array([True, True, False, True, True, False])
  # Reference: sort all valid pairs by similarity, take each pair whose row
  # and column are both still free.
  expected = -np.ones(9, np.int32)
  used_rows = set()
  for flat in np.argsort(-similarity, axis=None, kind='stable'):
    row, col = divmod(int(flat), 9)
    if valid_rows[row] and row not in used_rows and expected[col] == -1:
      expected[col] = row
      used_rows.add(row)
  out = _run(execute, similarity, valid_rows)
  np.testing.assert_array_equal(out, expected)
