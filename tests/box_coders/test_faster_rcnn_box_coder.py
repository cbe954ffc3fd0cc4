"""box_coders.faster_rcnn_box_coder and core.box_coder.batch_decode."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.core import box_coder
from od_estimator.core import box_list

# Anchor 0: centre (5, 5), size 10 x 10. Box 0: centre (7, 11), size 10 x 20.
# Anchor 1: centre (12, 24), size 4 x 8. Box 1: centre (15, 24), size 8 x 4.
ANCHORS = np.array([[0, 0, 10, 10], [10, 20, 14, 28]], np.float32)
BOXES = np.array([[2, 1, 12, 21], [11, 22, 19, 26]], np.float32)
# ty = (yc - yca) / ha, tx = (xc - xca) / wa, th = log(h / ha),
# tw = log(w / wa):
#   box 0: 2/10, 6/10, log(10/10), log(20/10)
#   box 1: 3/4,  0/8,  log(8/4),   log(4/8)
UNSCALED_CODES = np.array(
    [[0.2, 0.6, 0., math.log(2.)],
     [0.75, 0., math.log(2.), math.log(0.5)]], np.float32)
# Scale factors [10, 10, 5, 5]: e.g. ty = 10 * 2/10 = 2, th = 5 * log(8/4).
SCALED_CODES = UNSCALED_CODES * np.array([10, 10, 5, 5], np.float32)


def _encode(coder):
  return lambda b, a: coder.encode(box_list.BoxList(b), box_list.BoxList(a))


def _decode(coder):
  return lambda c, a: coder.decode(c, box_list.BoxList(a)).get()


@pytest.mark.parametrize('scale_factors, codes', [
    (None, UNSCALED_CODES), ([10., 10., 5., 5.], SCALED_CODES)])
def test_encode(execute, scale_factors, codes):
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors)
  out = execute(_encode(coder), [BOXES, ANCHORS])
  np.testing.assert_allclose(out, codes, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('scale_factors, codes', [
    (None, UNSCALED_CODES), ([10., 10., 5., 5.], SCALED_CODES)])
@pytest.mark.parametrize('dynamic', [False, True])
def test_decode(execute, scale_factors, codes, dynamic):
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors)

  def graph_fn(c, a):
    # BoxList needs the 4 columns known; N (and the codes) stay dynamic.
    a.set_shape([None, 4])
    return _decode(coder)(c, a)
  out = execute(graph_fn, [codes, ANCHORS], dynamic=dynamic)
  np.testing.assert_allclose(out, BOXES, rtol=1e-5, atol=1e-4)


def test_round_trip_random(execute):
  rng = np.random.RandomState(1)
  mins = rng.uniform(0, 50, size=[20, 2])
  boxes = np.concatenate([mins, mins + rng.uniform(1, 30, size=[20, 2])], 1)
  mins = rng.uniform(0, 50, size=[20, 2])
  anchors = np.concatenate([mins, mins + rng.uniform(1, 30, size=[20, 2])], 1)
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder([10., 10., 5., 5.])
  out = execute(
      lambda b, a: _decode(coder)(_encode(coder)(b, a), a),
      [boxes.astype(np.float32), anchors.astype(np.float32)])
  np.testing.assert_allclose(out, boxes, rtol=1e-4, atol=1e-3)


def test_zero_size_boxes_and_anchors_give_finite_codes(execute):
  # EPSILON keeps log(0) and x / 0 away: a point box on a point anchor gives
  # all zeros; a point box on a 10 x 10 anchor gives log(1e-8 / 10).
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder([10., 10., 5., 5.])
  boxes = np.array([[1, 1, 1, 1], [5, 5, 5, 5]], np.float32)
  anchors = np.array([[1, 1, 1, 1], [0, 0, 10, 10]], np.float32)
  out = execute(_encode(coder), [boxes, anchors])
  assert np.all(np.isfinite(out))
  np.testing.assert_allclose(out[0], [0, 0, 0, 0], atol=1e-6)
  np.testing.assert_allclose(
      out[1], [0, 0, 5 * math.log(1e-8 / 10), 5 * math.log(1e-8 / 10)],
      rtol=1e-4)


def test_empty(execute):
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder([10., 10., 5., 5.])
  empty = np.zeros([0, 4], np.float32)
  assert execute(_encode(coder), [empty, empty]).shape == (0, 4)
  assert execute(_decode(coder), [empty, empty]).shape == (0, 4)


def test_static_shapes_and_code_size():
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder()
  assert coder.code_size == 4
  with tf.Graph().as_default():
    anchors = box_list.BoxList(tf.constant(ANCHORS))
    codes = coder.encode(box_list.BoxList(tf.constant(BOXES)), anchors)
    assert codes.shape.as_list() == [2, 4]
    assert coder.decode(codes, anchors).get().shape.as_list() == [2, 4]


@pytest.mark.parametrize('scale_factors', [[10., 10., 5.], [10., 0., 5., 5.],
                                           [10., 10., -5., 5.]])
def test_bad_scale_factors(scale_factors):
  with pytest.raises(ValueError, match='scale_factors'):
    faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors)


@pytest.mark.parametrize('dynamic', [False, True])
def test_batch_decode(execute, dynamic):
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder([10., 10., 5., 5.])
  # Image 0 holds the codes of BOXES; image 1 all-zero codes, which decode
  # to the anchors themselves.
  codes = np.stack([SCALED_CODES, np.zeros_like(SCALED_CODES)])
  if dynamic:
    # Anchors stay static (their count must be known); codes get a dynamic
    # batch size.
    def graph_fn(c):
      c = tf.compat.v1.placeholder_with_default(c, [None, 2, 4])
      return box_coder.batch_decode(
          c, coder, box_list.BoxList(tf.constant(ANCHORS)))
    out = execute(graph_fn, [codes])
  else:
    out = execute(
        lambda c, a: box_coder.batch_decode(c, coder, box_list.BoxList(a)),
        [codes, ANCHORS])
  assert out.shape == (2, 2, 4)
  np.testing.assert_allclose(out[0], BOXES, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(out[1], ANCHORS, rtol=1e-5, atol=1e-4)


def test_batch_decode_checks_shapes():
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder()
  with tf.Graph().as_default():
    anchors = box_list.BoxList(tf.constant(ANCHORS))
    with pytest.raises(ValueError, match='anchors'):
      box_coder.batch_decode(tf.zeros([1, 3, 4]), coder, anchors)
    with pytest.raises(ValueError):
      box_coder.batch_decode(tf.zeros([2, 4]), coder, anchors)
    decoded = box_coder.batch_decode(tf.zeros([5, 2, 4]), coder, anchors)
    assert decoded.shape.as_list() == [5, 2, 4]
