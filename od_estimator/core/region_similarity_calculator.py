"""Pairwise similarity between two box lists (higher = more similar).

Matchers consume the [N, M] matrices built here; N is usually groundtruth
and M anchors.
"""
import abc

import tensorflow as tf

from od_estimator.core import box_list_ops
from od_estimator.core import standard_fields as fields


class RegionSimilarityCalculator(abc.ABC):
  """Abstract base class for region similarity calculators."""

  def compare(self, boxlist1, boxlist2, scope=None):
    """Computes pairwise similarity; does not match anything.

    Args:
      boxlist1: BoxList of N boxes.
      boxlist2: BoxList of M boxes.
      scope: name scope, default 'Compare'.

    Returns:
      [N, M] float32 similarity.
    """
    with tf.name_scope(scope or 'Compare'):
      return self._compare(boxlist1, boxlist2)

  @abc.abstractmethod
  def _compare(self, boxlist1, boxlist2):
    """Implements compare(); same arguments and result."""


class IouSimilarity(RegionSimilarityCalculator):
  """Intersection over union."""

  def _compare(self, boxlist1, boxlist2):
    return box_list_ops.iou(boxlist1, boxlist2)


class NegSqDistSimilarity(RegionSimilarityCalculator):
  """Negated squared distance between boxes as [ymin, xmin, ymax, xmax]."""

  def _compare(self, boxlist1, boxlist2):
    return -box_list_ops.sq_dist(boxlist1, boxlist2)


class IoaSimilarity(RegionSimilarityCalculator):
  """Intersection over the area of the boxlist2 box (not symmetric)."""

  def _compare(self, boxlist1, boxlist2):
    return box_list_ops.ioa(boxlist1, boxlist2)


class ThresholdedIouSimilarity(RegionSimilarityCalculator):
  """boxlist1's score where IoU > iou_threshold, else 0."""

  def __init__(self, iou_threshold=0):
    """Creates a ThresholdedIouSimilarity.

    Args:
      iou_threshold: pairs with IoU strictly above this take the score of
        the boxlist1 box; the rest get 0.
    """
    super().__init__()
    self._iou_threshold = iou_threshold

  def _compare(self, boxlist1, boxlist2):
    """Returns [N, M]; boxlist1 needs an [N] 'scores' field."""
    ious = box_list_ops.iou(boxlist1, boxlist2)
    scores = tf.expand_dims(boxlist1.get_field(fields.BoxListFields.scores), 1)
    return tf.where(ious > self._iou_threshold,
                    scores * tf.ones_like(ious), tf.zeros_like(ious))
