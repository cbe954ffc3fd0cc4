"""Greedy bipartite matcher built from plain TF ops.

The original called a contrib C++ kernel (removed in TF 2); this keeps its
greedy rule: repeatedly pair the globally most similar (row, column) among
rows and columns not yet paired, until the valid rows or the columns run out.
"""
import tensorflow as tf

from od_estimator.core import matcher
from od_estimator.core import shape_utils


class GreedyBipartiteMatcher(matcher.Matcher):
  """One-to-one greedy matching of valid rows to columns."""

  def __init__(self, use_matmul_gather=False):
    """Creates a GreedyBipartiteMatcher.

    Args:
      use_matmul_gather: make the Match gather with a one-hot matmul.
    """
    super().__init__(use_matmul_gather=use_matmul_gather)

  def _match(self, similarity_matrix, valid_rows):
    """Greedily pairs rows and columns, most similar pair first.

    Ties go to the lowest row, then the lowest column. Invalid rows are
    never matched; the returned row indices refer to the rows of
    `similarity_matrix` as given (the original reported them after moving
    valid rows to the front, which differs only when an invalid row precedes
    a valid one).

    Args:
      similarity_matrix: [N, M] float32, higher means more similar.
      valid_rows: [N] bool.

    Returns:
      [M] int32: the matched row, or -1. Never -2.
    """
    num_rows, num_cols = shape_utils.combined_static_and_dynamic_shape(
        similarity_matrix)
    valid_rows = tf.cast(valid_rows, tf.bool)
    num_pairs = tf.minimum(tf.reduce_sum(tf.cast(valid_rows, tf.int32)),
                           num_cols)
    lowest = tf.fill(tf.shape(similarity_matrix), -float('inf'))

    def body(step, free_rows, free_cols, matches):
      available = tf.logical_and(tf.expand_dims(free_rows, 1),
                                 tf.expand_dims(free_cols, 0))
      scores = tf.where(available, similarity_matrix, lowest)
      # Comparing against the max (rather than taking argmax of `scores`)
      # keeps the choice among available pairs even when similarities are
      # -inf themselves.
      is_best = tf.logical_and(available,
                               tf.greater_equal(scores, tf.reduce_max(scores)))
      flat_index = tf.argmax(tf.cast(tf.reshape(is_best, [-1]), tf.int32),
                             output_type=tf.int32)
      row = flat_index // num_cols
      col = flat_index % num_cols
      free_rows = tf.logical_and(
          free_rows, tf.logical_not(tf.one_hot(row, num_rows, True, False)))
      col_mask = tf.one_hot(col, num_cols, True, False)
      free_cols = tf.logical_and(free_cols, tf.logical_not(col_mask))
      matches = tf.where(col_mask, row * tf.ones_like(matches), matches)
      return step + 1, free_rows, free_cols, matches

    initial_matches = -tf.ones([num_cols], dtype=tf.int32)
    _, _, _, matches = tf.while_loop(
        lambda step, *_: step < num_pairs, body,
        [tf.constant(0), valid_rows, tf.ones([num_cols], dtype=tf.bool),
         initial_matches])
    matches.set_shape(initial_matches.shape)
    return matches
