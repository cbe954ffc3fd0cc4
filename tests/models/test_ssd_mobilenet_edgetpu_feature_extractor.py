"""SSD MobileNet EdgeTPU feature extractor.

Expected names, shapes and counts were collected by running the original
TF1 Object Detection API (SSDMobileNetEdgeTPUFeatureExtractor, and
model_builder on the upstream ssdlite_mobilenet_edgetpu_320x320_coco
config) with the same inputs and hyperparams.
"""
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.models import ssd_mobilenet_edgetpu_feature_extractor
from od_estimator.protos import hyperparams_pb2
from od_estimator.config import config_util
from tests import fast_graphs
from tests import plain_session
from tests import upstream_folder


# conv_hyperparams of the upstream ssdlite_mobilenet_edgetpu configs.
CONV_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.97,
               epsilon: 0.001 }
"""

_FE = 'FeatureExtractor/MobilenetEdgeTPU/'

# Depth multiplier 1, no depthwise SSD layers.
DEFAULT_VARIABLES = {
    _FE + 'Conv/weights': [3, 3, 3, 32],
    # The first block does not expand: a bare projection.
    _FE + 'expanded_conv/project/weights': [1, 1, 32, 16],
    # Fused blocks: a full 3x3 expansion conv.
    _FE + 'expanded_conv_1/expand/weights': [3, 3, 16, 128],
    _FE + 'expanded_conv_16/expand/weights': [1, 1, 96, 384],
    _FE + 'layer_23_1_Conv2d_2_1x1_256/weights': [1, 1, 192, 256],
    _FE + 'layer_23_2_Conv2d_2_3x3_s2_512/weights': [3, 3, 256, 512],
}

UPSTREAM_VARIABLES = {
    _FE + 'layer_23_2_Conv2d_2_3x3_s2_512_depthwise/depthwise_weights':
        [3, 3, 256, 1],
    'BoxPredictor_0/ClassPredictor/weights': [1, 1, 384, 273],
    'BoxPredictor_1/BoxEncodingPredictor_depthwise/depthwise_weights':
        [3, 3, 192, 1],
    'BoxPredictor_5/ClassPredictor/biases': [546],
}


def _extractor(**kwargs):
  config = hyperparams_pb2.Hyperparams()
  text_format.Merge(CONV_HYPERPARAMS, config)
  return (ssd_mobilenet_edgetpu_feature_extractor
          .SSDMobileNetEdgeTPUFeatureExtractor(
              is_training=False, depth_multiplier=1.0, min_depth=16,
              pad_to_multiple=1,
              conv_hyperparams_fn=hyperparams_builder.build(
                  config, is_training=False),
              **kwargs))


def _variables():
  return {v.op.name: v.shape.as_list()
          for v in tf.compat.v1.global_variables()}


def _num_regularization_losses():
  return len(tf.compat.v1.get_collection(
      tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES))


def test_shapes_names_and_restore_128():
  with fast_graphs.new_graph():
    extractor = _extractor()
    images = tf.fill([2, 128, 128, 3], 128.0)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    variables = _variables()
    num_losses = _num_regularization_losses()
    restore = extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      maps = sess.run(maps)
  # layer_18's expansion (96 * 4) at stride 16, layer_23 (192) at 32.
  assert [m.shape for m in maps] == [
      (2, 8, 8, 384), (2, 4, 4, 192), (2, 2, 2, 512), (2, 1, 1, 256),
      (2, 1, 1, 256), (2, 1, 1, 128)]
  assert all(np.isfinite(m).all() for m in maps)
  for name, shape in DEFAULT_VARIABLES.items():
    assert variables.get(name) == shape, name
  assert len(variables) == 325
  assert num_losses == 52
  assert len(restore) == 325
  assert restore['MobilenetEdgeTPU/expanded_conv_1/expand/weights'].op.name \
      == _FE + 'expanded_conv_1/expand/weights'


def test_upstream_config_variables():
  path = os.path.join(upstream_folder.require(),
                      'ssdlite_mobilenet_edgetpu_320x320_coco.config')
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  with fast_graphs.new_graph():
    model = model_builder.build(model_config, is_training=True)
    preprocessed, true_shapes = model.preprocess(tf.zeros([1, 128, 128, 3]))
    model.predict(preprocessed, true_shapes)
    variables = _variables()
    num_losses = _num_regularization_losses()
    restore = model.restore_map(fine_tune_checkpoint_type='classification')
  for name, shape in UPSTREAM_VARIABLES.items():
    assert variables.get(name) == shape, name
  assert len(variables) == 429
  assert num_losses == 93
  assert len(restore) == 345
  assert all(name.startswith('MobilenetEdgeTPU/') for name in restore)


def test_explicit_padding_odd_size(execute):
  def graph_fn(images):
    extractor = _extractor(use_explicit_padding=True, use_depthwise=True)
    return extractor.extract_features(extractor.preprocess(images))

  maps = execute(graph_fn, [np.zeros([1, 75, 75, 3], np.float32)])
  # Fused 3x3 convs and 5x5 depthwise convs padded as SAME would:
  # 75 -> 38, 19, 10, 5, 3, then the SSD layers 2, 1, 1.
  assert [m.shape[1:3] for m in maps] == [
      (5, 5), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)]
