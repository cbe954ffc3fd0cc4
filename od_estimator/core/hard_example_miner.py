"""Online hard example mining over per-anchor losses.

The non-max suppression runs over the whole batch at once
(batch_greedy_suppression), selecting what the original's per-image
tf.image.non_max_suppression selects, in the same order.
The original defines HardExampleMiner in core/losses.py;
od_estimator.core.losses re-exports it under that name.
"""
import tensorflow as tf

from od_estimator.core import batch_greedy_suppression


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
    num_images = len(decoded_boxlist_list)
    if not match_list:
      match_list = [None] * num_images
    if not (location_losses.shape[0] == num_images == cls_losses.shape[0]):
      raise ValueError(
          'location_losses (%s images), cls_losses (%s) and '
          'decoded_boxlist_list (%d) do not have compatible shapes.' %
          (location_losses.shape[0], cls_losses.shape[0], num_images))
    if not isinstance(match_list, list):
      raise ValueError('match_list must be a list.')
    if len(match_list) != num_images:
      raise ValueError('match_list must be None or have '
                       'len(decoded_boxlist_list)=%d entries, got %d.' %
                       (num_images, len(match_list)))
    with_matches = [match is not None for match in match_list]
    if any(with_matches) and not all(with_matches):
      raise ValueError('match_list must have a Match for every image or '
                       'for none.')

    # indices[b][selected[b]]: image b's selection, in selection order.
    indices, selected = batch_greedy_suppression.batch_greedy_suppression(
        tf.stack([boxlist.get() for boxlist in decoded_boxlist_list]),
        self._ranking_losses(location_losses, cls_losses),
        self._iou_threshold)
    # The cap on the selection cannot bind when it is above the anchors.
    num_anchors = location_losses.shape[1]
    if self._num_hard_examples is not None and not (
        num_anchors is not None and self._num_hard_examples >= num_anchors):
      selected &= tf.cumsum(tf.cast(selected, tf.int32),
                            axis=1) <= self._num_hard_examples
    if self._max_negatives_per_positive is not None and all(with_matches):
      selected, num_positives, num_negatives = (
          self._subsample_selection_to_desired_neg_pos_ratio(
              indices, selected, match_list))
      self._num_positives_list = tf.unstack(num_positives)
      self._num_negatives_list = tf.unstack(num_negatives)
    # Summed image by image over the selected anchors in selection order,
    # as the per-image gathers of the original: the same float sums.
    mined_location_losses = []
    mined_cls_losses = []
    for image_indices, image_selected, location, cls in zip(
        tf.unstack(indices), tf.unstack(selected),
        tf.unstack(location_losses), tf.unstack(cls_losses)):
      kept = tf.boolean_mask(image_indices, image_selected)
      mined_location_losses.append(tf.reduce_sum(tf.gather(location, kept)))
      mined_cls_losses.append(tf.reduce_sum(tf.gather(cls, kept)))
    return (tf.reduce_sum(tf.stack(mined_location_losses)),
            tf.reduce_sum(tf.stack(mined_cls_losses)))

  def _ranking_losses(self, location_losses, cls_losses):
    """The losses that order the anchors, by loss_type."""
    if self._loss_type == 'loc':
      return location_losses
    if self._loss_type == 'both':
      return (cls_losses * self._cls_loss_weight +
              location_losses * self._loc_loss_weight)
    return cls_losses

  def summarize(self):
    """Adds scalar summaries of the mean mined positives and negatives."""
    if self._num_positives_list and self._num_negatives_list:
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumPositives',
          tf.reduce_mean(tf.cast(self._num_positives_list, tf.float32)))
      tf.compat.v1.summary.scalar(
          'HardExampleMiner/NumNegatives',
          tf.reduce_mean(tf.cast(self._num_negatives_list, tf.float32)))

  def _subsample_selection_to_desired_neg_pos_ratio(self, indices, selected,
                                                    match_list):
    """Keeps all selected positives and the first K selected negatives.

    K = max(min_negatives_per_image,
            floor(max_negatives_per_positive * num_positives)), per image.
    As in the original, an ignored anchor (neither matched nor unmatched) is
    kept when it comes before the K-th negative in selection order, and is
    counted with the negatives.

    Args:
      indices: [num_images, num_anchors] int32 anchor indices, in an order
        where the selected ones come in selection order.
      selected: [num_images, num_anchors] bool, over `indices`.
      match_list: num_images Match objects over all anchors.

    Returns:
      selected: [num_images, num_anchors] bool over `indices`, a subset.
      num_positives: [num_images] int32.
      num_negatives: [num_images] int32.
    """
    def in_order(indicators):
      return tf.gather(tf.stack(indicators), indices, batch_dims=1)

    positives = selected & in_order(
        [match.matched_column_indicator() for match in match_list])
    negatives = selected & in_order(
        [match.unmatched_column_indicator() for match in match_list])
    num_positives = tf.reduce_sum(tf.cast(positives, tf.int32), axis=1)
    max_negatives = tf.maximum(
        self._min_negatives_per_image,
        tf.cast(self._max_negatives_per_positive *
                tf.cast(num_positives, tf.float32), tf.int32))
    within_cap = tf.less_equal(
        tf.cumsum(tf.cast(negatives, tf.int32), axis=1),
        max_negatives[:, tf.newaxis])
    keep = positives | (selected & within_cap)
    num_negatives = (tf.reduce_sum(tf.cast(keep, tf.int32), axis=1) -
                     num_positives)
    return keep, num_positives, num_negatives
