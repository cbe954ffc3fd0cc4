"""eval_util: evaluation groundtruth built from labels, whatever the model."""
import numpy as np
import tensorflow as tf

from od_estimator import eval_util
from od_estimator import model_lib
from od_estimator.core import standard_fields as fields

_IN = fields.InputDataFields
NUM_CLASSES = 3
MAX_BOXES = 4


def _batched_labels():
  """Two images padded to MAX_BOXES: 2 boxes (classes 3, 1) and none."""
  boxes = np.zeros([2, MAX_BOXES, 4], np.float32)
  boxes[0, :2] = [[0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.9, 0.8]]
  classes = np.zeros([2, MAX_BOXES, NUM_CLASSES], np.float32)
  classes[0, 0, 2] = classes[0, 1, 0] = 1.0
  difficult = np.zeros([2, MAX_BOXES], np.int32)
  difficult[0, 1] = 1
  group_of = np.zeros([2, MAX_BOXES], bool)
  group_of[0, 0] = True
  masks = np.zeros([2, MAX_BOXES, 8, 8], np.float32)
  masks[0, 0, 1:4, 1:4] = 1.0
  image_classes = np.array([[1, 0, 1], [1, 1, 1]], np.float32)
  return {
      _IN.num_groundtruth_boxes: tf.constant([2, 0], tf.int32),
      _IN.groundtruth_boxes: tf.constant(boxes),
      _IN.groundtruth_classes: tf.constant(classes),
      _IN.groundtruth_weights: tf.ones([2, MAX_BOXES]),
      _IN.groundtruth_is_crowd: tf.zeros([2, MAX_BOXES], tf.bool),
      _IN.groundtruth_difficult: tf.constant(difficult),
      _IN.groundtruth_group_of: tf.constant(group_of),
      _IN.groundtruth_instance_masks: tf.constant(masks),
      _IN.groundtruth_image_classes: tf.constant(image_classes),
  }, boxes, masks


def _groundtruth(execute, unpad):
  def graph_fn():
    labels, _, _ = _batched_labels()
    unstacked = model_lib.unstack_batch(labels,
                                        unpad_groundtruth_tensors=unpad)
    return eval_util.groundtruth_from_labels(unstacked, MAX_BOXES)
  return execute(graph_fn)


def test_groundtruth_from_unpadded_and_padded_labels_agree(execute):
  _, boxes, masks = _batched_labels()
  for unpad in (True, False):
    result = _groundtruth(execute, unpad)
    np.testing.assert_array_equal(result[_IN.num_groundtruth_boxes], [2, 0])
    # 1-based ids; 0 past each image's boxes (also for padded labels, whose
    # all-zero class rows would otherwise read as class 1).
    np.testing.assert_array_equal(result[_IN.groundtruth_classes],
                                  [[3, 1, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(result[_IN.groundtruth_boxes], boxes)
    np.testing.assert_array_equal(result[_IN.groundtruth_difficult],
                                  [[0, 1, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(result[_IN.groundtruth_group_of][0],
                                  [True, False, False, False])
    assert result[_IN.groundtruth_instance_masks].shape == (2, MAX_BOXES, 8, 8)
    np.testing.assert_array_equal(result[_IN.groundtruth_instance_masks],
                                  masks)
    # Labeled classes indexed by class id: background column first.
    np.testing.assert_array_equal(
        result[_IN.groundtruth_labeled_classes],
        [[0, 1, 0, 1], [0, 1, 1, 1]])
    # Training-only fields stay out of the eval dict.
    assert _IN.groundtruth_weights not in result


def test_groundtruth_clips_to_max_boxes_and_keeps_static_shapes():
  with tf.Graph().as_default():
    labels, _, _ = _batched_labels()
    unstacked = model_lib.unstack_batch(labels)
    result = eval_util.groundtruth_from_labels(unstacked, 1)
    assert result[_IN.groundtruth_boxes].shape.as_list() == [2, 1, 4]
    assert result[_IN.groundtruth_classes].shape.as_list() == [2, 1]
    with tf.compat.v1.Session() as sess:
      counts, classes = sess.run([result[_IN.num_groundtruth_boxes],
                                  result[_IN.groundtruth_classes]])
  np.testing.assert_array_equal(counts, [1, 0])
  np.testing.assert_array_equal(classes, [[3], [0]])


def test_groundtruth_without_optional_fields(execute):
  def graph_fn():
    labels = {
        _IN.num_groundtruth_boxes: tf.constant([1], tf.int32),
        _IN.groundtruth_boxes: tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        _IN.groundtruth_classes: tf.constant([[[0.0, 1.0]]]),
    }
    return eval_util.groundtruth_from_labels(
        model_lib.unstack_batch(labels), 2)
  result = execute(graph_fn)
  assert set(result) == {_IN.num_groundtruth_boxes, _IN.groundtruth_classes,
                         _IN.groundtruth_boxes}
  np.testing.assert_array_equal(result[_IN.groundtruth_classes], [[2, 0]])
