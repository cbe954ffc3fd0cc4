"""Box coder interface: boxes <-> codes relative to anchors.

Detectors regress codes (offsets and log-scales relative to an anchor)
rather than raw corners; a box coder converts between the two.
"""
import abc

import tensorflow as tf

from od_estimator.core import box_list

FASTER_RCNN = 'faster_rcnn'
KEYPOINT = 'keypoint'
MEAN_STDDEV = 'mean_stddev'
SQUARE = 'square'


class BoxCoder(abc.ABC):
  """Abstract base class for box coders."""

  @property
  @abc.abstractmethod
  def code_size(self):
    """Number of values in one code (the last dimension of encode())."""

  def encode(self, boxes, anchors):
    """Encodes boxes relative to anchors, pairwise.

    Args:
      boxes: BoxList of N boxes.
      anchors: BoxList of N anchors.

    Returns:
      [N, code_size] float32 codes.
    """
    with tf.name_scope('Encode'):
      return self._encode(boxes, anchors)

  def decode(self, rel_codes, anchors):
    """Decodes codes back to boxes, pairwise with anchors.

    Args:
      rel_codes: [N, code_size] float32 codes.
      anchors: BoxList of N anchors.

    Returns:
      BoxList of N boxes, ymin, xmin, ymax, xmax.
    """
    with tf.name_scope('Decode'):
      return self._decode(rel_codes, anchors)

  @abc.abstractmethod
  def _encode(self, boxes, anchors):
    """Implements encode(); same arguments and result."""

  @abc.abstractmethod
  def _decode(self, rel_codes, anchors):
    """Implements decode(); same arguments and result."""


def batch_decode(encoded_boxes, box_coder, anchors):
  """Decodes a batch of codes that share one set of anchors.

  Args:
    encoded_boxes: [batch_size, num_anchors, code_size] float32 codes.
    box_coder: BoxCoder.
    anchors: BoxList of num_anchors anchors.

  Returns:
    [batch_size, num_anchors, 4] float32 boxes, ymin, xmin, ymax, xmax.

  Raises:
    ValueError: if encoded_boxes is not rank 3, or its second dimension
      differs from the number of anchors (when both are static).
  """
  encoded_boxes.shape.assert_has_rank(3)
  num_codes = tf.compat.dimension_value(encoded_boxes.shape[1])
  num_anchors = anchors.num_boxes_static()
  if num_codes != num_anchors:
    raise ValueError(
        'encoded_boxes has %s codes per image (shape[1]) but there are %s '
        'anchors' % (num_codes, num_anchors))
  # Stack the batch along the anchor axis and tile the anchors (and their
  # fields, which some coders inspect) to match, so that a single decode
  # call handles the whole batch, static or dynamic in size.
  batch_size = tf.shape(encoded_boxes)[0]
  flat_codes = tf.reshape(encoded_boxes, [-1, box_coder.code_size])
  tiled_anchors = box_list.BoxList(tf.tile(anchors.get(), [batch_size, 1]))
  for field in anchors.get_extra_fields():
    value = anchors.get_field(field)
    multiples = [batch_size] + [1] * (value.shape.ndims - 1)
    tiled_anchors.add_field(field, tf.tile(value, multiples))
  decoded = box_coder.decode(flat_codes, tiled_anchors).get()
  static_batch = tf.compat.dimension_value(encoded_boxes.shape[0])
  return tf.reshape(decoded, [
      batch_size if static_batch is None else static_batch,
      -1 if num_anchors is None else num_anchors, 4])
