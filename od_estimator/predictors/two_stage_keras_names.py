"""The original's TF2 (Keras) names of the two-stage detectors' shared heads.

The original's TF2 Faster R-CNN and Mask R-CNN (feature extractor types
ending in `_keras`) build their heads as Keras layers; we build the same
slim layers and give their variables those names, so its TF2 checkpoints
restore (the slim names of the TF1 checkpoints are in the modules of each
part):

  RPN features    RPNConv/{kernel,bias}, RPNBatchNorm/{gamma,beta,...}
                  (conv, batch norm and relu6 as separate layers of its
                  `FirstStageRPNFeatures`)
  RPN predictor   FirstStageBoxPredictor/ConvolutionalBoxHead_0/
                  BoxEncodingPredictor/..., FirstStageBoxPredictor/
                  ConvolutionalClassHead_0/ClassPredictor/...
  second stage    mask_rcnn_keras_box_predictor/
                    mask_rcnn_box_head/BoxEncodingPredictor_dense/...
                    mask_rcnn_class_head/ClassPredictor_dense/...
                    mask_rcnn_mask_head/MaskPredictor_conv2d_<i>/...,
                      MaskPredictor_batchnorm_<i>/...,
                      MaskPredictor_upsample_{conv2d,batchnorm}/...,
                      MaskPredictor_last_conv2d/...

`LayerNames` is the one choice the model builder makes: SLIM or KERAS.
"""
import contextlib
import dataclasses

from od_estimator.utils import keras_names

# Keras name of the original's second-stage predictor and its heads.
SECOND_STAGE_PREDICTOR = 'mask_rcnn_keras_box_predictor'
_SECOND_STAGE_HEADS = {
    'BoxEncodingPredictor': 'mask_rcnn_box_head/BoxEncodingPredictor_dense',
    'ClassPredictor': 'mask_rcnn_class_head/ClassPredictor_dense',
}
_MASK_HEAD = 'mask_rcnn_mask_head'
# Slim scope of the RPN features' conv when it is given Keras names.
_KERAS_RPN_SCOPE = 'RPN'
# Slim scope of the TF1 RPN conv: `Conv/weights` at the graph's root.
_SLIM_RPN_SCOPE = 'Conv'


def _rpn_features_name(name):
  """'RPN/weights' -> 'RPNConv/kernel', 'RPN/BatchNorm/gamma' ->
  'RPNBatchNorm/gamma'."""
  return keras_names.keras_layer_variable(name, conv_suffix='Conv',
                                          batch_norm_suffix='BatchNorm')


def mask_head_layers(num_conv_layers, convolve_then_upsample):
  """Keras (conv, batch norm) layer names of the mask head's convolutions.

  Args:
    num_conv_layers: mask_prediction_num_conv_layers.
    convolve_then_upsample: convolve_then_upsample_masks.

  Returns:
    One (conv, batch norm) pair per slim convolution of the mask head, in
    the order they are built (slim `Conv`, `Conv_1`, ...).
  """
  layers = [('MaskPredictor_conv2d_%d' % i, 'MaskPredictor_batchnorm_%d' % i)
            for i in range(num_conv_layers - 1)]
  if convolve_then_upsample:
    layers.append(('MaskPredictor_upsample_conv2d',
                   'MaskPredictor_upsample_batchnorm'))
  layers.append(('MaskPredictor_last_conv2d', None))
  return layers


def _slim_conv_index(layer):
  """0 for slim's 'Conv', k for 'Conv_k'; None for another layer."""
  if layer == 'Conv':
    return 0
  prefix, _, number = layer.partition('_')
  return int(number) if prefix == 'Conv' and number.isdigit() else None


def second_stage_name(name, mask_layers=()):
  """Keras name, from the graph's root, of a second-stage predictor variable.

  Args:
    name: slim name relative to the predictor's scope, e.g.
      'ClassPredictor/weights' or 'Conv_1/BatchNorm/beta' (mask head).
    mask_layers: mask_head_layers(...) of the mask head, if any.

  Raises:
    ValueError: for a layer the Keras predictor does not have.
  """
  layer, weight = keras_names.split_variable(name)
  if layer in _SECOND_STAGE_HEADS:
    return '%s/%s/%s' % (SECOND_STAGE_PREDICTOR, _SECOND_STAGE_HEADS[layer],
                         weight)
  batch_norm = layer.endswith('/BatchNorm')
  index = _slim_conv_index(layer.partition('/')[0])
  if index is None or index >= len(mask_layers) or (
      batch_norm and mask_layers[index][1] is None):
    raise ValueError('Second-stage predictor variable %r has no Keras name.'
                     % name)
  return '%s/%s/%s/%s' % (SECOND_STAGE_PREDICTOR, _MASK_HEAD,
                          mask_layers[index][int(batch_norm)], weight)


@dataclasses.dataclass(frozen=True)
class LayerNames:
  """How a two-stage model names its shared heads' variables.

  Attributes:
    keras: the original's TF2 (Keras) names instead of its TF1 (slim) ones.
  """
  keras: bool = False

  @property
  def rpn_features_scope(self):
    """Slim scope of the RPN features' convolution."""
    return _KERAS_RPN_SCOPE if self.keras else _SLIM_RPN_SCOPE

  def rpn_features(self):
    """Context naming the RPN features' variables (built with that scope)."""
    if self.keras:
      return keras_names.renamed_variables(_rpn_features_name)
    return contextlib.nullcontext()


SLIM = LayerNames(keras=False)
KERAS = LayerNames(keras=True)


def for_feature_extractor(feature_extractor_type):
  """KERAS for the original's TF2 extractor types (`*_keras`), else SLIM."""
  return KERAS if feature_extractor_type.endswith('_keras') else SLIM
