"""eval_util's result dicts called as the original's users call them.

An image with one box, detected perfectly, given one image at a time
(result_dict_for_single_example) or as a batch with max_gt_boxes
(result_dict_for_batched_example), through the evaluators' metric ops.
"""
from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.protos import eval_pb2

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORIES = [{'id': 1, 'name': 'person'}, {'id': 2, 'name': 'dog'},
              {'id': 3, 'name': 'cat'}]


def _make_evaluation_dict(batch_size=1, max_gt_boxes=None,
                          scale_to_absolute=False, groundtruth_mask_size=20):
  image = tf.zeros(shape=[batch_size, 20, 20, 3], dtype=tf.uint8)
  if batch_size == 1:
    key = tf.constant('image1')
  else:
    key = tf.constant([str(i) for i in range(batch_size)])
  detections = {
      _DET.detection_boxes: tf.tile(tf.constant([[[0., 0., 1., 1.]]]),
                                    multiples=[batch_size, 1, 1]),
      _DET.detection_scores: tf.tile(tf.constant([[0.8]]),
                                     multiples=[batch_size, 1]),
      _DET.detection_classes: tf.tile(tf.constant([[0]]),
                                      multiples=[batch_size, 1]),
      _DET.detection_masks: tf.tile(tf.ones(shape=[1, 1, 20, 20]),
                                    multiples=[batch_size, 1, 1, 1]),
      _DET.num_detections: tf.ones([batch_size]),
  }
  groundtruth = {
      _IN.groundtruth_boxes: tf.constant([[0., 0., 1., 1.]]),
      _IN.groundtruth_classes: tf.constant([1]),
      _IN.groundtruth_instance_masks: tf.ones(
          shape=[1, groundtruth_mask_size, groundtruth_mask_size],
          dtype=tf.uint8),
  }
  if batch_size == 1:
    return eval_util.result_dict_for_single_example(
        image, key, detections, groundtruth,
        scale_to_absolute=scale_to_absolute)
  groundtruth = {name: tf.tile(tf.expand_dims(value, 0),
                               [batch_size] + [1] * value.shape.rank)
                 for name, value in groundtruth.items()}
  return eval_util.result_dict_for_batched_example(
      image, key, detections, groundtruth,
      scale_to_absolute=scale_to_absolute, max_gt_boxes=max_gt_boxes)


@pytest.mark.parametrize('batch_size, max_gt_boxes', [
    (1, None), (8, [1]), (8, [1] * 8), (3, 1)])
@pytest.mark.parametrize('scale_to_absolute', [True, False])
# 10: groundtruth masks smaller than the image, resized to it (as the
# original's test of resized masks).
@pytest.mark.parametrize('groundtruth_mask_size', [20, 10])
def test_coco_metrics_of_a_perfect_detection(batch_size, max_gt_boxes,
                                             scale_to_absolute,
                                             groundtruth_mask_size):
  metrics = _coco_box_and_mask_metrics(lambda: _make_evaluation_dict(
      batch_size, max_gt_boxes, scale_to_absolute, groundtruth_mask_size))
  assert metrics['DetectionBoxes_Precision/mAP'] == pytest.approx(1.0)
  assert metrics['DetectionMasks_Precision/mAP'] == pytest.approx(1.0)


def _coco_box_and_mask_metrics(make_eval_dict):
  eval_config = text_format.Parse(
      'metrics_set: "coco_detection_metrics" '
      'metrics_set: "coco_mask_metrics"', eval_pb2.EvalConfig())
  with tf.Graph().as_default():
    metric_ops = eval_util.get_eval_metric_ops_for_evaluators(
        eval_config, CATEGORIES, make_eval_dict())
    update_ops = {update for _, update in metric_ops.values()}
    with tf.compat.v1.Session() as sess:
      sess.run(list(update_ops))
      return sess.run({key: value_op for key, (value_op, _)
                       in metric_ops.items()})


def _padded_evaluation_dict():
  """A batch as the original's model_lib makes it: padded everywhere.

  Two images padded to 20x20 (the second's true size 10x20), originally
  40x40 and 20x40; 3 detection slots (1 used) with box-relative 7x7 masks;
  groundtruth padded to 5 boxes with image-sized masks (1 box used), its
  boxes normalized to the padded image. Each detection covers its
  groundtruth box and mask exactly.
  """
  boxes = np.zeros([2, 3, 4], np.float32)
  boxes[:, 0] = [0, 0, 1, 1]
  scores = np.zeros([2, 3], np.float32)
  scores[:, 0] = 0.9
  detections = {
      _DET.detection_boxes: tf.constant(boxes),
      _DET.detection_scores: tf.constant(scores),
      _DET.detection_classes: tf.zeros([2, 3]),
      _DET.detection_masks: tf.ones([2, 3, 7, 7]),
      _DET.num_detections: tf.constant([1., 1.]),
  }
  groundtruth_boxes = np.zeros([2, 5, 4], np.float32)
  groundtruth_boxes[:, 0] = [[0, 0, 1, 1], [0, 0, 0.5, 1]]
  masks = np.zeros([2, 5, 20, 20], np.uint8)
  masks[0, 0] = 1
  masks[1, 0, :10] = 1
  groundtruth = {
      _IN.groundtruth_boxes: tf.constant(groundtruth_boxes),
      _IN.groundtruth_classes: tf.ones([2, 5]),
      _IN.groundtruth_instance_masks: tf.constant(masks),
      _IN.num_groundtruth_boxes: tf.constant([1, 1]),
  }
  return eval_util.result_dict_for_batched_example(
      tf.zeros([2, 20, 20, 3]), tf.constant(['a', 'b']), detections,
      groundtruth, scale_to_absolute=True,
      true_image_shapes=tf.constant([[20, 20, 3], [10, 20, 3]]),
      original_image_spatial_shapes=tf.constant([[40, 40], [20, 40]]),
      max_gt_boxes=tf.constant([1, 1]))


def test_coco_metrics_of_a_padded_batch_with_masks():
  metrics = _coco_box_and_mask_metrics(_padded_evaluation_dict)
  assert metrics['DetectionBoxes_Precision/mAP'] == pytest.approx(1.0)
  assert metrics['DetectionMasks_Precision/mAP'] == pytest.approx(1.0)


def test_single_example_dict_has_no_batch_dimension(execute):
  def graph_fn():
    return _make_evaluation_dict(scale_to_absolute=True)

  result = execute(graph_fn)
  assert result[_IN.original_image].shape == (1, 20, 20, 3)
  assert result[_IN.key] == b'image1'
  np.testing.assert_allclose(result[_DET.detection_boxes], [[0, 0, 20, 20]])
  np.testing.assert_array_equal(result[_DET.detection_classes], [1])
  np.testing.assert_allclose(result[_IN.groundtruth_boxes], [[0, 0, 20, 20]])
  assert result[_DET.detection_masks].shape == (1, 20, 20)
  assert result[_IN.groundtruth_instance_masks].shape == (1, 20, 20)
  assert _DET.num_detections not in result
  assert _IN.num_groundtruth_boxes not in result


def test_batched_example_honours_max_gt_boxes(execute):
  def graph_fn(max_gt_boxes):
    groundtruth = {
        _IN.groundtruth_boxes: tf.zeros([2, 3, 4]),
        _IN.groundtruth_classes: tf.ones([2, 3], tf.int32),
        _IN.num_groundtruth_boxes: tf.constant([3, 3]),
    }
    detections = {_DET.detection_boxes: tf.zeros([2, 1, 4]),
                  _DET.detection_scores: tf.zeros([2, 1]),
                  _DET.detection_classes: tf.zeros([2, 1]),
                  _DET.num_detections: tf.ones([2])}
    return eval_util.result_dict_for_batched_example(
        tf.zeros([2, 8, 8, 3], tf.uint8), tf.constant(['a', 'b']),
        detections, groundtruth, max_gt_boxes=max_gt_boxes)[
            _IN.num_groundtruth_boxes]

  np.testing.assert_array_equal(
      execute(graph_fn, [np.array([2, 1], np.int32)]), [2, 1])


def test_batched_groundtruth_needs_a_box_count():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='max_gt_boxes must be provided'):
      eval_util.result_dict_for_batched_example(
          tf.zeros([1, 8, 8, 3]), tf.constant(['a']),
          {_DET.detection_boxes: tf.zeros([1, 1, 4]),
           _DET.detection_scores: tf.zeros([1, 1]),
           _DET.detection_classes: tf.zeros([1, 1]),
           _DET.num_detections: tf.ones([1])},
          {_IN.groundtruth_boxes: tf.zeros([1, 1, 4]),
           _IN.groundtruth_classes: tf.ones([1, 1], tf.int32)})
