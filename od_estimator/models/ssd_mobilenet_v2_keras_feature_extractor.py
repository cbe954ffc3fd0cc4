"""SSD MobileNet v2 with the original's TF2 names ('ssd_mobilenet_v2_keras').

The original builds this type only in TF2, from the Keras MobileNetV2
application with its layers overridden so that it computes what the slim
net computes ('same' padding, ReLU6, batch norm after every conv). We build
the slim network of 'ssd_mobilenet_v2' and give the variables the Keras
names, so the original's TF2 checkpoints restore:

  Conv1/kernel, bn_Conv1/{gamma,beta,moving_mean,moving_variance}
  expanded_conv_{depthwise,project}[_BN]/...
  block_<n>_{expand,depthwise,project}[_BN]/...   (slim expanded_conv_<n>)
  Conv_1/kernel, Conv_1_bn/...
  ssd_mobile_net_v2_keras_feature_extractor/FeatureMaps/
      layer_19_<k>_Conv2d_<i>_..._{conv,batchnorm}/...

Where the Keras model differs from the slim one we follow Keras: its
depthwise kernels are L2 regularized, and with depth_multiplier > 1 the
last conv keeps 1280 channels.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import keras_named_feature_extractor
from od_estimator.models import ssd_mobilenet_v2_feature_extractor
from od_estimator.nets import mobilenet_v2
from od_estimator.utils import keras_names

# Keras name of the extractor model, prefix of its added layers.
_EXTRACTOR_NAME = 'ssd_mobile_net_v2_keras_feature_extractor'
# The Keras backbone's default L2 weight decay (as a slim scale).
_WEIGHT_DECAY = 0.00004
_LAST_CONV_DEPTH = 1280
_FIELD = 'model.ssd.feature_extractor'


def _backbone_layer_names(layer):
  """(conv, batch norm) Keras layer names of a slim MobileNet v2 layer.

  Args:
    layer: slim layer scope inside 'MobilenetV2', e.g. 'Conv',
      'expanded_conv/depthwise', 'expanded_conv_3/expand', 'Conv_1'.

  Raises:
    ValueError: for a layer the Keras model does not have.
  """
  if layer == 'Conv':
    return 'Conv1', 'bn_Conv1'
  if layer == 'Conv_1':
    return 'Conv_1', 'Conv_1_bn'
  block, _, part = layer.partition('/')
  if block == 'expanded_conv' and part:
    name = 'expanded_conv_' + part
  elif block.startswith('expanded_conv_') and part:
    name = 'block_%s_%s' % (block[len('expanded_conv_'):], part)
  else:
    raise ValueError('MobileNet v2 layer %r has no Keras name.' % layer)
  return name, name + '_BN'


def keras_variable_name(name):
  """Keras name of a variable of the slim 'ssd_mobilenet_v2' extractor.

  Args:
    name: name below the extractor's scope, e.g. 'MobilenetV2/Conv/weights'
      or 'MobilenetV2/layer_19_1_Conv2d_2_1x1_256/BatchNorm/beta'.

  Returns:
    The name in the original's TF2 model, from the graph's root.

  Raises:
    ValueError: for a name outside the extractor's layers.
  """
  root, _, relative = name.partition('/')
  if root != 'MobilenetV2':
    raise ValueError('Variable %r is not under MobilenetV2/.' % name)
  if relative.startswith('layer_'):
    feature_map = keras_names.keras_layer_variable(relative, '_conv',
                                                   '_batchnorm')
    return '%s/FeatureMaps/%s' % (_EXTRACTOR_NAME, feature_map)
  layer, weight = keras_names.split_variable(relative)
  if layer.endswith('/BatchNorm'):
    return '%s/%s' % (_backbone_layer_names(layer[:-len('/BatchNorm')])[1],
                      weight)
  return '%s/%s' % (_backbone_layer_names(layer)[0], weight)


def _regularize_depthwise(getter, name, *args, **kwargs):
  """Adds the Keras backbone's L2 decay to depthwise kernels (slim: none)."""
  if name.endswith('/depthwise_weights') and kwargs.get('regularizer') is None:
    kwargs['regularizer'] = slim.l2_regularizer(_WEIGHT_DECAY)
  return getter(name, *args, **kwargs)


def _backbone_activation(conv_hyperparams_fn):
  """The activation conv_hyperparams give an overridden Keras backbone.

  The slim net always has scaled and centred batch norm after its convs;
  Keras then takes conv_hyperparams as they are, so configs where the two
  would differ are refused.

  Raises:
    ValueError: if conv_hyperparams lack batch_norm with scale and center,
      or an activation.
  """
  batch_norm_args, activation_fn = (
      keras_named_feature_extractor.overriding_hyperparams(
          conv_hyperparams_fn))
  if (batch_norm_args is None or not batch_norm_args.get('scale') or
      not batch_norm_args.get('center', True)):
    raise errors.UserInputError(
        '%s.type ssd_mobilenet_v2_keras with '
        'override_base_feature_extractor_hyperparams needs conv_hyperparams '
        'with batch_norm { scale: true center: true }.' % _FIELD)
  if activation_fn is None:
    raise errors.UserInputError(
        '%s.type ssd_mobilenet_v2_keras with '
        'override_base_feature_extractor_hyperparams needs a '
        'conv_hyperparams.activation other than NONE.' % _FIELD)
  return activation_fn


class SSDMobileNetV2KerasFeatureExtractor(
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    ssd_mobilenet_v2_feature_extractor.SSDMobileNetV2FeatureExtractor):
  """'ssd_mobilenet_v2' computed, the original's TF2 model named."""

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor; arguments are those of SSDFeatureExtractor.

    Raises:
      ValueError: when overriding the backbone's hyperparams with
        conv_hyperparams the slim backbone cannot honour.
    """
    super().__init__(
        is_training, depth_multiplier, min_depth, pad_to_multiple,
        conv_hyperparams_fn, reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    if self._depth_multiplier > 1:
      # Keras keeps 1280 channels where slim would scale them up.
      conv_defs = list(mobilenet_v2.V2_DEF)
      conv_defs[-1] = conv_defs[-1]._replace(
          depth=_LAST_CONV_DEPTH / self._depth_multiplier)
      self._conv_defs = conv_defs
    self._backbone_activation_fn = tf.nn.relu6
    if self._override_base_feature_extractor_hyperparams:
      self._backbone_activation_fn = _backbone_activation(
          self._conv_hyperparams_fn)

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps; see SSDMobileNetV2FeatureExtractor."""
    with self._keras_named(self._keras_variable_name):
      return super().extract_features(preprocessed_inputs)

  def _keras_variable_name(self, name):
    """Keras name of a variable below the extractor's scope."""
    return keras_variable_name(name)

  def _backbone_end_points(self, preprocessed_inputs, scope):
    """The slim backbone with the Keras model's activation and decay."""
    # With the override, conv_hyperparams already regularize every conv.
    getter = (None if self._override_base_feature_extractor_hyperparams
              else _regularize_depthwise)
    with tf.compat.v1.variable_scope(scope, custom_getter=getter,
                                     auxiliary_name_scope=False) as scope, \
        slim.arg_scope([mobilenet_v2.mobilenet_base],
                       activation_fn=self._backbone_activation_fn):
      return super()._backbone_end_points(preprocessed_inputs, scope)
