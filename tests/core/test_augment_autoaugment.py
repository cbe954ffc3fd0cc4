"""Tests for autoaugment_image (policy v0) and its ops, values by hand."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import preprocessor_builder
from od_estimator.core import augment_autoaugment
from od_estimator.core import autoaugment_ops as ops
from od_estimator.core import preprocessor
from od_estimator.core import preprocessor_cache
from od_estimator.core import standard_fields as fields
from od_estimator.protos import preprocessor_pb2


def _run(build_fn, repeats=1):
  """Builds build_fn() in a fresh graph and runs it `repeats` times."""
  with tf.Graph().as_default():
    outputs = build_fn()
    with tf.compat.v1.Session() as sess:
      results = [sess.run(outputs) for _ in range(repeats)]
  return results[0] if repeats == 1 else results


def _rows_image(height, width):
  """uint8 [H, W, 3]: pixel (y, x) is 10 * y + x in every channel."""
  values = 10 * np.arange(height)[:, None] + np.arange(width)[None, :]
  return np.repeat(values[:, :, None], 3, axis=2).astype(np.uint8)


def test_translate_x_moves_content_and_box_by_pixels_over_width():
  image = _rows_image(8, 10)
  boxes = np.array([[0.0, 0.4, 0.5, 0.8]], np.float32)
  left, left_boxes = _run(lambda: ops.translate_with_boxes(
      tf.constant(image), tf.constant(boxes), 2.0, horizontal=True))
  np.testing.assert_array_equal(left[:, :8], image[:, 2:])
  np.testing.assert_array_equal(left[:, 8:], 128)
  np.testing.assert_allclose(left_boxes, [[0.0, 0.2, 0.5, 0.6]])
  right, right_boxes = _run(lambda: ops.translate_with_boxes(
      tf.constant(image), tf.constant(boxes), -3.0, horizontal=True))
  np.testing.assert_array_equal(right[:, 3:], image[:, :7])
  np.testing.assert_array_equal(right[:, :3], 128)
  # xmax 8 + 3 pixels is clipped to the width.
  np.testing.assert_allclose(right_boxes, [[0.0, 0.7, 0.5, 1.0]])


def test_translate_box_pushed_out_keeps_a_minimal_width():
  boxes = np.array([[0.0, 0.0, 0.5, 0.2]], np.float32)
  _, moved = _run(lambda: ops.translate_with_boxes(
      tf.constant(_rows_image(8, 10)), tf.constant(boxes), 5.0, True))
  # Both x corners clip to 0; the box is widened to max 0.05.
  np.testing.assert_allclose(moved, [[0.0, 0.0, 0.5, 0.05]])


def test_shear_x_moves_rows_and_box_corners():
  image = _rows_image(8, 8)
  boxes = np.array([[0.5, 0.25, 0.75, 0.5]], np.float32)
  sheared, new_boxes = _run(lambda: ops.shear_with_boxes(
      tf.constant(image), tf.constant(boxes), 0.5, horizontal=True))
  np.testing.assert_array_equal(sheared[0], image[0])
  # Row 2 reads input x + 1, row 4 input x + 2 (then grey beyond the edge).
  np.testing.assert_array_equal(sheared[2, :7], image[2, 1:])
  np.testing.assert_array_equal(sheared[4, :6], image[4, 2:])
  np.testing.assert_array_equal(sheared[4, 6:], 128)
  # Corners (y, x) 4..6 x 2..4 pixels: x - 0.5 y spans -1..2, clipped at 0.
  np.testing.assert_allclose(new_boxes, [[0.5, 0.0, 0.75, 0.25]])


def test_rotate_90_turns_image_and_box_counterclockwise():
  image = _rows_image(8, 8)
  boxes = np.array([[0.0, 0.0, 0.25, 0.75]], np.float32)
  rotated, new_boxes = _run(lambda: ops.rotate_with_boxes(
      tf.constant(image), tf.constant(boxes), 90.0))
  np.testing.assert_array_equal(rotated, np.rot90(image))
  # The top strip (rows 0..2, columns 0..6) ends on the left, columns 0..2,
  # rows 2..8; corners are truncated to whole pixels, so within a pixel.
  np.testing.assert_allclose(new_boxes, [[0.25, 0.0, 1.0, 0.25]],
                             atol=1 / 8 + 1e-6)


def test_translate_y_only_boxes_moves_content_inside_the_box():
  image = _rows_image(8, 8)
  boxes = np.array([[0.25, 0.25, 0.75, 0.75]], np.float32)
  # probability 3 -> each box is picked with probability 3 / 3 = 1.
  moved, same_boxes = _run(lambda: ops.translate_y_only_boxes(
      tf.constant(image), tf.constant(boxes), 3.0, 2.0))
  expected = image.copy()
  # Box pixels rows 2..6, columns 2..6: rows read 2 lower, grey at bottom.
  expected[2:5, 2:7] = image[4:7, 2:7]
  expected[5:7, 2:7] = 128
  np.testing.assert_array_equal(moved, expected)
  np.testing.assert_array_equal(same_boxes, boxes)
  untouched, _ = _run(lambda: ops.translate_y_only_boxes(
      tf.constant(image), tf.constant(boxes), 0.0, 2.0))
  np.testing.assert_array_equal(untouched, image)


def test_equalize_two_level_image_and_flat_channel():
  image = np.zeros([32, 32, 3], np.uint8)
  image[:16, :, 0] = 10
  image[16:, :, 0] = 20
  image[:, :, 1] = 77
  image[:, :, 2] = image[:, :, 0]
  equalized = _run(lambda: ops.equalize(tf.constant(image)))
  # 512 pixels below the top level: step 2, lut[10] = 0, lut[20] = 255.
  np.testing.assert_array_equal(equalized[:16, :, 0], 0)
  np.testing.assert_array_equal(equalized[16:, :, 0], 255)
  np.testing.assert_array_equal(equalized[:, :, 2], equalized[:, :, 0])
  # One level only: step 0, channel unchanged.
  np.testing.assert_array_equal(equalized[:, :, 1], 77)


def test_cutout_sets_a_clipped_square_to_grey():
  image = np.full([10, 12, 3], 7, np.uint8)
  results = _run(lambda: ops.cutout(tf.constant(image), 2), repeats=20)
  for result in results:
    grey = np.all(result == 128, axis=2)
    assert np.all((result == 128) | (result == 7))
    rows = np.flatnonzero(grey.any(axis=1))
    cols = np.flatnonzero(grey.any(axis=0))
    # A full rectangle, at most 4 x 4 (2 * pad_size), at least 2 x 2.
    assert grey.sum() == len(rows) * len(cols)
    assert 2 <= len(rows) <= 4 and 2 <= len(cols) <= 4
    assert np.all(np.diff(rows) == 1) and np.all(np.diff(cols) == 1)


def test_color_factor_scales_channel_spread():
  image = np.zeros([4, 4, 3], np.uint8)
  image[:, :, 0], image[:, :, 1] = 200, 100
  grey = np.full([4, 4, 3], 90, np.uint8)
  same, weak, grey_out = _run(lambda: (
      ops.color(tf.constant(image), 1.0), ops.color(tf.constant(image), 0.1),
      ops.color(tf.constant(grey), 1.54)))
  np.testing.assert_array_equal(same, image)
  spread = weak[..., 0].astype(int) - weak[..., 1].astype(int)
  assert np.all(np.abs(spread - 10) <= 1)
  np.testing.assert_array_equal(grey_out, grey)


def test_policy_draws_each_sub_policy_uniformly():
  image = np.zeros([4, 4, 3], np.uint8)
  image[:, :, 0], image[:, :, 1] = 200, 100
  levels = [0, 2, 4, 6, 8]
  policy = [[('Color', 1.0, level)] for level in levels]
  spreads = {round(100 * (level / 10 * 1.8 + 0.1)) for level in levels}
  results = _run(lambda: augment_autoaugment.apply_policy(
      tf.constant(image), tf.zeros([0, 4]), policy)[0], repeats=80)
  seen = set()
  for result in results:
    spread = int(result[0, 0, 0]) - int(result[0, 0, 1])
    nearest = min(spreads, key=lambda s: abs(s - spread))
    assert abs(nearest - spread) <= 2
    seen.add(nearest)
  assert seen == spreads


def test_policy_v0_is_the_originals():
  assert augment_autoaugment.POLICIES['v0'] == [
      [('TranslateX_BBox', 0.6, 4), ('Equalize', 0.8, 10)],
      [('TranslateY_Only_BBoxes', 0.2, 2), ('Cutout', 0.8, 8)],
      [('Sharpness', 0.0, 8), ('ShearX_BBox', 0.4, 0)],
      [('ShearY_BBox', 1.0, 2), ('TranslateY_Only_BBoxes', 0.6, 6)],
      [('Rotate_BBox', 0.6, 10), ('Color', 1.0, 6)],
  ]


@pytest.mark.parametrize('boxes', [
    np.array([[0.1, 0.2, 0.6, 0.7], [0.5, 0.5, 0.9, 0.8]], np.float32),
    np.zeros([0, 4], np.float32)])
def test_each_v0_sub_policy_builds_and_keeps_boxes_normalized(boxes):
  rng = np.random.RandomState(0)
  image = rng.uniform(0, 255, [24, 32, 3]).astype(np.float32)

  def build():
    return [augment_autoaugment._apply_sub_policy(
        tf.cast(tf.constant(image), tf.uint8), tf.constant(boxes), sub, None)
            for sub in augment_autoaugment.POLICIES['v0']]
  runs = _run(build, repeats=3)
  for out_image, out_boxes in [pair for run in runs for pair in run]:
    assert out_image.shape == (24, 32, 3) and out_image.dtype == np.uint8
    assert out_boxes.shape == boxes.shape
    assert np.all((out_boxes >= 0) & (out_boxes <= 1))
    assert np.all(out_boxes[:, 2:] >= out_boxes[:, :2])
  for run in runs:
    # Sub-policy 5 ends with Color (probability 1, factor 1.18).
    assert np.any(run[4][0] != image.astype(np.uint8))


def test_autoaugment_image_with_a_cache_repeats_its_choices():
  image = np.random.RandomState(1).uniform(0, 255, [16, 20, 3]).astype(
      np.float32)
  boxes = np.array([[0.1, 0.2, 0.6, 0.7]], np.float32)

  def build():
    cache = preprocessor_cache.PreprocessorCache()
    first = preprocessor.autoaugment_image(
        tf.constant(image), tf.constant(boxes), preprocess_vars_cache=cache)
    second = preprocessor.autoaugment_image(
        tf.constant(image), tf.constant(boxes), preprocess_vars_cache=cache)
    return first, second
  for first, second in _run(build, repeats=5):
    assert first[0].dtype == np.float32
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])


def test_unknown_policy_is_refused():
  with pytest.raises(ValueError, match='policy_name'):
    augment_autoaugment.autoaugment_image(
        tf.zeros([4, 4, 3]), tf.zeros([0, 4]), policy_name='v9')


def test_non_rgb_image_is_refused():
  with pytest.raises(ValueError, match='RGB'):
    augment_autoaugment.autoaugment_image(tf.zeros([4, 4, 4]),
                                          tf.zeros([0, 4]))


def _step(text):
  return text_format.Parse(text, preprocessor_pb2.PreprocessingStep())


def test_config_builds_and_preprocess_runs_it():
  function, kwargs = preprocessor_builder.build(
      _step('autoaugment_image { policy_name: "v0" }'))
  assert function is preprocessor.autoaugment_image
  assert kwargs == {'policy_name': 'v0'}
  default_function, default_kwargs = preprocessor_builder.build(
      _step('autoaugment_image { }'))
  assert (default_function, default_kwargs) == (function, kwargs)
  image = np.random.RandomState(2).uniform(0, 255, [1, 16, 16, 3])
  boxes = np.array([[0.2, 0.2, 0.8, 0.8]], np.float32)
  classes = np.array([3], np.int32)
  with tf.Graph().as_default():
    # Sizes unknown when the graph is built, as in the input pipeline.
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    outputs = preprocessor.preprocess({
        fields.InputDataFields.image: images,
        fields.InputDataFields.groundtruth_boxes: tf.constant(boxes),
        fields.InputDataFields.groundtruth_classes: tf.constant(classes),
    }, [(function, kwargs)])
    with tf.compat.v1.Session() as sess:
      out = sess.run(outputs, {images: image})
  assert out[fields.InputDataFields.image].shape == (1, 16, 16, 3)
  assert out[fields.InputDataFields.groundtruth_boxes].shape == (1, 4)
  np.testing.assert_array_equal(
      out[fields.InputDataFields.groundtruth_classes], classes)


def test_unsupported_policy_in_config_is_refused():
  with pytest.raises(ValueError, match='policy_name "v3" is not supported'):
    preprocessor_builder.build(_step('autoaugment_image { policy_name: "v3" }'))


@pytest.mark.parametrize('key', [
    fields.InputDataFields.groundtruth_instance_masks,
    fields.InputDataFields.groundtruth_keypoints])
def test_preprocess_refuses_masks_and_keypoints(key):
  tensors = {
      fields.InputDataFields.image: tf.zeros([1, 8, 8, 3]),
      fields.InputDataFields.groundtruth_boxes: tf.zeros([1, 4]),
      key: tf.zeros([1, 8, 8]),
  }
  with pytest.raises(ValueError, match='misaligned'):
    preprocessor.preprocess(tensors, [(preprocessor.autoaugment_image, {})])
