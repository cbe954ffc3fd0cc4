"""box_coders.mean_stddev_box_coder."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.core import box_list

ANCHORS = np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 0.8]], np.float32)
BOXES = np.array([[0, 0, 0.5, 0.5], [0.6, 0.7, 1, 1]], np.float32)


def _encode(coder):
  return lambda b, a: coder.encode(box_list.BoxList(b), box_list.BoxList(a))


def test_encode_and_decode(execute):
  coder = mean_stddev_box_coder.MeanStddevBoxCoder(stddev=0.1)
  # (box - anchor) / 0.1: box 0 equals its anchor; box 1 differs by
  # [0.1, 0.2, 0, 0.2].
  expected = np.array([[0, 0, 0, 0], [1, 2, 0, 2]], np.float32)
  np.testing.assert_allclose(execute(_encode(coder), [BOXES, ANCHORS]),
                             expected, atol=1e-5)
  out = execute(lambda c, a: coder.decode(c, box_list.BoxList(a)).get(),
                [expected, ANCHORS])
  np.testing.assert_allclose(out, BOXES, atol=1e-6)


def test_default_stddev_is_0_01(execute):
  coder = mean_stddev_box_coder.MeanStddevBoxCoder()
  # Offsets [0.1, 0.2, 0, 0.2] / 0.01.
  out = execute(_encode(coder), [BOXES, ANCHORS])
  np.testing.assert_allclose(out[1], [10, 20, 0, 20], rtol=1e-4)
  assert coder.code_size == 4


def test_empty(execute):
  coder = mean_stddev_box_coder.MeanStddevBoxCoder()
  empty = np.zeros([0, 4], np.float32)
  assert execute(_encode(coder), [empty, empty]).shape == (0, 4)


def test_stddev_anchor_field_rejected():
  coder = mean_stddev_box_coder.MeanStddevBoxCoder()
  with tf.Graph().as_default():
    anchors = box_list.BoxList(tf.constant(ANCHORS))
    anchors.add_field('stddev', tf.ones([2, 4]))
    boxes = box_list.BoxList(tf.constant(BOXES))
    with pytest.raises(ValueError, match='stddev'):
      coder.encode(boxes, anchors)
    with pytest.raises(ValueError, match='stddev'):
      coder.decode(tf.zeros([2, 4]), anchors)
