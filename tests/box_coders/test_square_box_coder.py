"""box_coders.square_box_coder."""
import math

import numpy as np
import pytest

from od_estimator.box_coders import square_box_coder
from od_estimator.core import box_list

# Anchor: centre (2, 4.5), 4 x 9, so la = sqrt(36) = 6.
# Box: centre (3, 4), 4 x 4, so l = 4.
ANCHORS = np.array([[0, 0, 4, 9]], np.float32)
BOXES = np.array([[1, 2, 5, 6]], np.float32)
# ty = (3 - 2) / 6, tx = (4 - 4.5) / 6, tl = log(4 / 6).
UNSCALED = np.array([[1 / 6, -0.5 / 6, math.log(4 / 6)]], np.float32)
SCALED = UNSCALED * np.array([10, 10, 5], np.float32)


def _encode(coder):
  return lambda b, a: coder.encode(box_list.BoxList(b), box_list.BoxList(a))


def _decode(coder):
  return lambda c, a: coder.decode(c, box_list.BoxList(a)).get()


@pytest.mark.parametrize('scale_factors, codes', [
    (None, UNSCALED), ([10., 10., 5.], SCALED)])
def test_encode_decode(execute, scale_factors, codes):
  coder = square_box_coder.SquareBoxCoder(scale_factors)
  assert coder.code_size == 3
  np.testing.assert_allclose(execute(_encode(coder), [BOXES, ANCHORS]),
                             codes, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(execute(_decode(coder), [codes, ANCHORS]),
                             BOXES, rtol=1e-5, atol=1e-5)


def test_non_square_box_decodes_to_square(execute):
  # Box centre (1, 4), 2 x 8: l = sqrt(16) = 4, so it comes back as the
  # 4 x 4 square around (1, 4).
  coder = square_box_coder.SquareBoxCoder([10., 10., 5.])
  boxes = np.array([[0, 0, 2, 8]], np.float32)
  out = execute(lambda b, a: _decode(coder)(_encode(coder)(b, a), a),
                [boxes, ANCHORS])
  np.testing.assert_allclose(out, [[-1, 2, 3, 6]], rtol=1e-5, atol=1e-5)


def test_zero_size_and_empty(execute):
  coder = square_box_coder.SquareBoxCoder([10., 10., 5.])
  point = np.array([[1, 1, 1, 1]], np.float32)
  out = execute(_encode(coder), [point, point])
  np.testing.assert_allclose(out, [[0, 0, 0]], atol=1e-6)
  empty = np.zeros([0, 4], np.float32)
  assert execute(_encode(coder), [empty, empty]).shape == (0, 3)
  assert execute(_decode(coder), [np.zeros([0, 3], np.float32),
                                  empty]).shape == (0, 4)


@pytest.mark.parametrize('scale_factors', [[10., 10.], [10., 10., 5., 5.],
                                           [10., 0., 5.]])
def test_bad_scale_factors(scale_factors):
  with pytest.raises(ValueError, match='scale_factors'):
    square_box_coder.SquareBoxCoder(scale_factors)
