"""The batched suppression and miner select exactly what the per-image kernel
path selects (tf.image.non_max_suppression image by image), on random boxes
built to sit at the IOU threshold, with tied, NaN and infinite scores,
flipped corners, empty and non-finite boxes."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import batch_greedy_suppression
from od_estimator.core import box_list
from od_estimator.core import losses

THRESHOLDS = [0., .3, .5, .7, .99, 1.]


def _near_threshold_copies(rng, boxes, threshold):
  """Copies shifted so their IOU with the source is the threshold +- ulps."""
  ymin, xmin, ymax, xmax = boxes.T.astype(np.float64)
  height = ymax - ymin
  shift = height * (1. - threshold) / (1. + threshold)
  copies = np.stack([ymin + shift, xmin, ymax + shift, xmax], axis=1)
  copies = copies.astype(np.float32)
  steps = rng.integers(-3, 4, size=copies.shape)
  for _ in range(3):
    direction = np.where(steps > 0, np.inf, -np.inf).astype(np.float32)
    copies = np.where(steps != 0, np.nextafter(copies, direction), copies)
    steps = steps - np.sign(steps)
  return copies


def _hard_inputs(seed, batch, num_boxes, threshold, nan_boxes_selectable=False):
  """Boxes and scores of `batch` images, many pairs at the threshold.

  Each image has a box with a NaN corner and one with an infinite corner;
  they only have selectable scores with nan_boxes_selectable.
  """
  rng = np.random.default_rng(seed)
  quarter = num_boxes // 4
  centers = rng.uniform(0., 1., [batch, quarter, 2])
  sizes = np.exp(rng.uniform(np.log(1e-3), np.log(.5), [batch, quarter, 2]))
  base = np.concatenate([centers - sizes / 2, centers + sizes / 2],
                        axis=-1).astype(np.float32)
  images_boxes = []
  for image in base:
    jitter = image + (rng.normal(size=image.shape) *
                      10. ** rng.uniform(-8, -1, [quarter, 1]) *
                      (image[:, 2:3] - image[:, 0:1])).astype(np.float32)
    duplicates = image[rng.permutation(quarter)]
    boxes = np.concatenate([image, _near_threshold_copies(rng, image,
                                                          threshold),
                            jitter, duplicates])
    boxes = boxes[rng.permutation(len(boxes))]
    flipped = rng.random(len(boxes)) < .1
    boxes[flipped] = boxes[flipped][:, [2, 3, 0, 1]]
    empty = rng.random(len(boxes)) < .03
    boxes[empty, 2] = boxes[empty, 0]
    boxes[0] = [np.nan, 0., 1., 1.]
    boxes[1] = [0., 0., np.inf, 1.]
    boxes[2] = [-np.inf, 0., np.inf, 1.]
    images_boxes.append(boxes)
  boxes = np.stack(images_boxes).astype(np.float32)
  # Few distinct values: many ties, including 0 and -0.
  scores = rng.choice(np.array([-1., -0., 0., .5, 1., 2., 3.], np.float32),
                      size=boxes.shape[:2])
  special = rng.random(scores.shape)
  scores[special < .02] = np.nan
  scores[(special >= .02) & (special < .04)] = -np.inf
  scores[(special >= .04) & (special < .05)] = np.inf
  if not nan_boxes_selectable:
    scores[:, :3] = [np.nan, -np.inf, np.nan]
  return boxes, scores


def _kernel_selections(boxes, scores, max_output_size, threshold, images=3):
  return [tf.image.non_max_suppression(boxes[image], scores[image],
                                       max_output_size, threshold)
          for image in range(images)]


@pytest.mark.parametrize('threshold', THRESHOLDS)
def test_selects_what_the_kernel_selects(execute, threshold):
  def graph(*inputs):
    # The candidate-pair path itself (the public function takes it for
    # these inputs, where every selectable box is finite); one graph for
    # all seeds' inputs.
    outputs = []
    for boxes, scores in zip(inputs[::2], inputs[1::2]):
      corners = batch_greedy_suppression._corners_and_areas(boxes)
      outputs.append((batch_greedy_suppression._greedy_over_candidate_pairs(
          corners, scores, scores > float('-inf'), threshold),
                      batch_greedy_suppression.batch_greedy_suppression(
                          boxes, scores, threshold),
                      _kernel_selections(boxes, scores, 400, threshold)))
    return outputs
  inputs = [array for seed in range(3) for array in _hard_inputs(
      seed, batch=3, num_boxes=400, threshold=threshold)]
  for (order, kept), (indices, selected), expected in execute(graph, inputs):
    for image in range(3):
      np.testing.assert_array_equal(order[image][kept[image]],
                                    expected[image])
      np.testing.assert_array_equal(indices[image][selected[image]],
                                    expected[image])


@pytest.mark.parametrize('threshold', [0., .7, 1.])
def test_selectable_non_finite_boxes_select_as_the_kernel(execute,
                                                          threshold):
  # A NaN IOU re-queues a box at score 0 in the kernel: a later position.
  boxes, scores = _hard_inputs(5, batch=2, num_boxes=200,
                               threshold=threshold, nan_boxes_selectable=True)
  scores[:, :3] = [1., 2., .5]
  (indices, selected), expected = execute(
      lambda b, s: (batch_greedy_suppression.batch_greedy_suppression(
          b, s, threshold), _kernel_selections(b, s, 200, threshold,
                                               images=2)),
      [boxes, scores])
  for image in range(2):
    np.testing.assert_array_equal(indices[image][selected[image]],
                                  expected[image])


def test_dynamic_shapes_and_no_boxes(execute):
  boxes, scores = _hard_inputs(7, batch=2, num_boxes=64, threshold=.5)

  def graph(boxes, scores):
    return (batch_greedy_suppression.batch_greedy_suppression(
        boxes, scores, .5), _kernel_selections(boxes, scores, 64, .5, images=2))
  (indices, selected), expected = execute(graph, [boxes, scores],
                                           dynamic=True)
  for image in range(2):
    np.testing.assert_array_equal(indices[image][selected[image]],
                                  expected[image])
  indices, selected = execute(
      lambda b, s: batch_greedy_suppression.batch_greedy_suppression(
          b, s, .5), [np.zeros([2, 0, 4], np.float32),
                      np.zeros([2, 0], np.float32)])
  assert indices.shape == selected.shape == (2, 0)


def test_rejects_thresholds_the_kernel_rejects():
  with tf.Graph().as_default():
    for threshold in (-.1, 1.5):
      with pytest.raises(ValueError, match='iou_threshold'):
        batch_greedy_suppression.batch_greedy_suppression(
            tf.zeros([1, 2, 4]), tf.zeros([1, 2]), threshold)


class _Match:
  """Match stand-in: anchors >= 0 matched, -1 unmatched, -2 ignored."""

  def __init__(self, results):
    self._results = results

  def matched_column_indicator(self):
    return tf.greater_equal(self._results, 0)

  def unmatched_column_indicator(self):
    return tf.equal(self._results, -1)


def _reference_miner(miner, location_losses, cls_losses, boxes, match_list):
  """The miner image by image, with the kernel (the original's algorithm)."""
  ranking = miner._ranking_losses(location_losses, cls_losses)
  num_boxes = boxes.shape[1]
  max_selected = (num_boxes if miner._num_hard_examples is None
                  else miner._num_hard_examples)
  mined_loc, mined_cls, positives, negatives = [], [], [], []
  for image, match in enumerate(match_list):
    selected = tf.image.non_max_suppression(
        boxes[image], ranking[image], max_selected, miner._iou_threshold)
    if miner._max_negatives_per_positive is not None and match is not None:
      is_positive = tf.gather(match.matched_column_indicator(), selected)
      is_negative = tf.gather(match.unmatched_column_indicator(), selected)
      num_positives = tf.reduce_sum(tf.cast(is_positive, tf.int32))
      max_negatives = tf.maximum(
          miner._min_negatives_per_image,
          tf.cast(miner._max_negatives_per_positive *
                  tf.cast(num_positives, tf.float32), tf.int32))
      within_cap = tf.cumsum(tf.cast(is_negative, tf.int32)) <= max_negatives
      keep = tf.reshape(tf.where(is_positive | within_cap), [-1])
      positives.append(num_positives)
      negatives.append(tf.size(keep) - num_positives)
      selected = tf.gather(selected, keep)
    mined_loc.append(tf.reduce_sum(tf.gather(location_losses[image],
                                             selected)))
    mined_cls.append(tf.reduce_sum(tf.gather(cls_losses[image], selected)))
  return (tf.reduce_sum(tf.stack(mined_loc)),
          tf.reduce_sum(tf.stack(mined_cls)), positives, negatives)


MINERS = [
    dict(num_hard_examples=3000, iou_threshold=.99, loss_type='cls',
         max_negatives_per_positive=3, min_negatives_per_image=3),
    dict(num_hard_examples=40, iou_threshold=.7, loss_type='both',
         max_negatives_per_positive=2, min_negatives_per_image=0),
    dict(num_hard_examples=None, iou_threshold=.5, loss_type='loc'),
    dict(num_hard_examples=64, iou_threshold=1., loss_type='cls',
         max_negatives_per_positive=3, min_negatives_per_image=10),
]


@pytest.mark.parametrize('config', MINERS)
def test_miner_losses_equal_the_per_image_reference(execute, config):
  batch, num_boxes = 4, 240
  boxes, scores = _hard_inputs(11, batch, num_boxes,
                               config['iou_threshold'])
  rng = np.random.default_rng(12)
  # Losses: tied values, a scale from the scores' ranking, no NaN (losses
  # feed sums the test compares bit for bit).
  cls_losses = np.where(np.isfinite(scores), scores, 5.).astype(np.float32)
  cls_losses += rng.choice([0., .25], size=cls_losses.shape).astype(
      np.float32)
  location_losses = rng.choice(np.array([0., 1., 1.5, 7.], np.float32),
                               size=cls_losses.shape)
  matches = rng.choice(np.array([-2, -1, -1, -1, 0, 3], np.int32),
                       size=cls_losses.shape)
  matches[0] = -1  # One image without positives.
  with_matches = 'max_negatives_per_positive' in config

  def graph(location_losses, cls_losses, boxes, matches):
    match_list = ([_Match(m) for m in tf.unstack(matches)] if with_matches
                  else None)
    miner = losses.HardExampleMiner(**config)
    mined = miner(location_losses, cls_losses,
                  [box_list.BoxList(b) for b in tf.unstack(boxes)],
                  match_list)
    counts = ((miner._num_positives_list, miner._num_negatives_list)
              if with_matches else ())
    reference = _reference_miner(miner, location_losses, cls_losses, boxes,
                                 match_list or [None] * batch)
    return mined, counts, reference
  (loc, cls), counts, reference = execute(
      graph, [location_losses, cls_losses, boxes, matches])
  # Bit for bit: the same anchors summed in the same order.
  assert (loc, cls) == tuple(reference[:2])
  if with_matches:
    np.testing.assert_array_equal(counts[0], reference[2])
    np.testing.assert_array_equal(counts[1], reference[3])
    assert sum(reference[2]) > 0
