"""Matcher interface and the Match result object.

A matcher pairs columns (usually anchors) with rows (usually groundtruth
boxes) from an [N, M] similarity matrix. Every column ends up in exactly one
of three states:
  matched:   match_results[col] = row index (>= 0);
  unmatched: match_results[col] = -1 (a negative example);
  ignored:   match_results[col] = -2 (neither positive nor negative, e.g. an
             anchor whose overlap falls between the two thresholds).
"""
import abc

import tensorflow as tf

from od_estimator.core import box_list_ops

UNMATCHED = -1
IGNORED = -2


class Match:
  """Holds match results and answers queries about them."""

  def __init__(self, match_results, use_matmul_gather=False):
    """Creates a Match.

    Args:
      match_results: [M] int32 tensor: >= 0 the matched row of column i,
        -1 column i is unmatched, -2 column i is ignored.
      use_matmul_gather: gather with a one-hot matmul instead of tf.gather
        (static shapes, faster on TPU).

    Raises:
      ValueError: if match_results is not rank 1 or not int32.
    """
    if match_results.shape.ndims != 1:
      raise ValueError('match_results should have rank 1, got shape %s' %
                       match_results.shape)
    if match_results.dtype != tf.int32:
      raise ValueError('match_results should be int32, got %s' %
                       match_results.dtype.name)
    self._match_results = match_results
    self._gather_op = (box_list_ops.matmul_gather_on_zeroth_axis
                       if use_matmul_gather else tf.gather)

  @property
  def match_results(self):
    """The [M] int32 match results tensor."""
    return self._match_results

  def matched_column_indices(self):
    """Returns [K] int32 indices of matched columns, in increasing order."""
    return self._where(self.matched_column_indicator())

  def matched_column_indicator(self):
    """Returns [M] bool, True where the column is matched."""
    return tf.greater_equal(self._match_results, 0)

  def num_matched_columns(self):
    """Returns the number of matched columns as an int32 scalar."""
    return tf.size(self.matched_column_indices())

  def unmatched_column_indices(self):
    """Returns [K] int32 indices of unmatched columns, in increasing order."""
    return self._where(self.unmatched_column_indicator())

  def unmatched_column_indicator(self):
    """Returns [M] bool, True where the column is unmatched."""
    return tf.equal(self._match_results, UNMATCHED)

  def num_unmatched_columns(self):
    """Returns the number of unmatched columns as an int32 scalar."""
    return tf.size(self.unmatched_column_indices())

  def ignored_column_indices(self):
    """Returns [K] int32 indices of ignored columns, in increasing order."""
    return self._where(self.ignored_column_indicator())

  def ignored_column_indicator(self):
    """Returns [M] bool, True where the column is ignored."""
    return tf.equal(self._match_results, IGNORED)

  def num_ignored_columns(self):
    """Returns the number of ignored columns as an int32 scalar."""
    return tf.size(self.ignored_column_indices())

  def unmatched_or_ignored_column_indices(self):
    """Returns [K] int32 indices of columns that are not matched, ascending."""
    return self._where(tf.less(self._match_results, 0))

  def matched_row_indices(self):
    """Returns [K] int32 rows of the matched columns.

    The i-th entry is the row matched to matched_column_indices()[i].
    """
    # The matmul gather works in float; row indices are exact in float32.
    rows = self._gather_op(tf.cast(self._match_results, tf.float32),
                           self.matched_column_indices())
    return tf.cast(tf.reshape(rows, [-1]), tf.int32)

  def num_matched_rows(self):
    """Returns the number of distinct matched rows as an int32 scalar."""
    unique_rows, _ = tf.unique(self.matched_row_indices())
    return tf.size(unique_rows)

  def gather_based_on_match(self, input_tensor, unmatched_value,
                            ignored_value):
    """Gathers one row of `input_tensor` per column according to the match.

    Matched column c gets input_tensor[match_results[c]], unmatched columns get
    unmatched_value and ignored columns get ignored_value.

    Args:
      input_tensor: [N, ...] tensor to gather from.
      unmatched_value: tensor of shape input_tensor.shape[1:].
      ignored_value: tensor of shape input_tensor.shape[1:].

    Returns:
      [M, ...] tensor, M = match_results.shape[0].
    """
    # Prepend the two fill values so that match_results + 2 indexes the
    # extended tensor directly: -2 -> ignored_value, -1 -> unmatched_value.
    extended = tf.concat(
        [tf.stack([ignored_value, unmatched_value]), input_tensor], axis=0)
    gather_indices = tf.maximum(self._match_results + 2, 0)
    return self._gather_op(extended, gather_indices)

  @staticmethod
  def _where(indicator):
    return tf.cast(tf.reshape(tf.where(indicator), [-1]), tf.int32)


class Matcher(abc.ABC):
  """Abstract base class: turns a similarity matrix into a Match."""

  def __init__(self, use_matmul_gather=False):
    """Creates a Matcher.

    Args:
      use_matmul_gather: make the returned Match objects gather with a
        one-hot matmul instead of tf.gather.
    """
    self._use_matmul_gather = use_matmul_gather

  def match(self, similarity_matrix, valid_rows=None, scope=None):
    """Matches columns to rows.

    Args:
      similarity_matrix: [N, M] float32, higher means more similar.
      valid_rows: [N] bool, rows that may be matched (default: all).
      scope: name scope, default 'Match'.

    Returns:
      Match with [M] results.
    """
    with tf.name_scope(scope or 'Match'):
      if valid_rows is None:
        valid_rows = tf.ones(tf.shape(similarity_matrix)[0], dtype=tf.bool)
      return Match(self._match(similarity_matrix, valid_rows),
                   self._use_matmul_gather)

  @abc.abstractmethod
  def _match(self, similarity_matrix, valid_rows):
    """Computes match results; implemented by subclasses.

    Args:
      similarity_matrix: [N, M] float32, higher means more similar.
      valid_rows: [N] bool, rows that may be matched.

    Returns:
      [M] int32 match results (row index, -1 unmatched or -2 ignored).
    """
