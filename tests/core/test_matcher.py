"""core.matcher: Match queries and the Matcher.match wrapper."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import matcher

# Column:        0   1  2   3  4   5  6
MATCH_RESULTS = [3, -1, 0, -2, 1, -1, 3]


def _queries(match):
  return {
      'matched_cols': match.matched_column_indices(),
      'matched_ind': match.matched_column_indicator(),
      'num_matched_cols': match.num_matched_columns(),
      'unmatched_cols': match.unmatched_column_indices(),
      'unmatched_ind': match.unmatched_column_indicator(),
      'num_unmatched_cols': match.num_unmatched_columns(),
      'ignored_cols': match.ignored_column_indices(),
      'ignored_ind': match.ignored_column_indicator(),
      'num_ignored_cols': match.num_ignored_columns(),
      'unmatched_or_ignored': match.unmatched_or_ignored_column_indices(),
      'matched_rows': match.matched_row_indices(),
      'num_matched_rows': match.num_matched_rows(),
  }


@pytest.mark.parametrize('use_matmul_gather', [False, True])
@pytest.mark.parametrize('dynamic', [False, True])
def test_queries(execute, use_matmul_gather, dynamic):
  out = execute(
      lambda r: _queries(matcher.Match(r, use_matmul_gather)),
      [np.array(MATCH_RESULTS, np.int32)], dynamic=dynamic)
  np.testing.assert_array_equal(out['matched_cols'], [0, 2, 4, 6])
  np.testing.assert_array_equal(
      out['matched_ind'], [True, False, True, False, True, False, True])
  assert out['num_matched_cols'] == 4
  np.testing.assert_array_equal(out['unmatched_cols'], [1, 5])
  np.testing.assert_array_equal(
      out['unmatched_ind'], [False, True, False, False, False, True, False])
  assert out['num_unmatched_cols'] == 2
  np.testing.assert_array_equal(out['ignored_cols'], [3])
  np.testing.assert_array_equal(
      out['ignored_ind'], [False, False, False, True, False, False, False])
  assert out['num_ignored_cols'] == 1
  np.testing.assert_array_equal(out['unmatched_or_ignored'], [1, 3, 5])
  # Rows of columns 0, 2, 4, 6 in that order.
  np.testing.assert_array_equal(out['matched_rows'], [3, 0, 1, 3])
  # Distinct rows {3, 0, 1}.
  assert out['num_matched_rows'] == 3
  for key in ('matched_cols', 'unmatched_cols', 'ignored_cols',
              'unmatched_or_ignored', 'matched_rows'):
    assert out[key].dtype == np.int32


def test_queries_all_unmatched_and_empty(execute):
  out = execute(lambda r: _queries(matcher.Match(r)),
                [np.array([-1, -1], np.int32)])
  assert out['matched_cols'].shape == (0,)
  assert out['matched_rows'].shape == (0,)
  assert out['num_matched_rows'] == 0
  np.testing.assert_array_equal(out['unmatched_cols'], [0, 1])
  out = execute(lambda r: _queries(matcher.Match(r)),
                [np.zeros([0], np.int32)])
  assert out['num_matched_cols'] == 0
  assert out['num_unmatched_cols'] == 0
  assert out['unmatched_or_ignored'].shape == (0,)


@pytest.mark.parametrize('use_matmul_gather', [False, True])
def test_gather_based_on_match(execute, use_matmul_gather):
  def graph_fn(results, values):
    match = matcher.Match(results, use_matmul_gather)
    return match.gather_based_on_match(
        values, unmatched_value=tf.constant([0., 0.]),
        ignored_value=tf.constant([-5., -5.]))
  values = np.array([[1., 2.], [3., 4.], [5., 6.], [7., 8.]], np.float32)
  out = execute(graph_fn, [np.array(MATCH_RESULTS, np.int32), values])
  # Row r of `values` for matched columns, the fill values otherwise.
  expected = [[7, 8], [0, 0], [1, 2], [-5, -5], [3, 4], [0, 0], [7, 8]]
  np.testing.assert_allclose(out, expected)


def test_gather_based_on_match_scalars_keeps_static_shape():
  with tf.Graph().as_default():
    match = matcher.Match(tf.constant(MATCH_RESULTS, tf.int32))
    gathered = match.gather_based_on_match(
        tf.constant([10., 20., 30., 40.]), tf.constant(-1.), tf.constant(-2.))
    assert gathered.shape.as_list() == [7]
    with tf.compat.v1.Session() as sess:
      np.testing.assert_allclose(sess.run(gathered),
                                 [40, -1, 10, -2, 20, -1, 40])


def test_match_rejects_bad_results():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='rank 1'):
      matcher.Match(tf.constant([[0, 1]], tf.int32))
    with pytest.raises(ValueError, match='int32'):
      matcher.Match(tf.constant([0, 1], tf.int64))


class _FirstRowMatcher(matcher.Matcher):
  """Matches every column to the first valid row, to test the wrapper."""

  def _match(self, similarity_matrix, valid_rows):
    first_valid = tf.argmax(tf.cast(valid_rows, tf.int32), output_type=tf.int32)
    return tf.fill([tf.shape(similarity_matrix)[1]], first_valid)


def test_matcher_defaults_valid_rows_to_all(execute):
  out = execute(lambda s: _FirstRowMatcher().match(s).match_results,
                [np.zeros([3, 2], np.float32)])
  np.testing.assert_array_equal(out, [0, 0])
  out = execute(
      lambda s, v: _FirstRowMatcher().match(s, valid_rows=v).match_results,
      [np.zeros([3, 2], np.float32), np.array([False, False, True])])
  np.testing.assert_array_equal(out, [2, 2])


def test_matcher_passes_use_matmul_gather_and_scope():
  with tf.Graph().as_default():
    match = _FirstRowMatcher(use_matmul_gather=True).match(
        tf.zeros([3, 2]), scope='MyMatch')
    assert match.match_results.name.startswith('MyMatch/')
    rows = match.matched_row_indices()
    assert any(op.type == 'MatMul' for op in tf.compat.v1.get_default_graph()
               .get_operations())
    with tf.compat.v1.Session() as sess:
      np.testing.assert_array_equal(sess.run(rows), [0, 0])


def test_matcher_is_abstract():
  with pytest.raises(TypeError):
    matcher.Matcher()  # pylint: disable=abstract-class-instantiated
