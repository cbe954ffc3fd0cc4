"""'ssd_mobilenet_v1_fpn_keras' and 'ssd_mobilenet_v2_fpn_keras' (FPN-lite).

A tiny model of each TF2 sample config (depth x0.25, 64x64) trains two
steps; the Keras names are checked in full against the original's in
tests/estimator/test_object_checkpoint.py.
"""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator import errors
from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.models import ssd_mobilenet_fpn_keras_feature_extractor
from od_estimator.protos import hyperparams_pb2
from tests import plain_session
from tests import upstream_folder

EXTRACTORS = ssd_mobilenet_fpn_keras_feature_extractor
FPNLITE = 'ssd_mobilenet_v2_fpnlite_320x320_coco17_tpu-8'
V1_FPN = 'ssd_mobilenet_v1_fpn_640x640_coco17_tpu-8'
SIZE = 64


def _train_two_steps(name):
  """(feature map shapes, losses of the two steps, gradients, variables).

  Gradients are those of the first step, None where a variable gets none.
  """
  model_config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(name, tf2=True))['model']
  model_config.ssd.feature_extractor.depth_multiplier = 0.25
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = SIZE
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    model = model_builder.build(model_config, is_training=True)
    images = tf.random.uniform([2, SIZE, SIZE, 3], 0, 255, seed=2)
    model.provide_groundtruth(
        groundtruth_boxes_list=[tf.constant([[0.1, 0.1, 0.6, 0.5]])] * 2,
        groundtruth_classes_list=[tf.one_hot([3], model.num_classes)] * 2)
    predictions = model.predict(*model.preprocess(images))
    losses = model.loss(predictions, None)
    loss = tf.add_n(list(losses.values()))
    update_ops = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.UPDATE_OPS)
    trainable = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(loss, trainable)
    with tf.control_dependencies(update_ops):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(
          0.01).apply_gradients(zip(gradients, trainable))
    with plain_session.session(graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      first = sess.run({'loss': loss, 'gradients': [
          g for g in gradients if g is not None], 'train': train_op})
      second = sess.run([loss, train_op])[0]
  values = iter(first['gradients'])
  return ([m.shape.as_list() for m in predictions['feature_maps']],
          [first['loss'], second],
          [None if g is None else next(values) for g in gradients],
          trainable)


@pytest.fixture(scope='module', params=[FPNLITE, V1_FPN])
def trained(request):
  return request.param, _train_two_steps(request.param)


def test_a_tiny_model_trains(trained):
  name, (shapes, losses, gradients, trainable) = trained
  # Levels 3..7 at 64 px, 128 (FPN-lite) or 256 channels x0.25, min 16.
  depth = 32 if name == FPNLITE else 64
  assert shapes == [[2, 8, 8, depth], [2, 4, 4, depth], [2, 2, 2, depth],
                    [2, 1, 1, depth], [2, 1, 1, depth]]
  assert all(np.isfinite(losses)) and losses[1] != losses[0]
  # Every variable of the extractor and the heads gets a finite gradient.
  assert [v.op.name for v, g in zip(trainable, gradients)
          if g is None or not np.all(np.isfinite(g))] == []
  assert all(np.any(g != 0) for g in gradients[-4:])
  separable = [v.op.name for v in trainable
               if v.op.name.endswith('/depthwise_kernel') and
               '_fpn_keras_feature_extractor/' in v.op.name]
  assert bool(separable) == (name == FPNLITE)


@pytest.mark.parametrize('slim_name, keras_name', [
    ('MobilenetV1/Conv2d_0/weights', 'conv1/kernel'),
    ('MobilenetV1/Conv2d_0/BatchNorm/gamma', 'conv1_bn/gamma'),
    ('MobilenetV1/Conv2d_3_depthwise/depthwise_weights',
     'conv_dw_3/depthwise_kernel'),
    ('MobilenetV1/Conv2d_13_pointwise/BatchNorm/moving_mean',
     'conv_pw_13_bn/moving_mean'),
])
def test_mobilenet_v1_keras_variable_name(slim_name, keras_name):
  assert EXTRACTORS.mobilenet_v1_keras_variable_name(slim_name) == keras_name


@pytest.mark.parametrize('slim_name', [
    'MobilenetV1/Conv2d_1/weights', 'MobilenetV1/Conv2d_0_pointwise/weights',
    'MobilenetV1/Logits/weights'])
def test_mobilenet_v1_keras_variable_name_rejects_other_layers(slim_name):
  with pytest.raises(ValueError, match='has no Keras name'):
    EXTRACTORS.mobilenet_v1_keras_variable_name(slim_name)


def _hyperparams_fn():
  config = text_format.Parse(
      'regularizer { l2_regularizer {} } '
      'initializer { truncated_normal_initializer {} }',
      hyperparams_pb2.Hyperparams())
  return hyperparams_builder.build(config, is_training=True)


@pytest.mark.parametrize('extractor, option, field', [
    (EXTRACTORS.SSDMobileNetV1FpnKerasFeatureExtractor,
     {'use_depthwise': True}, 'use_depthwise'),
    (EXTRACTORS.SSDMobileNetV2FpnKerasFeatureExtractor,
     {'use_explicit_padding': True}, 'use_explicit_padding'),
    (EXTRACTORS.SSDMobileNetV2FpnKerasFeatureExtractor,
     {'use_native_resize_op': True}, 'use_native_resize_op'),
    (EXTRACTORS.SSDMobileNetV1FpnKerasFeatureExtractor,
     {'fpn_min_level': 6}, r'fpn: min_level must be in \[2'),
])
def test_unsupported_options(extractor, option, field):
  with pytest.raises(errors.UserInputError, match=field):
    extractor(is_training=True, depth_multiplier=1.0, min_depth=16,
              pad_to_multiple=1, conv_hyperparams_fn=_hyperparams_fn,
              **option)
