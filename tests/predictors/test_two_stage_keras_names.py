"""The TF2 (Keras) names of the two-stage heads, beyond the recorded configs.

The sample configs' names are checked in full against the original's
checkpoints (tests/test_upstream_tf2_configs.py, with a mask head in
tests/estimator/object_checkpoint_checks.py); here the layers they do not
have: batch norms of the RPN and of the mask head, its upsampling conv.
"""
import pytest
import tensorflow as tf
import tf_slim as slim
from google.protobuf import text_format

from od_estimator.builders import box_predictor_builder
from od_estimator.builders import hyperparams_builder
from od_estimator.errors import UserInputError
from od_estimator.meta_architectures import region_proposal_network
from od_estimator.predictors import two_stage_keras_names
from od_estimator.protos import box_predictor_pb2
from od_estimator.protos import hyperparams_pb2

_BATCH_NORM_CONV = """
  op: CONV
  regularizer { l2_regularizer { weight: 0.0 } }
  initializer { truncated_normal_initializer { stddev: 0.01 } }
  batch_norm { scale: true }
"""
_PREDICTOR = """
  mask_rcnn_box_predictor {
    fc_hyperparams {
      op: FC
      regularizer { l2_regularizer { weight: 0.0 } }
      initializer { variance_scaling_initializer { } }
    }
    conv_hyperparams { %s }
    predict_instance_masks: true
    mask_height: 8
    mask_width: 8
    mask_prediction_conv_depth: 4
    mask_prediction_num_conv_layers: 3
    convolve_then_upsample_masks: true
  }
""" % _BATCH_NORM_CONV


def _variables(build_fn):
  with tf.Graph().as_default():
    build_fn()
    return sorted(v.op.name for v in tf.compat.v1.global_variables())


def test_rpn_features_with_batch_norm():
  hyperparams = hyperparams_builder.build(
      text_format.Parse(_BATCH_NORM_CONV, hyperparams_pb2.Hyperparams()),
      True)
  names = two_stage_keras_names.KERAS

  def build():
    with names.rpn_features(), slim.arg_scope(hyperparams()):
      slim.conv2d(tf.zeros([1, 4, 4, 8]), 6, [3, 3],
                  scope=names.rpn_features_scope)
  assert _variables(build) == [
      'RPNBatchNorm/beta', 'RPNBatchNorm/gamma', 'RPNBatchNorm/moving_mean',
      'RPNBatchNorm/moving_variance', 'RPNConv/kernel']
  assert region_proposal_network.FirstStageParams.__dataclass_fields__[
      'layer_names'].default is two_stage_keras_names.SLIM


def test_mask_head_with_batch_norm_and_upsampling():
  config = text_format.Parse(_PREDICTOR, box_predictor_pb2.BoxPredictor())

  def build():
    predictor = box_predictor_builder.build(
        hyperparams_builder.build, config, is_training=True, num_classes=2,
        keras_layer_names=True)
    for stage in (2, 3):
      predictor.predict([tf.zeros([3, 4, 4, 8])], [1],
                        scope='SecondStageBoxPredictor',
                        prediction_stage=stage)
  head = 'mask_rcnn_keras_box_predictor/mask_rcnn_mask_head/MaskPredictor_'
  batch_norm = ('beta', 'gamma', 'moving_mean', 'moving_variance')
  assert _variables(build) == sorted(
      ['mask_rcnn_keras_box_predictor/mask_rcnn_box_head/'
       'BoxEncodingPredictor_dense/' + w for w in ('bias', 'kernel')] +
      ['mask_rcnn_keras_box_predictor/mask_rcnn_class_head/'
       'ClassPredictor_dense/' + w for w in ('bias', 'kernel')] +
      [head + layer + '/kernel' for layer in (
          'conv2d_0', 'conv2d_1', 'upsample_conv2d')] +
      [head + layer + '/' + w for layer in (
          'batchnorm_0', 'batchnorm_1', 'upsample_batchnorm')
       for w in batch_norm] +
      [head + 'last_conv2d/' + w for w in ('bias', 'kernel')])


def test_fc_batch_norm_is_refused_with_keras_names():
  config = text_format.Parse(_PREDICTOR, box_predictor_pb2.BoxPredictor())
  config.mask_rcnn_box_predictor.fc_hyperparams.batch_norm.scale = True
  with pytest.raises(UserInputError,
                     match='fc_hyperparams.batch_norm is not supported with '
                     r'the TF2 \(_keras\) feature extractors'):
    box_predictor_builder.build(hyperparams_builder.build, config, True, 2,
                                keras_layer_names=True)


def test_a_layer_without_keras_name_is_refused():
  with pytest.raises(ValueError, match='has no Keras name'):
    two_stage_keras_names.second_stage_name('Conv_2/weights', mask_layers=[
        ('MaskPredictor_conv2d_0', 'MaskPredictor_batchnorm_0'),
        ('MaskPredictor_last_conv2d', None)])
  assert two_stage_keras_names.for_feature_extractor(
      'faster_rcnn_resnet50') is two_stage_keras_names.SLIM
