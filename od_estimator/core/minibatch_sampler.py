"""Minibatch sampler interface: pick which candidate examples a loss sees.

Detectors have far more candidate anchors (or proposals) than they can or
should train on; a minibatch sampler chooses a subset, returned as a boolean
indicator over the candidates.

The random choice here is made with fixed-shape ops only (a random
permutation, cumulative sums and gathers), so samplers built on it compile
with XLA for TPUs.
"""
import abc

import tensorflow as tf


class MinibatchSampler(abc.ABC):
  """Abstract base class of minibatch samplers."""

  @abc.abstractmethod
  def subsample(self, indicator, batch_size, **params):
    """Returns a sampled subset of the candidates.

    Args:
      indicator: [N] bool tensor, True for the entries that may be sampled.
      batch_size: the number of entries to sample.
      **params: sampler-specific arguments.

    Returns:
      [N] bool tensor, True for the sampled entries.
    """

  @staticmethod
  def subsample_indicator(indicator, num_samples):
    """Picks min(num_samples, count of True) True entries uniformly at random.

    Args:
      indicator: [N] bool tensor, True for the entries that may be picked.
      num_samples: int or int32 scalar tensor, how many to pick.

    Returns:
      [N] bool tensor, True for the picked entries (a subset of indicator).
    """
    permutation = random_permutation(indicator)
    shuffled = tf.gather(indicator, permutation)
    return tf.gather(first_n(shuffled, num_samples),
                     tf.math.invert_permutation(permutation))


def random_permutation(tensor):
  """Returns a random permutation of range(len(tensor)), [N] int32.

  Sorting uniform random keys keeps every shape static (unlike shuffling the
  indices of tf.where), so the result works inside XLA computations.
  """
  keys = tf.random.uniform(tf.shape(tensor)[:1])
  return tf.argsort(keys)


def first_n(indicator, num):
  """Keeps the first `num` True entries of a [N] bool tensor.

  Args:
    indicator: [N] bool tensor.
    num: int or int32 scalar tensor; non-positive keeps none.

  Returns:
    [N] bool tensor.
  """
  rank = tf.cumsum(tf.cast(indicator, tf.int32))  # 1-based among the Trues.
  return tf.logical_and(indicator, rank <= num)
