"""Pairwise and matched distances between BoxLists beyond IoU.

The original keeps giou and l1 in box_list_ops; od_estimator.core.box_list_ops
re-exports them.
"""
import tensorflow as tf


def _giou(boxes1, boxes2):
  """Generalized IoU of broadcastable [..., 4] boxes, in [-1, 1].

  IoU minus the share of the smallest enclosing box the union leaves empty
  (Rezatofighi et al., CVPR 2019); 0/0 counts as 0.
  """
  ymin1, xmin1, ymax1, xmax1 = tf.unstack(boxes1, axis=-1)
  ymin2, xmin2, ymax2, xmax2 = tf.unstack(boxes2, axis=-1)
  intersections = (
      tf.nn.relu(tf.minimum(ymax1, ymax2) - tf.maximum(ymin1, ymin2)) *
      tf.nn.relu(tf.minimum(xmax1, xmax2) - tf.maximum(xmin1, xmin2)))
  unions = ((ymax1 - ymin1) * (xmax1 - xmin1) +
            (ymax2 - ymin2) * (xmax2 - xmin2) - intersections)
  enclosing = ((tf.maximum(ymax1, ymax2) - tf.minimum(ymin1, ymin2)) *
               (tf.maximum(xmax1, xmax2) - tf.minimum(xmin1, xmin2)))
  return (tf.math.divide_no_nan(intersections, unions) -
          tf.math.divide_no_nan(enclosing - unions, enclosing))


def giou(boxlist1, boxlist2, scope=None):
  """Returns [N, M] pairwise generalized IoU, in [-1, 1]."""
  with tf.name_scope(scope or 'PairwiseGIoU'):
    return _giou(boxlist1.get()[:, tf.newaxis], boxlist2.get()[tf.newaxis])


def matched_giou(boxlist1, boxlist2, scope=None):
  """Returns [N] generalized IoU of box i of each list (same N)."""
  with tf.name_scope(scope or 'MatchedGIoU'):
    return _giou(boxlist1.get(), boxlist2.get())


def l1(boxlist1, boxlist2, scope=None):
  """Returns [N, M] pairwise L1 distances of (ycenter, xcenter, h, w)."""
  with tf.name_scope(scope or 'PairwiseL1'):
    centers_sizes1 = tf.stack(boxlist1.get_center_coordinates_and_sizes(), 1)
    centers_sizes2 = tf.stack(boxlist2.get_center_coordinates_and_sizes(), 1)
    return tf.reduce_sum(tf.abs(centers_sizes1[:, tf.newaxis] -
                                centers_sizes2[tf.newaxis]), axis=-1)
