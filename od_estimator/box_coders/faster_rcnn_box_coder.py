"""Faster R-CNN box coder: centre offsets and log size ratios.

For a box (yc, xc, h, w) and an anchor (yca, xca, ha, wa):
  ty = (yc - yca) / ha    tx = (xc - xca) / wa
  th = log(h / ha)        tw = log(w / wa)
each optionally multiplied by its scale factor ([10, 10, 5, 5] in Faster
R-CNN), which spreads the codes to a range that regression losses like.
"""
import tensorflow as tf

from od_estimator.core import box_coder
from od_estimator.core import box_list

# Added to sizes when encoding so that zero-size boxes or anchors give finite
# codes instead of dividing by zero or taking log(0).
EPSILON = 1e-8


def check_scale_factors(scale_factors, length):
  """Raises ValueError unless scale_factors is None/empty or `length` > 0s."""
  if not scale_factors:
    return
  if len(scale_factors) != length:
    raise ValueError('scale_factors must have %d values, got %s' %
                     (length, list(scale_factors)))
  if any(factor <= 0 for factor in scale_factors):
    raise ValueError('scale_factors must all be > 0, got %s' %
                     list(scale_factors))


class FasterRcnnBoxCoder(box_coder.BoxCoder):
  """Encodes boxes as [ty, tx, th, tw]."""

  def __init__(self, scale_factors=None):
    """Creates a FasterRcnnBoxCoder.

    Args:
      scale_factors: 4 positive floats multiplying ty, tx, th, tw, or None
        for no scaling.

    Raises:
      ValueError: if scale_factors is not 4 positive values.
    """
    check_scale_factors(scale_factors, 4)
    self._scale_factors = scale_factors

  @property
  def code_size(self):
    return 4

  def _encode(self, boxes, anchors):
    """Returns [N, 4] codes ty, tx, th, tw of boxes relative to anchors."""
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    ycenter, xcenter, h, w = boxes.get_center_coordinates_and_sizes()
    ha += EPSILON
    wa += EPSILON
    h += EPSILON
    w += EPSILON
    codes = [(ycenter - ycenter_a) / ha,
             (xcenter - xcenter_a) / wa,
             tf.math.log(h / ha),
             tf.math.log(w / wa)]
    if self._scale_factors:
      codes = [code * factor
               for code, factor in zip(codes, self._scale_factors)]
    return tf.stack(codes, axis=1)

  def _decode(self, rel_codes, anchors):
    """Returns a BoxList of the boxes that [N, 4] rel_codes describe."""
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    ty, tx, th, tw = tf.unstack(rel_codes, num=4, axis=1)
    if self._scale_factors:
      ty, tx, th, tw = [code / factor for code, factor
                        in zip((ty, tx, th, tw), self._scale_factors)]
    h = tf.exp(th) * ha
    w = tf.exp(tw) * wa
    ycenter = ty * ha + ycenter_a
    xcenter = tx * wa + xcenter_a
    return box_list.BoxList(tf.stack(
        [ycenter - h / 2., xcenter - w / 2., ycenter + h / 2.,
         xcenter + w / 2.], axis=1))
