"""Evaluation images: names, count, side-by-side size and drawing rules."""
import io

import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import eval_visualization

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORY_INDEX = {1: {'id': 1, 'name': 'circle'},
                  2: {'id': 2, 'name': 'square'}}
# The retained image is 32 x 32 (model input); the originals are 48 x 40.
BATCH, SIZE, HEIGHT, WIDTH = 3, 32, 48, 40


def _eval_dict():
  """Gray images; one 0.9 detection (class 1) and one 0.3 (class 2)."""
  boxes = np.array([[4., 4., 20., 20.], [24., 10., 40., 30.]], np.float32)
  return {
      _IN.original_image: tf.fill([BATCH, SIZE, SIZE, 3],
                                  tf.constant(128, tf.uint8)),
      _IN.true_image_shape: tf.constant([[SIZE, SIZE, 3]] * BATCH),
      _IN.original_image_spatial_shape: tf.constant([[HEIGHT, WIDTH]] *
                                                    BATCH),
      _DET.detection_boxes: tf.constant(np.stack([boxes] * BATCH)),
      _DET.detection_classes: tf.constant([[1, 2]] * BATCH, tf.int64),
      _DET.detection_scores: tf.constant([[0.9, 0.3]] * BATCH),
      _DET.num_detections: tf.constant([2] * BATCH, tf.int32),
      _IN.groundtruth_boxes: tf.constant(np.stack([boxes] * BATCH)),
      _IN.groundtruth_classes: tf.constant([[1, 2]] * BATCH, tf.int32),
      _IN.num_groundtruth_boxes: tf.constant([2, 1, 0], tf.int32),
  }


def _run(visualization, batches=1):
  """Runs the update op `batches` times, then the value ops."""
  with tf.Graph().as_default():
    ops = visualization.get_estimator_eval_metric_ops(_eval_dict())
    if not ops:
      return {}
    update = next(iter(ops.values()))[1]
    with tf.compat.v1.Session() as sess:
      for _ in range(batches):
        sess.run(update)
      return sess.run({name: value for name, (value, _) in ops.items()})


def _image(serialized):
  summary = tf.compat.v1.Summary.FromString(serialized)
  (value,) = summary.value
  image = np.array(Image.open(io.BytesIO(value.image.encoded_image_string)))
  assert (value.image.height, value.image.width) == image.shape[:2]
  return image


def test_names_count_and_side_by_side_size():
  values = _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=2))
  assert sorted(values) == ['Detections_Left_Groundtruth_Right/0',
                            'Detections_Left_Groundtruth_Right/1']
  for serialized in values.values():
    # The original image size, twice side by side.
    assert _image(serialized).shape == (HEIGHT, 2 * WIDTH, 3)


def test_fewer_images_than_asked_leave_the_rest_empty():
  values = _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=5))
  written = [name for name, value in values.items() if value]
  assert sorted(written) == ['Detections_Left_Groundtruth_Right/%d' % i
                             for i in range(BATCH)]
  assert values['Detections_Left_Groundtruth_Right/4'] == b''


def test_images_come_from_the_first_batches_only():
  values = _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=4), batches=3)
  assert all(values.values()) and len(values) == 4


def test_zero_visualizations_make_no_ops():
  assert _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=0)) == {}


def _changed(image):
  """Mask of pixels that differ from the gray background."""
  return np.any(image != 128, axis=2)


def test_detections_below_the_threshold_are_not_drawn():
  values = _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=1, min_score_thresh=0.5))
  image = _image(values['Detections_Left_Groundtruth_Right/0'])
  left, right = _changed(image[:, :WIDTH]), _changed(image[:, WIDTH:])
  # Box 2 spans rows 24-40, columns 10-30: its bottom edge is drawn on the
  # groundtruth side only (its 0.3 detection is below 0.5).
  assert right[39, 20] and not left[39, 20]
  # Box 1 (0.9) is drawn on both sides.
  assert left[19, 12] and right[19, 12]


def test_skip_scores_and_labels_change_only_the_label_text():
  plain = _image(_run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=1, min_score_thresh=0.0))[
          'Detections_Left_Groundtruth_Right/0'])
  skipped = _image(_run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=1, min_score_thresh=0.0,
      skip_scores=True, skip_labels=True))[
          'Detections_Left_Groundtruth_Right/0'])
  # Fewer label pixels on the detection side; box lines stay.
  assert _changed(skipped[:, :WIDTH]).sum() < _changed(plain[:, :WIDTH]).sum()
  assert _changed(skipped[:, :WIDTH])[19, 12]


def test_groundtruth_color_also_draws_groundtruth_on_the_left():
  values = _run(eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=1, min_score_thresh=0.5,
      groundtruth_box_visualization_color='black'))
  left = _image(values['Detections_Left_Groundtruth_Right/0'])[:, :WIDTH]
  # Box 2's bottom edge, in black, though its detection is below 0.5.
  np.testing.assert_array_equal(left[39, 20], [0, 0, 0])


def test_retained_frame_is_cropped_to_the_true_shape_then_resized():
  frame = eval_visualization._Frame((4, 4, 3), (2, 3, 3), (4, 6))  # pylint: disable=protected-access
  picture = np.arange(16).reshape(4, 4)
  resized = frame.to_original(picture)
  assert resized.shape == (4, 6)
  # Only the true 2 x 3 part is used; corners map to corners.
  assert resized[0, 0] == 0 and resized[-1, -1] == picture[1, 2]
  masks = frame.masks(np.ones([2, 4, 4], np.float32))
  assert masks.shape == (2, 4, 6) and masks.dtype == np.uint8


def test_padded_original_frame_masks_are_drawn_on_both_sides():
  """Masks as eval_util gives them: the original frame of each image,
  padded to the batch's largest (here 52 x 44 for 48 x 40 images)."""
  masks = np.zeros([BATCH, 2, HEIGHT + 4, WIDTH + 4], np.uint8)
  masks[:, 0, 42:48, 0:6] = 1  # Away from the boxes' lines and labels.
  visualization = eval_visualization.SideBySideEvalImages(
      CATEGORY_INDEX, max_examples_to_draw=1, min_score_thresh=0.5)
  with tf.Graph().as_default():
    eval_dict = _eval_dict()
    eval_dict[_IN.original_image_spatial_shape] = tf.constant(
        [[HEIGHT, WIDTH], [HEIGHT, WIDTH], [HEIGHT + 4, WIDTH + 4]])
    eval_dict[_DET.detection_masks] = tf.constant(masks)
    eval_dict[_IN.groundtruth_instance_masks] = tf.constant(masks)
    ops = visualization.get_estimator_eval_metric_ops(eval_dict)
    with tf.compat.v1.Session() as sess:
      sess.run(next(iter(ops.values()))[1])
      image = _image(sess.run(ops['Detections_Left_Groundtruth_Right/0'][0]))
  assert image.shape == (HEIGHT, 2 * WIDTH, 3)
  for side in (image[:, :WIDTH], image[:, WIDTH:]):
    assert tuple(side[46, 36]) == (128, 128, 128)
    assert tuple(side[45, 3]) != (128, 128, 128)  # Tinted by the mask.


def test_eval_dicts_without_counts_as_the_originals_test():
  # The original's test feeds no num_detections or num_groundtruth_boxes:
  # every row is drawn (detections by score), every batch image too.
  with tf.Graph().as_default():
    eval_dict = {
        name: value for name, value in _eval_dict().items()
        if name not in (_DET.num_detections, _IN.num_groundtruth_boxes)}
    images = eval_visualization.SideBySideEvalImages(
        CATEGORY_INDEX, max_examples_to_draw=4)
    ops = images.get_estimator_eval_metric_ops(eval_dict)
    update = next(iter(ops.values()))[1]
    with tf.compat.v1.Session() as sess:
      sess.run(update)
      values = sess.run({name: value for name, (value, _) in ops.items()})
  drawn = [_image(values['Detections_Left_Groundtruth_Right/%d' % i])
           for i in range(BATCH)]
  assert values['Detections_Left_Groundtruth_Right/3'] == b''
  # Both groundtruth boxes on the right of each image (the dict with
  # counts draws 2, 1, 0 of them).
  for image in drawn:
    np.testing.assert_array_equal(image, drawn[0])


def test_one_images_dict_as_the_originals():
  # result_dict_for_single_example: [1, H, W, C] original_image, the other
  # fields without their batch dimension.
  with tf.Graph().as_default():
    eval_dict = {
        name: value[0] if name != _IN.original_image else value[:1]
        for name, value in _eval_dict().items()
        if name not in (_DET.num_detections, _IN.num_groundtruth_boxes)}
    images = eval_visualization.SideBySideEvalImages(
        CATEGORY_INDEX, max_examples_to_draw=1)
    ops = images.get_estimator_eval_metric_ops(eval_dict)
    with tf.compat.v1.Session() as sess:
      sess.run(next(iter(ops.values()))[1])
      (value,) = sess.run([value for value, _ in ops.values()])
  assert _image(value).shape == (HEIGHT, 2 * WIDTH, 3)
