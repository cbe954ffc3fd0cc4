"""Faster R-CNN feature extractor classes by `FasterRcnnFeatureExtractor.type`.

The model builder looks the config's type up here. Every class takes
(is_training, first_stage_features_stride, batch_norm_trainable=False,
reuse_weights=None, weight_decay=0.0) and may add keyword arguments of its
own with defaults; those the builder fills from FasterRcnnFeatureExtractor
fields, the class names in CONFIG_FIELDS.
"""
from od_estimator.models import faster_rcnn_inception_resnet_v2_feature_extractor
from od_estimator.models import faster_rcnn_inception_resnet_v2_keras_feature_extractor
from od_estimator.models import faster_rcnn_inception_v2_feature_extractor
from od_estimator.models import faster_rcnn_nas_feature_extractor
from od_estimator.models import faster_rcnn_resnet_keras_feature_extractor
from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor
from od_estimator.models import (
    faster_rcnn_resnet_v1_fpn_keras_feature_extractor as fpn_keras)

FASTER_RCNN_FEATURE_EXTRACTORS = {
    'faster_rcnn_inception_resnet_v2':
        faster_rcnn_inception_resnet_v2_feature_extractor
        .FasterRCNNInceptionResnetV2FeatureExtractor,
    'faster_rcnn_inception_resnet_v2_keras':
        faster_rcnn_inception_resnet_v2_keras_feature_extractor
        .FasterRCNNInceptionResnetV2KerasFeatureExtractor,
    'faster_rcnn_inception_v2':
        faster_rcnn_inception_v2_feature_extractor
        .FasterRCNNInceptionV2FeatureExtractor,
    'faster_rcnn_nas':
        faster_rcnn_nas_feature_extractor.FasterRCNNNASFeatureExtractor,
    'faster_rcnn_resnet50':
        faster_rcnn_resnet_v1_feature_extractor
        .FasterRCNNResnet50FeatureExtractor,
    'faster_rcnn_resnet101':
        faster_rcnn_resnet_v1_feature_extractor
        .FasterRCNNResnet101FeatureExtractor,
    'faster_rcnn_resnet152':
        faster_rcnn_resnet_v1_feature_extractor
        .FasterRCNNResnet152FeatureExtractor,
    'faster_rcnn_resnet50_keras':
        faster_rcnn_resnet_keras_feature_extractor
        .FasterRCNNResnet50KerasFeatureExtractor,
    'faster_rcnn_resnet101_keras':
        faster_rcnn_resnet_keras_feature_extractor
        .FasterRCNNResnet101KerasFeatureExtractor,
    'faster_rcnn_resnet152_keras':
        faster_rcnn_resnet_keras_feature_extractor
        .FasterRCNNResnet152KerasFeatureExtractor,
    'faster_rcnn_resnet50_fpn_keras':
        fpn_keras.FasterRCNNResnet50FpnKerasFeatureExtractor,
    'faster_rcnn_resnet101_fpn_keras':
        fpn_keras.FasterRCNNResnet101FpnKerasFeatureExtractor,
    'faster_rcnn_resnet152_fpn_keras':
        fpn_keras.FasterRCNNResnet152FpnKerasFeatureExtractor,
}
