"""A tiny TF2 Faster R-CNN ResNet-50 (faster_rcnn_resnet50_keras) trains.

The TF2 sample config at 64x64 with 8 proposals, 4 of them classified, trains
three steps in one module fixture. Its variables are checked in full
against the original's in tests/test_upstream_tf2_configs.py; here the
computation: conv4 gives the proposal features (stride 16), and conv5, whose
first block keeps stride 2 in the Keras ResNet, turns each 7x7 pooled crop
into 4x4 box classifier features.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.utils import graph_building
from tests import plain_session
from tests import tf2_faster_rcnn

_PROPOSALS = 8
_CLASSIFIED = 4


@pytest.fixture(scope='module')
def trained():
  """(predicted shapes, losses per step, first gradients, trainables)."""
  config = tf2_faster_rcnn.model_config(tf2_faster_rcnn.RESNET50)
  config.faster_rcnn.first_stage_max_proposals = _PROPOSALS
  config.faster_rcnn.second_stage_batch_size = _CLASSIFIED
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    tf.compat.v1.set_random_seed(1)
    model = model_builder.build(config, is_training=True)
    tf2_faster_rcnn.provide_groundtruth(model)
    images = tf.random.uniform([1, 64, 64, 3], 0, 255, seed=2)
    preprocessed, true_shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, true_shapes)
    loss = tf.add_n(list(model.loss(predictions, true_shapes).values()))
    trainable = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(loss, trainable)
    with tf.control_dependencies(model.updates()):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(
          0.01).apply_gradients(zip(gradients, trainable))
    with plain_session.session(graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      first = sess.run({'loss': loss, 'train': train_op, 'gradients': [
          g for g in gradients if g is not None]})
      losses = [first['loss']] + [sess.run([loss, train_op])[0]
                                  for _ in range(2)]
  shapes = {key: predictions[key].shape.as_list() for key in (
      'rpn_features_to_crop', 'box_classifier_features')}
  values = iter(first['gradients'])
  return (shapes, losses,
          [None if g is None else next(values) for g in gradients],
          [v.op.name for v in trainable])


def test_the_keras_resnet_stages(trained):
  shapes, _, _, _ = trained
  assert shapes == {'rpn_features_to_crop': [1, 4, 4, 1024],
                    'box_classifier_features': [_CLASSIFIED, 4, 4, 2048]}


def test_a_tiny_model_trains(trained):
  _, losses, gradients, trainable = trained
  assert all(np.isfinite(losses)) and losses[2] != losses[0]
  assert [name for name, g in zip(trainable, gradients)
          if g is None or not np.all(np.isfinite(g))] == []
  learning = {name for name, g in zip(trainable, gradients)
              if np.any(g != 0)}
  for name in ('conv1_conv/kernel', 'conv5_block3_3_conv/kernel',
               'RPNConv/kernel',
               'FirstStageBoxPredictor/ConvolutionalClassHead_0/'
               'ClassPredictor/kernel',
               'FirstStageBoxPredictor/ConvolutionalBoxHead_0/'
               'BoxEncodingPredictor/kernel',
               'mask_rcnn_keras_box_predictor/mask_rcnn_class_head/'
               'ClassPredictor_dense/kernel',
               'mask_rcnn_keras_box_predictor/mask_rcnn_box_head/'
               'BoxEncodingPredictor_dense/kernel'):
    assert name in learning, name
