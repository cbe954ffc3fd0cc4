"""Position-sensitive crops against a numpy reference."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import position_sensitive_crop as ps_crop
from tests.core import crop_and_resize_reference as reference


def _inputs(depth, seed=0, batch=2, height=7, width=9, num_boxes=5):
  rng = np.random.RandomState(seed)
  images = rng.uniform(-1, 1, [batch, height, width, depth]).astype(
      np.float32)
  corners = rng.uniform(-0.2, 1.2, [batch, num_boxes, 2, 2])
  boxes = np.concatenate([corners.min(axis=2), corners.max(axis=2)], -1)
  boxes[:, 0] = [0.0, 0.0, 1.0, 1.0]       # The whole image.
  boxes[:, 1] = [0.8, 0.7, 0.2, 0.1]       # Flipped.
  boxes[:, 2] = [0.5, 0.5, 0.5, 0.5]       # Zero size.
  return images, boxes.astype(np.float32)


# (crop_size, num_spatial_bins, channels per bin).
CASES = [([3, 3], [3, 3], 2), ([6, 4], [3, 2], 3), ([4, 6], [1, 3], 1),
         ([2, 2], [1, 1], 4), ([6, 6], [2, 2], 1)]


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('global_pool', [True, False])
@pytest.mark.parametrize('crop_size,num_spatial_bins,channels', CASES)
def test_batch_matches_numpy(execute, crop_size, num_spatial_bins, channels,
                             global_pool, dynamic):
  images, boxes = _inputs(channels * num_spatial_bins[0] *
                          num_spatial_bins[1])
  crops = execute(
      lambda i, b: ps_crop.batch_position_sensitive_crop_regions(
          i, b, crop_size, num_spatial_bins, global_pool),
      [images, boxes], dynamic=dynamic)
  expected = reference.position_sensitive_crop(
      images, boxes, crop_size, num_spatial_bins, global_pool)
  assert crops.shape == expected.shape
  np.testing.assert_allclose(crops, expected, atol=1e-5)


@pytest.mark.parametrize('global_pool', [True, False])
def test_one_image_matches_numpy(execute, global_pool):
  images, boxes = _inputs(depth=8, batch=1)
  crops = execute(
      lambda i, b: ps_crop.position_sensitive_crop_regions(
          i, b, [4, 2], [2, 2], global_pool),
      [images[0], boxes[0]])
  np.testing.assert_allclose(
      crops, reference.position_sensitive_crop(images, boxes, [4, 2], [2, 2],
                                               global_pool)[0], atol=1e-5)


def test_bins_read_their_channel_group_row_by_row(execute):
  # Channel group k holds the constant 10 k: the assembled crop shows which
  # group each bin read, and the pooled value is their mean.
  groups = np.repeat(10.0 * np.arange(6), 2).astype(np.float32)
  images = np.broadcast_to(groups, [1, 5, 5, 12])
  boxes = np.array([[[0.1, 0.2, 0.9, 0.7]]], np.float32)
  assembled, pooled = execute(
      lambda i, b: [ps_crop.batch_position_sensitive_crop_regions(
          i, b, [4, 6], [2, 3], global_pool) for global_pool in (False, True)],
      [images, boxes])
  np.testing.assert_allclose(assembled[0, 0, :, :, 0], [
      [0, 0, 10, 10, 20, 20], [0, 0, 10, 10, 20, 20],
      [30, 30, 40, 40, 50, 50], [30, 30, 40, 40, 50, 50]], atol=1e-4)
  np.testing.assert_allclose(assembled[..., 1], assembled[..., 0])
  np.testing.assert_allclose(pooled, np.full([1, 1, 1, 1, 2], 25.0),
                             atol=1e-4)


@pytest.mark.parametrize('global_pool', [True, False])
def test_static_shapes_use_matrix_products(global_pool):
  with tf.Graph().as_default() as graph:
    crops = ps_crop.batch_position_sensitive_crop_regions(
        tf.zeros([2, 7, 9, 18]), tf.zeros([2, 5, 4]), [6, 3], [3, 3],
        global_pool)
    op_types = {op.type for op in graph.get_operations()}
  assert crops.shape.as_list() == (
      [2, 5, 1, 1, 2] if global_pool else [2, 5, 6, 3, 2])
  assert 'CropAndResize' not in op_types


def test_compiles_with_xla():
  images, boxes = _inputs(depth=18, seed=3)
  compiled = tf.function(
      lambda i, b: ps_crop.batch_position_sensitive_crop_regions(
          i, b, [6, 6], [3, 3], global_pool=True),
      jit_compile=True)
  crops = compiled(tf.constant(images), tf.constant(boxes)).numpy()
  np.testing.assert_allclose(
      crops, reference.position_sensitive_crop(images, boxes, [6, 6], [3, 3],
                                               True), atol=1e-5)


def test_dynamic_shapes_keep_what_is_known():
  with tf.Graph().as_default():
    images = tf.compat.v1.placeholder(tf.float32, [None, None, None, 18])
    boxes = tf.compat.v1.placeholder(tf.float32, [None, 300, 4])
    crops = ps_crop.batch_position_sensitive_crop_regions(
        images, boxes, [9, 9], [3, 3], global_pool=False)
  assert crops.shape.as_list() == [None, 300, 9, 9, 2]


@pytest.mark.parametrize('crop_size,num_spatial_bins,depth,message', [
    ([9, 9], [0, 3], 9, 'num_spatial_bins should be >= 1'),
    ([9, 8], [3, 3], 9, 'crop_size should be divisible by num_spatial_bins'),
    ([4, 4], [2, 2], 6, 'depth of the score maps'),
    ([4], [2, 2], 8, 'two ints'),
])
def test_invalid_sizes_raise(crop_size, num_spatial_bins, depth, message):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=message):
      ps_crop.batch_position_sensitive_crop_regions(
          tf.zeros([1, 5, 5, depth]), tf.zeros([1, 2, 4]), crop_size,
          num_spatial_bins, global_pool=True)
