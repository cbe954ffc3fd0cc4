"""Tiny fake components for meta-architecture and model builder tests.

Import as `from tests import fakes` (pytest runs from the repository root).
"""
import contextlib

import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.core import anchor_generator
from od_estimator.core import box_list
from od_estimator.core import box_predictor
from od_estimator.models import faster_rcnn_feature_extractor
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import ssd_feature_extractor

# The four quadrants of the unit square, row-major: the anchors of a 2x2
# feature map with one anchor per cell.
QUADRANT_ANCHORS = [[0.0, 0.0, 0.5, 0.5], [0.0, 0.5, 0.5, 1.0],
                    [0.5, 0.0, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0]]
# The anchor of the optional second (1x1) feature map.
WHOLE_IMAGE_ANCHOR = [[0.0, 0.0, 1.0, 1.0]]


class FakeSSDFeatureExtractor(ssd_feature_extractor.SSDFeatureExtractor):
  """One 1x1 conv, average-pooled to a 2x2 map; a 1x1 map as second layer.

  The input's height and width must be static and even.
  """

  def __init__(self, is_training=True, depth_multiplier=1.0, min_depth=1,
               pad_to_multiple=1, conv_hyperparams_fn=None, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False, num_layers=1,
               override_base_feature_extractor_hyperparams=False,
               use_batch_norm=False, depth=8):
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier,
        min_depth=min_depth, pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn, reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding, use_depthwise=use_depthwise,
        num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    self._use_batch_norm = use_batch_norm
    self._depth = depth

  def preprocess(self, resized_inputs):
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    if self._conv_hyperparams_fn is None:
      return self._feature_maps(preprocessed_inputs)
    with slim.arg_scope(self._conv_hyperparams_fn()):
      return self._feature_maps(preprocessed_inputs)

  def _feature_maps(self, preprocessed_inputs):
    with tf.compat.v1.variable_scope('mock_model'):
      net = slim.conv2d(
          preprocessed_inputs, self._depth, [1, 1], scope='layer1',
          normalizer_fn=slim.batch_norm if self._use_batch_norm else None)
    height, width = preprocessed_inputs.shape.as_list()[1:3]
    pool = [height // 2, width // 2]
    feature_maps = [slim.avg_pool2d(net, pool, stride=pool)]
    if self._num_layers > 1:
      feature_maps.append(tf.reduce_mean(net, axis=[1, 2], keepdims=True))
    return feature_maps


class FakeFpnFeatureExtractor(FakeSSDFeatureExtractor):
  """Accepts (and records) the FPN constructor arguments."""

  def __init__(self, fpn_min_level=3, fpn_max_level=7,
               additional_layer_depth=256, **kwargs):
    super().__init__(**kwargs)
    self.fpn_levels = (fpn_min_level, fpn_max_level, additional_layer_depth)


class FakeAnchorGenerator2x2(anchor_generator.AnchorGenerator):
  """Fixed anchors: the quadrants (2x2 map), plus the whole image (1x1 map)."""

  def __init__(self, num_layers=1):
    self._num_layers = num_layers

  def name_scope(self):
    return 'FakeAnchorGenerator'

  def num_anchors_per_location(self):
    return [1] * self._num_layers

  def _generate(self, feature_map_shape_list, im_height=1, im_width=1):
    del feature_map_shape_list, im_height, im_width
    anchors = [box_list.BoxList(tf.constant(QUADRANT_ANCHORS, tf.float32))]
    if self._num_layers > 1:
      anchors.append(box_list.BoxList(
          tf.constant(WHOLE_IMAGE_ANCHOR, tf.float32)))
    return anchors


class FakeBoxPredictor(box_predictor.BoxPredictor):
  """A 1x1 conv per feature map giving box codes and class logits."""

  def __init__(self, is_training, num_classes, code_size=4,
               add_background_class=True):
    super().__init__(is_training, num_classes)
    self._code_size = code_size
    self._num_class_slots = num_classes + (1 if add_background_class else 0)

  def _predict(self, image_features, num_predictions_per_location):
    box_encodings, class_predictions = [], []
    with tf.compat.v1.variable_scope('BoxPredictor'):
      for i, (features, num_per_location) in enumerate(
          zip(image_features, num_predictions_per_location)):
        outputs = num_per_location * (self._code_size + self._num_class_slots)
        net = slim.conv2d(features, outputs, [1, 1], activation_fn=None,
                          normalizer_fn=None, scope='conv_%d' % i)
        batch_size = tf.shape(features)[0]
        height, width = features.shape.as_list()[1:3]
        num_anchors = height * width * num_per_location
        net = tf.reshape(net, [batch_size, num_anchors, -1])
        box_encodings.append(tf.reshape(
            net[:, :, :self._code_size],
            [batch_size, num_anchors, 1, self._code_size]))
        class_predictions.append(net[:, :, self._code_size:])
    return {box_predictor.BOX_ENCODINGS: box_encodings,
            box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND: class_predictions}


class FakeExampleSampler:
  """Random example sampler stand-in that keeps only the positives."""

  def subsample(self, indicator, batch_size, labels):
    del batch_size
    return tf.logical_and(indicator, labels)


class FakeFasterRCNNFeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """A 1x1 conv average-pooled by the stride; a 1x1 conv as second stage.

  The input's height and width must be static multiples of the stride.
  """

  def __init__(self, is_training=True, first_stage_features_stride=16,
               batch_norm_trainable=False, reuse_weights=None,
               weight_decay=0.0, depth=8, second_stage_depth=6):
    super().__init__(is_training, first_stage_features_stride,
                     batch_norm_trainable, reuse_weights, weight_decay)
    self._depth = depth
    self._second_stage_depth = second_stage_depth

  def preprocess(self, resized_inputs):
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    net = slim.conv2d(preprocessed_inputs, self._depth, [1, 1],
                      scope='layer1')
    stride = self._first_stage_features_stride
    return slim.avg_pool2d(net, [stride, stride], stride=stride), {}

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    return slim.conv2d(proposal_feature_maps, self._second_stage_depth,
                       [1, 1], scope='layer2')


class FakePyramidFeatureExtractor(FakeFasterRCNNFeatureExtractor):
  """The fake extractor's conv, average-pooled to each pyramid level l of
  fpn_min_level..fpn_max_level (stride 2**l), finest first.

  The input's height and width must be static multiples of the coarsest
  stride.
  """

  CONFIG_FIELDS = ('fpn',)

  def __init__(self, is_training=True, first_stage_features_stride=16,
               batch_norm_trainable=False, fpn_min_level=3, fpn_max_level=4,
               additional_layer_depth=8, **kwargs):
    super().__init__(is_training, first_stage_features_stride,
                     batch_norm_trainable, depth=additional_layer_depth,
                     **kwargs)
    self._levels = range(fpn_min_level, fpn_max_level + 1)

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    net = slim.conv2d(preprocessed_inputs, self._depth, [1, 1],
                      scope='layer1')
    return [slim.avg_pool2d(net, [2**level] * 2, stride=2**level)
            for level in self._levels], {}


class FakeSecondStageBoxPredictor(box_predictor.BoxPredictor):
  """Mean-pools each proposal's features, then fully connected box/class heads.

  Variable names follow the Mask R-CNN box predictor's
  (BoxEncodingPredictor, ClassPredictor).
  """

  def __init__(self, is_training, num_classes, share_box_across_classes=False):
    super().__init__(is_training, num_classes)
    self._num_box_codes = 1 if share_box_across_classes else num_classes

  def _predict(self, image_features, num_predictions_per_location,
               prediction_stage=2):
    del num_predictions_per_location, prediction_stage
    pooled = tf.reduce_mean(image_features[0], axis=[1, 2])
    box_encodings = slim.fully_connected(
        pooled, self._num_box_codes * 4, activation_fn=None,
        scope='BoxEncodingPredictor')
    class_logits = slim.fully_connected(
        pooled, self.num_classes + 1, activation_fn=None,
        scope='ClassPredictor')
    return {
        box_predictor.BOX_ENCODINGS: tf.reshape(
            box_encodings, [-1, 1, self._num_box_codes, 4]),
        box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND: tf.reshape(
            class_logits, [-1, 1, self.num_classes + 1]),
    }



@contextlib.contextmanager
def fake_faster_rcnn_extractor():
  """Context: FakeFasterRCNNFeatureExtractor is feature extractor 'fake'."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'fake', FakeFasterRCNNFeatureExtractor)
    yield
