"""post_processing: one image's NMS on hand-made boxes with known survivors
(tests/core/nms_cases.py)."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import post_processing
from tests.core.nms_cases import A, B, BOXES, C, D, IDS, IOU_THRESH
from tests.core.nms_cases import SCORE_THRESH, SCORES, SURVIVORS
from tests.core.nms_cases import assert_result, expected


def _multiclass(boxes, scores, **kwargs):
  """Runs multiclass NMS with the ids field; returns boxes, fields, count."""
  args = dict(score_thresh=SCORE_THRESH, iou_thresh=IOU_THRESH,
              max_size_per_class=3)
  args.update(kwargs)
  result, num_valid = post_processing.multiclass_non_max_suppression(
      boxes, scores, additional_fields={'ids': tf.range(
          tf.shape(boxes)[0], dtype=tf.float32)}, **args)
  return (result.get(), result.get_field('scores'),
          result.get_field('classes'), result.get_field('ids'), num_valid)


@pytest.mark.parametrize('dynamic', [False, True])
def test_multiclass_known_survivors(execute, dynamic):
  def graph(boxes, scores):
    # Dynamic inputs: keep k unknown but the class/coordinate dims static.
    return _multiclass(tf.reshape(boxes, [-1, 1, 4]),
                       tf.reshape(scores, [-1, 2]))
  assert_result(execute(graph, [BOXES, SCORES], dynamic=dynamic), SURVIVORS)


def test_multiclass_per_class_limit(execute):
  # Two per class: class 0 keeps A, C; class 1 keeps D, F.
  result = execute(lambda b, s: _multiclass(b, s, max_size_per_class=2),
                   [BOXES, SCORES])
  assert_result(result, [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1)])


def test_multiclass_max_total_size(execute):
  result = execute(lambda b, s: _multiclass(b, s, max_total_size=4),
                   [BOXES, SCORES])
  assert_result(result, SURVIVORS[:4])


def test_multiclass_score_threshold(execute):
  # Above .5: class 0 has A, B (suppressed by A), C; class 1 has D, E
  # (suppressed by D).
  result = execute(lambda b, s: _multiclass(b, s, score_thresh=.5),
                   [BOXES, SCORES])
  assert_result(result, [(0, .9, 0), (3, .85, 1), (2, .7, 0)])


def test_multiclass_clip_window_drops_zero_area(execute):
  window = np.array([0., 0., 1., 5.5], np.float32)

  def graph(boxes, scores, window):
    return _multiclass(boxes, scores, clip_window=window)
  boxes, scores, classes, ids, num_valid = execute(
      graph, [BOXES, SCORES, window])
  # F lies right of x = 5.5, so clipping leaves it with zero area; D and E
  # are cut at x = 5.5.
  assert num_valid == 5
  np.testing.assert_array_equal(ids, [0, 3, 2, 4, 2])
  np.testing.assert_allclose(scores, [.9, .85, .7, .3, .2], rtol=1e-6)
  np.testing.assert_array_equal(classes, [0, 1, 0, 0, 1])
  np.testing.assert_allclose(
      boxes, [A, [0., 5., 1., 5.5], C, [0., 5.1, 1., 5.5], C], rtol=1e-6)


def test_multiclass_change_coordinate_frame(execute):
  window = np.array([0., 0., 1., 5.5], np.float32)

  def graph(boxes, scores, window):
    return _multiclass(boxes, scores, clip_window=window,
                       change_coordinate_frame=True)
  boxes = execute(graph, [BOXES, SCORES, window])[0]
  clipped = np.array([A, [0., 5., 1., 5.5], C, [0., 5.1, 1., 5.5], C])
  # Window origin (0, 0), height 1, width 5.5: divide x by 5.5.
  np.testing.assert_allclose(boxes, clipped / [1., 5.5, 1., 5.5], rtol=1e-6)


def test_multiclass_padded_output(execute):
  def graph(boxes, scores):
    outputs = _multiclass(boxes, scores, max_size_per_class=4,
                          pad_to_max_output_size=True)
    for tensor in outputs[:4]:
      assert tensor.shape.is_fully_defined()
    assert outputs[0].shape.as_list() == [8, 4]  # 2 classes * 4 per class
    return outputs
  boxes, scores, classes, ids, num_valid = execute(graph, [BOXES, SCORES])
  assert_result((boxes[:6], scores[:6], classes[:6], ids[:6], num_valid),
                 SURVIVORS)
  # Unused slots: zero boxes and fields, score -1.
  np.testing.assert_array_equal(boxes[6:], np.zeros([2, 4]))
  np.testing.assert_array_equal(scores[6:], [-1., -1.])
  np.testing.assert_array_equal(ids[6:], [0., 0.])


def test_multiclass_padded_max_total_size(execute):
  def graph(boxes, scores):
    outputs = _multiclass(boxes, scores, max_total_size=3,
                          pad_to_max_output_size=True)
    assert outputs[0].shape.as_list() == [3, 4]
    return outputs
  assert_result(execute(graph, [BOXES, SCORES]), SURVIVORS[:3])


def test_multiclass_partitioned_nms_keeps_the_same_survivors(execute):
  def graph(boxes, scores):
    outputs = _multiclass(boxes, scores, pad_to_max_output_size=True,
                          use_partitioned_nms=True)
    assert outputs[0].shape.as_list() == [6, 4]  # 2 classes * 3 per class
    return outputs
  assert_result(execute(graph, [BOXES, SCORES]), SURVIVORS)


@pytest.mark.parametrize('pad', [False, True])
@pytest.mark.parametrize('dynamic', [False, True])
def test_multiclass_empty_input(execute, pad, dynamic):
  def graph(boxes, scores):
    return _multiclass(tf.reshape(boxes, [-1, 1, 4]),
                       tf.reshape(scores, [-1, 2]),
                       pad_to_max_output_size=pad,
                       clip_window=tf.constant([0., 0., 1., 1.]))
  boxes, scores, classes, ids, num_valid = execute(
      graph, [np.zeros([0, 1, 4], np.float32), np.zeros([0, 2], np.float32)],
      dynamic=dynamic)
  assert num_valid == 0
  if pad:
    # 2 classes * 3 slots, all unused.
    np.testing.assert_array_equal(boxes, np.zeros([6, 4]))
    np.testing.assert_array_equal(scores, -np.ones(6))
  else:
    assert boxes.shape == (0, 4) and scores.shape == (0,)
    assert classes.shape == (0,) and ids.shape == (0,)


def test_multiclass_all_below_threshold(execute):
  result = execute(lambda b, s: _multiclass(b, s, score_thresh=.95),
                   [BOXES, SCORES])
  assert result[-1] == 0 and result[0].shape == (0, 4)


def test_multiclass_class_specific_boxes_and_masks(execute):
  # q = 2: each anchor has a box per class. Class 1's box of anchor 1
  # duplicates anchor 0's (IoU 1), class 0's boxes do not overlap.
  boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1]],
                    [[0, 3, 1, 4], [0, 0, 1, 1]]], np.float32)
  scores = np.array([[.9, .8], [.7, .6]], np.float32)
  # Mask value encodes anchor * 10 + class.
  masks = np.array([[np.full([2, 2], 0.), np.full([2, 2], 1.)],
                    [np.full([2, 2], 10.), np.full([2, 2], 11.)]], np.float32)

  def graph(boxes, scores, masks):
    result, num_valid = post_processing.multiclass_non_max_suppression(
        boxes, scores, 0., .5, max_size_per_class=5, masks=masks)
    return (result.get(), result.get_field('scores'),
            result.get_field('classes'), result.get_field('masks'), num_valid)
  out_boxes, out_scores, out_classes, out_masks, num_valid = execute(
      graph, [boxes, scores, masks])
  # Class 0 keeps both anchors, class 1 only anchor 0 (.8 beats .6).
  assert num_valid == 3
  np.testing.assert_allclose(out_scores, [.9, .8, .7], rtol=1e-6)
  np.testing.assert_array_equal(out_classes, [0, 1, 0])
  np.testing.assert_array_equal(out_boxes, [[0, 0, 1, 1], [0, 0, 1, 1],
                                            [0, 3, 1, 4]])
  np.testing.assert_array_equal(out_masks[:, 0, 0], [0., 1., 10.])


def test_soft_nms_lowers_overlapping_score(execute):
  boxes = np.array([[A], [B], [D]], np.float32)
  scores = np.array([[.9], [.8], [.7]], np.float32)

  def graph(boxes, scores):
    result, num_valid = post_processing.multiclass_non_max_suppression(
        boxes, scores, 0., .9, max_size_per_class=3, soft_nms_sigma=.5)
    return result.get(), result.get_field('scores'), num_valid
  out_boxes, out_scores, num_valid = execute(graph, [boxes, scores])
  # Gaussian soft-NMS decays B by exp(-iou^2 / (2 sigma)), IoU(A, B) = 2/3:
  # .8 * exp(-(4/9) / 1) = .513, now below D's .7. D overlaps nothing.
  decayed = .8 * np.exp(-(2. / 3.) ** 2 / (2 * .5))
  assert num_valid == 3
  np.testing.assert_allclose(out_scores, [.9, .7, decayed], rtol=1e-5)
  np.testing.assert_allclose(out_boxes, [A, D, B], rtol=1e-6)


def test_hard_nms_flag_matches_default(execute):
  result = execute(lambda b, s: _multiclass(b, s, use_hard_nms=True,
                                            use_cpu_nms=True),
                   [BOXES, SCORES])
  assert_result(result, SURVIVORS)


@pytest.mark.parametrize('pad,use_hard_nms', [(False, False), (True, False),
                                              (False, True)])
def test_class_agnostic(execute, pad, use_hard_nms):
  # Best class per box: A .9/0, B .8/0, C .7/0, D .85/1, E .6/1, F .4/1.
  # Greedy over all: A; D; B (IoU .667 with A) goes; C stays; E (.818 with
  # D) goes; F stays.
  def graph(boxes, scores):
    result, num_valid = post_processing.class_agnostic_non_max_suppression(
        boxes, scores, SCORE_THRESH, IOU_THRESH, max_total_size=6,
        pad_to_max_output_size=pad, use_hard_nms=use_hard_nms,
        use_cpu_nms=use_hard_nms,
        additional_fields={'ids': tf.constant(IDS)})
    return (result.get(), result.get_field('scores'),
            result.get_field('classes'), result.get_field('ids'), num_valid)
  boxes, scores, classes, ids, num_valid = execute(graph, [BOXES, SCORES])
  expected = [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1)]
  assert_result((boxes[:4], scores[:4], classes[:4], ids[:4], num_valid),
                 expected)
  assert len(scores) == (6 if pad else 4)


def test_class_agnostic_picks_best_class_box(execute):
  boxes = np.array([[[0, 0, 1, 1], [0, 0, 2, 2]],
                    [[5, 5, 6, 6], [9, 9, 10, 10]]], np.float32)
  scores = np.array([[.2, .7], [.6, .1]], np.float32)

  def graph(boxes, scores):
    result, num_valid = post_processing.class_agnostic_non_max_suppression(
        boxes, scores, 0., .5, max_total_size=2)
    return (result.get(), result.get_field('scores'),
            result.get_field('classes'), num_valid)
  out_boxes, out_scores, out_classes, num_valid = execute(
      graph, [boxes, scores])
  # Anchor 0's best class is 1 (.7), anchor 1's is 0 (.6).
  assert num_valid == 2
  np.testing.assert_array_equal(out_boxes, [[0, 0, 2, 2], [5, 5, 6, 6]])
  np.testing.assert_allclose(out_scores, [.7, .6], rtol=1e-6)
  np.testing.assert_array_equal(out_classes, [1, 0])


def test_bad_arguments():
  with tf.Graph().as_default():
    boxes = tf.constant(BOXES)
    scores = tf.constant(SCORES)
    nms = post_processing.multiclass_non_max_suppression
    with pytest.raises(ValueError, match='iou_thresh'):
      nms(boxes, scores, 0., 1.5, 3)
    with pytest.raises(ValueError, match='q='):
      nms(tf.zeros([6, 3, 4]), scores, 0., .5, 3)
    with pytest.raises(ValueError, match='rank 2'):
      nms(boxes, tf.zeros([6]), 0., .5, 3)
    with pytest.raises(ValueError, match='clip_window'):
      nms(boxes, scores, 0., .5, 3, change_coordinate_frame=True)
    with pytest.raises(ValueError, match='soft_nms_sigma'):
      nms(boxes, scores, 0., .5, 3, pad_to_max_output_size=True,
          soft_nms_sigma=.5)
    agnostic = post_processing.class_agnostic_non_max_suppression
    with pytest.raises(ValueError, match='max_classes_per_detection'):
      agnostic(boxes, scores, 0., .5, max_classes_per_detection=2)
    with pytest.raises(ValueError, match='max_total_size'):
      agnostic(boxes, scores, 0., .5, pad_to_max_output_size=True)
    with pytest.raises(ValueError, match='use_hard_nms'):
      agnostic(boxes, scores, 0., .5, max_total_size=3, use_hard_nms=True,
               soft_nms_sigma=.5)
