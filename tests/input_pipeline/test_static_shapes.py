"""static_shapes: every input tensor padded or clipped to a static shape."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.input_pipeline import static_shapes

_IN = fields.InputDataFields


def test_pads_boxes_and_caps_their_count(execute):
  def graph():
    padded = static_shapes.pad_input_data_to_static_shapes({
        _IN.image: tf.zeros([8, 6, 3]),
        _IN.groundtruth_boxes: tf.constant(
            [[0., 0., .5, .5], [.1, .1, .9, .9], [.2, .2, .3, .3]]),
        _IN.groundtruth_classes: tf.one_hot([0, 1, 1], 2),
        _IN.num_groundtruth_boxes: tf.constant(3),
    }, max_num_boxes=2, num_classes=2, spatial_image_shape=[8, 6])
    for field in padded.values():
      assert field.shape.is_fully_defined()
    return (padded[_IN.groundtruth_boxes], padded[_IN.groundtruth_classes],
            padded[_IN.num_groundtruth_boxes])
  boxes, classes, num_boxes = execute(graph)
  np.testing.assert_allclose(boxes, [[0., 0., .5, .5], [.1, .1, .9, .9]])
  np.testing.assert_allclose(classes, [[1., 0.], [0., 1.]])
  assert num_boxes == 2


def test_rejects_unknown_fields():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='mystery'):
      static_shapes.pad_input_data_to_static_shapes(
          {'mystery': tf.zeros([2])}, 5, 3)
