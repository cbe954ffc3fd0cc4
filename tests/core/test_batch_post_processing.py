"""batch_post_processing: batch NMS on the hand-made cases of
tests/core/nms_cases.py, with padding anchors and per-image windows."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import batch_post_processing
from tests.core.nms_cases import BOXES, IOU_THRESH, SCORE_THRESH, SCORES
from tests.core.nms_cases import SURVIVORS, assert_result, expected

# Batch of two images with 6 anchors. Image 1 has two real anchors, P and
# Q (IoU .9 / 1.1 = .818), then four padding anchors that would win if
# num_valid_boxes did not exclude them.
P = [0., 0., 1., 1.]
Q = [0., .1, 1., 1.1]
BATCH_BOXES = np.stack([BOXES, np.array([[P], [Q]] + [[P]] * 4, np.float32)])
BATCH_SCORES = np.stack([SCORES, np.array([[0., .9], [0., .8]] +
                                          [[.99, .99]] * 4, np.float32)])
NUM_VALID = np.array([6, 2], np.int32)


def _batch(boxes, scores, num_valid, **kwargs):
  args = dict(score_thresh=SCORE_THRESH, iou_thresh=IOU_THRESH,
              max_size_per_class=3, max_total_size=5,
              num_valid_boxes=num_valid,
              additional_fields={'ids': tf.tile(
                  tf.range(6, dtype=tf.float32)[tf.newaxis], [2, 1])})
  args.update(kwargs)
  (boxes, scores, classes, masks, fields,
   num_detections) = batch_post_processing.batch_multiclass_non_max_suppression(
       boxes, scores, **args)
  outputs = [boxes, scores, classes, fields['ids'], num_detections]
  if masks is not None:
    outputs.append(masks)
  return outputs


def _assert_batch(outputs, image0, image1_score_class, size=5):
  boxes, scores, classes, ids, num_detections = outputs[:5]
  np.testing.assert_array_equal(num_detections,
                                [len(image0), len(image1_score_class)])
  assert_result((boxes[0, :len(image0)], scores[0, :len(image0)],
                  classes[0, :len(image0)], ids[0, :len(image0)],
                  len(image0)), image0)
  # Image 1: P with class 1 survives, Q is suppressed.
  if image1_score_class:
    np.testing.assert_allclose(boxes[1, 0], P)
    np.testing.assert_allclose(scores[1, 0], image1_score_class[0][0])
    assert classes[1, 0] == image1_score_class[0][1]
  # Everything past num_detections is zero padding.
  for b, n in enumerate(num_detections):
    for tensor in (boxes, scores, classes, ids):
      assert tensor.shape[1] == size
      np.testing.assert_array_equal(tensor[b, n:], 0.)


@pytest.mark.parametrize('use_static_shapes', [False, True])
@pytest.mark.parametrize('use_dynamic_map_fn', [False, True])
def test_batch_nms(execute, use_static_shapes, use_dynamic_map_fn):
  def graph(boxes, scores, num_valid):
    outputs = _batch(boxes, scores, num_valid,
                     use_static_shapes=use_static_shapes,
                     use_dynamic_map_fn=use_dynamic_map_fn)
    if use_static_shapes:
      for tensor in outputs:
        assert tensor.shape.is_fully_defined(), tensor
      assert outputs[0].shape.as_list() == [2, 5, 4]
      assert outputs[-1].shape.as_list() == [2]
    return outputs
  outputs = execute(graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID])
  _assert_batch(outputs, SURVIVORS[:5], [(.9, 1)])


def test_batch_nms_static_pads_past_per_class_total(execute):
  # One box per class (2 rows per image) padded out to max_total_size 5.
  def graph(boxes, scores, num_valid):
    masks = tf.ones([2, 6, 1, 3, 3])
    outputs = _batch(boxes, scores, num_valid, max_size_per_class=1,
                     use_static_shapes=True, masks=masks)
    for tensor in outputs:
      assert tensor.shape.is_fully_defined(), tensor
    assert outputs[-1].shape.as_list() == [2, 5, 3, 3]
    return outputs
  outputs = execute(graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID])
  _assert_batch(outputs, [(0, .9, 0), (3, .85, 1)], [(.9, 1)])
  masks = outputs[-1]
  np.testing.assert_array_equal(masks[0, :2], 1.)
  np.testing.assert_array_equal(masks[0, 2:], 0.)
  np.testing.assert_array_equal(masks[1, 1:], 0.)


def test_batch_nms_dynamic_batch(execute):
  def graph(boxes, scores, num_valid):
    return _batch(tf.reshape(boxes, [-1, 6, 1, 4]),
                  tf.reshape(scores, [-1, 6, 2]), num_valid)
  outputs = execute(graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID],
                    dynamic=True)
  _assert_batch(outputs, SURVIVORS[:5], [(.9, 1)])


def test_batch_class_agnostic(execute):
  def graph(boxes, scores, num_valid):
    return _batch(boxes, scores, num_valid, use_class_agnostic_nms=True,
                  use_static_shapes=True)
  outputs = execute(graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID])
  _assert_batch(outputs, [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1)],
                [(.9, 1)])


def test_batch_clip_window_and_frame(execute):
  # Per-image windows; image 1's window is twice as wide as P.
  windows = np.array([[0., 0., 1., 5.5], [0., 0., 1., 2.]], np.float32)

  def graph(boxes, scores, num_valid, windows):
    return _batch(boxes, scores, num_valid, clip_window=windows,
                  change_coordinate_frame=True, use_static_shapes=True)
  boxes, scores, _, ids, num_detections = execute(
      graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID, windows])
  # Image 0 as in test_multiclass_clip_window_drops_zero_area.
  np.testing.assert_array_equal(num_detections, [5, 1])
  np.testing.assert_array_equal(ids[0], [0, 3, 2, 4, 2])
  np.testing.assert_allclose(boxes[0, 1], np.array([0., 5., 1., 5.5]) /
                             [1., 5.5, 1., 5.5], rtol=1e-6)
  np.testing.assert_allclose(boxes[1, 0], [0., 0., 1., .5])


def test_batch_all_below_threshold_is_zeros(execute):
  def graph(boxes, scores, num_valid):
    return _batch(boxes, scores, num_valid, score_thresh=.999,
                  use_static_shapes=True)
  outputs = execute(graph, [BATCH_BOXES, BATCH_SCORES, NUM_VALID])
  np.testing.assert_array_equal(outputs[-1], [0, 0])
  for tensor in outputs[:4]:
    np.testing.assert_array_equal(tensor, 0.)


def test_batch_zero_anchors(execute):
  def graph(boxes, scores):
    outputs = batch_post_processing.batch_multiclass_non_max_suppression(
        boxes, scores, 0., .5, 3, max_total_size=4, use_static_shapes=True)
    return outputs[0], outputs[1], outputs[-1]
  boxes, scores, num_detections = execute(
      graph, [np.zeros([2, 0, 1, 4], np.float32),
              np.zeros([2, 0, 3], np.float32)])
  np.testing.assert_array_equal(num_detections, [0, 0])
  np.testing.assert_array_equal(boxes, np.zeros([2, 4, 4]))
  np.testing.assert_array_equal(scores, np.zeros([2, 4]))


def test_batch_combined_nms(execute):
  def graph(boxes, scores):
    outputs = batch_post_processing.batch_multiclass_non_max_suppression(
        boxes, scores, SCORE_THRESH, IOU_THRESH, 3, max_total_size=5,
        clip_window=tf.constant([0., 0., 100., 100.]), use_combined_nms=True)
    assert outputs[3] is None and outputs[4] is None
    return outputs[0], outputs[1], outputs[2], outputs[5]
  boxes, scores, classes, num_detections = execute(
      graph, [BATCH_BOXES[:1], BATCH_SCORES[:1]])
  exp_boxes, exp_scores, exp_classes, _ = expected(SURVIVORS[:5])
  assert num_detections[0] == 5
  np.testing.assert_allclose(boxes[0], exp_boxes, rtol=1e-6)
  np.testing.assert_allclose(scores[0], exp_scores, rtol=1e-6)
  np.testing.assert_array_equal(classes[0], exp_classes)


def test_batch_bad_arguments():
  with tf.Graph().as_default():
    boxes = tf.constant(BATCH_BOXES)
    scores = tf.constant(BATCH_SCORES)
    nms = batch_post_processing.batch_multiclass_non_max_suppression
    with pytest.raises(ValueError, match='q='):
      nms(tf.zeros([2, 6, 3, 4]), scores, 0., .5, 3, 5)
    with pytest.raises(ValueError, match='clip_window'):
      nms(boxes, scores, 0., .5, 3, 5, change_coordinate_frame=True)
    with pytest.raises(ValueError, match='masks'):
      nms(boxes, scores, 0., .5, 3, 5, masks=tf.zeros([2, 6, 1, 2, 2]),
          use_combined_nms=True)
    with pytest.raises(ValueError, match='use_class_agnostic_nms'):
      nms(boxes, scores, 0., .5, 3, 5, use_combined_nms=True,
          use_class_agnostic_nms=True)
    with pytest.raises(ValueError, match='soft_nms_sigma'):
      nms(boxes, scores, 0., .5, 3, 5, use_static_shapes=True,
          soft_nms_sigma=.5)
