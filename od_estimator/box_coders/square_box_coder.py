"""Square box coder: one side length instead of height and width.

With l = sqrt(h * w) for the box and la = sqrt(ha * wa) for the anchor:
  ty = (yc - yca) / la    tx = (xc - xca) / la    tl = log(l / la)
each optionally scaled. Decoding always yields squares; useful when objects
are square (e.g. faces) and images are not resized anisotropically.
"""
import tensorflow as tf

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.core import box_coder
from od_estimator.core import box_list

# Added to side lengths when encoding so zero-size boxes give finite codes.
EPSILON = 1e-8


class SquareBoxCoder(box_coder.BoxCoder):
  """Encodes boxes as [ty, tx, tl]."""

  def __init__(self, scale_factors=None):
    """Creates a SquareBoxCoder.

    Args:
      scale_factors: 3 positive floats multiplying ty, tx, tl, or None for no
        scaling.

    Raises:
      ValueError: if scale_factors is not 3 positive values.
    """
    faster_rcnn_box_coder.check_scale_factors(scale_factors, 3)
    self._scale_factors = scale_factors

  @property
  def code_size(self):
    return 3

  def _encode(self, boxes, anchors):
    """Returns [N, 3] codes ty, tx, tl of boxes relative to anchors."""
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    ycenter, xcenter, h, w = boxes.get_center_coordinates_and_sizes()
    la = tf.sqrt(ha * wa) + EPSILON
    l = tf.sqrt(h * w) + EPSILON
    codes = [(ycenter - ycenter_a) / la,
             (xcenter - xcenter_a) / la,
             tf.math.log(l / la)]
    if self._scale_factors:
      codes = [code * factor
               for code, factor in zip(codes, self._scale_factors)]
    return tf.stack(codes, axis=1)

  def _decode(self, rel_codes, anchors):
    """Returns a BoxList of the square boxes that [N, 3] rel_codes describe."""
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    la = tf.sqrt(ha * wa)
    ty, tx, tl = tf.unstack(rel_codes, num=3, axis=1)
    if self._scale_factors:
      ty, tx, tl = [code / factor for code, factor
                    in zip((ty, tx, tl), self._scale_factors)]
    l = tf.exp(tl) * la
    ycenter = ty * la + ycenter_a
    xcenter = tx * la + xcenter_a
    return box_list.BoxList(tf.stack(
        [ycenter - l / 2., xcenter - l / 2., ycenter + l / 2.,
         xcenter + l / 2.], axis=1))
