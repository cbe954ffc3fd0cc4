"""utils/ops: the original's other helpers, checked against numpy."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.compat import ops
from od_estimator.core import standard_fields as fields
from od_estimator.core import spatial_transform_ops


def test_nearest_neighbor_upsampling_repeats_pixels(execute):
  image = np.arange(2 * 2 * 3 * 2, dtype=np.float32).reshape([2, 2, 3, 2])
  both = execute(lambda x: ops.nearest_neighbor_upsampling(x, scale=2),
                 [image])
  np.testing.assert_array_equal(
      both, np.repeat(np.repeat(image, 2, axis=1), 2, axis=2))
  apart = execute(lambda x: ops.nearest_neighbor_upsampling(
      x, height_scale=3, width_scale=1), [image], dynamic=True)
  np.testing.assert_array_equal(apart, np.repeat(image, 3, axis=1))
  with pytest.raises(ValueError, match='height_scale'):
    ops.nearest_neighbor_upsampling(image, height_scale=2)


def test_normalized_to_image_coordinates(execute):
  boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.5, 0.25, 0.75, 1.0]]],
                   np.float32)
  shape = np.array([1, 40, 80, 3], np.int32)
  absolute = execute(ops.normalized_to_image_coordinates, [boxes, shape])
  np.testing.assert_allclose(
      absolute, [[[0, 0, 40, 80], [20, 20, 30, 80]]])


def test_matmul_gather_keeps_the_indices_shape(execute):
  params = np.arange(12, dtype=np.float32).reshape([4, 3])
  indices = np.array([[3, 0], [1, 1]], np.int32)
  gathered = execute(ops.matmul_gather_on_zeroth_axis, [params, indices])
  assert gathered.shape == (2, 2, 3)
  np.testing.assert_array_equal(gathered, params[indices])


def test_indices_to_dense_vector(execute):
  vector = execute(lambda i: ops.indices_to_dense_vector(
      i, 6, indices_value=2.5, default_value=-1), [np.array([4, 0, 4])])
  np.testing.assert_array_equal(vector, [2.5, -1, -1, -1, 2.5, -1])


def test_meshgrid_and_expanded_shape_as_numpy(execute):
  x, y = np.array([1, 2, 3]), np.array([10, 20])
  xgrid, ygrid = execute(ops.meshgrid, [x, y])
  expected_x, expected_y = np.meshgrid(x, y)
  np.testing.assert_array_equal(xgrid, expected_x)
  np.testing.assert_array_equal(ygrid, expected_y)
  shape = execute(lambda s: ops.expanded_shape(s, 1, 2),
                  [np.array([4, 5, 6], np.int32)])
  np.testing.assert_array_equal(shape, [4, 1, 1, 5, 6])


def test_padded_one_hot_and_gather_with_padding(execute):
  one_hot = execute(lambda i: ops.padded_one_hot_encoding(i, 3, 1),
                    [np.array([2, 0])])
  np.testing.assert_array_equal(one_hot, [[0, 0, 0, 1], [0, 1, 0, 0]])
  assert ops.padded_one_hot_encoding(np.array([1]), 0, 1) is None
  with pytest.raises(ValueError, match='left_pad'):
    ops.padded_one_hot_encoding(np.array([1]), 2, -1)
  values = np.array([[1., 1.], [2., 2.]], np.float32)
  gathered = execute(lambda v, i: ops.gather_with_padding_values(
      v, i, np.array([9., 9.], np.float32)), [values, np.array([1, -1, 0])])
  np.testing.assert_array_equal(gathered, [[2, 2], [9, 9], [1, 1]])


def test_fpn_feature_levels(execute):
  boxes = np.array([[[0, 0, 1, 1], [0, 0, 0.25, 0.25], [0, 0, .01, .01]]],
                   np.float32)
  levels = execute(lambda b: ops.fpn_feature_levels(4, 2, 1.0, b), [boxes])
  np.testing.assert_array_equal(levels, [[2, 0, 0]])


def test_crops_are_spatial_transform_ops():
  assert ops.matmul_crop_and_resize is (
      spatial_transform_ops.matmul_crop_and_resize)
  assert ops.native_crop_and_resize is (
      spatial_transform_ops.native_crop_and_resize)


def test_groundtruth_filters_keep_every_per_box_field():
  from od_estimator.core import standard_fields as fields  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  in_fields = fields.InputDataFields
  nan = float('nan')
  with tf.Graph().as_default():
    tensors = {
        in_fields.groundtruth_boxes: tf.constant(
            [[0, 0, 1, 1], [nan, 0, 1, 1], [0, 0, .5, .5], [0, 0, .2, .2]]),
        in_fields.groundtruth_classes: tf.constant([1, 2, -1, 0]),
        in_fields.groundtruth_is_crowd: tf.constant(
            [False, False, False, True]),
        in_fields.groundtruth_area: tf.constant([], tf.float32),
        in_fields.image: tf.zeros([2, 2, 3]),
    }
    results = [ops.filter_groundtruth_with_nan_box_coordinates(tensors),
               ops.filter_unrecognized_classes(tensors),
               ops.filter_groundtruth_with_crowd_boxes(tensors),
               ops.retain_groundtruth_with_positive_classes(tensors)]
    with tf.compat.v1.Session() as session:
      nan_free, recognized, not_crowd, positive = session.run(results)
      scores = session.run(ops.replace_nan_groundtruth_label_scores_with_ones(
          tf.constant([nan, 0.5])))
  np.testing.assert_array_equal(
      nan_free[in_fields.groundtruth_classes], [1, -1, 0])
  np.testing.assert_array_equal(
      recognized[in_fields.groundtruth_classes], [1, 2, 0])
  np.testing.assert_array_equal(
      not_crowd[in_fields.groundtruth_is_crowd], [False] * 3)
  np.testing.assert_array_equal(positive[in_fields.groundtruth_classes],
                                [1, 2])
  assert positive[in_fields.groundtruth_boxes].shape == (2, 4)
  assert positive[in_fields.groundtruth_area].shape == (0,)
  assert positive[in_fields.image].shape == (2, 2, 3)
  np.testing.assert_array_equal(scores, [1.0, 0.5])
  with pytest.raises(ValueError, match='shape of valid_indices'):
    ops.retain_groundtruth(tensors, np.zeros([2, 2], np.int64))


def test_sequence_frame_helpers_have_the_original_names():
  # As the original's: context tensors get a frame axis; images decode.
  image = tf.io.encode_png(tf.zeros([2, 3, 3], tf.uint8))
  tensors = {fields.InputDataFields.image: tf.stack([image, image]),
             fields.InputDataFields.context_features: tf.ones([4, 2])}
  tiled = ops.tile_context_tensors(tensors)
  assert tiled[fields.InputDataFields.context_features].shape == (2, 4, 2)
  frame = ops.decode_image({fields.InputDataFields.image: image})
  assert frame[fields.InputDataFields.image].shape == (2, 3, 3)
