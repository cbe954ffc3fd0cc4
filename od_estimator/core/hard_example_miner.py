"""Online hard example mining over per-anchor losses.

The original defines HardExampleMiner in core/losses.py;
od_estimator.core.losses re-exports it under that name.
"""
import tensorflow as tf


class HardExampleMiner:
  """Keeps, per image, the highest-loss anchors that NMS lets through.

  Anchors are ranked by loss and greedily selected, skipping any whose
  predicted box overlaps an already selected one by more than iou_threshold
  (OHEM, Shrivastava et al. 2016). Optionally the number of negatives kept is
  capped relative to the positives (SSD, Liu et al. 2016: set
  num_hard_examples=None, iou_threshold=1.0, max_negatives_per_positive=3).
  """

  def __init__(self,
               num_hard_examples=64,
               iou_threshold=0.7,
               loss_type='both',
               cls_loss_weight=0.05,
               loc_loss_weight=0.06,
               max_negatives_per_positive=None,
               min_negatives_per_image=0):
    """Constructor.

    Args:
      num_hard_examples: at most this many anchors per image are selected
        before the negative:positive cap; None means no limit.
      iou_threshold: NMS discards a box whose IOU with a selected box is
        above this.
      loss_type: rank by 'cls', 'loc', or 'both' (a weighted sum using
        cls_loss_weight and loc_loss_weight).
      cls_loss_weight: classification weight for loss_type 'both'.
      loc_loss_weight: localization weight for loss_type 'both'.
      max_negatives_per_positive: optional cap on kept negatives per kept
        positive (converted to float); needs match_list at call time.
      min_negatives_per_image: the cap never goes below this, so images
        without positives still contribute negatives.
    """
    self._num_hard_examples = num_hard_examples
    self._iou_threshold = iou_threshold
    self._loss_type = loss_type
    self._cls_loss_weight = cls_loss_weight
    self._loc_loss_weight = loc_loss_weight
    self._max_negatives_per_positive = (
        None if max_negatives_per_positive is None
        else float(max_negatives_per_positive))
    self._min_negatives_per_image = min_negatives_per_image
    self._num_positives_list = None
    self._num_negatives_list = None

  def __call__(self, location_losses, cls_losses, decoded_boxlist_list,
               match_list=None):
    """Sums the localization and classification losses of the mined anchors.

    Args:
      location_losses: [num_images, num_anchors] float32, static num_images.
      cls_losses: [num_images, num_anchors] float32.
      decoded_boxlist_list: list of num_images BoxLists of predicted boxes,
        num_anchors each.
      match_list: optional list of num_images Match objects (columns are
        anchors), telling positives (matched) from negatives (unmatched).

    Returns:
      mined_location_loss: float32 scalar, sum over the selected anchors.
      mined_cls_loss: float32 scalar, sum over the selected anchors.

    Raises:
      ValueError: if the losses and box lists disagree on the number of
        images, or match_list is not a list of that length.
    """
    location_losses = tf.unstack(location_losses)
    cls_losses = tf.unstack(cls_losses)
    num_images = len(decoded_boxlist_list)
    if not match_list:
      match_list = [None] * num_images
    if not len(location_losses) == num_images == len(cls_losses):
      raise ValueError(
          'location_losses (%d images), cls_losses (%d) and '
          'decoded_boxlist_list (%d) do not have compatible shapes.' %
          (len(location_losses), len(cls_losses), num_images))
    if not isinstance(match_list, list):
      raise ValueError('match_list must be a list.')
    if len(match_list) != num_images:
      raise ValueError('match_list must be None or have '
                       'len(decoded_boxlist_list)=%d entries, got %d.' %
                       (num_images, len(match_list)))

    mined_location_losses = []
    mined_cls_losses = []
    num_positives_list = []
    num_negatives_list = []
    for image_index, boxlist in enumerate(decoded_boxlist_list):
      match = match_list[image_index]
      if self._loss_type == 'loc':
        ranking_losses = location_losses[image_index]
      elif self._loss_type == 'both':
        ranking_losses = (cls_losses[image_index] * self._cls_loss_weight +
                          location_losses[image_index] * self._loc_loss_weight)
      else:
        ranking_losses = cls_losses[image_index]
      max_selected = self._num_hard_examples
      if max_selected is None:
        max_selected = boxlist.num_boxes_static()
        if max_selected is None:
          max_selected = boxlist.num_boxes()
      selected = tf.image.non_max_suppression(
          boxlist.get(), ranking_losses, max_selected, self._iou_threshold)
      if self._max_negatives_per_positive is not None and match is not None:
        selected, num_positives, num_negatives = (
            self._subsample_selection_to_desired_neg_pos_ratio(
                selected, match, self._max_negatives_per_positive,
                self._min_negatives_per_image))
        num_positives_list.append(num_positives)
        num_negatives_list.append(num_negatives)
      mined_location_losses.append(
          tf.reduce_sum(tf.gather(location_losses[image_index], selected)))
      mined_cls_losses.append(
          tf.reduce_sum(tf.gather(cls_losses[image_index], selected)))
    if num_positives_list:
      self._num_positives_list = num_positives_list
      self._num_negatives_list = num_negatives_list
    return (tf.reduce_sum(tf.stack(mined_location_losses)),
            tf.reduce_sum(tf.stack(mined_cls_losses)))

  def summarize(self):
    """Adds scalar summaries of the mean mined positives and negatives."""
    if self._num_positives_list and self._num_negatives_list:
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumPositives',
          tf.reduce_mean(tf.cast(self._num_positives_list, tf.float32)))
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumNegatives',
          tf.reduce_mean(tf.cast(self._num_negatives_list, tf.float32)))

  def _subsample_selection_to_desired_neg_pos_ratio(
      self, indices, match, max_negatives_per_positive,
      min_negatives_per_image=0):
    """Keeps all selected positives and the first K selected negatives.

    K = max(min_negatives_per_image,
            floor(max_negatives_per_positive * num_positives)).
    As in the original, an ignored anchor (neither matched nor unmatched) is
    kept when it comes before the K-th negative in selection order, and is
    counted with the negatives.

    Args:
      indices: [M] int32 selected anchor indices, in selection order.
      match: Match object with matched_column_indicator() and
        unmatched_column_indicator() over all anchors.
      max_negatives_per_positive: float.
      min_negatives_per_image: int.

    Returns:
      selected_indices: [M'] int32, M' <= M, order preserved.
      num_positives: int32 scalar.
      num_negatives: int32 scalar.
    """
    positives = tf.gather(match.matched_column_indicator(), indices)
    negatives = tf.gather(match.unmatched_column_indicator(), indices)
    num_positives = tf.reduce_sum(tf.cast(positives, tf.int32))
    max_negatives = tf.maximum(
        min_negatives_per_image,
        tf.cast(max_negatives_per_positive *
                tf.cast(num_positives, tf.float32), tf.int32))
    within_cap = tf.less_equal(tf.cumsum(tf.cast(negatives, tf.int32)),
                               max_negatives)
    keep = tf.reshape(tf.where(tf.logical_or(positives, within_cap)), [-1])
    num_negatives = tf.size(keep) - num_positives
    return tf.gather(indices, keep), num_positives, num_negatives
