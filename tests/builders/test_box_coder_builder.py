"""box_coder_builder: coders built from text protos like the sample configs."""
import math

import numpy as np
import pytest
from google.protobuf import text_format

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.box_coders import keypoint_box_coder
from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.box_coders import square_box_coder
from od_estimator.builders import box_coder_builder
from od_estimator.core import box_list
from od_estimator.protos import box_coder_pb2


def _build(text):
  return box_coder_builder.build(
      text_format.Parse(text, box_coder_pb2.BoxCoder()))


def test_faster_rcnn_from_ssd_sample(execute):
  coder = _build("""
    faster_rcnn_box_coder {
      y_scale: 10.0
      x_scale: 10.0
      height_scale: 5.0
      width_scale: 5.0
    }
  """)
  assert isinstance(coder, faster_rcnn_box_coder.FasterRcnnBoxCoder)
  # Anchor centre (5, 5) 10 x 10, box centre (7, 11) 10 x 20:
  # ty = 10 * 2/10 = 2, tx = 10 * 6/10 = 6, th = 5 * log(1) = 0,
  # tw = 5 * log(2).
  out = execute(
      lambda b, a: coder.encode(box_list.BoxList(b), box_list.BoxList(a)),
      [np.array([[2, 1, 12, 21]], np.float32),
       np.array([[0, 0, 10, 10]], np.float32)])
  np.testing.assert_allclose(out, [[2, 6, 0, 5 * math.log(2)]], rtol=1e-5,
                             atol=1e-6)


def test_faster_rcnn_defaults_and_custom_scales():
  coder = _build('faster_rcnn_box_coder {}')
  assert coder._scale_factors == [10., 10., 5., 5.]
  coder = _build("""
    faster_rcnn_box_coder { y_scale: 4 x_scale: 3 height_scale: 2
                            width_scale: 1 }""")
  assert coder._scale_factors == [4., 3., 2., 1.]


def test_keypoint():
  coder = _build("""
    keypoint_box_coder {
      num_keypoints: 6
      y_scale: 6.0
      x_scale: 3.0
      height_scale: 7.0
      width_scale: 8.0
    }
  """)
  assert isinstance(coder, keypoint_box_coder.KeypointBoxCoder)
  assert coder.code_size == 4 + 2 * 6
  assert coder._scale_factors == [6., 3., 7., 8.]


def test_keypoint_defaults():
  coder = _build('keypoint_box_coder { num_keypoints: 2 }')
  assert coder._scale_factors == [10., 10., 5., 5.]
  assert coder.code_size == 8


def test_mean_stddev(execute):
  coder = _build('mean_stddev_box_coder { stddev: 0.1 }')
  assert isinstance(coder, mean_stddev_box_coder.MeanStddevBoxCoder)
  # (box - anchor) / 0.1 = [0.1, 0, 0, 0.2] / 0.1.
  out = execute(
      lambda b, a: coder.encode(box_list.BoxList(b), box_list.BoxList(a)),
      [np.array([[0.1, 0, 1, 1.2]], np.float32),
       np.array([[0, 0, 1, 1]], np.float32)])
  np.testing.assert_allclose(out, [[1, 0, 0, 2]], rtol=1e-5, atol=1e-6)
  assert _build('mean_stddev_box_coder {}')._stddev == pytest.approx(0.01)


def test_square():
  coder = _build("""
    square_box_coder {
      y_scale: 6.0
      x_scale: 3.0
      length_scale: 7.0
    }
  """)
  assert isinstance(coder, square_box_coder.SquareBoxCoder)
  assert coder._scale_factors == [6., 3., 7.]
  assert _build('square_box_coder {}')._scale_factors == [10., 10., 5.]


@pytest.mark.parametrize('text, field', [
    ('faster_rcnn_box_coder { x_scale: 0 }', 'FasterRcnnBoxCoder.x_scale'),
    ('keypoint_box_coder { num_keypoints: 1 width_scale: -1 }',
     'KeypointBoxCoder.width_scale'),
    ('square_box_coder { length_scale: 0 }', 'SquareBoxCoder.length_scale'),
    ('mean_stddev_box_coder { stddev: 0 }', 'MeanStddevBoxCoder.stddev'),
])
def test_non_positive_values_rejected(text, field):
  with pytest.raises(ValueError, match=field):
    _build(text)


def test_empty_and_wrong_type():
  with pytest.raises(ValueError, match='box_coder_oneof'):
    box_coder_builder.build(box_coder_pb2.BoxCoder())
  with pytest.raises(ValueError, match='BoxCoder'):
    box_coder_builder.build('faster_rcnn_box_coder {}')
