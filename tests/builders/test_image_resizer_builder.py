"""image_resizer_builder: resize callables from text protos."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import image_resizer_builder
from od_estimator.protos import image_resizer_pb2


def _build(text):
  return image_resizer_builder.build(
      text_format.Merge(text, image_resizer_pb2.ImageResizer()))


def _flat(height, width, value=10.0):
  return np.full((height, width, 3), value, np.float32)


def test_keep_aspect_ratio_resizer_like_faster_rcnn_configs(execute):
  resizer = _build("""
    keep_aspect_ratio_resizer {
      min_dimension: 600
      max_dimension: 1024
    }
  """)
  image, true_shape = execute(resizer, [_flat(480, 640)])
  # scale = min(600 / 480, 1024 / 640) = 1.25 -> 600 x 800.
  assert image.shape == (600, 800, 3)
  np.testing.assert_array_equal(true_shape, [600, 800, 3])


def test_keep_aspect_ratio_resizer_padding_and_masks(execute):
  resizer = _build("""
    keep_aspect_ratio_resizer {
      min_dimension: 4
      max_dimension: 8
      pad_to_max_dimension: true
      per_channel_pad_value: [5, 6, 7]
    }
  """)
  # 2x4 -> scale = min(4 / 2, 8 / 4) = 2 -> 4x8, padded to 8x8.
  image, masks, true_shape = execute(
      resizer, [_flat(2, 4), np.ones((1, 2, 4), np.float32)])
  assert image.shape == (8, 8, 3)
  np.testing.assert_array_equal(true_shape, [4, 8, 3])
  np.testing.assert_array_equal(image[5, 0], [5, 6, 7])
  assert masks.shape == (1, 8, 8) and masks.sum() == 4 * 8


def test_keep_aspect_ratio_resizer_rejects_min_above_max():
  with pytest.raises(ValueError, match='min_dimension'):
    _build('keep_aspect_ratio_resizer { min_dimension: 700 '
           'max_dimension: 600 }')


def test_fixed_shape_resizer_like_ssd_configs_has_static_shapes():
  resizer = _build("""
    fixed_shape_resizer {
      height: 300
      width: 300
    }
  """)
  with tf.Graph().as_default():
    image, masks, true_shape = resizer(
        tf.compat.v1.placeholder(tf.float32, [None, None, 3]),
        tf.compat.v1.placeholder(tf.float32, [None, None, None]))
    assert image.shape.as_list() == [300, 300, 3]
    assert masks.shape.as_list() == [None, 300, 300]
    assert tf.get_static_value(true_shape).tolist() == [300, 300, 3]


def test_fixed_shape_resizer_nearest_neighbor(execute):
  resizer = _build("""
    fixed_shape_resizer {
      height: 4
      width: 4
      resize_method: NEAREST_NEIGHBOR
    }
  """)
  image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
  resized, _ = execute(resizer, [image])
  # Nearest keeps the dtype; output pixel (y, x) copies (y // 2, x // 2).
  assert resized.dtype == np.uint8
  np.testing.assert_array_equal(resized[3, 1], image[1, 0])
  np.testing.assert_array_equal(resized[0, 2], image[0, 1])


@pytest.mark.parametrize('method', ['BILINEAR', 'BICUBIC', 'AREA'])
def test_fixed_shape_resizer_methods_keep_flat_images_flat(execute, method):
  resizer = _build('fixed_shape_resizer { height: 3 width: 5 '
                   'resize_method: %s }' % method)
  image, _ = execute(resizer, [_flat(6, 4)])
  np.testing.assert_allclose(image, 10.0, rtol=1e-5)


def test_identity_resizer(execute):
  resizer = _build('identity_resizer {}')
  image, masks, true_shape = execute(
      resizer, [_flat(5, 7), np.ones((2, 5, 7), np.float32)])
  np.testing.assert_array_equal(image, _flat(5, 7))
  assert masks.shape == (2, 5, 7)
  np.testing.assert_array_equal(true_shape, [5, 7, 3])


def test_conditional_shape_resizer_greater(execute):
  resizer = _build("""
    conditional_shape_resizer {
      condition: GREATER
      size_threshold: 300
    }
  """)
  # Long side 400 > 300: ratio 0.75 -> 300 x 150.
  image, true_shape = execute(resizer, [_flat(400, 200)])
  assert image.shape == (300, 150, 3)
  np.testing.assert_array_equal(true_shape, [300, 150, 3])


def test_conditional_shape_resizer_smaller(execute):
  resizer = _build("""
    conditional_shape_resizer {
      condition: SMALLER
      size_threshold: 150
    }
  """)
  # Short side 100 < 150: ratio 1.5 -> 150 x 300.
  image, _ = execute(resizer, [_flat(100, 200)])
  assert image.shape == (150, 300, 3)


def test_conditional_shape_resizer_invalid_condition():
  with pytest.raises(ValueError, match='conditional_shape_resizer.condition'):
    _build('conditional_shape_resizer { condition: INVALID }')


def test_pad_to_multiple_resizer(execute):
  resizer = _build('pad_to_multiple_resizer { multiple: 32 }')
  # 100 -> 128 and 70 -> 96, the next multiples of 32.
  image, true_shape = execute(resizer, [_flat(100, 70)])
  assert image.shape == (128, 96, 3)
  np.testing.assert_array_equal(true_shape, [100, 70, 3])


def test_pad_to_multiple_resizer_rejects_zero():
  with pytest.raises(ValueError, match='pad_to_multiple_resizer.multiple'):
    _build('pad_to_multiple_resizer { multiple: 0 }')


def test_convert_to_grayscale(execute):
  resizer = _build("""
    keep_aspect_ratio_resizer {
      min_dimension: 4
      max_dimension: 8
      convert_to_grayscale: true
    }
  """)
  image = np.zeros((2, 4, 3), np.float32)
  image[:, :, 0] = 100.0
  resized, masks, true_shape = execute(
      resizer, [image, np.ones((1, 2, 4), np.float32)])
  assert resized.shape == (4, 8, 1)
  # 0.2989 * 100 = 29.89 everywhere.
  np.testing.assert_allclose(resized, 29.89, rtol=1e-5)
  assert masks.shape == (1, 4, 8)
  np.testing.assert_array_equal(true_shape, [4, 8, 1])


def test_fixed_shape_grayscale_without_masks(execute):
  resizer = _build('fixed_shape_resizer { height: 2 width: 3 '
                   'convert_to_grayscale: true }')
  resized, true_shape = execute(resizer, [_flat(4, 4)])
  assert resized.shape == (2, 3, 1)
  np.testing.assert_array_equal(true_shape, [2, 3, 1])


def test_rejects_wrong_type_and_unset_oneof():
  with pytest.raises(ValueError, match='ImageResizer'):
    image_resizer_builder.build('keep_aspect_ratio_resizer {}')
  with pytest.raises(ValueError, match='image_resizer_oneof'):
    image_resizer_builder.build(image_resizer_pb2.ImageResizer())
