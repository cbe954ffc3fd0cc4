"""inputs with tf.SequenceExamples and context features (Context R-CNN).

Real TFRecords from create_synthetic_sequence_tf_record through the train
and eval input functions: frames become examples with the keys and static
shapes of tf.Example input, plus context_features and valid_context_size.
"""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_sequence_tf_record
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.input_pipeline import inputs
from od_estimator.protos import input_reader_pb2
from od_estimator.protos import pipeline_pb2
from tests.input_pipeline import test_inputs

_IN = fields.InputDataFields
SIZE = test_inputs.SIZE
NUM_FRAMES = 3
LENGTH = 8


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('sequences')
  written = create_synthetic_sequence_tf_record.create_dataset(
      str(directory), num_train=4, num_val=2, num_frames=NUM_FRAMES,
      image_size=SIZE, max_shapes=2, annotate_every=2,
      context_feature_length=LENGTH, seed=5)
  return {'label_map': written['label_map'], 'train': written['train'][0],
          'val': written['val'][0]}


def _expected_frames(path):
  """Per frame of the file, in order: (source_id, boxes [N, 4], context)."""
  frames = []
  for record in tf.data.TFRecordDataset(path):
    example = tf.train.SequenceExample.FromString(record.numpy())
    lists = example.feature_lists.feature_list
    context = example.context.feature
    rows = np.reshape(context['image/context_features'].float_list.value,
                      [-1, LENGTH])
    for frame in range(NUM_FRAMES):
      boxes = np.stack([lists['region/bbox/' + name].feature[frame]
                        .float_list.value for name in
                        ('ymin', 'xmin', 'ymax', 'xmax')], axis=-1)
      source_id = lists['image/source_id'].feature[frame].bytes_list.value[0]
      frames.append((source_id, np.reshape(boxes, [-1, 4]), rows))
  return frames


def _configs(data, max_context=6, length=LENGTH, train_extra='',
             eval_extra='', model_extra=''):
  reader = """label_map_path: "%s" max_number_of_boxes: 4
      input_type: TF_SEQUENCE_EXAMPLE load_context_features: true
      include_source_id: true"""
  text = """
    model { faster_rcnn { num_classes: 3
      image_resizer { fixed_shape_resizer { height: %d width: %d } }
      context_config { max_num_context_features: %d
                       context_feature_length: %d } %s } }
    train_config { batch_size: 2 }
    train_input_reader { %s %s tf_record_input_reader { input_path: "%s" } }
    eval_config { batch_size: 1 }
    eval_input_reader { %s shuffle: false num_epochs: 1 %s
      tf_record_input_reader { input_path: "%s" } }
  """ % (SIZE, SIZE, max_context, length, model_extra,
         reader % data['label_map'], train_extra, data['train'],
         reader % data['label_map'], eval_extra, data['val'])
  return config_util.create_configs_from_pipeline_proto(
      text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig()))


def _train(configs):
  return lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=test_inputs.FakeModel())


def _eval(configs):
  return lambda: inputs.eval_input(
      configs['eval_config'], configs['eval_input_configs'][0],
      configs['model'], model=test_inputs.FakeModel())


def _all_batches(dataset_fn):
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset_fn()).get_next()
    batches = []
    with tf.compat.v1.Session() as sess:
      try:
        while True:
          batches.append(sess.run((features, labels)))
      except tf.errors.OutOfRangeError:
        return batches


def _example_input(tmp_path):
  """The features and labels of tf.Example input (test_inputs' set)."""
  written = create_synthetic_tf_record.create_dataset(
      str(tmp_path), num_train=2, num_val=0, image_size=SIZE,
      num_train_shards=1)
  configs = test_inputs._configs({
      'label_map': written['label_map'], 'train': written['train'][0],
      'val': written['train'][0]})
  configs['train_input_config'].include_source_id = True
  features, labels, _ = test_inputs._run(lambda: inputs.train_input(
      configs['train_config'], configs['train_input_config'],
      configs['model'], model=test_inputs.FakeModel()))
  return features, labels


def test_training_frames_have_the_keys_and_static_shapes_of_examples(
    data, tmp_path):
  features, labels, shapes = test_inputs._run(_train(_configs(data)))
  for key, shape in shapes.items():
    assert shape.is_fully_defined(), (key, shape)
  example_features, example_labels = _example_input(tmp_path)
  assert set(features) == set(example_features) | {
      _IN.context_features, _IN.valid_context_size}
  # tf.Examples have area, is_crowd and difficult besides; sequence
  # examples only what the original's sequence decoder reads.
  assert set(labels) == {
      _IN.num_groundtruth_boxes, _IN.groundtruth_boxes,
      _IN.groundtruth_classes, _IN.groundtruth_weights,
      _IN.groundtruth_confidences}
  assert set(labels) < set(example_labels)
  for key in labels:
    assert labels[key].dtype == example_labels[key].dtype, key
  for key in example_features:
    assert features[key].dtype == example_features[key].dtype, key
  assert features[_IN.image].shape == (2, SIZE, SIZE, 3)
  assert features[_IN.context_features].shape == (2, 6, LENGTH)
  assert features[_IN.context_features].dtype == np.float32
  assert features[_IN.valid_context_size].dtype == np.int32
  assert labels[_IN.groundtruth_boxes].shape == (2, 4, 4)
  assert labels[_IN.groundtruth_classes].shape == (2, 4, 3)


def test_training_reads_frame_index_with_its_boxes_and_context(data):
  configs = _configs(data, train_extra='frame_index: 2 shuffle: false')
  features, labels, _ = test_inputs._run(_train(configs))
  expected = _expected_frames(data['train'])
  for row in range(2):
    source_id, boxes, context = expected[row * NUM_FRAMES + 2]
    assert features[_IN.source_id][row] == source_id
    count = labels[_IN.num_groundtruth_boxes][row]
    assert count == len(boxes)
    np.testing.assert_allclose(labels[_IN.groundtruth_boxes][row, :count],
                               boxes, atol=1e-6)
    valid = features[_IN.valid_context_size][row]
    assert valid == min(len(context), 6)
    np.testing.assert_allclose(features[_IN.context_features][row, :valid],
                               context[:valid])
    assert not features[_IN.context_features][row, valid:].any()


def test_evaluation_reads_every_frame_in_order(data):
  batches = _all_batches(_eval(_configs(data)))
  expected = _expected_frames(data['val'])
  assert len(batches) == len(expected) == 2 * NUM_FRAMES
  for (features, labels), (source_id, boxes, context) in zip(batches,
                                                            expected):
    assert features[_IN.source_id][0] == source_id
    count = labels[_IN.num_groundtruth_boxes][0]
    assert count == len(boxes)  # 0 on the frames not annotated.
    np.testing.assert_allclose(labels[_IN.groundtruth_boxes][0, :count],
                               boxes, atol=1e-6)
    assert features[_IN.valid_context_size][0] == min(len(context), 6)
  counts = [labels[_IN.num_groundtruth_boxes][0] for _, labels in batches]
  # annotate_every=2: frames 0 and 2 of each sequence.
  assert counts[1] == counts[4] == 0
  assert min(counts[0], counts[2], counts[3], counts[5]) >= 1


def test_more_context_rows_than_the_model_takes_are_clipped(data):
  features, _, _ = test_inputs._run(_train(_configs(
      data, max_context=1, train_extra='frame_index: 0 shuffle: false')))
  expected = _expected_frames(data['train'])
  assert features[_IN.context_features].shape == (2, 1, LENGTH)
  assert features[_IN.valid_context_size].tolist() == [1, 1]
  np.testing.assert_allclose(features[_IN.context_features][:, 0],
                             [expected[0][2][0], expected[3][2][0]])


def test_a_record_of_another_feature_length_fails_naming_both(data):
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'image/context_feature_length of the record is.*'
                     r'\b%d\b.*model\.faster_rcnn\.context_config\.'
                     r'context_feature_length is 5' % LENGTH):
    test_inputs._run(_train(_configs(data, length=5)))


def test_bfloat16_training_casts_the_context_features(data):
  configs = _configs(data)
  configs['train_config'].use_bfloat16 = True
  with tf.Graph().as_default():
    spec = _train(configs)().element_spec[0]
  assert spec[_IN.context_features].dtype == tf.bfloat16
  assert spec[_IN.image].dtype == tf.bfloat16


def test_padding_context_features_needs_the_context_sizes():
  with pytest.raises(ValueError, match='context_config'):
    inputs.pad_input_data_to_static_shapes(
        {_IN.context_features: tf.zeros([3, 2])}, max_num_boxes=2,
        num_classes=1)


def test_the_original_context_rcnn_config_passes_the_input_checks(
    upstream_configs):
  configs = config_util.get_configs_from_pipeline_file(
      '%s/context_rcnn_resnet101_snapshot_serengeti.config' %
      upstream_configs)
  inputs.check_input_options(configs['train_input_config'],
                             'train_input_reader', configs['train_config'],
                             model_config=configs['model'])
  inputs.check_input_options(configs['eval_input_configs'][0],
                             'eval_input_reader',
                             model_config=configs['model'],
                             metrics_sets=configs['eval_config'].metrics_set)
  assert config_util.get_max_num_context_features(configs['model']) == 2000
  assert config_util.get_context_feature_length(configs['model']) == 2057


def test_tf_examples_with_context_features_feed_context_rcnn(data, tmp_path):
  # tf.Examples carry image/context_features too (the original's decoder
  # reads them); one frame of the shapes set with three context rows.
  rng = np.random.default_rng(0)
  image, boxes, labels, masks = create_synthetic_tf_record.make_image(
      rng, SIZE, SIZE, 2)
  example = create_synthetic_tf_record.make_example(
      image, boxes, labels, masks, 'ctx', include_masks=False)
  rows = rng.normal(size=[3, LENGTH]).astype(np.float32)
  feature = example.features.feature
  feature['image/context_features'].float_list.value.extend(rows.ravel())
  feature['image/context_feature_length'].int64_list.value.append(LENGTH)
  path = str(tmp_path / 'context.record')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(example.SerializeToString())
  configs = _configs(data)
  reader = configs['train_input_config']
  reader.input_type = input_reader_pb2.TF_EXAMPLE
  reader.tf_record_input_reader.input_path[:] = [path]
  features, labels, _ = test_inputs._run(_train(configs))
  assert features[_IN.valid_context_size].tolist() == [3, 3]
  np.testing.assert_allclose(features[_IN.context_features][0, :3], rows,
                             rtol=1e-6)
  assert not features[_IN.context_features][:, 3:].any()
  assert labels[_IN.num_groundtruth_boxes].tolist() == [len(boxes)] * 2
