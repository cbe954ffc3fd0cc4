"""SSD box predictors built from convolutions (tf-slim).

ConvolutionalBoxPredictor gives every feature map its own layers;
WeightSharedConvolutionalBoxPredictor (RetinaNet, https://arxiv.org/abs/
1708.02002) reuses one set of convolutions on all of them. Variable scopes
match the TF1 Object Detection API exactly so model-zoo checkpoints restore:

  BoxPredictor_<i>/{Conv2d_<j>_1x1_<depth>,BoxEncodingPredictor,
                    ClassPredictor}/...
  WeightSharedConvolutionalBoxPredictor/{BoxPredictionTower,
      ClassPredictionTower,PredictionTower}/conv2d_<j>/...,
      .../conv2d_<j>/BatchNorm/feature_<i>/..., ProjectionLayer/conv2d_<i>,
      BoxPredictor, ClassPredictor

With keras_layer_names the variables take the names of the original's TF2
(Keras) predictors instead, e.g. BoxPredictor/ConvolutionalBoxHead_<i>/
BoxEncodingPredictor/kernel and WeightSharedConvolutionalBoxPredictor/
WeightSharedConvolutionalBoxHead/BoxPredictor/kernel.
"""
import contextlib
import functools
import re

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.core import box_predictor
from od_estimator.utils import conv_bias
from od_estimator.utils import keras_names

BOX_ENCODINGS = box_predictor.BOX_ENCODINGS
CLASS_PREDICTIONS_WITH_BACKGROUND = (
    box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND)
MASK_PREDICTIONS = box_predictor.MASK_PREDICTIONS


def _keras_convolutional_name(keras_name, feature_index, name):
  """Keras name of a ConvolutionalBoxPredictor variable.

  Args:
    keras_name: the Keras predictor's name the heads go under; '' for none.
    feature_index: index of the feature map the variable belongs to.
    name: slim name, e.g. 'BoxPredictor_0/ClassPredictor/weights' (without
      the BoxPredictor_<i> scope when there is one feature map).

  Raises:
    ValueError: for a layer the Keras predictor does not have.
  """
  name = re.sub(r'^BoxPredictor_\d+/', '', name)
  layer = name.partition('/')[0]
  if layer.startswith('BoxEncodingPredictor'):
    parent, batch_norm_suffix = 'ConvolutionalBoxHead', '_batchnorm'
  elif layer.startswith('ClassPredictor'):
    parent, batch_norm_suffix = 'ConvolutionalClassHead', '_batchnorm'
  elif layer.startswith('Conv2d_'):
    parent, batch_norm_suffix = 'SharedConvolutions', '_norm'
  else:
    raise ValueError('Box predictor layer %r has no Keras name.' % layer)
  head = '%s_%d/%s' % (
      parent, feature_index,
      keras_names.keras_layer_variable(name,
                                       batch_norm_suffix=batch_norm_suffix))
  return '%s/%s' % (keras_name, head) if keras_name else head


# Keras layers of the weight shared heads, by slim head scope.
_KERAS_WEIGHT_SHARED_HEADS = {
    'BoxPredictor': 'WeightSharedConvolutionalBoxHead/BoxPredictor',
    'ClassPredictor': 'WeightSharedConvolutionalClassHead/ClassPredictor',
}


def _keras_weight_shared_name(name):
  """Keras name of a WeightSharedConvolutionalBoxPredictor variable.

  Towers and projections keep their slim layer names (per-map batch norms
  included); only the heads gain a parent and weights become kernels.
  """
  root, _, name = name.partition('/')
  layer, weight = keras_names.split_variable(name)
  layer = _KERAS_WEIGHT_SHARED_HEADS.get(layer, layer)
  return '%s/%s/%s' % (root, layer, weight)


def _channels(image_feature):
  channels = image_feature.shape.as_list()[3]
  if channels is None:
    raise ValueError('image_features need a static channel dimension, got '
                     'shape %s' % image_feature.shape)
  return channels


class ConvolutionalBoxPredictor(box_predictor.BoxPredictor):
  """Predicts from each feature map with its own convolutional heads.

  Optionally inserts 1x1 convolutions before the heads. Box predictions are
  shared across classes (q = 1).
  """

  def __init__(self,
               is_training,
               num_classes,
               box_prediction_head,
               class_prediction_head,
               other_heads,
               conv_hyperparams_fn,
               num_layers_before_predictor,
               min_depth,
               max_depth,
               keras_layer_names=False,
               keras_name='BoxPredictor'):
    """Constructor.

    Args:
      is_training: whether the predictor is built for training.
      num_classes: number of classes, background excluded.
      box_prediction_head: a ConvolutionalBoxHead.
      class_prediction_head: a ConvolutionalClassHead.
      other_heads: dict from output name to an extra head with a
        `predict(features, num_predictions_per_location)` method.
      conv_hyperparams_fn: callable returning the slim arg_scope for the
        convolutions (hyperparams_builder.build's result).
      num_layers_before_predictor: number of 1x1 convolutions inserted
        before the heads.
      min_depth: minimum depth of those inserted convolutions.
      max_depth: maximum depth of those inserted convolutions; with 0 (and
        min_depth 0) no convolution is inserted.
      keras_layer_names: name the variables as the original's Keras
        predictor (for its TF2 checkpoints).
      keras_name: with keras_layer_names, the Keras predictor's name, below
        the caller's variable scope; '' when that scope is its name (the
        Faster R-CNN first stage's 'FirstStageBoxPredictor').
    """
    super().__init__(is_training, num_classes)
    self._box_prediction_head = box_prediction_head
    self._class_prediction_head = class_prediction_head
    self._other_heads = other_heads
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._num_layers_before_predictor = num_layers_before_predictor
    self._min_depth = min_depth
    self._max_depth = max_depth
    self._keras_layer_names = keras_layer_names
    self._keras_name = keras_name

  def _variable_naming(self, feature_index):
    if self._keras_layer_names:
      return keras_names.renamed_variables(
          functools.partial(_keras_convolutional_name, self._keras_name,
                            feature_index))
    return contextlib.nullcontext()

  def _predict(self, image_features, num_predictions_per_location_list):
    """Runs the heads on every feature map.

    Args:
      image_features: list of [batch_size, height_i, width_i, channels_i]
        float tensors.
      num_predictions_per_location_list: list of ints, anchors per location.

    Returns:
      A dict from BOX_ENCODINGS ([batch_size, num_anchors_i, 1, code_size]
      tensors), CLASS_PREDICTIONS_WITH_BACKGROUND ([batch_size,
      num_anchors_i, num_class_slots] tensors) and each other head's name to
      a list with one tensor per feature map.
    """
    head_names = sorted(self._other_heads) + [
        BOX_ENCODINGS, CLASS_PREDICTIONS_WITH_BACKGROUND]
    heads = dict(self._other_heads)
    heads[BOX_ENCODINGS] = self._box_prediction_head
    heads[CLASS_PREDICTIONS_WITH_BACKGROUND] = self._class_prediction_head
    predictions = {name: [] for name in head_names}
    # Checkpoints from the original name a lone feature map's layers without
    # any BoxPredictor_<i> scope.
    use_index_scopes = len(image_features) > 1
    for index, (image_feature, num_predictions) in enumerate(
        zip(image_features, num_predictions_per_location_list)):
      scope = (tf.compat.v1.variable_scope('BoxPredictor_%d' % index)
               if use_index_scopes else contextlib.nullcontext())
      with self._variable_naming(index), scope, \
          slim.arg_scope(self._conv_hyperparams_fn()), \
          slim.arg_scope([slim.dropout], is_training=self._is_training):
        net = image_feature
        depth = max(min(_channels(image_feature), self._max_depth),
                    self._min_depth)
        if depth > 0:
          for layer in range(self._num_layers_before_predictor):
            net = slim.conv2d(net, depth, [1, 1],
                              reuse=tf.compat.v1.AUTO_REUSE,
                              scope='Conv2d_%d_1x1_%d' % (layer, depth))
        for name in head_names:
          predictions[name].append(heads[name].predict(
              features=net, num_predictions_per_location=num_predictions))
    return predictions


class WeightSharedConvolutionalBoxPredictor(box_predictor.BoxPredictor):
  """Predicts from all feature maps with one shared set of convolutions.

  Box and class heads each get a tower of num_layers_before_predictor
  convolutions (or share one tower). Convolution weights are shared across
  feature maps; batch norm parameters are not, since activation statistics
  differ per level. Feature maps whose depth differs from the most common
  one are first projected by a (per-map) 1x1 convolution.
  """

  def __init__(self,
               is_training,
               num_classes,
               box_prediction_head,
               class_prediction_head,
               other_heads,
               conv_hyperparams_fn,
               depth,
               num_layers_before_predictor,
               kernel_size=3,
               apply_batch_norm=False,
               share_prediction_tower=False,
               use_depthwise=False,
               keras_layer_names=False,
               tower_activation_fn=tf.nn.relu6):
    """Constructor.

    Args:
      is_training: whether the predictor is built for training.
      num_classes: number of classes, background excluded.
      box_prediction_head: a WeightSharedConvolutionalBoxHead.
      class_prediction_head: a WeightSharedConvolutionalClassHead.
      other_heads: dict from output name to an extra head; each gets its own
        '<name>PredictionTower' unless towers are shared.
      conv_hyperparams_fn: callable returning the slim arg_scope for the
        convolutions.
      depth: depth of the tower convolutions.
      num_layers_before_predictor: number of convolutions in each tower.
      kernel_size: spatial size of the tower convolutions.
      apply_batch_norm: batch-normalize tower (and projection) convolutions,
        with parameters kept per feature map.
      share_prediction_tower: one 'PredictionTower' feeds all heads instead
        of one tower per head.
      use_depthwise: use depthwise separable tower convolutions.
      keras_layer_names: name the variables as the original's Keras
        predictor (for its TF2 checkpoints).
      tower_activation_fn: activation after each tower convolution (the
        original's slim predictor has ReLU6, its Keras one the
        conv_hyperparams activation).
    """
    super().__init__(is_training, num_classes)
    self._box_prediction_head = box_prediction_head
    self._class_prediction_head = class_prediction_head
    self._other_heads = other_heads
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._depth = depth
    self._num_layers_before_predictor = num_layers_before_predictor
    self._kernel_size = kernel_size
    self._apply_batch_norm = apply_batch_norm
    self._share_prediction_tower = share_prediction_tower
    self._use_depthwise = use_depthwise
    self._keras_layer_names = keras_layer_names
    self._tower_activation_fn = tower_activation_fn

  def _variable_naming(self):
    if self._keras_layer_names:
      return keras_names.renamed_variables(_keras_weight_shared_name)
    return contextlib.nullcontext()

  def _normalizer_fn(self):
    # tf.identity stands in for batch norm so slim drops the conv biases
    # (kept under force_use_bias); batch norm itself is applied separately
    # under a per-map scope.
    if not self._apply_batch_norm:
      return None
    if getattr(self._conv_hyperparams_fn, 'force_use_bias', False):
      return conv_bias.biased(tf.identity)
    return tf.identity

  def _project(self, image_feature, layer_index, target_channels):
    """1x1 convolution bringing a feature map to target_channels."""
    scope = 'ProjectionLayer/conv2d_%d' % layer_index
    net = slim.conv2d(image_feature, target_channels, [1, 1], stride=1,
                      padding='SAME', activation_fn=None,
                      normalizer_fn=self._normalizer_fn(), scope=scope)
    if self._apply_batch_norm:
      net = slim.batch_norm(net, scope=scope + '/BatchNorm')
    return net

  def _tower(self, tower_scope, image_feature, feature_index):
    """The shared conv (+ per-map batch norm) + relu6 layers of one tower."""
    net = image_feature
    for layer in range(self._num_layers_before_predictor):
      conv_args = dict(stride=1, padding='SAME', activation_fn=None,
                       normalizer_fn=self._normalizer_fn(),
                       scope='%s/conv2d_%d' % (tower_scope, layer))
      kernel = [self._kernel_size, self._kernel_size]
      if self._use_depthwise:
        net = slim.separable_conv2d(net, self._depth, kernel,
                                    depth_multiplier=1, **conv_args)
      else:
        net = slim.conv2d(net, self._depth, kernel, **conv_args)
      if self._apply_batch_norm:
        net = slim.batch_norm(net, scope='%s/conv2d_%d/BatchNorm/feature_%d' %
                              (tower_scope, layer, feature_index))
      net = self._tower_activation_fn(net)
    return net

  def _predict(self, image_features, num_predictions_per_location_list):
    """Runs the shared towers and heads on every feature map.

    Args:
      image_features: list of [batch_size, height_i, width_i, channels]
        float tensors.
      num_predictions_per_location_list: list of ints, anchors per location;
        all equal since the head weights are shared.

    Returns:
      A dict from BOX_ENCODINGS ([batch_size, num_anchors_i, code_size]
      tensors), CLASS_PREDICTIONS_WITH_BACKGROUND ([batch_size,
      num_anchors_i, num_class_slots] tensors) and each other head's name to
      a list with one tensor per feature map.

    Raises:
      ValueError: if the anchors per location differ between feature maps.
    """
    if len(set(num_predictions_per_location_list)) > 1:
      raise errors.UserInputError(
          'num_predictions_per_location must be the same for '
          'all feature maps of a weight shared predictor, got %s'
          % list(num_predictions_per_location_list))
    channels = [_channels(feature) for feature in image_features]
    project = len(set(channels)) > 1
    # Most common depth; ties resolved through Python's set order, as the
    # original does, so projection shapes match its checkpoints.
    target_channels = max(set(channels), key=channels.count)
    other_names = sorted(self._other_heads)
    predictions = {name: [] for name in other_names + [
        BOX_ENCODINGS, CLASS_PREDICTIONS_WITH_BACKGROUND]}
    box_tower_scope = ('PredictionTower' if self._share_prediction_tower
                       else 'BoxPredictionTower')
    for index, (image_feature, num_predictions) in enumerate(
        zip(image_features, num_predictions_per_location_list)):
      with self._variable_naming(), \
          tf.compat.v1.variable_scope('WeightSharedConvolutionalBoxPredictor',
                                      reuse=tf.compat.v1.AUTO_REUSE), \
          slim.arg_scope(self._conv_hyperparams_fn()), \
          slim.arg_scope([slim.dropout], is_training=self._is_training):
        if project:
          image_feature = self._project(image_feature, index, target_channels)
        box_tower = self._tower(box_tower_scope, image_feature, index)
        predictions[BOX_ENCODINGS].append(self._box_prediction_head.predict(
            features=box_tower, num_predictions_per_location=num_predictions))
        for name in other_names + [CLASS_PREDICTIONS_WITH_BACKGROUND]:
          if name == CLASS_PREDICTIONS_WITH_BACKGROUND:
            head = self._class_prediction_head
            tower_scope = 'ClassPredictionTower'
          else:
            head = self._other_heads[name]
            tower_scope = name + 'PredictionTower'
          if self._share_prediction_tower:
            tower = box_tower
          else:
            tower = self._tower(tower_scope, image_feature, index)
          predictions[name].append(head.predict(
              features=tower, num_predictions_per_location=num_predictions))
    return predictions
