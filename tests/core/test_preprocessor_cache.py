"""PreprocessorCache and preprocess(preprocess_vars_cache=...): two calls
sharing a cache make the same random choices (the original's contract)."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import preprocessor
from od_estimator.core import preprocessor_cache
from od_estimator.core import standard_fields as fields
from tests import fast_graphs
from tests import plain_session

_F = fields.InputDataFields
_PERMUTATION = {'keypoint_flip_permutation': [1, 0]}

# Every random op of the default arg map, with arguments that make its
# random choices visible.
_RANDOM_STEPS = [
    (preprocessor.random_horizontal_flip, _PERMUTATION),
    (preprocessor.random_vertical_flip, _PERMUTATION),
    (preprocessor.random_rotation90, {'keypoint_rot_permutation': [1, 0]}),
    (preprocessor.random_pixel_value_scale, {}),
    (preprocessor.random_image_scale, {}),
    (preprocessor.random_rgb_to_gray, {'probability': 0.5}),
    (preprocessor.random_adjust_brightness, {}),
    (preprocessor.random_adjust_contrast, {}),
    (preprocessor.random_adjust_hue, {}),
    (preprocessor.random_adjust_saturation, {}),
    (preprocessor.random_distort_color, {}),
    (preprocessor.random_jitter_boxes, {}),
    (preprocessor.random_crop_image, {}),
    (preprocessor.random_pad_image, {}),
    (preprocessor.random_absolute_pad_image,
     {'max_height_padding': 10, 'max_width_padding': 10}),
    (preprocessor.random_crop_pad_image, {}),
    (preprocessor.random_crop_to_aspect_ratio, {'aspect_ratio': 0.5}),
    (preprocessor.random_pad_to_aspect_ratio, {}),
    (preprocessor.random_black_patches, {'probability': 0.5}),
    (preprocessor.random_resize_method, {'target_size': [20, 20]}),
    (preprocessor.ssd_random_crop, {}),
    (preprocessor.ssd_random_crop_pad, {}),
    (preprocessor.ssd_random_crop_fixed_aspect_ratio, {}),
    (preprocessor.ssd_random_crop_pad_fixed_aspect_ratio, {}),
    (preprocessor.random_jpeg_quality, {'random_coef': 0.5}),
    (preprocessor.random_patch_gaussian, {'max_patch_size': 16}),
    (preprocessor.random_square_crop_by_scale, {}),
    (preprocessor.random_scale_crop_and_pad_to_square, {'output_size': 32}),
    (preprocessor.drop_label_probabilistically,
     {'dropped_label': 1, 'drop_probability': 0.5}),
    (preprocessor.random_self_concat_image,
     {'concat_vertical_probability': 0.5,
      'concat_horizontal_probability': 0.5}),
    (preprocessor.random_downscale_to_target_pixels,
     {'min_target_pixels': 100, 'max_target_pixels': 900}),
]


def _inputs():
  rng = np.random.RandomState(1)
  masks = np.zeros([2, 32, 32], np.float32)
  masks[0, 4:16, 4:20] = 1.0
  masks[1, 16:30, 10:28] = 1.0
  return {
      _F.image: tf.constant(rng.uniform(0, 255, [1, 32, 32, 3]), tf.float32),
      _F.groundtruth_boxes: tf.constant(
          [[0.125, 0.125, 0.5, 0.625], [0.5, 0.3125, 0.9375, 0.875]],
          tf.float32),
      _F.groundtruth_classes: tf.constant([1, 2], tf.int32),
      _F.groundtruth_weights: tf.constant([1.0, 1.0], tf.float32),
      _F.groundtruth_instance_masks: tf.constant(masks),
      _F.groundtruth_keypoints: tf.constant(
          [[[0.2, 0.2], [0.4, 0.5]], [[0.6, 0.4], [0.9, 0.8]]], tf.float32),
  }


def _run_twice(steps, cache_1, cache_2, runs=3):
  """Outputs of two preprocess calls on the same inputs, `runs` times."""
  arg_map = preprocessor.get_default_func_arg_map(
      include_instance_masks=True, include_keypoints=True)
  with fast_graphs.new_graph():
    inputs = _inputs()
    first = preprocessor.preprocess(inputs, steps, arg_map,
                                    preprocess_vars_cache=cache_1)
    second = preprocessor.preprocess(inputs, steps, arg_map,
                                     preprocess_vars_cache=cache_2)
    with plain_session.session() as sess:
      return [sess.run([first, second]) for _ in range(runs)]


@pytest.mark.parametrize('step', _RANDOM_STEPS,
                         ids=[s[0].__name__ for s in _RANDOM_STEPS])
def test_same_cache_same_outputs(step):
  cache = preprocessor_cache.PreprocessorCache()
  for first, second in _run_twice([step], cache, cache):
    assert sorted(first) == sorted(second)
    for key in first:
      np.testing.assert_array_equal(first[key], second[key], err_msg=key)


def test_whole_pipeline_with_one_cache():
  cache = preprocessor_cache.PreprocessorCache()
  steps = [s for s in _RANDOM_STEPS
           if s[0] is not preprocessor.random_self_concat_image]
  runs = _run_twice(steps, cache, cache, runs=2)
  for first, second in runs:
    for key in first:
      np.testing.assert_array_equal(first[key], second[key], err_msg=key)
  # The choices are random (new ones each run), just shared by the calls.
  assert not np.array_equal(runs[0][0][_F.image], runs[1][0][_F.image])


def test_different_caches_draw_independently():
  step = (preprocessor.random_pixel_value_scale, {})
  (first, second), = _run_twice([step], preprocessor_cache.PreprocessorCache(),
                                preprocessor_cache.PreprocessorCache(),
                                runs=1)
  assert not np.array_equal(first[_F.image], second[_F.image])
  (first, second), = _run_twice([step], None, None, runs=1)
  assert not np.array_equal(first[_F.image], second[_F.image])


def test_op_called_directly_with_cache():
  cache = preprocessor_cache.PreprocessorCache()
  with fast_graphs.new_graph():
    image = tf.ones([8, 8, 3])
    first = preprocessor.random_image_scale(image,
                                            preprocess_vars_cache=cache)
    second = preprocessor.random_image_scale(image,
                                             preprocess_vars_cache=cache)
    with plain_session.session() as sess:
      for _ in range(3):
        a, b = sess.run([first[0], second[0]])
        assert a.shape == b.shape


def test_random_function_without_cache_argument_is_refused():
  def my_random_op(image):
    return image + tf.random.uniform([])

  arg_map = {my_random_op: (_F.image,)}
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match='my_random_op takes no '
                       'preprocess_vars_cache'):
      preprocessor.preprocess({_F.image: tf.ones([1, 4, 4, 3])},
                              [(my_random_op, {})], arg_map,
                              preprocess_vars_cache=(
                                  preprocessor_cache.PreprocessorCache()))


def test_deterministic_ops_accept_a_cache():
  with fast_graphs.new_graph():
    out = preprocessor.preprocess(
        {_F.image: tf.fill([1, 2, 2, 3], 255.0)},
        [(preprocessor.normalize_image,
          {'original_minval': 0, 'original_maxval': 255,
           'target_minval': 0, 'target_maxval': 1})],
        preprocess_vars_cache=preprocessor_cache.PreprocessorCache())
    with plain_session.session() as sess:
      np.testing.assert_allclose(sess.run(out[_F.image]), 1.0)


def test_cache_get_update_clear():
  cache = preprocessor_cache.PreprocessorCache()
  flip = preprocessor_cache.PreprocessorCache.HORIZONTAL_FLIP
  assert cache.get(flip, '') is None
  cache.update(flip, '', 'value')
  assert cache.get(flip, '') == 'value'
  assert cache.get(flip, 'other') is None
  cache.clear()
  assert cache.get(flip, '') is None
  with pytest.raises(ValueError, match='Function id not recognized'):
    cache.update('no_such_op', '', 1)


def test_cache_inside_a_dataset_map():
  steps = [(preprocessor.random_crop_image, {}),
           (preprocessor.random_adjust_brightness, {})]

  # Without AutoGraph, as dataset_builder maps the input transforms.
  @tf.autograph.experimental.do_not_convert
  def augment_twice(image):
    cache = preprocessor_cache.PreprocessorCache()
    views = [preprocessor.preprocess(
        {_F.image: image[None],
         _F.groundtruth_boxes: tf.constant([[0.1, 0.1, 0.6, 0.6]]),
         _F.groundtruth_classes: tf.constant([1]),
         _F.groundtruth_weights: tf.constant([1.0])},
        steps, preprocess_vars_cache=cache)[_F.image] for _ in range(2)]
    return tuple(views)

  with fast_graphs.new_graph():
    images = np.random.RandomState(2).rand(3, 16, 16, 3).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(images).map(augment_twice)
    first, second = tf.compat.v1.data.make_one_shot_iterator(
        dataset).get_next()
    with plain_session.session() as sess:
      for _ in range(3):
        a, b = sess.run([first, second])
        np.testing.assert_array_equal(a, b)
