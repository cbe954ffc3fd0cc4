"""Evaluation of a padded, non-square image: a perfect detection scores 1.0.

keep_aspect_ratio_resizer with pad_to_max_dimension (the resizer of most of
the original's Faster R-CNN configs) pads a 60x120 image, resized to 32x64,
to 64x64. The input pipeline normalizes groundtruth to the padded image;
both meta-architectures normalize detections to the true (unpadded) image.
Evaluation must bring the two into one frame, as the original's
result_dict_for_batched_example does.

The model's own postprocess produces the perfect detection: for Faster R-CNN
a proposal on the groundtruth box with zero refinement, for SSD an anchor on
it with zero box codes, each confidently of the groundtruth class.
"""
from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.input_pipeline import inputs
from od_estimator.estimator import eval_graph
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.protos import eval_pb2
from od_estimator.protos import input_reader_pb2
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from tests import tiny_faster_rcnn
from tests import tiny_ssd

_IN = fields.InputDataFields
HEIGHT, WIDTH = 60, 120
PADDED = 64
NUM_CLASSES = 3
RESIZER = """keep_aspect_ratio_resizer {
  min_dimension: 32 max_dimension: 64 pad_to_max_dimension: true }"""


@pytest.fixture(scope='module')
def record(tmp_path_factory):
  """One 60x120 shapes image; returns (record path, box, 1-based class)."""
  directory = tmp_path_factory.mktemp('padded')
  image, boxes, labels, masks = create_synthetic_tf_record.make_image(
      np.random.default_rng(5), HEIGHT, WIDTH, max_shapes=1)
  path = str(directory / 'eval.record')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(create_synthetic_tf_record.make_example(
        image, boxes, labels, masks, 0).SerializeToString())
  return path, boxes[0], int(labels[0])


def _model_config(meta_architecture):
  if meta_architecture == 'ssd':
    model_config = tiny_ssd.model_config()
  else:
    text = tiny_faster_rcnn.CONFIG % {
        'extractor': 'faster_rcnn_resnet50', 'model_fields': '',
        'batch_size': 1, 'train_fields': '', 'train': '', 'val': '',
        'label_map': ''}
    model_config = text_format.Parse(
        text, pipeline_pb2.TrainEvalPipelineConfig()).model
  resizer = config_util.get_image_resizer_config(model_config)
  resizer.Clear()
  text_format.Merge(RESIZER, resizer)
  return model_config


def _perfect_predictions(meta_architecture, features, box, label):
  """A prediction dict whose postprocess detects `box` as class `label`."""
  logits = tf.one_hot([label], NUM_CLASSES + 1, on_value=20.0,
                      off_value=-20.0)
  if meta_architecture == 'ssd':
    return {'preprocessed_inputs': features[_IN.image],
            'anchors': box[tf.newaxis],
            'box_encodings': tf.zeros([1, 1, 4]),
            'class_predictions_with_background': logits[tf.newaxis]}
  return {'proposal_boxes': (box * PADDED)[tf.newaxis, tf.newaxis],
          'num_proposals': tf.constant([1]),
          'refined_box_encodings': tf.zeros([1, NUM_CLASSES, 4]),
          'class_predictions_with_background': logits}


@pytest.mark.parametrize('meta_architecture', ['faster_rcnn', 'ssd'])
def test_perfect_detection_of_padded_image_scores_map_one(
    record, meta_architecture):
  path, box, label = record
  model_config = _model_config(meta_architecture)
  eval_config = eval_pb2.EvalConfig(metrics_set=['coco_detection_metrics'])
  eval_input_config = input_reader_pb2.InputReader(shuffle=False,
                                                   num_readers=1)
  eval_input_config.tf_record_input_reader.input_path.append(path)
  with tf.Graph().as_default():
    model = model_builder.build(model_config, is_training=False)
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        inputs.eval_input(eval_config, eval_input_config, model_config,
                          model=model, params={'batch_size': 1})).get_next()
    labels = model_lib.unstack_batch(labels)
    # The groundtruth box in the padded frame: where the model sees it.
    padded_box = labels[_IN.groundtruth_boxes][0][0]
    detections = model.postprocess(
        _perfect_predictions(meta_architecture, features, padded_box,
                             label), features[_IN.true_image_shape])
    eval_dict = eval_graph.build_eval_dict(labels, features, detections,
                                           eval_input_config)
    metrics = eval_util.get_eval_metric_ops_for_evaluators(
        eval_config, [{'id': i, 'name': str(i)} for i in (1, 2, 3)],
        eval_dict)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.local_variables_initializer())
      true_shape, padded, detected = session.run(
          [features[_IN.true_image_shape], padded_box, detections])
      session.run([update for _, update in metrics.values()])
      mean_ap = session.run(metrics['DetectionBoxes_Precision/mAP'][0])
  np.testing.assert_array_equal(true_shape[0], [32, 64, 3])
  # Groundtruth in the padded frame: rows scaled by 32 / 64.
  np.testing.assert_allclose(padded, box * [0.5, 1.0, 0.5, 1.0], atol=1e-6)
  # The detection, normalized to the true image, is the record's box.
  np.testing.assert_allclose(detected['detection_boxes'][0, 0], box,
                             atol=1e-5)
  assert mean_ap == pytest.approx(1.0)
