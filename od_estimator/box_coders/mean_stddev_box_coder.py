"""Mean/stddev box coder: corner offsets from the anchor over a fixed stddev.

code = (box_corners - anchor_corners) / stddev, as used by the original
MultiBox-style detectors.
"""
from od_estimator.core import box_coder
from od_estimator.core import box_list


class MeanStddevBoxCoder(box_coder.BoxCoder):
  """Encodes boxes as corner offsets divided by a constant stddev."""

  def __init__(self, stddev=0.01):
    """Creates a MeanStddevBoxCoder.

    Args:
      stddev: the standard deviation dividing the corner offsets.
    """
    self._stddev = stddev

  @property
  def code_size(self):
    return 4

  @staticmethod
  def _check_anchors(anchors):
    # Older configs carried stddev per anchor; silently ignoring that field
    # would decode with a different stddev than the user meant.
    if anchors.has_field('stddev'):
      raise ValueError("'stddev' is a parameter of MeanStddevBoxCoder and "
                       'should not be a field of the anchors BoxList.')

  def _encode(self, boxes, anchors):
    """Returns [N, 4] codes; raises ValueError on a 'stddev' anchor field."""
    self._check_anchors(anchors)
    return (boxes.get() - anchors.get()) / self._stddev

  def _decode(self, rel_codes, anchors):
    """Returns a BoxList; raises ValueError on a 'stddev' anchor field."""
    self._check_anchors(anchors)
    return box_list.BoxList(rel_codes * self._stddev + anchors.get())
