"""Keypoint box coder: Faster R-CNN box codes followed by keypoint codes.

The box part is [ty, tx, th, tw] as in FasterRcnnBoxCoder. Keypoint k at
(ky, kx) becomes tky = (ky - yca) / ha, tkx = (kx - xca) / wa, scaled by the
y and x scale factors. Codes are
[ty, tx, th, tw, tky0, tkx0, tky1, tkx1, ...].
"""
import tensorflow as tf

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.core import box_coder
from od_estimator.core import box_list
from od_estimator.core import standard_fields as fields

# Added to sizes when encoding so zero-size boxes or anchors give finite codes.
EPSILON = 1e-8


class KeypointBoxCoder(box_coder.BoxCoder):
  """Encodes boxes and their keypoints relative to anchors."""

  def __init__(self, num_keypoints, scale_factors=None):
    """Creates a KeypointBoxCoder.

    Args:
      num_keypoints: keypoints per box.
      scale_factors: 4 positive floats multiplying ty, tx, th, tw (the first
        two also scale keypoint y and x codes), or None for no scaling.

    Raises:
      ValueError: if scale_factors is not 4 positive values.
    """
    faster_rcnn_box_coder.check_scale_factors(scale_factors, 4)
    self._num_keypoints = num_keypoints
    self._scale_factors = scale_factors

  @property
  def code_size(self):
    return 4 + self._num_keypoints * 2

  def _keypoint_scale(self):
    # [2] y and x factors, broadcast over [N, num_keypoints, 2] keypoints.
    return tf.constant(self._scale_factors[:2], dtype=tf.float32)

  def _encode(self, boxes, anchors):
    """Encodes boxes with a [N, num_keypoints, 2] 'keypoints' field.

    Args:
      boxes: BoxList of N boxes with field fields.BoxListFields.keypoints.
      anchors: BoxList of N anchors.

    Returns:
      [N, 4 + 2 * num_keypoints] float32 codes.
    """
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    ycenter, xcenter, h, w = boxes.get_center_coordinates_and_sizes()
    keypoints = tf.reshape(
        boxes.get_field(fields.BoxListFields.keypoints),
        [-1, self._num_keypoints, 2])
    ha += EPSILON
    wa += EPSILON
    h += EPSILON
    w += EPSILON
    box_codes = [(ycenter - ycenter_a) / ha,
                 (xcenter - xcenter_a) / wa,
                 tf.math.log(h / ha),
                 tf.math.log(w / wa)]
    # [N, 1, 2] anchor centres and (epsilon-padded) sizes per keypoint.
    centers = tf.expand_dims(tf.stack([ycenter_a, xcenter_a], axis=1), 1)
    sizes = tf.expand_dims(tf.stack([ha, wa], axis=1), 1)
    keypoint_codes = (keypoints - centers) / sizes
    if self._scale_factors:
      box_codes = [code * factor
                   for code, factor in zip(box_codes, self._scale_factors)]
      keypoint_codes *= self._keypoint_scale()
    return tf.concat(
        [tf.stack(box_codes, axis=1),
         tf.reshape(keypoint_codes, [-1, 2 * self._num_keypoints])], axis=1)

  def _decode(self, rel_codes, anchors):
    """Decodes [N, 4 + 2 * num_keypoints] codes.

    Args:
      rel_codes: [N, code_size] float32 codes.
      anchors: BoxList of N anchors.

    Returns:
      BoxList of N boxes with a [N, num_keypoints, 2] keypoints field.
    """
    ycenter_a, xcenter_a, ha, wa = anchors.get_center_coordinates_and_sizes()
    ty, tx, th, tw = tf.unstack(rel_codes[:, :4], num=4, axis=1)
    keypoint_codes = tf.reshape(rel_codes[:, 4:],
                                [-1, self._num_keypoints, 2])
    if self._scale_factors:
      ty, tx, th, tw = [code / factor for code, factor
                        in zip((ty, tx, th, tw), self._scale_factors)]
      keypoint_codes /= self._keypoint_scale()
    h = tf.exp(th) * ha
    w = tf.exp(tw) * wa
    ycenter = ty * ha + ycenter_a
    xcenter = tx * wa + xcenter_a
    decoded = box_list.BoxList(tf.stack(
        [ycenter - h / 2., xcenter - w / 2., ycenter + h / 2.,
         xcenter + w / 2.], axis=1))
    centers = tf.expand_dims(tf.stack([ycenter_a, xcenter_a], axis=1), 1)
    sizes = tf.expand_dims(tf.stack([ha, wa], axis=1), 1)
    decoded.add_field(fields.BoxListFields.keypoints,
                      keypoint_codes * sizes + centers)
    return decoded
