"""Crop-and-resize, native and as matrix products, against numpy."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import spatial_transform_ops as ops
from tests.core import crop_and_resize_reference as reference


def _inputs(seed=0, batch=2, height=9, width=11, depth=3, num_boxes=7):
  rng = np.random.RandomState(seed)
  image = rng.uniform(-1, 1, [batch, height, width, depth]).astype(np.float32)
  corners = rng.uniform(-0.3, 1.3, [batch, num_boxes, 2, 2])
  boxes = np.concatenate([corners.min(axis=2), corners.max(axis=2)], axis=-1)
  boxes[:, 0] = [0.0, 0.0, 1.0, 1.0]         # The whole image.
  boxes[:, 1] = [0.4, 0.3, 0.4, 0.3]         # Zero size: one point.
  boxes[:, 2] = [0.2, 0.5, 0.2, 0.9]         # Zero height.
  boxes[:, 3] = [0.9, 0.8, 0.1, 0.2]         # Flipped.
  boxes[:, 4] = [-0.5, -0.5, -0.1, -0.2]     # Entirely outside.
  return image, boxes.astype(np.float32)


CROP_SIZES = [[3, 4], [1, 1], [1, 5], [14, 14]]


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('crop_size', CROP_SIZES)
def test_native_matches_numpy(execute, crop_size, dynamic):
  image, boxes = _inputs()
  crops = execute(lambda i, b: ops.native_crop_and_resize(i, b, crop_size),
                  [image, boxes], dynamic=dynamic)
  np.testing.assert_allclose(
      crops, reference.crop_and_resize(image, boxes, crop_size), atol=1e-5)


@pytest.mark.parametrize('crop_size', CROP_SIZES)
@pytest.mark.parametrize('extrapolation_value', [0.0, -2.0])
def test_matmul_matches_tf_crop_and_resize(execute, crop_size,
                                           extrapolation_value):
  image, boxes = _inputs(seed=1)

  def graph(images, boxes):
    matmul = ops.matmul_crop_and_resize(images, boxes, crop_size,
                                        extrapolation_value)
    native = tf.image.crop_and_resize(
        images, tf.reshape(boxes, [-1, 4]), tf.repeat(tf.range(2), 7),
        crop_size, extrapolation_value=extrapolation_value)
    return matmul, native

  matmul, native = execute(graph, [image, boxes])
  assert matmul.shape == (2, 7) + tuple(crop_size) + (3,)
  np.testing.assert_allclose(matmul, native.reshape(matmul.shape), atol=1e-5)


def test_matmul_both_contraction_orders(execute):
  # A tall image contracts x first, a wide one y first: same results.
  for height, width in ((20, 5), (5, 20)):
    image, boxes = _inputs(seed=2, height=height, width=width)
    crops = execute(lambda i, b: ops.matmul_crop_and_resize(i, b, [6, 3]),
                    [image, boxes])
    np.testing.assert_allclose(
        crops, reference.crop_and_resize(image, boxes, [6, 3]), atol=1e-5)


def test_matmul_integer_image_and_dynamic_box_count(execute):
  image, boxes = _inputs(seed=3)
  int_image = np.round(image * 100).astype(np.int32)

  def graph(images, boxes):
    boxes = tf.compat.v1.placeholder_with_default(boxes, [2, None, 4])
    crops = ops.matmul_crop_and_resize(images, boxes, [2, 3])
    assert crops.shape.as_list() == [2, None, 2, 3, 3]
    return crops

  crops = execute(graph, [int_image, boxes])
  assert crops.dtype == np.float32
  np.testing.assert_allclose(
      crops, reference.crop_and_resize(int_image.astype(np.float64), boxes,
                                       [2, 3]), atol=1e-3)


def test_static_shapes():
  with tf.Graph().as_default():
    crops = ops.matmul_crop_and_resize(tf.zeros([2, 9, 11, 3]),
                                       tf.zeros([2, 7, 4]), [5, 4])
    assert crops.shape.as_list() == [2, 7, 5, 4, 3]
    native = ops.native_crop_and_resize(tf.zeros([2, 9, 11, 3]),
                                        tf.zeros([2, 7, 4]), [5, 4])
    assert native.shape.as_list() == [2, 7, 5, 4, 3]


def test_matmul_compiles_with_xla():
  image, boxes = _inputs(seed=4)
  compiled = tf.function(
      lambda i, b: ops.matmul_crop_and_resize(i, b, [7, 7], -1.0),
      jit_compile=True)
  crops = compiled(tf.constant(image), tf.constant(boxes)).numpy()
  np.testing.assert_allclose(
      crops, reference.crop_and_resize(image, boxes, [7, 7], -1.0), atol=1e-5)


def test_matmul_gradient_matches_native():
  image, boxes = _inputs(seed=5)
  image = tf.constant(image)
  gradients = []
  for crop_fn in (ops.matmul_crop_and_resize, ops.native_crop_and_resize):
    with tf.GradientTape() as tape:
      tape.watch(image)
      crops = crop_fn(image, tf.constant(boxes), [4, 4])
      weights = tf.reshape(tf.range(672.0), [2, 7, 4, 4, 3])
      loss = tf.reduce_sum(crops * weights)
    gradients.append(tape.gradient(loss, image).numpy())
  np.testing.assert_allclose(gradients[0], gradients[1], atol=1e-4)


def test_matmul_rejects_bad_arguments():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='crop_size'):
      ops.matmul_crop_and_resize(tf.zeros([1, 4, 4, 1]), tf.zeros([1, 1, 4]),
                                 [0, 3])
    unknown = tf.compat.v1.placeholder(tf.float32, [1, None, None, 1])
    with pytest.raises(ValueError, match='static image height'):
      ops.matmul_crop_and_resize(unknown, tf.zeros([1, 1, 4]), [2, 2])
