"""shape_utils called the way the original's users call it."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import shape_utils


def test_pad_tensor_int_and_tensor_length(execute):
  def graph_fn(t):
    padded = shape_utils.pad_tensor(t, 4)
    assert padded.shape.as_list() == [4, 2]
    dynamic = shape_utils.pad_tensor(t, tf.constant([4]))
    return padded, dynamic

  padded, dynamic = execute(graph_fn, [np.array([[1, 2], [3, 4]], np.float32)])
  expected = [[1, 2], [3, 4], [0, 0], [0, 0]]
  np.testing.assert_array_equal(padded, expected)
  np.testing.assert_array_equal(dynamic, expected)


def test_clip_tensor_int_and_tensor_length(execute):
  def graph_fn(t):
    clipped = shape_utils.clip_tensor(t, 2)
    assert clipped.shape.as_list() == [2]
    return clipped, shape_utils.clip_tensor(t, tf.constant(1))

  clipped, dynamic = execute(graph_fn, [np.array([5, 6, 7], np.int32)])
  np.testing.assert_array_equal(clipped, [5, 6])
  np.testing.assert_array_equal(dynamic, [5])


@pytest.mark.parametrize('dynamic', [False, True])
def test_pad_or_clip_nd(execute, dynamic):
  def graph_fn(t):
    return (shape_utils.pad_or_clip_nd(t, [2, 4]),
            shape_utils.pad_or_clip_nd(t, [tf.constant(1), None]),
            shape_utils.pad_or_clip_tensor(t, 4))

  t = np.arange(9, dtype=np.float32).reshape(3, 3)
  nd, tensor_dim, first = execute(graph_fn, [t], dynamic=dynamic)
  np.testing.assert_array_equal(nd, [[0, 1, 2, 0], [3, 4, 5, 0]])
  np.testing.assert_array_equal(tensor_dim, [[0, 1, 2]])
  np.testing.assert_array_equal(first, np.concatenate([t, np.zeros([1, 3])]))


def test_pad_or_clip_nd_static_shape_with_tensor_dimension():
  with tf.Graph().as_default():
    t = tf.zeros([3, 5])
    out = shape_utils.pad_or_clip_nd(
        t, [tf.compat.v1.placeholder(tf.int32, []), 2])
    assert out.shape.as_list() == [None, 2]
    assert shape_utils.pad_or_clip_nd(t, [None, 7]).shape.as_list() == [3, 7]


@pytest.mark.parametrize('dynamic', [False, True])
def test_flatten_and_expand_dimensions(execute, dynamic):
  def graph_fn(t):
    return (shape_utils.flatten_dimensions(t, first=1, last=3),
            shape_utils.flatten_first_n_dimensions(t, 2),
            shape_utils.expand_first_dimension(
                shape_utils.flatten_first_n_dimensions(t, 2), [2, 3]))

  t = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
  middle, first, expanded = execute(graph_fn, [t], dynamic=dynamic)
  np.testing.assert_array_equal(middle, t.reshape(2, 12, 5))
  np.testing.assert_array_equal(first, t.reshape(6, 4, 5))
  np.testing.assert_array_equal(expanded, t)


def test_flatten_keeps_static_shape_and_checks_range():
  with tf.Graph().as_default():
    t = tf.zeros([2, 3, 4])
    assert shape_utils.flatten_first_n_dimensions(t, 2).shape.as_list() == [
        6, 4]
    with pytest.raises(ValueError):
      shape_utils.flatten_dimensions(t, first=3, last=3)


def test_expand_first_dimension_rejects_wrong_product(execute):
  with pytest.raises(tf.errors.InvalidArgumentError):
    execute(lambda t: shape_utils.expand_first_dimension(t, [4, 2]),
            [np.zeros([6, 3], np.float32)], dynamic=True)


def test_check_min_image_dim_static_and_dynamic(execute):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='image size must be >= 33'):
      shape_utils.check_min_image_dim(33, tf.zeros([1, 32, 64, 3]))
    image = tf.zeros([1, 40, 40, 3])
    assert shape_utils.check_min_image_dim(33, image) is image
  with pytest.raises(tf.errors.InvalidArgumentError):
    execute(lambda image: shape_utils.check_min_image_dim(33, image),
            [np.zeros([1, 32, 64, 3], np.float32)], dynamic=True)
  out = execute(lambda image: shape_utils.check_min_image_dim(33, image),
                [np.zeros([1, 40, 64, 3], np.float32)], dynamic=True)
  assert out.shape == (1, 40, 64, 3)


def test_assert_shape_equal_along_first_dimension(execute):
  with tf.Graph().as_default():
    assert shape_utils.assert_shape_equal_along_first_dimension(
        [2, 3], [2, 7]).type == 'NoOp'
    with pytest.raises(ValueError, match='Unequal first dimension 2, 3'):
      shape_utils.assert_shape_equal_along_first_dimension([2, 3], [3, 3])

  def graph_fn(a, b):
    check = shape_utils.assert_shape_equal_along_first_dimension(
        shape_utils.combined_static_and_dynamic_shape(a),
        shape_utils.combined_static_and_dynamic_shape(b))
    with tf.control_dependencies([check]):
      return tf.identity(a)

  execute(graph_fn, [np.zeros([2, 3]), np.zeros([2, 5])], dynamic=True)
  with pytest.raises(tf.errors.InvalidArgumentError):
    execute(graph_fn, [np.zeros([2, 3]), np.zeros([4, 3])], dynamic=True)


def test_static_or_dynamic_map_fn_static_and_list(execute):
  def graph_fn(a, b):
    squares = shape_utils.static_or_dynamic_map_fn(tf.square, a)
    sums = shape_utils.static_or_dynamic_map_fn(
        lambda args: [args[0] + args[1], args[0] - args[1]], [a, b])
    return squares, sums

  a = np.array([[1., 2.], [3., 4.]], np.float32)
  b = np.ones([2, 2], np.float32)
  for dynamic in (False, True):
    squares, (plus, minus) = execute(graph_fn, [a, b], dynamic=dynamic)
    np.testing.assert_array_equal(squares, a * a)
    np.testing.assert_array_equal(plus, a + b)
    np.testing.assert_array_equal(minus, a - b)


def test_static_or_dynamic_map_fn_rejects_nested_input():
  with tf.Graph().as_default():
    a = tf.zeros([2, 3])
    with pytest.raises(ValueError, match='must be a Tensor or list'):
      shape_utils.static_or_dynamic_map_fn(tf.identity, {'a': a})
    with pytest.raises(ValueError, match='must be a Tensor or list'):
      shape_utils.static_or_dynamic_map_fn(tf.identity, [a, [a]])
    with pytest.raises(ValueError, match='should return a Tensor'):
      shape_utils.static_or_dynamic_map_fn(lambda x: {'x': x}, a)


def test_resize_images_and_return_shapes(execute):
  def resize(image):
    resized = tf.image.resize(image, [4, 6])
    return [resized, tf.constant([4, 6, 3], tf.int32)]

  images, shapes = execute(
      lambda x: shape_utils.resize_images_and_return_shapes(x, resize),
      [np.ones([2, 8, 8, 3], np.float32)])
  assert images.shape == (2, 4, 6, 3)
  np.testing.assert_array_equal(shapes, [[4, 6, 3], [4, 6, 3]])
  with tf.Graph().as_default(), pytest.raises(ValueError):
    shape_utils.resize_images_and_return_shapes(
        tf.zeros([1, 4, 4, 3], tf.uint8), resize)


def test_assert_box_normalized(execute):
  def graph_fn(boxes):
    with tf.control_dependencies([shape_utils.assert_box_normalized(boxes)]):
      return tf.identity(boxes)

  execute(graph_fn, [np.array([[0., 0., 1., 1.05]], np.float32)])
  with pytest.raises(tf.errors.InvalidArgumentError):
    execute(graph_fn, [np.array([[0., 0., 1., 1.5]], np.float32)])
