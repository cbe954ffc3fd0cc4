"""box_coders.keypoint_box_coder."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.box_coders import keypoint_box_coder
from od_estimator.core import box_list
from od_estimator.core import standard_fields as fields

KEYPOINTS = fields.BoxListFields.keypoints
# Anchor: centre (5, 5), 10 x 10. Box: centre (7, 11), 10 x 20.
ANCHORS = np.array([[0, 0, 10, 10]], np.float32)
BOXES = np.array([[2, 1, 12, 21]], np.float32)
BOX_KEYPOINTS = np.array([[[7, 11], [2, 1]]], np.float32)
# Box part as Faster R-CNN: 2/10, 6/10, log(10/10), log(20/10).
# Keypoints: ((7-5)/10, (11-5)/10) and ((2-5)/10, (1-5)/10).
UNSCALED = np.array([[0.2, 0.6, 0., math.log(2.), 0.2, 0.6, -0.3, -0.4]],
                    np.float32)
# Scale [10, 10, 5, 5]; keypoints use the y and x factors (10, 10).
SCALED = UNSCALED * np.array([10, 10, 5, 5, 10, 10, 10, 10], np.float32)


def _encode(coder):
  def graph_fn(boxes, keypoints, anchors):
    boxes = box_list.BoxList(boxes)
    boxes.add_field(KEYPOINTS, keypoints)
    return coder.encode(boxes, box_list.BoxList(anchors))
  return graph_fn


def _decode(coder):
  def graph_fn(codes, anchors):
    decoded = coder.decode(codes, box_list.BoxList(anchors))
    return decoded.get(), decoded.get_field(KEYPOINTS)
  return graph_fn


@pytest.mark.parametrize('scale_factors, codes', [
    (None, UNSCALED), ([10., 10., 5., 5.], SCALED)])
def test_encode_decode(execute, scale_factors, codes):
  coder = keypoint_box_coder.KeypointBoxCoder(2, scale_factors)
  assert coder.code_size == 8
  out = execute(_encode(coder), [BOXES, BOX_KEYPOINTS, ANCHORS])
  np.testing.assert_allclose(out, codes, rtol=1e-5, atol=1e-5)
  boxes, keypoints = execute(_decode(coder), [codes, ANCHORS])
  np.testing.assert_allclose(boxes, BOXES, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(keypoints, BOX_KEYPOINTS, rtol=1e-5, atol=1e-4)


def test_round_trip_several_boxes(execute):
  anchors = np.array([[0, 0, 10, 10], [5, 5, 9, 15], [1, 2, 3, 4]], np.float32)
  boxes = np.array([[1, 1, 9, 12], [6, 4, 10, 14], [0, 0, 5, 5]], np.float32)
  keypoints = np.array([[[2, 3], [8, 8], [5, 1]],
                        [[7, 5], [6, 13], [9, 9]],
                        [[1, 4], [0, 0], [4, 2]]], np.float32)
  coder = keypoint_box_coder.KeypointBoxCoder(3, [10., 10., 5., 5.])

  def graph_fn(b, k, a):
    codes = _encode(coder)(b, k, a)
    return codes, _decode(coder)(codes, a)
  codes, (out_boxes, out_keypoints) = execute(graph_fn,
                                              [boxes, keypoints, anchors])
  assert codes.shape == (3, 10)
  np.testing.assert_allclose(out_boxes, boxes, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(out_keypoints, keypoints, rtol=1e-4, atol=1e-4)


def test_empty(execute):
  coder = keypoint_box_coder.KeypointBoxCoder(2, [10., 10., 5., 5.])
  codes = execute(_encode(coder), [np.zeros([0, 4], np.float32),
                                   np.zeros([0, 2, 2], np.float32),
                                   np.zeros([0, 4], np.float32)])
  assert codes.shape == (0, 8)
  boxes, keypoints = execute(_decode(coder), [np.zeros([0, 8], np.float32),
                                              np.zeros([0, 4], np.float32)])
  assert boxes.shape == (0, 4)
  assert keypoints.shape == (0, 2, 2)


def test_missing_keypoints_field():
  coder = keypoint_box_coder.KeypointBoxCoder(2)
  with tf.Graph().as_default():
    boxes = box_list.BoxList(tf.constant(BOXES))
    with pytest.raises(ValueError, match='keypoints'):
      coder.encode(boxes, box_list.BoxList(tf.constant(ANCHORS)))


def test_bad_scale_factors():
  with pytest.raises(ValueError, match='scale_factors'):
    keypoint_box_coder.KeypointBoxCoder(2, [10., 10., 5.])
