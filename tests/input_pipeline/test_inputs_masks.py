"""inputs: instance masks from TFRecords through the train/eval input fns.

With `load_instance_masks: true` the labels carry
groundtruth_instance_masks [batch, max_number_of_boxes, H, W] float32 0/1
at the preprocessed image size, padded with empty masks, aligned with the
boxes after augmentation and resizing; without it they carry none.
"""
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.input_pipeline import inputs
from od_estimator.builders import image_resizer_builder
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util

_IN = fields.InputDataFields
MAX_DIMENSION = 40


class ResizerModel:
  """Preprocess only: the config's image resizer, as a real model does."""

  def __init__(self, model_config):
    self._resize = image_resizer_builder.build(
        config_util.get_image_resizer_config(model_config))

  def preprocess(self, images):
    resized, true_shape = self._resize(images[0])
    return resized[tf.newaxis] / 127.5 - 1.0, true_shape[tf.newaxis]


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('shapes_masks')
  written = create_synthetic_tf_record.create_dataset(
      str(directory), num_train=8, num_val=4, image_size=48,
      num_train_shards=1, num_val_shards=1, max_shapes=3, seed=3)
  # The val examples again, with the masks as dense floats.
  numerical = str(directory / 'shapes_val_numerical.record')
  with tf.io.TFRecordWriter(numerical) as writer:
    for record in tf.compat.v1.io.tf_record_iterator(written['val'][0]):
      example = tf.train.Example.FromString(record)
      feature = example.features.feature['image/object/mask']
      masks = [np.array(Image.open(io.BytesIO(png)))
               for png in feature.bytes_list.value]
      feature.Clear()
      feature.float_list.value.extend(np.ravel(masks).astype(np.float32))
      writer.write(example.SerializeToString())
  return {'label_map': written['label_map'], 'train': written['train'][0],
          'val': written['val'][0], 'val_numerical': numerical}


def _configs(data, load_masks=True, mask_type='PNG_MASKS', val='val'):
  masks = ('load_instance_masks: true mask_type: %s' % mask_type
           if load_masks else '')
  text = """
    model { faster_rcnn { num_classes: 3
      image_resizer { keep_aspect_ratio_resizer {
        min_dimension: 32 max_dimension: %d pad_to_max_dimension: true } } } }
    train_config { batch_size: 2
      data_augmentation_options { random_horizontal_flip { } }
      data_augmentation_options { random_crop_image {
        min_object_covered: 0.0 min_area: 0.4 overlap_thresh: 0.0 } }
      data_augmentation_options { random_rotation90 { } } }
    train_input_reader { label_map_path: "%s" max_number_of_boxes: 4 %s
      tf_record_input_reader { input_path: "%s" } }
    eval_config { batch_size: 2 }
    eval_input_reader { label_map_path: "%s" shuffle: false num_epochs: 1
      max_number_of_boxes: 4 %s tf_record_input_reader { input_path: "%s" } }
  """ % (MAX_DIMENSION, data['label_map'], masks, data['train'],
         data['label_map'], masks, data[val])
  return config_util.create_configs_from_pipeline_proto(
      text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig()))


def _first_batch(dataset_fn):
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(1)
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset_fn()).get_next()
    shape = labels.get(_IN.groundtruth_instance_masks, tf.zeros([0])).shape
    with tf.compat.v1.Session() as sess:
      batches = [sess.run((features, labels)) for _ in range(2)]
  return batches, shape


def _check_masks_on_boxes(features, labels):
  masks = labels[_IN.groundtruth_instance_masks]
  assert masks.dtype == np.float32
  assert masks.shape[:2] == labels[_IN.groundtruth_boxes].shape[:2]
  assert masks.shape[2:] == features[_IN.image].shape[1:3]
  assert set(np.unique(masks)) <= {0.0, 1.0}
  pixel = 1.0 / MAX_DIMENSION
  for boxes, image_masks, count in zip(labels[_IN.groundtruth_boxes], masks,
                                       labels[_IN.num_groundtruth_boxes]):
    assert not image_masks[count:].any()  # padding rows are empty
    for box, mask in zip(boxes[:count], image_masks[:count]):
      rows = np.nonzero(mask.any(axis=1))[0]
      cols = np.nonzero(mask.any(axis=0))[0]
      if not len(rows):
        continue  # covered by a later shape, or cropped to a sliver
      # The synthetic shapes lie inside their boxes (occluded parts aside).
      assert rows[0] / MAX_DIMENSION >= box[0] - pixel
      assert cols[0] / MAX_DIMENSION >= box[1] - pixel
      assert (rows[-1] + 1) / MAX_DIMENSION <= box[2] + pixel
      assert (cols[-1] + 1) / MAX_DIMENSION <= box[3] + pixel


def test_train_input_loads_masks_aligned_and_padded(data):
  configs = _configs(data)
  batches, shape = _first_batch(lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=ResizerModel(configs['model'])))
  assert shape.as_list() == [2, 4, MAX_DIMENSION, MAX_DIMENSION]
  for features, labels in batches:
    _check_masks_on_boxes(features, labels)
    assert labels[_IN.groundtruth_instance_masks].any()


@pytest.mark.parametrize('load_masks', [True, False])
def test_eval_input_labels_carry_masks_when_loaded(data, load_masks):
  configs = _configs(data, load_masks=load_masks)
  batches, shape = _first_batch(lambda: inputs.eval_input(
      configs['eval_config'], configs['eval_input_configs'][0],
      configs['model'], model=ResizerModel(configs['model'])))
  for features, labels in batches:
    assert (_IN.groundtruth_instance_masks in labels) == load_masks
    if load_masks:
      _check_masks_on_boxes(features, labels)
  if load_masks:
    assert shape.as_list() == [2, 4, MAX_DIMENSION, MAX_DIMENSION]


def test_numerical_masks_give_the_same_labels(data):
  """Dense float masks (mask_type NUMERICAL_MASKS) read as the PNG ones."""
  labels = []
  for mask_type, val in (('PNG_MASKS', 'val'),
                         ('NUMERICAL_MASKS', 'val_numerical')):
    configs = _configs(data, mask_type=mask_type, val=val)
    batches, _ = _first_batch(lambda configs=configs: inputs.eval_input(
        configs['eval_config'], configs['eval_input_configs'][0],
        configs['model'], model=ResizerModel(configs['model'])))
    labels.append([batch[1] for batch in batches])
  for png, numerical in zip(*labels):
    assert png[_IN.groundtruth_instance_masks].any()
    for key in (_IN.groundtruth_instance_masks, _IN.groundtruth_boxes):
      np.testing.assert_array_equal(png[key], numerical[key])


def _identity_resizer(image, masks=None):
  shape = tf.shape(image)
  return [image, masks, shape] if masks is not None else [image, shape]


@pytest.mark.parametrize('masks,problem', [
    # Records converted without masks, read by a mask config.
    (np.zeros([0, 4, 6]), 'different number of masks than there are boxes'),
    (np.ones([1, 4, 6]), 'different number of masks than there are boxes'),
    (np.ones([2, 4, 5]), 'size differs from the image size'),
])
def test_masks_that_do_not_fit_name_the_record(execute, masks, problem):
  # The decoder gives PNG masks as the original's (any size and count);
  # training and evaluation need one mask of the image's size per box.
  def graph_fn():
    return inputs.transform_input_data(
        {_IN.image: tf.zeros([4, 6, 3], tf.uint8),
         _IN.source_id: tf.constant('17'),
         _IN.filename: tf.constant('a.png'),
         _IN.groundtruth_boxes: tf.constant([[0., 0., .5, .5],
                                             [.5, .5, 1., 1.]]),
         _IN.groundtruth_classes: tf.constant([1, 2]),
         _IN.groundtruth_instance_masks: tf.constant(masks, tf.float32)},
        model_preprocess_fn=lambda x: (x, tf.constant([[4, 6, 3]])),
        image_resizer_fn=_identity_resizer, num_classes=3
    )[_IN.groundtruth_instance_masks]

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=problem + r'.* in record\] \[source_id=17, '
                     'filename=a.png'):
    execute(graph_fn)


def test_masks_that_fit_pass(execute):
  masks = np.zeros([2, 4, 6], np.float32)
  masks[0, :2, :3] = 1

  def graph_fn():
    return inputs.transform_input_data(
        {_IN.image: tf.zeros([4, 6, 3], tf.uint8),
         _IN.groundtruth_boxes: tf.constant([[0., 0., .5, .5],
                                             [.5, .5, 1., 1.]]),
         _IN.groundtruth_classes: tf.constant([1, 2]),
         _IN.groundtruth_instance_masks: tf.constant(masks)},
        model_preprocess_fn=lambda x: (x, tf.constant([[4, 6, 3]])),
        image_resizer_fn=_identity_resizer, num_classes=3
    )[_IN.groundtruth_instance_masks]

  np.testing.assert_array_equal(execute(graph_fn), masks)
