"""inputs called as the original's users call them: hand-made tensor dicts.

Each test is a difference from the original found this way (issue 20):
prediction-only data, multiclass scores, inverted boxes, additional
channels.
"""
import functools

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.input_pipeline import inputs
from od_estimator.core import standard_fields as fields
from od_estimator.protos import input_reader_pb2
from od_estimator.utils import dataset_util
from tests import tiny_ssd

_IN = fields.InputDataFields


def _fake_model_preprocessor_fn(image):
  return image, tf.expand_dims(tf.shape(image)[1:], axis=0)


def _fake_image_resizer_fn(image, mask=None):
  return image, mask, tf.shape(image)


def _transform(tensor_dict, **kwargs):
  return inputs.transform_input_data(
      tensor_dict, model_preprocess_fn=_fake_model_preprocessor_fn,
      image_resizer_fn=_fake_image_resizer_fn, num_classes=3, **kwargs)


@pytest.mark.parametrize('with_classes', [True, False])
def test_prediction_only_data_without_groundtruth_boxes(execute,
                                                        with_classes):
  np_image = np.random.randint(256, size=(4, 4, 3)).astype(np.float32)

  def graph_fn(image):
    tensor_dict = {_IN.image: image}
    if with_classes:
      tensor_dict[_IN.groundtruth_classes] = tf.constant([3, 1])
    out = _transform(tensor_dict)
    assert _IN.num_groundtruth_boxes not in out
    return out

  out = execute(graph_fn, [np_image])
  np.testing.assert_allclose(out[_IN.image], np_image)
  np.testing.assert_array_equal(out[_IN.true_image_shape], [4, 4, 3])
  if with_classes:
    np.testing.assert_allclose(out[_IN.groundtruth_classes],
                               [[0, 0, 1], [1, 0, 0]])


def _boxes_and_scores_dict(scores, boxes=((.5, .5, 1, 1), (.5, .5, 1, 1)),
                           classes=(1, 2)):
  return {
      _IN.image: tf.constant(np.random.rand(4, 4, 3).astype(np.float32)),
      _IN.groundtruth_boxes: tf.constant(np.array(boxes, np.float32)),
      _IN.multiclass_scores: scores,
      _IN.groundtruth_classes: tf.constant(np.array(classes, np.int32)),
  }


def test_multiclass_scores_in_the_originals_flat_layout(execute):
  # The records' (and the original's) layout is flat [N * num_classes].
  def graph_fn():
    out = _transform(_boxes_and_scores_dict(
        tf.constant([0.2, 0.3, 0.5, 0.1, 0.6, 0.3])),
                     use_multiclass_scores=True)
    return out[_IN.groundtruth_classes]

  np.testing.assert_allclose(execute(graph_fn),
                             [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])


def test_multiclass_scores_follow_their_box_when_boxes_are_dropped(execute):
  # The first box's class is unknown (-1): its row of scores goes with it.
  def graph_fn():
    out = _transform(_boxes_and_scores_dict(
        tf.constant([0.2, 0.3, 0.5, 0.1, 0.6, 0.3, 0.7, 0.2, 0.1]),
        boxes=[[0, 0, 1, 1], [.5, .5, 1, 1], [0, 0, .5, .5]],
        classes=[-1, 2, 1]), use_multiclass_scores=True)
    return out[_IN.groundtruth_classes], out[_IN.num_groundtruth_boxes]

  classes, count = execute(graph_fn)
  assert count == 2
  np.testing.assert_allclose(classes, [[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]])


def test_multiclass_scores_follow_the_flip_augmentation(execute):
  augment = functools.partial(
      inputs.augment_input_data,
      data_augmentation_options=[(inputs.preprocessor.random_horizontal_flip,
                                  {'probability': 1.0})])

  def graph_fn():
    out = _transform(_boxes_and_scores_dict(
        tf.constant([0.2, 0.3, 0.5, 0.1, 0.6, 0.3]),
        boxes=[[0, 0, .5, .25], [.5, .5, 1, 1]]),
                     use_multiclass_scores=True, data_augmentation_fn=augment)
    return out[_IN.groundtruth_classes], out[_IN.groundtruth_boxes]

  classes, boxes = execute(graph_fn)
  np.testing.assert_allclose(boxes, [[0, .75, .5, 1], [.5, 0, 1, .5]])
  np.testing.assert_allclose(classes, [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])


def test_empty_multiclass_scores_fall_back_to_one_hot(execute):
  # As the original's test: the scores' size is only known at run time.
  def graph_fn(scores):
    out = _transform(_boxes_and_scores_dict(scores),
                     use_multiclass_scores=True)
    return out[_IN.groundtruth_classes]

  classes = execute(graph_fn, [np.zeros([0], np.float32)], dynamic=True)
  # Classes 1 and 2, one-hot without background (the original's fallback
  # forgets the label offset and gives [[0, 1, 0], [0, 0, 1]]).
  np.testing.assert_allclose(classes, [[1, 0, 0], [0, 1, 0]])


def test_inverted_boxes_are_refused(execute):
  def graph_fn():
    return _transform({
        _IN.image: tf.zeros([4, 4, 3]),
        _IN.source_id: tf.constant('img7'),
        _IN.groundtruth_boxes: tf.constant([[0., 0., 1., 1.],
                                            [.5, .5, .4, .9]]),
        _IN.groundtruth_classes: tf.constant([1, 2]),
    })[_IN.groundtruth_boxes]

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'Inverted .*in record\] \[source_id=img7'):
    execute(graph_fn)


def test_pad_refuses_an_image_without_its_additional_channels():
  with tf.Graph().as_default():
    three = tf.compat.v1.placeholder(tf.float32, [None, None, 3])
    two = tf.compat.v1.placeholder(tf.float32, [None, None, 2])
    five = tf.compat.v1.placeholder(tf.float32, [None, None, 5])
    pad = functools.partial(inputs.pad_input_data_to_static_shapes,
                            max_num_boxes=3, num_classes=3,
                            spatial_image_shape=[5, 6])
    for image, original in ((three, three), (two, None), (five, five)):
      tensor_dict = {_IN.image: image, _IN.image_additional_channels: two}
      if original is not None:
        tensor_dict[_IN.original_image] = original
      with pytest.raises(ValueError, match='must already be concatenated'):
        pad(tensor_dict)
    padded = pad({_IN.image: five, _IN.image_additional_channels: two,
                  _IN.original_image: three})
    assert padded[_IN.image].shape.as_list() == [5, 6, 5]
    assert padded[_IN.image_additional_channels].shape.as_list() == [5, 6, 2]


def _example_with_additional_channels(image, extra):
  def png(array):
    return tf.io.encode_png(array).numpy()
  feature = {
      'image/encoded': dataset_util.bytes_feature(png(image)),
      'image/format': dataset_util.bytes_feature(b'png'),
      'image/additional_channels/encoded': dataset_util.bytes_list_feature(
          [png(channel[:, :, None]) for channel in extra]),
  }
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def test_predict_input_carries_the_additional_channels():
  image = np.full([64, 64, 3], 255, np.uint8)
  extra = [np.zeros([64, 64], np.uint8), np.full([64, 64], 255, np.uint8)]
  serialized = _example_with_additional_channels(image, extra)
  predict_input_fn = inputs.create_predict_input_fn(
      model_config=tiny_ssd.model_config(),
      predict_input_config=input_reader_pb2.InputReader(
          num_additional_channels=2))
  with tf.Graph().as_default():
    receiver = predict_input_fn()
    images = receiver.features[_IN.image]
    assert images.shape.as_list() == [1, 64, 64, 5]
    example = receiver.receiver_tensors[inputs.SERVING_FED_EXAMPLE_KEY]
    with tf.compat.v1.Session() as sess:
      values = sess.run(images, {example: serialized})
  # SSD's preprocess maps [0, 255] to [-1, 1], every channel alike.
  np.testing.assert_allclose(values[0, 0, 0], [1, 1, 1, -1, 1], atol=1e-6)


def test_pad_gives_context_features_static_shapes_and_their_count():
  # The original's test: 8 rows of length 10 padded to 20 rows.
  with tf.Graph().as_default():
    rows = tf.compat.v1.placeholder(tf.float32, [None, None])
    padded = inputs.pad_input_data_to_static_shapes(
        {_IN.context_features: rows,
         _IN.context_feature_length: tf.constant(10, tf.int64),
         _IN.is_annotated: tf.constant(True)},
        max_num_boxes=3, num_classes=3, spatial_image_shape=[5, 6],
        max_num_context_features=20, context_feature_length=10)
    assert padded[_IN.context_features].shape.as_list() == [20, 10]
    assert padded[_IN.valid_context_size].shape.as_list() == []
    assert padded[_IN.is_annotated].shape.as_list() == []
    with tf.compat.v1.Session() as sess:
      values = sess.run(padded, {rows: np.ones([8, 10])})
  assert values[_IN.valid_context_size] == 8
  np.testing.assert_array_equal(values[_IN.context_features][:8], 1.0)
  np.testing.assert_array_equal(values[_IN.context_features][8:], 0.0)
  assert values[_IN.context_feature_length] == 10
