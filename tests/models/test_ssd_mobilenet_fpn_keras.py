"""'ssd_mobilenet_v1_fpn_keras' and 'ssd_mobilenet_v2_fpn_keras' (FPN-lite).

Their backbone names and the options they refuse. A tiny model of each
trains in tests/models/test_ssd_keras_training.py; the Keras names are
checked in full against the original's by
tests/estimator/object_checkpoint_checks.py (run in
tests/test_upstream_tf2_configs.py).
"""
import pytest
from google.protobuf import text_format

from od_estimator import errors
from od_estimator.builders import hyperparams_builder
from od_estimator.models import ssd_mobilenet_fpn_keras_feature_extractor
from od_estimator.protos import hyperparams_pb2

EXTRACTORS = ssd_mobilenet_fpn_keras_feature_extractor


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
