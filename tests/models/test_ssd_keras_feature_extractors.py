"""'ssd_mobilenet_v2_keras' and 'ssd_resnet50_v1_fpn_keras': names, shapes,
restore maps (restoring the original's TF2 checkpoints:
tests/estimator/object_checkpoint_checks.py).

Expected names and shapes are those of the original's TF2 models, built
from its samples ssd_mobilenet_v2_pets_keras.config and
ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco17_sync_keras.config
at 128 and 256 pixels. Each network is built once per module (MobileNet v2
and ResNet50 are slow to build on TF 2.15).
"""
import collections

import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.models import ssd_mobilenet_v2_keras_feature_extractor
from od_estimator.models import ssd_resnet_v1_fpn_keras_feature_extractor
from od_estimator.protos import hyperparams_pb2
from od_estimator.protos import model_pb2
from tests import fast_graphs

MOBILENET_KERAS = ssd_mobilenet_v2_keras_feature_extractor
RESNET_KERAS = ssd_resnet_v1_fpn_keras_feature_extractor

# The feature extractor conv_hyperparams of both sample configs.
MOBILENET_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { train: true, scale: true, center: true, decay: 0.9997,
               epsilon: 0.001 }
"""
RESNET_HYPERPARAMS = """
  activation: RELU_6,
  regularizer { l2_regularizer { weight: 0.0004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
  batch_norm { scale: true, decay: 0.997, epsilon: 0.001 }
"""
# The pets sample's model at 128x128: 37 classes, 3 then 6 anchors.
MOBILENET_SSD = """
ssd {
  num_classes: 37
  box_coder { faster_rcnn_box_coder {} }
  matcher { argmax_matcher {} }
  similarity_calculator { iou_similarity {} }
  anchor_generator { ssd_anchor_generator {
    num_layers: 6 min_scale: 0.2 max_scale: 0.95
    aspect_ratios: [1.0, 2.0, 0.5, 3.0, 0.3333]
    reduce_boxes_in_lowest_layer: true } }
  image_resizer { fixed_shape_resizer { height: 128 width: 128 } }
  box_predictor { convolutional_box_predictor {
    kernel_size: 3 box_code_size: 4
    conv_hyperparams {
      activation: RELU_6,
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 } } } } }
  feature_extractor {
    type: 'ssd_mobilenet_v2_keras' min_depth: 16 depth_multiplier: 1.0
    conv_hyperparams { %s }
    override_base_feature_extractor_hyperparams: true }
  loss { classification_loss { weighted_sigmoid {} }
         localization_loss { weighted_smooth_l1 {} } }
  post_processing { batch_non_max_suppression {
    max_detections_per_class: 10 max_total_detections: 10 } }
}
""" % MOBILENET_HYPERPARAMS


def _hyperparams_fn(text):
  config = text_format.Parse(text, hyperparams_pb2.Hyperparams())
  return hyperparams_builder.build(config, is_training=True)


def _variables():
  return {v.op.name: v.shape.as_list()
          for v in tf.compat.v1.global_variables()}


def _shapes(tensors):
  return [t.shape.as_list() for t in tensors]


# ---------------------------------------------------------------------------
# MobileNet v2.

MobileNetSSD = collections.namedtuple(
    'MobileNetSSD', ['graph', 'model', 'feature_maps', 'variables'])


@pytest.fixture(scope='module')
def mobilenet_ssd():
  """The whole SSD (extractor and predictor), for training, at 128 px."""
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(
        text_format.Parse(MOBILENET_SSD, model_pb2.DetectionModel()),
        is_training=True)
    preprocessed, true_shapes = model.preprocess(
        tf.zeros([1, 128, 128, 3]))
    predictions = model.predict(preprocessed, true_shapes)
    variables = _variables()
  return MobileNetSSD(graph, model, predictions['feature_maps'], variables)


def test_mobilenet_feature_maps(mobilenet_ssd):
  assert _shapes(mobilenet_ssd.feature_maps) == [
      [1, 8, 8, 576], [1, 4, 4, 1280], [1, 2, 2, 512], [1, 1, 1, 256],
      [1, 1, 1, 256], [1, 1, 1, 128]]


MOBILENET_FEATURE_MAPS = ('ssd_mobile_net_v2_keras_feature_extractor/'
                          'FeatureMaps/')


def test_mobilenet_keras_names(mobilenet_ssd):
  variables = mobilenet_ssd.variables
  expected = {
      'Conv1/kernel': [3, 3, 3, 32],
      'bn_Conv1/gamma': [32],
      'bn_Conv1/moving_variance': [32],
      'expanded_conv_depthwise/depthwise_kernel': [3, 3, 32, 1],
      'expanded_conv_depthwise_BN/beta': [32],
      'expanded_conv_project/kernel': [1, 1, 32, 16],
      'block_1_expand/kernel': [1, 1, 16, 96],
      'block_1_expand_BN/gamma': [96],
      'block_13_expand/kernel': [1, 1, 96, 576],
      'block_16_project/kernel': [1, 1, 960, 320],
      'block_16_project_BN/moving_mean': [320],
      'Conv_1/kernel': [1, 1, 320, 1280],
      'Conv_1_bn/beta': [1280],
      MOBILENET_FEATURE_MAPS + 'layer_19_1_Conv2d_2_1x1_256_conv/kernel':
          [1, 1, 1280, 256],
      MOBILENET_FEATURE_MAPS + 'layer_19_1_Conv2d_2_1x1_256_batchnorm/gamma':
          [256],
      MOBILENET_FEATURE_MAPS + 'layer_19_2_Conv2d_5_3x3_s2_128_conv/kernel':
          [3, 3, 64, 128],
      'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/kernel':
          [3, 3, 576, 12],
      'BoxPredictor/ConvolutionalBoxHead_5/BoxEncodingPredictor/bias': [24],
      'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/kernel':
          [3, 3, 576, 114],
      'BoxPredictor/ConvolutionalClassHead_1/ClassPredictor/kernel':
          [3, 3, 1280, 228],
  }
  assert {name: variables.get(name) for name in expected} == expected
  # 52 backbone layers and 8 extra ones, each conv + 4 batch norm
  # variables, and 6 x 2 heads with kernel and bias.
  assert len(variables) == 60 * 5 + 24
  assert not [name for name in variables if 'FeatureExtractor' in name]


@pytest.mark.parametrize('slim_name,keras_name', [
    ('MobilenetV2/Conv/weights', 'Conv1/kernel'),
    ('MobilenetV2/Conv/BatchNorm/moving_mean', 'bn_Conv1/moving_mean'),
    ('MobilenetV2/expanded_conv/depthwise/depthwise_weights',
     'expanded_conv_depthwise/depthwise_kernel'),
    ('MobilenetV2/expanded_conv_12/project/BatchNorm/beta',
     'block_12_project_BN/beta'),
    ('MobilenetV2/Conv_1/BatchNorm/gamma', 'Conv_1_bn/gamma'),
    ('MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512_depthwise/'
     'depthwise_weights',
     MOBILENET_FEATURE_MAPS +
     'layer_19_2_Conv2d_2_3x3_s2_512_depthwise_conv/depthwise_kernel'),
    ('MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512_depthwise/BatchNorm/beta',
     MOBILENET_FEATURE_MAPS +
     'layer_19_2_Conv2d_2_3x3_s2_512_depthwise_batchnorm/beta'),
])
def test_mobilenet_keras_variable_name(slim_name, keras_name):
  assert MOBILENET_KERAS.keras_variable_name(slim_name) == keras_name


def test_mobilenet_keras_variable_name_rejects_unknown_layers():
  for name in ('MobilenetV2/Logits/weights', 'Other/Conv/weights',
               'MobilenetV2/expanded_conv_3/weights'):
    with pytest.raises(ValueError):
      MOBILENET_KERAS.keras_variable_name(name)


def test_mobilenet_restore_maps(mobilenet_ssd):
  model = mobilenet_ssd.model
  with mobilenet_ssd.graph.as_default():
    detection = model.restore_map('detection')
    classification = model.restore_map('classification')
    everything = model.restore_map('detection',
                                   load_all_detection_checkpoint_vars=True)
  extractor_names = {name for name in mobilenet_ssd.variables
                     if not name.startswith('BoxPredictor/')}
  assert set(detection) == set(classification) == extractor_names
  assert set(everything) == set(mobilenet_ssd.variables)
  assert all(variable.op.name == name
             for name, variable in everything.items())


def test_mobilenet_override_needs_scaled_batch_norm_and_activation():
  for hyperparams in (MOBILENET_HYPERPARAMS.replace('scale: true',
                                                    'scale: false'),
                      MOBILENET_HYPERPARAMS.replace('RELU_6', 'NONE')):
    with pytest.raises(ValueError, match='ssd_mobilenet_v2_keras'):
      MOBILENET_KERAS.SSDMobileNetV2KerasFeatureExtractor(
          is_training=True, depth_multiplier=1.0, min_depth=16,
          pad_to_multiple=1,
          conv_hyperparams_fn=_hyperparams_fn(hyperparams),
          override_base_feature_extractor_hyperparams=True)


# ---------------------------------------------------------------------------
# ResNet50 v1 FPN.

ResNetFpn = collections.namedtuple(
    'ResNetFpn', ['graph', 'extractor', 'feature_maps', 'variables'])


def _build_resnet(depth_multiplier=1.0, override=True):
  """The extractor at 256 px, levels 3..7, in the 'FeatureExtractor' scope."""
  with fast_graphs.new_graph() as graph:
    extractor = RESNET_KERAS.SSDResNet50V1FpnKerasFeatureExtractor(
        is_training=True, depth_multiplier=depth_multiplier, min_depth=16,
        pad_to_multiple=1,
        conv_hyperparams_fn=_hyperparams_fn(RESNET_HYPERPARAMS),
        override_base_feature_extractor_hyperparams=override)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(
          extractor.preprocess(tf.zeros([1, 256, 256, 3])))
    variables = _variables()
  return ResNetFpn(graph, extractor, feature_maps, variables)


@pytest.fixture(scope='module')
def resnet_fpn():
  return _build_resnet()


FPN = 'ResNet50V1_FPN/'
TOP_DOWN = FPN + 'FeatureMaps/top_down/'


def test_resnet_feature_maps(resnet_fpn):
  assert _shapes(resnet_fpn.feature_maps) == [
      [1, 32, 32, 256], [1, 16, 16, 256], [1, 8, 8, 256], [1, 4, 4, 256],
      [1, 2, 2, 256]]


def test_resnet_keras_names(resnet_fpn):
  variables = resnet_fpn.variables
  expected = {
      'conv1_conv/kernel': [7, 7, 3, 64],
      'conv1_bn/gamma': [64],
      'conv2_block1_0_conv/kernel': [1, 1, 64, 256],
      'conv2_block1_0_bn/moving_mean': [256],
      'conv2_block1_1_conv/kernel': [1, 1, 64, 64],
      'conv3_block1_0_conv/kernel': [1, 1, 256, 512],
      'conv3_block1_1_conv/kernel': [1, 1, 256, 128],
      'conv4_block6_3_conv/kernel': [1, 1, 256, 1024],
      'conv5_block3_3_bn/moving_variance': [2048],
      TOP_DOWN + 'projection_1/kernel': [1, 1, 512, 256],
      TOP_DOWN + 'projection_3/kernel': [1, 1, 2048, 256],
      TOP_DOWN + 'projection_3/bias': [256],
      TOP_DOWN + 'smoothing_1_conv/kernel': [3, 3, 256, 256],
      TOP_DOWN + 'smoothing_2_batchnorm/gamma': [256],
      FPN + 'bottom_up_block5_conv/kernel': [3, 3, 256, 256],
      FPN + 'bottom_up_block6_batchnorm/moving_mean': [256],
  }
  assert {name: variables.get(name) for name in expected} == expected
  # Backbone: 53 bias-free convs with batch norm; FPN: 3 projections with
  # bias, 2 smoothing and 2 coarse convs with batch norm.
  assert len(variables) == 53 * 5 + 3 * 2 + 4 * 5
  assert not [name for name in variables if 'FeatureExtractor' in name]
  assert sorted(name for name in variables if name.endswith('/bias')) == [
      TOP_DOWN + 'projection_%d/bias' % i for i in (1, 2, 3)]


def test_resnet_restore_maps_cover_the_extractor(resnet_fpn):
  extractor = resnet_fpn.extractor
  with resnet_fpn.graph.as_default():
    owned = [v.op.name for v in tf.compat.v1.global_variables()
             if extractor.owns_variable(v, 'FeatureExtractor')]
    classification = extractor.restore_from_classification_checkpoint_fn(
        'FeatureExtractor')
  assert sorted(owned) == sorted(classification) == sorted(
      resnet_fpn.variables)


def test_resnet_fpn_upsamples_the_smoothed_maps(resnet_fpn):
  # Unlike the slim FPN, the finer level upsamples the coarser level's
  # output after smoothing (conv + batch norm + activation).
  upsampled = {op.inputs[0].name for op in resnet_fpn.graph.get_operations()
               if 'nearest_neighbor_upsampling' in op.name and
               op.name.endswith('/w_stack')}
  assert resnet_fpn.feature_maps[1].op.type == 'Relu6'
  assert upsampled == {resnet_fpn.feature_maps[1].name,
                       resnet_fpn.feature_maps[2].name}


def _batch_norm_epsilons(graph, prefix):
  return {round(op.get_attr('epsilon'), 8) for op in graph.get_operations()
          if op.type.startswith('FusedBatchNorm') and
          op.name.startswith(prefix)}


def _activations(graph, prefix):
  return {op.type for op in graph.get_operations()
          if op.type in ('Relu', 'Relu6') and op.name.startswith(prefix)}


def test_resnet_backbone_with_overridden_hyperparams(resnet_fpn):
  backbone = 'FeatureExtractor/conv'
  assert _batch_norm_epsilons(resnet_fpn.graph, backbone) == {0.001}
  assert _activations(resnet_fpn.graph, backbone) == {'Relu6'}


def test_resnet_backbone_keras_defaults():
  # Without the override: the Keras application's ReLU and the original's
  # batch norm epsilon 1e-5 (FPN layers still follow conv_hyperparams).
  built = _build_resnet(depth_multiplier=0.25, override=False)
  assert _shapes(built.feature_maps)[0] == [1, 32, 32, 64]
  backbone = 'FeatureExtractor/conv'
  assert _batch_norm_epsilons(built.graph, backbone) == {1e-5}
  assert _activations(built.graph, backbone) == {'Relu'}
  fpn = 'FeatureExtractor/' + FPN
  assert _batch_norm_epsilons(built.graph, fpn) == {0.001}
  assert _activations(built.graph, fpn) == {'Relu6'}


@pytest.mark.parametrize('option', [{'use_explicit_padding': True},
                                    {'use_depthwise': True},
                                    {'fpn_min_level': 6},
                                    {'fpn_min_level': 1}])
def test_resnet_unsupported_options(option):
  with pytest.raises(ValueError, match='model.ssd.feature_extractor'):
    RESNET_KERAS.SSDResNet50V1FpnKerasFeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16,
        pad_to_multiple=1,
        conv_hyperparams_fn=_hyperparams_fn(RESNET_HYPERPARAMS), **option)
