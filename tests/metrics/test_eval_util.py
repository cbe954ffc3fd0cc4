"""eval_util: evaluation groundtruth built from labels, whatever the model."""
from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.estimator import model_lib
from od_estimator.core import standard_fields as fields
from od_estimator.protos import eval_pb2
from od_estimator.config import config_util

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


def _eval_config(text):
  return text_format.Parse(text, eval_pb2.EvalConfig())


def test_eval_fields_reach_the_evaluators():
  config = _eval_config("""
      metrics_set: 'coco_detection_metrics'
      metrics_set: 'precision_at_recall_detection_metrics'
      skip_predictions_for_unlabeled_class: true
      super_categories { key: 'shapes' value: 'circle, square' }""")
  options = eval_util.evaluator_options_from_eval_config(config)
  assert options['coco_detection_metrics'][
      'skip_predictions_for_unlabeled_class']
  assert options['coco_detection_metrics']['super_categories'] == {
      'shapes': ['circle', 'square']}
  assert options['precision_at_recall_detection_metrics'][
      'skip_predictions_for_unlabeled_class']
  categories = [{'id': 1, 'name': 'circle'}, {'id': 2, 'name': 'square'}]
  coco = eval_util.get_evaluators(config, categories)[0]
  assert ('DetectionBoxes_PerformanceBySuperCategory/shapes' in
          coco.metric_names())


@pytest.mark.parametrize('text, field', [
    ("parameterized_metric { coco_keypoint_metrics { class_label: 'p' } }",
     'eval_config.parameterized_metric'),
    ('keypoint_edge { start: 0 end: 1 }', 'eval_config.keypoint_edge'),
    ("metrics_set: 'pascal_voc_detection_metrics' "
     'skip_predictions_for_unlabeled_class: true',
     'eval_config.skip_predictions_for_unlabeled_class'),
    ("metrics_set: 'pascal_voc_detection_metrics' "
     "super_categories { key: 'a' value: 'circle' }",
     'eval_config.super_categories'),
    ("super_categories { key: 'a' value: ' , ' }",
     'eval_config.super_categories'),
])
def test_fields_that_cannot_be_honoured_are_refused(text, field):
  config = _eval_config(text)
  (error,) = eval_util.eval_config_errors(config)
  assert error.field == field
  with pytest.raises(config_util.ConfigError, match=field):
    eval_util.get_evaluators(config, [{'id': 1, 'name': 'circle'}])


def test_visualization_fields_reach_the_image_ops():
  config = _eval_config('num_visualizations: 3 max_num_boxes_to_visualize: 5 '
                        'min_score_threshold: 0.25')
  with tf.Graph().as_default():
    eval_dict = {
        _IN.original_image: tf.zeros([1, 8, 8, 3], tf.uint8),
        _IN.true_image_shape: tf.constant([[8, 8, 3]]),
        _IN.original_image_spatial_shape: tf.constant([[8, 8]]),
        fields.DetectionResultFields.detection_boxes: tf.zeros([1, 1, 4]),
        fields.DetectionResultFields.detection_classes: tf.ones([1, 1]),
        fields.DetectionResultFields.detection_scores: tf.ones([1, 1]),
        fields.DetectionResultFields.num_detections: tf.ones([1]),
        _IN.groundtruth_boxes: tf.zeros([1, 1, 4]),
        _IN.groundtruth_classes: tf.ones([1, 1], tf.int32),
        _IN.num_groundtruth_boxes: tf.ones([1], tf.int32),
    }
    ops = eval_util.visualization_metric_ops(
        config, [{'id': 1, 'name': 'circle'}], eval_dict)
    assert sorted(ops) == ['Detections_Left_Groundtruth_Right/%d' % i
                           for i in range(3)]
    assert not eval_util.visualization_metric_ops(
        _eval_config('num_visualizations: 0'), [], eval_dict)
