"""A tiny model of each SSD TF2 feature extractor trains two steps.

A TF2 sample config of each extractor we support (ssd_mobilenet_v2_keras,
its FPN-lite, ssd_mobilenet_v1_fpn_keras, ssd_resnet50_v1_fpn_keras) at
depth x0.25, batch 1 and the smallest image it builds at. ResNet-101 and
-152 FPN are the ResNet-50 extractor with more blocks per stage: their
graphs are built (tests/test_upstream_tf2_configs.py) and their Keras names
checked in full against the original's, as every backbone's are
(tests/estimator/object_checkpoint_checks.py), without training them
again.
"""
import re

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import plain_session
from tests import upstream_folder

# Config -> image size: 64 for the MobileNets (our tiny models' size); for
# ResNet FPN the smallest it builds at (at least 129, a multiple of 32 for
# the top-down additions).
SIZES = {
    'ssd_mobilenet_v2_320x320_coco17_tpu-8': 64,
    'ssd_mobilenet_v2_fpnlite_320x320_coco17_tpu-8': 64,
    'ssd_mobilenet_v1_fpn_640x640_coco17_tpu-8': 64,
    'ssd_resnet50_v1_fpn_640x640_coco17_tpu-8': 160,
}


def _train_two_steps(model_config, size):
  """(feature map shapes, losses of the two steps, gradients, variables).

  Gradients are those of the first step, None where a variable gets none.
  """
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    tf.compat.v1.set_random_seed(1)
    model = model_builder.build(model_config, is_training=True)
    images = tf.random.uniform([1, size, size, 3], 0, 255, seed=2)
    model.provide_groundtruth(
        groundtruth_boxes_list=[tf.constant([[0.1, 0.1, 0.6, 0.5]])],
        groundtruth_classes_list=[tf.one_hot([3], model.num_classes)])
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


@pytest.fixture(scope='module', params=list(SIZES))
def trained(request):
  """(model config, _train_two_steps of the tiny model)."""
  model_config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(request.param, tf2=True))['model']
  model_config.ssd.feature_extractor.depth_multiplier = 0.25
  size = SIZES[request.param]
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = size
  return model_config, _train_two_steps(model_config, size)


def test_a_tiny_model_trains(trained):
  model_config, (shapes, losses, gradients, trainable) = trained
  # Each feature map halves the one before (rounding up).
  sizes = [shape[1] for shape in shapes]
  assert sizes[1:] == [-(-size // 2) for size in sizes[:-1]]
  assert all(np.isfinite(losses)) and losses[1] != losses[0]
  # Every variable of the extractor and the heads gets a finite gradient,
  # nonzero for the first backbone layer and some box and class predictor.
  assert [v.op.name for v, g in zip(trainable, gradients)
          if g is None or not np.all(np.isfinite(g))] == []
  learning = [v.op.name for v, g in zip(trainable, gradients)
              if np.any(g != 0)]
  assert learning[0] == trainable[0].op.name
  for head in ('Box', 'Class'):
    assert any(re.search(r'%s\w*Predictor/\w*kernel$' % head, name)
               for name in learning), head
  # The MobileNet extractors' added layers are separable with use_depthwise
  # (the ResNet FPN extractors refuse it).
  separable = [v.op.name for v in trainable
               if v.op.name.endswith('/depthwise_kernel') and
               '_keras_feature_extractor/' in v.op.name]
  assert bool(separable) == model_config.ssd.feature_extractor.use_depthwise
