"""visualization_utils: the original's tensor, heat-map, part-mask and
summary helpers."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.compat import visualization_utils

CATEGORY_INDEX = {1: {'id': 1, 'name': 'cat'}, 2: {'id': 2, 'name': 'dog'}}


def _run(fetch, feed=None):
  with tf.compat.v1.Session() as session:
    return session.run(fetch, feed)


def test_boxes_on_image_tensors_equal_the_numpy_drawing():
  with tf.Graph().as_default():
    images = np.zeros([2, 40, 60, 3], np.uint8)
    boxes = np.array([[[0.1, 0.1, 0.6, 0.5], [0, 0, 0, 0]],
                      [[0.2, 0.3, 0.9, 0.9], [0.5, 0.5, 0.6, 0.6]]],
                     np.float32)
    classes = np.array([[1, 2], [2, 1]], np.int64)
    scores = np.array([[0.9, 0.1], [0.8, 0.7]], np.float32)
    drawn = _run(visualization_utils.draw_bounding_boxes_on_image_tensors(
        tf.constant(images), boxes, classes, scores, CATEGORY_INDEX,
        original_image_spatial_shape=tf.constant([[20, 30], [20, 30]]),
        true_image_shape=tf.constant([[40, 60, 3], [40, 60, 3]])))
  assert drawn.shape == (2, 20, 30, 3) and drawn.dtype == np.uint8
  for i in range(2):
    expected = visualization_utils.visualize_boxes_and_labels_on_image_array(
        np.zeros([20, 30, 3], np.uint8), boxes[i], classes[i], scores[i],
        CATEGORY_INDEX, use_normalized_coordinates=True,
        min_score_thresh=0.2, line_thickness=4)
    np.testing.assert_array_equal(drawn[i], expected)
  assert drawn[1].any()


def test_heatmaps_on_arrays_and_tensors():
  image = np.zeros([4, 5, 3], np.uint8)
  heatmaps = np.zeros([4, 5, 2], np.float32)
  heatmaps[1, 2, 0] = 1.0
  heatmaps[3, 4, 1] = 1.0
  drawn = visualization_utils.draw_heatmaps_on_image_array(image, heatmaps)
  assert tuple(drawn[1, 2]) == (240, 248, 255)  # AliceBlue, channel 0.
  assert tuple(drawn[3, 4]) == (127, 255, 0)  # Chartreuse, channel 1.
  drawn[1, 2] = drawn[3, 4] = 0
  assert not drawn.any() and not image.any()
  with tf.Graph().as_default():
    batch = _run(visualization_utils.draw_heatmaps_on_image_tensors(
        tf.zeros([1, 8, 10, 1], tf.uint8),
        tf.fill([1, 4, 5, 1], 20.0), apply_sigmoid=True))
  assert batch.shape == (1, 8, 10, 3)
  assert (batch == [240, 248, 255]).all()


def test_part_mask_and_float_channel():
  image = np.full([2, 3, 3], 100, np.uint8)
  mask = np.array([[0, 1, 2], [0, 0, 1]], np.uint8)
  visualization_utils.draw_part_mask_on_image_array(image, mask, alpha=1.0)
  assert tuple(image[0, 1]) == (240, 248, 255)  # Part 1: AliceBlue.
  assert tuple(image[0, 2]) == (127, 255, 0)
  assert tuple(image[0, 0]) == (100, 100, 100)
  channel = np.array([[0, 0, 1], [0.5, 0, 0]], np.float32)
  image = np.zeros([2, 3, 3], np.uint8)
  visualization_utils.draw_float_channel_on_image_array(
      image, channel, np.uint8(channel > 0) + np.uint8(
          [[1, 0, 0], [0, 0, 0]]), alpha=1.0)
  assert tuple(image[0, 0]) == (255, 255, 229)  # YlGn at 0: #ffffe5.
  assert tuple(image[0, 2]) == (0, 69, 41)  # YlGn at 1: #004529.
  assert not image[0, 1].any()
  with pytest.raises(ValueError, match='channel'):
    visualization_utils.draw_float_channel_on_image_array(
        image, channel.astype(np.float64), mask)
  # Any of matplotlib's colour maps, as the original's.
  visualization_utils.draw_float_channel_on_image_array(
      image, channel, mask, alpha=1.0, cmap='viridis')
  assert tuple(image[0, 2]) == (253, 231, 36)  # viridis at 1: #fde725.
  with pytest.raises(ValueError, match="'no_such_map' is not a matplotlib"):
    visualization_utils.draw_float_channel_on_image_array(
        image, channel, mask, cmap='no_such_map')


def test_cdf_and_hist_summaries():
  with tf.Graph().as_default():
    values = tf.constant([3.0, 1.0, 2.0, 4.0])
    cdf = visualization_utils.add_cdf_image_summary(values, 'cdf')
    hist = visualization_utils.add_hist_image_summary(values, [0, 2, 5],
                                                      'hist')
    assert {t.name for t in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.SUMMARIES)} == {cdf.name, hist.name}
    for serialized in _run([cdf, hist]):
      summary = tf.compat.v1.Summary.FromString(serialized)
      assert summary.value[0].image.width == 640
      assert summary.value[0].image.height == 480


def test_visualize_single_frame_detections_takes_normalized_boxes():
  images = visualization_utils.VisualizeSingleFrameDetections(
      CATEGORY_INDEX, max_examples_to_draw=1)
  assert images.names() == ['Detections_Left_Groundtruth_Right/0']
  from od_estimator.metrics import eval_visualization
  frame = eval_visualization._Frame((10, 20), (10, 20), (10, 20))  # pylint: disable=protected-access
  box = np.array([[0.2, 0.25, 0.8, 0.75]], np.float32)
  drawn = images.draw(np.zeros([10, 20, 3], np.uint8),
                      {'boxes': box, 'classes': np.array([1]),
                       'scores': np.array([0.9], np.float32)},
                      {'boxes': box, 'classes': np.array([1])}, frame)
  expected = visualization_utils.visualize_boxes_and_labels_on_image_array(
      np.zeros([10, 20, 3], np.uint8), box * [10, 20, 10, 20], [1], [0.9],
      CATEGORY_INDEX, min_score_thresh=0.2)
  np.testing.assert_array_equal(drawn[:, :20], expected)


def test_visualize_single_frame_detections_as_the_originals_test():
  # The original's eval-metric-ops test: normalized random boxes, no
  # num_detections or num_groundtruth_boxes, images of a new size each step.
  # (The original then draws the first image of each batch; here a batch's
  # images are drawn in turn, up to max_examples_to_draw.)
  from od_estimator.core import standard_fields as fields  # pylint: disable=g-import-not-at-top
  max_examples = 4
  prefix = 'Detections_Left_Groundtruth_Right'
  with tf.Graph().as_default():
    visualization = visualization_utils.VisualizeSingleFrameDetections(
        CATEGORY_INDEX, max_examples_to_draw=max_examples,
        summary_name_prefix=prefix)
    original_image = tf.compat.v1.placeholder(tf.uint8, [4, None, None, 3])
    original_shape = tf.compat.v1.placeholder(tf.int32, [4, 2])
    true_shape = tf.compat.v1.placeholder(tf.int32, [4, 3])
    rng = np.random.RandomState(0)
    metric_ops = visualization.get_estimator_eval_metric_ops({
        fields.DetectionResultFields.detection_boxes: tf.constant(
            rng.uniform(size=[4, 20, 4]), tf.float32),
        fields.DetectionResultFields.detection_classes: tf.constant(
            rng.randint(1, 3, size=[4, 20]), tf.int64),
        fields.DetectionResultFields.detection_scores: tf.constant(
            rng.uniform(size=[4, 20]), tf.float32),
        fields.InputDataFields.original_image: original_image,
        fields.InputDataFields.original_image_spatial_shape: original_shape,
        fields.InputDataFields.true_image_shape: true_shape,
        fields.InputDataFields.groundtruth_boxes: tf.constant(
            rng.uniform(size=[4, 8, 4]), tf.float32),
        fields.InputDataFields.groundtruth_classes: tf.constant(
            rng.randint(1, 3, size=[4, 8]), tf.int64)})
    update_op = next(iter(metric_ops.values()))[1]
    value_ops = {key: value for key, (value, _) in metric_ops.items()}

    def feed(i):
      return {original_image: rng.randint(0, 256, size=(4, 6 + i, 7 + i, 3),
                                          dtype=np.uint8),
              original_shape: [[6 + i, 7 + i]] * 4,
              true_shape: [[6 + i, 7 + i, 3]] * 4}

    with tf.compat.v1.Session() as session:
      for i in range(max_examples):
        session.run(update_op, feed(i))
      values = session.run(value_ops)
  assert sorted(values) == ['%s/%d' % (prefix, i) for i in range(max_examples)]
  assert all(values.values())
