"""SSD feature extractor classes by `SsdFeatureExtractor.type` string.

The model builder looks the config's type up here; every class takes the
SSDFeatureExtractor constructor arguments, and the *_fpn ones also
fpn_min_level, fpn_max_level, additional_layer_depth and
use_native_resize_op; the EfficientDet ones (ssd_efficientnet-b<N>_bifpn_keras)
the bifpn_* arguments and use_native_resize_op.
"""
from od_estimator.models import embedded_ssd_mobilenet_v1_feature_extractor
from od_estimator.models import ssd_efficientnet_bifpn_feature_extractor
from od_estimator.models import ssd_inception_feature_extractor
from od_estimator.models import ssd_mobiledet_feature_extractor
from od_estimator.models import ssd_mobilenet_edgetpu_feature_extractor
from od_estimator.models import ssd_mobilenet_fpn_keras_feature_extractor
from od_estimator.models import ssd_mobilenet_v1_feature_extractor
from od_estimator.models import ssd_mobilenet_v1_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v1_ppn_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_fpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_keras_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_mnasfpn_feature_extractor
from od_estimator.models import ssd_mobilenet_v3_feature_extractor
from od_estimator.models import ssd_resnet_v1_fpn_feature_extractor
from od_estimator.models import ssd_resnet_v1_fpn_keras_feature_extractor

SSD_FEATURE_EXTRACTORS = {
    'ssd_mobilenet_v1':
        ssd_mobilenet_v1_feature_extractor.SSDMobileNetV1FeatureExtractor,
    'ssd_mobilenet_v1_fpn':
        ssd_mobilenet_v1_fpn_feature_extractor
        .SSDMobileNetV1FpnFeatureExtractor,
    'ssd_mobilenet_v1_fpn_keras':
        ssd_mobilenet_fpn_keras_feature_extractor
        .SSDMobileNetV1FpnKerasFeatureExtractor,
    'ssd_mobilenet_v1_ppn':
        ssd_mobilenet_v1_ppn_feature_extractor
        .SSDMobileNetV1PpnFeatureExtractor,
    'ssd_mobilenet_v2':
        ssd_mobilenet_v2_feature_extractor.SSDMobileNetV2FeatureExtractor,
    'ssd_mobilenet_v2_fpn':
        ssd_mobilenet_v2_fpn_feature_extractor
        .SSDMobileNetV2FpnFeatureExtractor,
    'ssd_mobilenet_v2_mnasfpn':
        ssd_mobilenet_v2_mnasfpn_feature_extractor
        .SSDMobileNetV2MnasFPNFeatureExtractor,
    'ssd_mobilenet_v2_keras':
        ssd_mobilenet_v2_keras_feature_extractor
        .SSDMobileNetV2KerasFeatureExtractor,
    'ssd_mobilenet_v2_fpn_keras':
        ssd_mobilenet_fpn_keras_feature_extractor
        .SSDMobileNetV2FpnKerasFeatureExtractor,
    'ssd_mobilenet_v3_large':
        ssd_mobilenet_v3_feature_extractor
        .SSDMobileNetV3LargeFeatureExtractor,
    'ssd_mobilenet_v3_small':
        ssd_mobilenet_v3_feature_extractor
        .SSDMobileNetV3SmallFeatureExtractor,
    'ssd_mobilenet_edgetpu':
        ssd_mobilenet_edgetpu_feature_extractor
        .SSDMobileNetEdgeTPUFeatureExtractor,
    'ssd_mobiledet_cpu':
        ssd_mobiledet_feature_extractor.SSDMobileDetCPUFeatureExtractor,
    'ssd_mobiledet_dsp':
        ssd_mobiledet_feature_extractor.SSDMobileDetDSPFeatureExtractor,
    'ssd_mobiledet_edgetpu':
        ssd_mobiledet_feature_extractor.SSDMobileDetEdgeTPUFeatureExtractor,
    'ssd_mobiledet_gpu':
        ssd_mobiledet_feature_extractor.SSDMobileDetGPUFeatureExtractor,
    'embedded_ssd_mobilenet_v1':
        embedded_ssd_mobilenet_v1_feature_extractor
        .EmbeddedSSDMobileNetV1FeatureExtractor,
    'ssd_inception_v2':
        ssd_inception_feature_extractor.SSDInceptionV2FeatureExtractor,
    'ssd_inception_v3':
        ssd_inception_feature_extractor.SSDInceptionV3FeatureExtractor,
    'ssd_resnet50_v1_fpn':
        ssd_resnet_v1_fpn_feature_extractor.SSDResnet50V1FpnFeatureExtractor,
    'ssd_resnet101_v1_fpn':
        ssd_resnet_v1_fpn_feature_extractor.SSDResnet101V1FpnFeatureExtractor,
    'ssd_resnet152_v1_fpn':
        ssd_resnet_v1_fpn_feature_extractor.SSDResnet152V1FpnFeatureExtractor,
    'ssd_resnet50_v1_fpn_keras':
        ssd_resnet_v1_fpn_keras_feature_extractor
        .SSDResNet50V1FpnKerasFeatureExtractor,
    'ssd_resnet101_v1_fpn_keras':
        ssd_resnet_v1_fpn_keras_feature_extractor
        .SSDResNet101V1FpnKerasFeatureExtractor,
    'ssd_resnet152_v1_fpn_keras':
        ssd_resnet_v1_fpn_keras_feature_extractor
        .SSDResNet152V1FpnKerasFeatureExtractor,
    **ssd_efficientnet_bifpn_feature_extractor.EXTRACTORS,
}
