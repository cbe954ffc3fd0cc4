"""Samples minibatches with a set fraction of positive examples.

Used by Faster R-CNN for both stages (e.g. 256 anchors with at most half
positives for the RPN, 64 proposals with at most a quarter positives for the
box classifier) and by SSD's `random_example_sampler`. Positives are usually
rare: when there are too few to reach the fraction, negatives fill the rest
of the batch; when there are too few of both, fewer entries are returned
(except with `is_static`, see below).

    sampler = BalancedPositiveNegativeSampler(positive_fraction=0.25)
    sampled = sampler.subsample(indicator, 64, labels)  # [N] bool
"""
import tensorflow as tf

from od_estimator.core import minibatch_sampler


class BalancedPositiveNegativeSampler(minibatch_sampler.MinibatchSampler):
  """Picks up to fraction * batch_size positives, then negatives.

  With `is_static=True` the sampler needs a static N and an int batch_size,
  uses fixed-shape ops only (it compiles with XLA for TPUs), and returns
  exactly min(batch_size, N) entries whenever the fraction allows it: when
  candidates run short, entries outside `indicator` fill the batch, taken in
  index order. Static-shape models rely on that count (they gather exactly
  batch_size sampled boxes). The positive cap is never exceeded, so with
  almost only positives the batch can still come out smaller.
  """

  def __init__(self, positive_fraction=0.5, is_static=False):
    """Constructor.

    Args:
      positive_fraction: the largest fraction of positives in a batch, in
        [0, 1].
      is_static: use the static-shape form (see the class docstring).

    Raises:
      ValueError: if positive_fraction is outside [0, 1].
    """
    if not 0 <= positive_fraction <= 1:
      raise ValueError('positive_fraction must be in [0, 1], got %s'
                       % positive_fraction)
    self._positive_fraction = positive_fraction
    self._is_static = is_static

  @property
  def positive_fraction(self):
    return self._positive_fraction

  @property
  def is_static(self):
    return self._is_static

  def subsample(self, indicator, batch_size, labels, scope=None):
    """Returns the sampled entries.

    Args:
      indicator: [N] bool tensor, True for the candidates.
      batch_size: int, the batch size to sample; None (dynamic form only)
        keeps every positive candidate and adds negatives so that positives
        make up positive_fraction of the result.
      labels: [N] bool tensor, True for positives, False for negatives.
      scope: optional name scope; 'BalancedPositiveNegativeSampler' by
        default.

    Returns:
      [N] bool tensor, True for the sampled entries.

    Raises:
      ValueError: if indicator or labels is not a 1-D bool tensor; with
        is_static, if N is not static or batch_size is not an int; with
        batch_size None, if positive_fraction is 0.
    """
    for name, tensor in (('indicator', indicator), ('labels', labels)):
      if tensor.shape.rank != 1:
        raise ValueError('%s must be 1-D, got shape %s' % (name, tensor.shape))
      if tensor.dtype != tf.bool:
        raise ValueError('%s must be bool, got %s' % (name, tensor.dtype.name))
    if self._is_static:
      if not (indicator.shape.is_fully_defined() and
              labels.shape.is_fully_defined()):
        raise ValueError('The static sampler needs indicator and labels of '
                         'static shape, got %s and %s'
                         % (indicator.shape, labels.shape))
      if not isinstance(batch_size, int):
        raise ValueError('The static sampler needs an int batch_size, got %r'
                         % (batch_size,))
    if batch_size is None and self._positive_fraction == 0:
      raise ValueError('batch_size None sizes the batch from the positives '
                       'and needs positive_fraction > 0')
    with tf.name_scope(scope or 'BalancedPositiveNegativeSampler'):
      return self._subsample(indicator, batch_size, labels)

  def _subsample(self, indicator, batch_size, labels):
    # One random permutation orders both positives and negatives; entries
    # are kept by their rank in it, so all shapes stay [N].
    permutation = minibatch_sampler.random_permutation(indicator)
    indicator = tf.gather(indicator, permutation)
    labels = tf.gather(labels, permutation)
    positives = tf.logical_and(indicator, labels)
    negatives = tf.logical_and(indicator, tf.logical_not(labels))

    num_positives = tf.reduce_sum(tf.cast(positives, tf.int32))
    if batch_size is not None:
      num_positives = tf.minimum(
          num_positives, int(batch_size * self._positive_fraction))
    sampled_positives = minibatch_sampler.first_n(positives, num_positives)
    if batch_size is None:
      ratio = (1 - self._positive_fraction) / self._positive_fraction
      num_negatives = tf.cast(ratio * tf.cast(num_positives, tf.float32),
                              tf.int32)
    else:
      num_negatives = batch_size - num_positives
    sampled = tf.logical_or(
        sampled_positives, minibatch_sampler.first_n(negatives, num_negatives))

    inverse = tf.math.invert_permutation(permutation)
    sampled = tf.gather(sampled, inverse)
    if self._is_static:
      sampled = self._fill_up(sampled, tf.gather(indicator, inverse),
                              batch_size)
    return sampled

  @staticmethod
  def _fill_up(sampled, indicator, batch_size):
    """Adds non-candidates, in index order, up to batch_size entries."""
    missing = batch_size - tf.reduce_sum(tf.cast(sampled, tf.int32))
    return tf.logical_or(sampled, minibatch_sampler.first_n(
        tf.logical_not(indicator), missing))
