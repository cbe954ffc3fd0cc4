"""Random box choices over BoxLists: one box, a covering box, jittered boxes.

The original keeps these in box_list_ops; od_estimator.core.box_list_ops
re-exports them, so `box_list_ops.select_random_box(...)` works as there.
"""
import tensorflow as tf

from od_estimator.core import box_list


def select_random_box(boxlist, default_box=None, seed=None, scope=None):
  """Picks one box of the list uniformly at random.

  Args:
    boxlist: BoxList of N boxes.
    default_box: [1, 4] float32 returned when N is 0; None means
      [[-1, -1, -1, -1]].
    seed: random seed.
    scope: name scope.

  Returns:
    ([1, 4] float32 box, scalar bool: True when a box of the list was picked,
     False when the default box is returned).
  """
  with tf.name_scope(scope or 'SelectRandomBox'):
    boxes = boxlist.get()
    num_boxes = tf.shape(boxes)[0]
    if default_box is None:
      default_box = tf.constant([[-1., -1., -1., -1.]])

    def pick():
      index = tf.random.uniform([], maxval=num_boxes, dtype=tf.int32,
                                seed=seed)
      return boxes[index][tf.newaxis], tf.constant(True)

    return tf.cond(num_boxes >= 1, pick,
                   lambda: (default_box, tf.constant(False)))


def get_minimal_coverage_box(boxlist, default_box=None, scope=None):
  """The smallest box containing every box of the list.

  Args:
    boxlist: BoxList of N boxes.
    default_box: [1, 4] float32 returned when N is 0; None means
      [[0, 0, 1, 1]].
    scope: name scope.

  Returns:
    [1, 4] float32 ymin, xmin, ymax, xmax.
  """
  with tf.name_scope(scope or 'CreateCoverageBox'):
    boxes = boxlist.get()
    if default_box is None:
      default_box = tf.constant([[0., 0., 1., 1.]])

    def cover():
      return tf.concat([tf.reduce_min(boxes[:, :2], axis=0),
                        tf.reduce_max(boxes[:, 2:], axis=0)], 0)[tf.newaxis]

    return tf.cond(boxlist.num_boxes() >= 1, cover, lambda: default_box)


def sample_boxes_by_jittering(boxlist, num_boxes_to_sample, stddev=0.1,
                              scope=None):
  """Samples boxes around randomly chosen boxes of the list.

  Each sampled box starts from a box of the list chosen uniformly; each of
  its corners moves by a normal offset (standard deviation `stddev`) times
  the box's height (y) or width (x). Corners are then ordered and clipped to
  [0, 1], so a sampled box can have zero size (rarely, for a small stddev).

  Args:
    boxlist: BoxList of N > 0 boxes, normalized coordinates.
    num_boxes_to_sample: how many boxes to return.
    stddev: standard deviation of the offsets, relative to the box size.
    scope: name scope.

  Returns:
    BoxList of num_boxes_to_sample boxes, normalized; no extra fields.
  """
  with tf.name_scope(scope or 'SampleBoxesByJittering'):
    indices = tf.random.uniform([num_boxes_to_sample], maxval=
                                boxlist.num_boxes(), dtype=tf.int32)
    boxes = tf.gather(boxlist.get(), indices)
    heights = boxes[:, 2] - boxes[:, 0]
    widths = boxes[:, 3] - boxes[:, 1]
    sizes = tf.stack([heights, widths, heights, widths], axis=1)
    jittered = boxes + sizes * tf.random.normal([num_boxes_to_sample, 4],
                                                stddev=stddev)
    ymin, xmin, ymax, xmax = tf.unstack(jittered, axis=1)
    ordered = tf.stack([ymin, xmin, tf.maximum(ymin, ymax),
                        tf.maximum(xmin, xmax)], axis=1)
    return box_list.BoxList(tf.clip_by_value(ordered, 0.0, 1.0))
