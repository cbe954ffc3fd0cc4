"""post_processing: NMS on hand-made overlapping boxes with known survivors."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import post_processing

# Six unit-height boxes and two classes. IoUs (intersection / union):
#   A-B: 0.8 / 1.2 = 0.667   A-C: 0.4 / 1.6 = 0.25   B-C: 0.6 / 1.4 = 0.43
#   D-E: 0.9 / 1.1 = 0.818   F (2x2, far away) overlaps nothing.
A = [0., 0., 1., 1.]
B = [0., .2, 1., 1.2]
C = [0., .6, 1., 1.6]
D = [0., 5., 1., 6.]
E = [0., 5.1, 1., 6.1]
F = [0., 20., 2., 22.]
BOXES = np.array([A, B, C, D, E, F], np.float32)[:, np.newaxis, :]  # q = 1
SCORES = np.array([[.9, .1],    # A
                   [.8, .0],    # B
                   [.7, .2],    # C
                   [.2, .85],   # D
                   [.3, .6],    # E
                   [.05, .4]],  # F
                  np.float32)
IDS = np.arange(6, dtype=np.float32)  # carried as an additional field
# With score_thresh .15 and iou_thresh .5, greedy NMS keeps
#   class 0 (A .9, B .8, C .7, E .3, D .2): A; B (IoU .667 with A) goes;
#     C (.25 with A) stays; E stays; D (.818 with E) goes.
#   class 1 (D .85, E .6, F .4, C .2): D; E (.818 with D) goes; F; C.
# All survivors by decreasing score: (box id, score, class)
SURVIVORS = [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1), (4, .3, 0),
             (2, .2, 1)]
SCORE_THRESH = .15
IOU_THRESH = .5


def _expected(survivors):
  ids = [s[0] for s in survivors]
  return (BOXES[ids, 0], np.array([s[1] for s in survivors], np.float32),
          np.array([s[2] for s in survivors], np.float32),
          np.array(ids, np.float32))


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


def _assert_result(actual, survivors):
  boxes, scores, classes, ids, num_valid = actual
  exp_boxes, exp_scores, exp_classes, exp_ids = _expected(survivors)
  assert num_valid == len(survivors)
  np.testing.assert_allclose(boxes, exp_boxes, rtol=1e-6)
  np.testing.assert_allclose(scores, exp_scores, rtol=1e-6)
  np.testing.assert_array_equal(classes, exp_classes)
  np.testing.assert_array_equal(ids, exp_ids)


@pytest.mark.parametrize('dynamic', [False, True])
def test_multiclass_known_survivors(execute, dynamic):
  def graph(boxes, scores):
    # Dynamic inputs: keep k unknown but the class/coordinate dims static.
    return _multiclass(tf.reshape(boxes, [-1, 1, 4]),
                       tf.reshape(scores, [-1, 2]))
  _assert_result(execute(graph, [BOXES, SCORES], dynamic=dynamic), SURVIVORS)


def test_multiclass_per_class_limit(execute):
  # Two per class: class 0 keeps A, C; class 1 keeps D, F.
  result = execute(lambda b, s: _multiclass(b, s, max_size_per_class=2),
                   [BOXES, SCORES])
  _assert_result(result, [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1)])


def test_multiclass_max_total_size(execute):
  result = execute(lambda b, s: _multiclass(b, s, max_total_size=4),
                   [BOXES, SCORES])
  _assert_result(result, SURVIVORS[:4])


def test_multiclass_score_threshold(execute):
  # Above .5: class 0 has A, B (suppressed by A), C; class 1 has D, E
  # (suppressed by D).
  result = execute(lambda b, s: _multiclass(b, s, score_thresh=.5),
                   [BOXES, SCORES])
  _assert_result(result, [(0, .9, 0), (3, .85, 1), (2, .7, 0)])


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
  _assert_result((boxes[:6], scores[:6], classes[:6], ids[:6], num_valid),
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
  _assert_result(execute(graph, [BOXES, SCORES]), SURVIVORS[:3])


def test_multiclass_partitioned_nms_keeps_the_same_survivors(execute):
  def graph(boxes, scores):
    outputs = _multiclass(boxes, scores, pad_to_max_output_size=True,
                          use_partitioned_nms=True)
    assert outputs[0].shape.as_list() == [6, 4]  # 2 classes * 3 per class
    return outputs
  _assert_result(execute(graph, [BOXES, SCORES]), SURVIVORS)


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
  _assert_result(result, SURVIVORS)


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
  _assert_result((boxes[:4], scores[:4], classes[:4], ids[:4], num_valid),
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
   num_detections) = post_processing.batch_multiclass_non_max_suppression(
       boxes, scores, **args)
  outputs = [boxes, scores, classes, fields['ids'], num_detections]
  if masks is not None:
    outputs.append(masks)
  return outputs


def _assert_batch(outputs, image0, image1_score_class, size=5):
  boxes, scores, classes, ids, num_detections = outputs[:5]
  np.testing.assert_array_equal(num_detections,
                                [len(image0), len(image1_score_class)])
  _assert_result((boxes[0, :len(image0)], scores[0, :len(image0)],
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
    outputs = post_processing.batch_multiclass_non_max_suppression(
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
    outputs = post_processing.batch_multiclass_non_max_suppression(
        boxes, scores, SCORE_THRESH, IOU_THRESH, 3, max_total_size=5,
        clip_window=tf.constant([0., 0., 100., 100.]), use_combined_nms=True)
    assert outputs[3] is None and outputs[4] is None
    return outputs[0], outputs[1], outputs[2], outputs[5]
  boxes, scores, classes, num_detections = execute(
      graph, [BATCH_BOXES[:1], BATCH_SCORES[:1]])
  exp_boxes, exp_scores, exp_classes, _ = _expected(SURVIVORS[:5])
  assert num_detections[0] == 5
  np.testing.assert_allclose(boxes[0], exp_boxes, rtol=1e-6)
  np.testing.assert_allclose(scores[0], exp_scores, rtol=1e-6)
  np.testing.assert_array_equal(classes[0], exp_classes)


def test_batch_bad_arguments():
  with tf.Graph().as_default():
    boxes = tf.constant(BATCH_BOXES)
    scores = tf.constant(BATCH_SCORES)
    nms = post_processing.batch_multiclass_non_max_suppression
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
