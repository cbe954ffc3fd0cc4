"""Matcher that gives each column its highest-similarity row.

With thresholds, a column's best similarity s falls into one of three bands:
  s >= matched_threshold                       -> matched (positive);
  unmatched_threshold <= s < matched_threshold -> ignored (-2), or unmatched
                                                  (-1) when
                                                  negatives_lower_than_unmatched
                                                  is False;
  s < unmatched_threshold                      -> unmatched (-1), or ignored
                                                  (-2) when
                                                  negatives_lower_than_unmatched
                                                  is False.
"""
import tensorflow as tf

from od_estimator.core import matcher
from od_estimator.core import shape_utils


class ArgMaxMatcher(matcher.Matcher):
  """Argmax matcher with optional match/ignore thresholds and force matching."""

  def __init__(self,
               matched_threshold,
               unmatched_threshold=None,
               negatives_lower_than_unmatched=True,
               force_match_for_each_row=False,
               use_matmul_gather=False):
    """Creates an ArgMaxMatcher.

    Args:
      matched_threshold: a column is matched when its best similarity is >=
        this. None disables thresholding: every column is matched to its
        argmax row.
      unmatched_threshold: lower edge of the middle band; defaults to
        matched_threshold (no middle band).
      negatives_lower_than_unmatched: True: below unmatched_threshold is
        unmatched and the middle band ignored. False: the middle band is
        unmatched and below unmatched_threshold ignored.
      force_match_for_each_row: also match every valid row to its best
        column, overriding the thresholds for that column, so that no
        groundtruth box goes unmatched.
      use_matmul_gather: make the Match gather with a one-hot matmul.

    Raises:
      ValueError: if unmatched_threshold is given without matched_threshold,
        is above matched_threshold, or equals it while
        negatives_lower_than_unmatched is False (the negative band would be
        empty).
    """
    super().__init__(use_matmul_gather=use_matmul_gather)
    if matched_threshold is None and unmatched_threshold is not None:
      raise ValueError('unmatched_threshold (%s) needs matched_threshold to '
                       'be set too' % unmatched_threshold)
    if unmatched_threshold is None:
      unmatched_threshold = matched_threshold
    elif unmatched_threshold > matched_threshold:
      raise ValueError('unmatched_threshold (%s) must be <= matched_threshold '
                       '(%s)' % (unmatched_threshold, matched_threshold))
    if (not negatives_lower_than_unmatched and
        unmatched_threshold == matched_threshold):
      raise ValueError(
          'With negatives_lower_than_unmatched=False negatives lie between '
          'the thresholds, so they cannot be equal: matched %s, unmatched %s'
          % (matched_threshold, unmatched_threshold))
    self._matched_threshold = matched_threshold
    self._unmatched_threshold = unmatched_threshold
    self._negatives_lower_than_unmatched = negatives_lower_than_unmatched
    self._force_match_for_each_row = force_match_for_each_row

  def ignores_appended_zero_rows(self):
    """Whether rows of similarity 0 appended after the others, and not
    valid, change no match when every similarity is >= 0.

    True with thresholds whose unmatched one is above 0 and negatives below
    it: such a row is the argmax of a column only when every row before it
    ties at 0 (the argmax keeps the lowest row), and 0 is then below the
    unmatched threshold: unmatched, as when the rows are absent (also with
    no row at all); not valid, it is never force matched.
    """
    return (self._matched_threshold is not None and
            self._unmatched_threshold > 0 and
            self._negatives_lower_than_unmatched)

  def _match(self, similarity_matrix, valid_rows):
    """Matches each column of the [N, M] similarity matrix to a row.

    valid_rows only restricts force matching, as in the original: padded
    rows are expected to carry low similarity.

    Args:
      similarity_matrix: [N, M] float32.
      valid_rows: [N] bool.

    Returns:
      [M] int32 match results.
    """
    shape = shape_utils.combined_static_and_dynamic_shape(similarity_matrix)

    def no_rows():
      # Without groundtruth every column is a negative.
      return -tf.ones([shape[1]], dtype=tf.int32)

    def some_rows():
      return self._match_non_empty(similarity_matrix, valid_rows, shape)

    if isinstance(shape[0], int):
      return no_rows() if shape[0] == 0 else some_rows()
    return tf.cond(tf.greater(shape[0], 0), some_rows, no_rows)

  def _match_non_empty(self, similarity_matrix, valid_rows, shape):
    matches = tf.argmax(similarity_matrix, axis=0, output_type=tf.int32)
    if self._matched_threshold is not None:
      best = tf.reduce_max(similarity_matrix, axis=0)
      below = tf.less(best, self._unmatched_threshold)
      between = tf.logical_and(
          tf.greater_equal(best, self._unmatched_threshold),
          tf.less(best, self._matched_threshold))
      if self._negatives_lower_than_unmatched:
        below_value, between_value = matcher.UNMATCHED, matcher.IGNORED
      else:
        below_value, between_value = matcher.IGNORED, matcher.UNMATCHED
      matches = tf.where(below, below_value * tf.ones_like(matches), matches)
      matches = tf.where(between, between_value * tf.ones_like(matches),
                         matches)
    if not self._force_match_for_each_row:
      return matches
    # [N, M] indicator of each valid row's best column. When several rows
    # pick the same column the argmax below keeps the lowest row index.
    # A trailing -inf column keeps the argmax defined when there are no
    # columns; its index M then one-hots to all zeros.
    padded = tf.pad(similarity_matrix, [[0, 0], [0, 1]],
                    constant_values=-float('inf'))
    best_column = tf.argmax(padded, axis=1, output_type=tf.int32)
    forced = (tf.one_hot(best_column, depth=shape[1], dtype=tf.float32) *
              tf.cast(tf.expand_dims(valid_rows, 1), tf.float32))
    forced_row = tf.argmax(forced, axis=0, output_type=tf.int32)
    is_forced = tf.cast(tf.reduce_max(forced, axis=0), tf.bool)
    return tf.where(is_forced, forced_row, matches)
