"""create_model_fn with a tiny Context R-CNN: context features as features.

The model is the builder tests' two-stage config on the fake extractor with
a context_config of 5 rows of 6 values; the model_fn takes its side inputs
out of the features as for any model (DetectionModel.get_side_inputs).
"""
import functools

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.estimator import model_lib
from od_estimator.input_pipeline import inputs
from od_estimator.protos import pipeline_pb2
from tests.builders import test_faster_rcnn_model_builder as builder_tests

_IN = fields.InputDataFields
_ModeKeys = tf.estimator.ModeKeys
_BATCH = 2
_SIZE = 32
_TRAIN_EVAL_TEXT = """
train_config {
  batch_size: 2
  optimizer { momentum_optimizer {
    learning_rate { constant_learning_rate { learning_rate: 0.1 } }
  } }
}
eval_config { metrics_set: 'coco_detection_metrics' }
eval_input_reader { max_number_of_boxes: 2 }
"""

fake_extractor = builder_tests.fake_extractor


def pipeline():
  """The tiny Context R-CNN's TrainEvalPipelineConfig (32x32 images, 5
  context rows of 6 values); its 'fake' extractor is registered by the
  fake_extractor fixture."""
  config = config_util.parse_pipeline_text(_TRAIN_EVAL_TEXT)
  config.model.CopyFrom(builder_tests._config(extra=builder_tests._context()))
  # Anchors of 8 and 16 pixels, inside the 32x32 images (the default 256
  # would all be pruned, leaving no loss).
  anchors = config.model.faster_rcnn.first_stage_anchor_generator
  anchors.grid_anchor_generator.height = 16
  anchors.grid_anchor_generator.width = 16
  return config


def model_fn(config):
  """create_model_fn of a pipeline config."""
  configs = config_util.create_configs_from_pipeline_proto(config)
  return model_lib.create_model_fn(
      functools.partial(model_builder.build, configs['model']), configs)


def _model_fn():
  return model_fn(pipeline())


def _features():
  random = np.random.RandomState(0)
  return {
      _IN.image: tf.constant(random.uniform(
          0, 255, [_BATCH, _SIZE, _SIZE, 3]).astype(np.float32)),
      _IN.true_image_shape: tf.constant([[_SIZE, _SIZE, 3]] * _BATCH),
      _IN.original_image_spatial_shape: tf.constant([[_SIZE, _SIZE]] * _BATCH),
      inputs.HASH_KEY: tf.constant(['a', 'b']),
      _IN.context_features: tf.constant(
          random.uniform(-1, 1, [_BATCH, 5, 6]).astype(np.float32)),
      _IN.valid_context_size: tf.constant([3, 5]),
  }


def _labels():
  return {
      _IN.groundtruth_boxes: tf.constant(
          [[[0.1, 0.1, 0.6, 0.6], [0.0, 0.0, 0.0, 0.0]],
           [[0.2, 0.3, 0.9, 0.8], [0.0, 0.5, 0.5, 1.0]]]),
      _IN.groundtruth_classes: tf.constant(
          [[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
           [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]),
      _IN.groundtruth_weights: tf.ones([_BATCH, 2]),
      _IN.num_groundtruth_boxes: tf.constant([1, 2]),
  }


def test_a_train_step_moves_the_attention_weights():
  with tf.Graph().as_default():
    # Seeded: with some random initial weights no proposal overlaps the
    # groundtruth enough to move the attention (seen once in the suite).
    tf.compat.v1.set_random_seed(0)
    spec = _model_fn()(_features(), _labels(), _ModeKeys.TRAIN, None)
    weights = tf.compat.v1.global_variables(
        'AttentionBlock/fully_connected_1/weights')[0]
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      before = session.run(weights)
      loss, _ = session.run((spec.loss, spec.train_op))
      after = session.run(weights)
  assert np.isfinite(loss) and loss > 0
  assert not np.allclose(before, after)


@pytest.mark.parametrize('mode', [_ModeKeys.EVAL, _ModeKeys.PREDICT])
def test_eval_and_predict_specs_detect_with_context(mode):
  with tf.Graph().as_default():
    spec = _model_fn()(_features(),
                       None if mode == _ModeKeys.PREDICT else _labels(),
                       mode, None)
    if mode == _ModeKeys.EVAL:
      assert 'DetectionBoxes_Precision/mAP' in spec.eval_metric_ops
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      scores = session.run(spec.predictions[
          fields.DetectionResultFields.detection_scores]
                           if mode == _ModeKeys.PREDICT else spec.loss)
  assert np.all(np.isfinite(scores))


def test_features_without_context_are_refused_naming_them():
  features = _features()
  del features[_IN.valid_context_size]
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='valid_context_size'):
      _model_fn()(features, _labels(), _ModeKeys.TRAIN, None)
