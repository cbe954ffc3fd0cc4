"""inputs: real TFRecords through the train/eval input functions."""
import re

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.input_pipeline import inputs
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.protos import input_reader_pb2
from od_estimator.protos import model_pb2
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util

_IN = fields.InputDataFields
SIZE = 32


class FakeModel:
  """Preprocess only: resize to SIZE x SIZE and scale to [-1, 1]."""

  def preprocess(self, images):
    resized = tf.image.resize(images, [SIZE, SIZE])
    batch = tf.shape(images)[0]
    true_shapes = tf.tile([[SIZE, SIZE, 3]], [batch, 1])
    return resized / 127.5 - 1.0, true_shapes


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('shapes')
  written = create_synthetic_tf_record.create_dataset(
      str(directory), num_train=12, num_val=6, image_size=48,
      num_train_shards=2, num_val_shards=1, max_shapes=3, seed=1)
  return {'label_map': written['label_map'],
          'train': str(directory / 'shapes_train.record-*'),
          'val': str(directory / 'shapes_val.record-*')}


def _configs(data, augmentation='', max_boxes=5, extra_train=''):
  text = """
    model { ssd { num_classes: 3
      image_resizer { fixed_shape_resizer { height: %d width: %d } } } }
    train_config { batch_size: 4 %s %s }
    train_input_reader { label_map_path: "%s" max_number_of_boxes: %d
      tf_record_input_reader { input_path: "%s" } }
    eval_config { batch_size: 2 }
    eval_input_reader { label_map_path: "%s" shuffle: false num_epochs: 1
      max_number_of_boxes: %d
      tf_record_input_reader { input_path: "%s" } }
  """ % (SIZE, SIZE, augmentation, extra_train, data['label_map'], max_boxes,
         data['train'], data['label_map'], max_boxes, data['val'])
  return config_util.create_configs_from_pipeline_proto(
      text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig()))


def _run(dataset_fn):
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset_fn()).get_next()
    shapes = {k: v.shape for k, v in list(features.items()) +
              list(labels.items())}
    with tf.compat.v1.Session() as sess:
      values = sess.run((features, labels))
  return values[0], values[1], shapes


def test_train_input_has_fully_defined_shapes_and_padding(data):
  configs = _configs(data, augmentation="""
      data_augmentation_options { random_horizontal_flip { } }""")
  features, labels, shapes = _run(lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=FakeModel()))
  for key, shape in shapes.items():
    assert shape.is_fully_defined(), (key, shape)
  assert features[_IN.image].shape == (4, SIZE, SIZE, 3)
  assert labels[_IN.groundtruth_boxes].shape == (4, 5, 4)
  assert labels[_IN.groundtruth_classes].shape == (4, 5, 3)
  assert features[inputs.HASH_KEY].shape == (4,)
  for i, count in enumerate(labels[_IN.num_groundtruth_boxes]):
    assert 1 <= count <= 3
    # Real rows are one-hot; padded rows are zero.
    np.testing.assert_allclose(
        labels[_IN.groundtruth_classes][i, :count].sum(axis=1), 1.0)
    np.testing.assert_allclose(labels[_IN.groundtruth_classes][i, count:], 0)
    np.testing.assert_allclose(labels[_IN.groundtruth_boxes][i, count:], 0)
    np.testing.assert_allclose(labels[_IN.groundtruth_weights][i, :count], 1)
  assert features[_IN.image].min() >= -1.0 and features[_IN.image].max() <= 1.0


def test_params_batch_size_overrides_the_config(data):
  configs = _configs(data)
  features, _, _ = _run(lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=FakeModel(), params={'batch_size': 2}))
  assert features[_IN.image].shape[0] == 2


def test_max_number_of_boxes_clips_and_caps_the_count(data):
  configs = _configs(data, max_boxes=1)
  _, labels, _ = _run(lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=FakeModel()))
  assert labels[_IN.groundtruth_boxes].shape == (4, 1, 4)
  np.testing.assert_array_equal(labels[_IN.num_groundtruth_boxes], 1)


def test_eval_input_reads_every_example_in_order(data):
  configs = _configs(data)
  ids = []
  with tf.Graph().as_default():
    dataset = inputs.eval_input(configs['eval_config'],
                                configs['eval_input_configs'][0],
                                configs['model'], model=FakeModel())
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset).get_next()
    assert features[_IN.image].shape.as_list() == [2, SIZE, SIZE, 3]
    with tf.compat.v1.Session() as sess:
      # Bounded: an eval input that wrongly repeats fails instead of hanging.
      for _ in range(10):
        try:
          batch = sess.run(labels)
        except tf.errors.OutOfRangeError:
          break
        ids.append(batch[_IN.groundtruth_is_crowd].shape)
  assert len(ids) == 3  # 6 examples, batch 2, one epoch.


def _decoded_example(boxes, classes):
  return {
      _IN.image: tf.zeros([20, 40, 3], tf.uint8),
      _IN.source_id: tf.constant('1'),
      _IN.original_image_spatial_shape: tf.constant([20, 40]),
      _IN.groundtruth_boxes: tf.constant(boxes, tf.float32),
      _IN.groundtruth_classes: tf.constant(classes, tf.int32),
      _IN.groundtruth_weights: tf.ones([len(classes)]),
  }


def _identity_resizer(image, masks=None):
  shape = tf.shape(image)
  return [image, masks, shape] if masks is not None else [image, shape]


def test_transform_drops_invalid_boxes_and_rescales_to_the_padded_frame(
    execute):
  def graph():
    def preprocess(images):
      # Pads the 20x40 image to 40x40: boxes shrink to half their height.
      padded = tf.image.pad_to_bounding_box(images, 0, 0, 40, 40)
      return padded, tf.constant([[20, 40, 3]])
    out = inputs.transform_input_data(
        _decoded_example([[0., 0., 1., 1.], [np.nan, 0., 1., 1.],
                          [.2, .2, .4, .4]], [1, 2, -1]),
        model_preprocess_fn=preprocess, image_resizer_fn=_identity_resizer,
        num_classes=3)
    return (out[_IN.groundtruth_boxes], out[_IN.groundtruth_classes],
            out[_IN.num_groundtruth_boxes], out[_IN.true_image_shape])
  boxes, classes, count, true_shape = execute(graph)
  # NaN box and unknown class (-1) are dropped (inverted boxes are refused:
  # tests/input_pipeline/test_inputs_original_usage.py).
  assert count == 1
  np.testing.assert_allclose(boxes, [[0., 0., .5, 1.]])
  np.testing.assert_allclose(classes, [[1., 0., 0.]])
  np.testing.assert_array_equal(true_shape, [20, 40, 3])


def test_merge_multiple_label_boxes(execute):
  def graph():
    out = inputs.transform_input_data(
        _decoded_example([[0., 0., .5, .5], [0., 0., .5, .5],
                          [.5, .5, 1., 1.]], [1, 3, 2]),
        model_preprocess_fn=lambda x: (x, tf.constant([[20, 40, 3]])),
        image_resizer_fn=_identity_resizer, num_classes=3,
        merge_multiple_boxes=True)
    return out[_IN.groundtruth_boxes], out[_IN.groundtruth_classes]
  boxes, classes = execute(graph)
  np.testing.assert_allclose(boxes, [[0., 0., .5, .5], [.5, .5, 1., 1.]])
  np.testing.assert_allclose(classes, [[1., 0., 1.], [0., 1., 0.]])


def test_wrong_config_types_are_named():
  with pytest.raises(TypeError, match='train_config'):
    inputs.train_input(None, None, None, model=FakeModel())


def test_multiclass_scores_without_loading_them_is_refused(data):
  configs = _configs(data, extra_train='use_multiclass_scores: true')
  with pytest.raises(config_util.ConfigError,
                     match='train_config.use_multiclass_scores.*'
                     'load_multiclass_scores is false'):
    inputs.train_input(configs['train_config'], configs['train_input_config'],
                       configs['model'], model=FakeModel())
  # Loaded, the scores are what training uses: accepted.
  configs['train_input_config'].load_multiclass_scores = True
  inputs.check_input_options(configs['train_input_config'],
                             'train_input_reader', configs['train_config'])


@pytest.mark.parametrize('which', ['train', 'eval'])
def test_context_features_for_a_model_without_context_are_refused(data,
                                                                  which):
  # The SSD would ignore them (test_inputs_sequence reads them for a
  # Context R-CNN).
  configs = _configs(data)
  if which == 'train':
    configs['train_input_config'].load_context_features = True
    build = lambda: inputs.train_input(  # pylint: disable=g-long-lambda
        configs['train_config'], configs['train_input_config'],
        configs['model'], model=FakeModel())
  else:
    configs['eval_input_configs'][0].load_context_features = True
    build = lambda: inputs.eval_input(  # pylint: disable=g-long-lambda
        configs['eval_config'], configs['eval_input_configs'][0],
        configs['model'], model=FakeModel())
  with pytest.raises(config_util.ConfigError,
                     match=r'%s_input_reader\.load_context_features.*'
                     'Context R-CNN.*would ignore them' % which):
    build()


def test_a_context_rcnn_reader_without_context_features_is_refused(data):
  config = _configs(data)['train_input_config']
  model = text_format.Parse(
      'faster_rcnn { num_classes: 3 context_config { } }',
      model_pb2.DetectionModel())
  with pytest.raises(config_util.ConfigError,
                     match=r'train_input_reader\.load_context_features.*'
                     'context_config makes the model a Context R-CNN'):
    inputs.check_input_options(config, 'train_input_reader',
                               model_config=model)
  config.load_context_features = True
  inputs.check_input_options(config, 'train_input_reader',
                             model_config=model)


@pytest.mark.parametrize('field', ['train_input_reader', 'eval_input_reader'])
def test_sequence_examples_pass_the_input_checks(data, field):
  config = _configs(data)['train_input_config']
  config.input_type = input_reader_pb2.TF_SEQUENCE_EXAMPLE
  inputs.check_input_options(config, field)


@pytest.mark.parametrize('field, index, problem', [
    ('train_input_reader', -2, 'frame_index -2 is not a frame'),
    ('eval_input_reader', 1, 'evaluation reads every frame'),
    ('eval_input_reader[1]', 0, 'evaluation reads every frame')])
def test_frame_indices_that_pick_no_frame_are_refused(data, field, index,
                                                      problem):
  config = _configs(data)['train_input_config']
  config.input_type = input_reader_pb2.TF_SEQUENCE_EXAMPLE
  config.frame_index = index
  with pytest.raises(config_util.ConfigError,
                     match=r'%s\.frame_index.*%s' % (re.escape(field),
                                                     problem)):
    inputs.check_input_options(config, field)
  config.frame_index = -1
  inputs.check_input_options(config, field)
