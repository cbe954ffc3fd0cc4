"""Tests for od_estimator.core.image_resizing."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import image_resizing

NEAREST = image_resizing.ResizeMethod.NEAREST_NEIGHBOR


def _flat_image(height, width, value=10.0):
  return np.full((height, width, 3), value, np.float32)


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('shape,expected', [
    # Landscape: scale = min(600 / 480, 1024 / 640) = min(1.25, 1.6) = 1.25.
    ((480, 640), (600, 800)),
    # Portrait, same numbers transposed.
    ((640, 480), (800, 600)),
    # Long side capped: min(600 / 300, 1024 / 1000) = 1.024 -> 307.2 -> 307.
    ((300, 1000), (307, 1024)),
    # Square: min(600 / 500, 1024 / 500) = 1.2 -> 600 x 600.
    ((500, 500), (600, 600)),
])
def test_resize_to_range_sizes(execute, dynamic, shape, expected):
  outputs = execute(
      lambda image: image_resizing.resize_to_range(
          image, min_dimension=600, max_dimension=1024),
      [_flat_image(*shape)], dynamic=dynamic)
  resized, true_shape = outputs
  assert resized.shape == expected + (3,)
  np.testing.assert_array_equal(true_shape, expected + (3,))
  # Bilinear resizing of a flat image keeps it flat.
  np.testing.assert_allclose(resized, 10.0)


@pytest.mark.parametrize('dynamic', [False, True])
def test_resize_to_range_rounds_half_to_even(execute, dynamic):
  # 4x5, min 2, max 100: scale = min(2 / 4, 100 / 5) = 0.5; 5 * 0.5 = 2.5
  # rounds to the even 2 (tf.round), so the output is 2x2.
  resized, true_shape = execute(
      lambda image: image_resizing.resize_to_range(
          image, min_dimension=2, max_dimension=100),
      [_flat_image(4, 5)], dynamic=dynamic)
  assert resized.shape == (2, 2, 3)
  np.testing.assert_array_equal(true_shape, [2, 2, 3])


def test_resize_to_range_static_shape():
  with tf.Graph().as_default():
    resized, true_shape = image_resizing.resize_to_range(
        tf.zeros([480, 640, 3]), min_dimension=600, max_dimension=1024)
    assert resized.shape.as_list() == [600, 800, 3]
    assert tf.get_static_value(true_shape).tolist() == [600, 800, 3]


@pytest.mark.parametrize('dynamic', [False, True])
def test_resize_to_range_pads_to_max_dimension(execute, dynamic):
  masks = np.zeros((2, 480, 640), np.float32)
  masks[0] = 1.0

  def graph_fn(image, masks):
    return image_resizing.resize_to_range(
        image, masks, min_dimension=600, max_dimension=1024,
        pad_to_max_dimension=True, per_channel_pad_value=(1, 2, 3))

  image, new_masks, true_shape = execute(
      graph_fn, [_flat_image(480, 640), masks], dynamic=dynamic)
  assert image.shape == (1024, 1024, 3)
  np.testing.assert_array_equal(true_shape, [600, 800, 3])
  np.testing.assert_allclose(image[:600, :800], 10.0)
  # Rows below 600 and columns right of 800 hold the per-channel values.
  np.testing.assert_array_equal(image[700, 0], [1, 2, 3])
  np.testing.assert_array_equal(image[0, 900], [1, 2, 3])
  assert new_masks.shape == (2, 1024, 1024)
  assert new_masks[0].sum() == 600 * 800  # only the resized area is 1
  assert new_masks[1].sum() == 0


def test_resize_to_range_padded_static_shape():
  with tf.Graph().as_default():
    image, _ = image_resizing.resize_to_range(
        tf.compat.v1.placeholder(tf.float32, [None, None, 3]),
        min_dimension=8, max_dimension=16, pad_to_max_dimension=True)
    assert image.shape.as_list() == [16, 16, 3]


def test_resize_to_range_errors():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='rank 3'):
      image_resizing.resize_to_range(tf.zeros([1, 4, 4, 3]), None, 2, 4)
    with pytest.raises(ValueError, match='min_dimension and max_dimension'):
      image_resizing.resize_to_range(tf.zeros([4, 4, 3]), min_dimension=2)
    with pytest.raises(ValueError, match='per_channel_pad_value'):
      image_resizing.resize_to_range(
          tf.zeros([4, 4, 3]), min_dimension=2, max_dimension=4,
          pad_to_max_dimension=True, per_channel_pad_value=(0, 0))


def test_resize_image_to_fixed_shape_with_masks(execute):
  masks = np.ones((2, 5, 7), np.float32)
  image, new_masks, true_shape = execute(
      lambda image, masks: image_resizing.resize_image(
          image, masks, new_height=3, new_width=4),
      [_flat_image(5, 7), masks])
  assert image.shape == (3, 4, 3)
  np.testing.assert_allclose(image, 10.0)
  np.testing.assert_array_equal(new_masks, np.ones((2, 3, 4)))
  np.testing.assert_array_equal(true_shape, [3, 4, 3])


def test_resize_image_with_no_instances(execute):
  _, new_masks, _ = execute(
      lambda image, masks: image_resizing.resize_image(
          image, masks, new_height=3, new_width=4),
      [_flat_image(5, 7), np.zeros((0, 5, 7), np.float32)], dynamic=True)
  assert new_masks.shape == (0, 3, 4)


def test_resize_image_static_shape_from_dynamic_input():
  with tf.Graph().as_default():
    image, true_shape = image_resizing.resize_image(
        tf.compat.v1.placeholder(tf.float32, [None, None, 3]),
        new_height=300, new_width=200)
    assert image.shape.as_list() == [300, 200, 3]
    assert tf.get_static_value(true_shape).tolist() == [300, 200, 3]


def test_resize_image_nearest_neighbor_values(execute):
  # 2x2 -> 4x4 nearest (TF1, no half-pixel centers): source index = out // 2.
  image = np.array([[[1], [2]], [[3], [4]]], np.float32)
  resized, _ = execute(
      lambda image: image_resizing.resize_image(
          image, new_height=4, new_width=4, method=NEAREST), [image])
  np.testing.assert_array_equal(resized[:, :, 0], [[1, 1, 2, 2],
                                                   [1, 1, 2, 2],
                                                   [3, 3, 4, 4],
                                                   [3, 3, 4, 4]])


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('shape,expected', [
    ((100, 200), (150, 300)),  # short side 100 < 150: ratio 1.5
    ((200, 300), (200, 300)),  # short side 200 >= 150: unchanged
])
def test_resize_to_min_dimension(execute, dynamic, shape, expected):
  masks = np.ones((1,) + shape, np.float32)
  image, new_masks, true_shape = execute(
      lambda image, masks: image_resizing.resize_to_min_dimension(
          image, masks, min_dimension=150), [_flat_image(*shape), masks],
      dynamic=dynamic)
  assert image.shape == expected + (3,)
  assert new_masks.shape == (1,) + expected
  np.testing.assert_array_equal(true_shape, expected + (3,))


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('shape,expected', [
    ((400, 200), (300, 150)),  # long side 400 > 300: ratio 0.75
    ((100, 250), (100, 250)),  # long side within 300: unchanged
    ((7, 3), (4, 1)),  # max 4: ratio 4 / 7; 3 * 4 / 7 = 1.71 truncates to 1
])
def test_resize_to_max_dimension(execute, dynamic, shape, expected):
  max_dimension = 4 if shape == (7, 3) else 300
  image, true_shape = execute(
      lambda image: image_resizing.resize_to_max_dimension(
          image, max_dimension=max_dimension), [_flat_image(*shape)],
      dynamic=dynamic)
  assert image.shape == expected + (3,)
  np.testing.assert_array_equal(true_shape, expected + (3,))


@pytest.mark.parametrize('dynamic', [False, True])
def test_resize_pad_to_multiple(execute, dynamic):
  # 101 -> 104 and 199 -> 200, the next multiples of 4.
  masks = np.ones((2, 101, 199), np.float32)
  image, new_masks, true_shape = execute(
      lambda image, masks: image_resizing.resize_pad_to_multiple(
          image, masks, multiple=4), [_flat_image(101, 199), masks],
      dynamic=dynamic)
  assert image.shape == (104, 200, 3)
  np.testing.assert_array_equal(image[:101, :199], 10.0)
  np.testing.assert_array_equal(image[101:], 0.0)
  np.testing.assert_array_equal(image[:, 199:], 0.0)
  assert new_masks.shape == (2, 104, 200)
  assert new_masks.sum() == 2 * 101 * 199
  np.testing.assert_array_equal(true_shape, [101, 199, 3])


def test_pad_to_multiple_static_and_identity():
  with tf.Graph().as_default():
    tensor = tf.zeros([1, 3, 5, 1])
    assert image_resizing.pad_to_multiple(tensor, 4).shape.as_list() == [
        1, 4, 8, 1]
    assert image_resizing.pad_to_multiple(tensor, 1) is tensor


def test_rgb_to_gray(execute):
  image = np.array([[[255, 0, 0], [0, 0, 100]]], np.float32)
  gray = execute(image_resizing.rgb_to_gray, [image])
  # 0.2989 * 255 = 76.2195; 0.1140 * 100 = 11.4.
  np.testing.assert_allclose(gray[:, :, 0], [[76.2195, 11.4]], rtol=1e-5)
