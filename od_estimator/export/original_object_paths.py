"""The object paths the original's TF2 code saves a model's values under.

The original's TF2 checkpoints key each value by its object path from the
checkpoint's root (see utils/checkpoint_contents). For the SSD models we
build with its Keras names, the path follows from the name (E: our
extractor's scope, e.g. ResNet50V1_FPN or
ssd_mobile_net_v2_fpn_keras_feature_extractor; <w>: the weight's name):

  <layer>/<w> (the Keras backbone at the graph's root)
      model/_feature_extractor/classification_backbone/
      layer_with_weights-N/<w>, N counting the backbone's layers that have
      weights in the Keras application's order (object_path_parts);
  E/FeatureMaps/layer_19_<k>_Conv2d_<i>_<size>_<depth>_<type>/<w>
      (type conv or batchnorm)
      model/_feature_extractor/feature_map_generator/convolutions/<i>/<j>/<w>,
      j counting conv, batch norm and activation layers of map i;
  BoxPredictor/Convolutional<Box|Class>Head_<i>/<predictor>/<w>
      model/_box_predictor/_prediction_heads/<box_encodings|
      class_predictions_with_background>/<i>/<layers>/0/<w>;
  E/FeatureMaps/top_down/..., E/bottom_up_... (a feature pyramid)
      model/_feature_extractor/_fpn_features_generator/...,
      model/_feature_extractor/_coarse_feature_layers/...
      (object_path_parts);
  WeightSharedConvolutionalBoxPredictor/<Box|Class|>PredictionTower/
  conv2d_<i>/<w>, .../conv2d_<i>/BatchNorm/feature_<f>/<w>
      model/_box_predictor/_head_scope_conv_layers/<tower>/<i>/<w>,
      model/_box_predictor/_base_tower_layers_for_heads/<box_encodings|
      class_predictions_with_background>/<f>/<3i+1>/<w> (the per-level
      batch norms; each tower layer is conv, batch norm, activation; a
      tower shared by both heads, PredictionTower, keeps them under
      box_encodings);
  WeightSharedConvolutionalBoxPredictor/WeightSharedConvolutional
  <Box|Class>Head/<BoxPredictor|ClassPredictor>/<w>
      model/_box_predictor/_box_prediction_head/_box_encoder_layers/0/<w>,
      model/_box_predictor/_prediction_heads/
      class_predictions_with_background/_class_predictor_layers/0/<w>.

The two-stage models of its TF2 names (Faster R-CNN ResNet C4 and FPN,
Mask R-CNN Inception-ResNet v2) have their own layout
(faster_rcnn_object_paths). Models whose Keras names do not identify their
layers (the Keras Inception-ResNet v2) tell their paths themselves
(models/keras_object_paths).

`original_paths` answers for a whole model or not at all: a model with a
value outside these layouts (e.g. of the TF1 names) gets None.
"""
import re

from od_estimator.export import faster_rcnn_object_paths
from od_estimator.export import object_path_parts
from od_estimator.models import keras_object_paths

_EXTRACTOR = 'model/_feature_extractor'
_PREDICTOR = 'model/_box_predictor'
_BACKBONE = _EXTRACTOR + '/classification_backbone'
_FEATURE_MAPS = re.compile(
    r'^[^/]+/FeatureMaps/layer_19_([12])_Conv2d_(\d+)_\d+x\d+(?:_s2)?_\d+_'
    r'(conv|batchnorm)/(\w+)$')
# Layers per feature map convolution: conv, batch norm, activation.
_LAYERS_PER_CONV = 3
_HEADS = re.compile(
    r'^BoxPredictor/Convolutional(Box|Class)Head_(\d+)/'
    r'(?:BoxEncodingPredictor|ClassPredictor)/(kernel|bias)$')
_WEIGHT_SHARED = re.compile(
    r'^WeightSharedConvolutionalBoxPredictor/(?:(Box|Class|)PredictionTower/'
    r'conv2d_(\d+)/(?:BatchNorm/feature_(\d+)/)?|WeightSharedConvolutional'
    r'(Box|Class)Head/(?:BoxPredictor|ClassPredictor)/)(\w+)$')
# Tower -> the head whose base tower layers hold its batch norms.
_TOWER_HEADS = {'Box': 'box_encodings', '': 'box_encodings',
                'Class': 'class_predictions_with_background'}
_WEIGHT_SHARED_HEADS = {
    'Box': '_box_prediction_head/_box_encoder_layers/0/',
    'Class': '_prediction_heads/class_predictions_with_background/'
             '_class_predictor_layers/0/',
}
_HEAD_PATHS = {
    'Box': 'box_encodings/%s/_box_encoder_layers/0/%s',
    'Class': 'class_predictions_with_background/%s/_class_predictor_layers/'
             '0/%s',
}


def _weight_shared_path(match):
  """The path of a weight-shared predictor value."""
  tower, conv, feature, head, weight = match.groups()
  if head:
    return '%s/%s%s' % (_PREDICTOR, _WEIGHT_SHARED_HEADS[head], weight)
  if feature is None:
    return '%s/_head_scope_conv_layers/%sPredictionTower/%s/%s' % (
        _PREDICTOR, tower, conv, weight)
  return '%s/_base_tower_layers_for_heads/%s/%s/%d/%s' % (
      _PREDICTOR, _TOWER_HEADS[tower], feature,
      int(conv) * _LAYERS_PER_CONV + 1, weight)


def _added_layer_path(name):
  """The path of a feature map or predictor value, or None."""
  match = _WEIGHT_SHARED.match(name)
  if match:
    return _weight_shared_path(match)
  match = _FEATURE_MAPS.match(name)
  if match:
    layer, conv, kind, weight = match.groups()
    index = (int(layer) - 1) * _LAYERS_PER_CONV + (kind == 'batchnorm')
    return '%s/feature_map_generator/convolutions/%s/%d/%s' % (
        _EXTRACTOR, conv, index, weight)
  match = _HEADS.match(name)
  if match:
    head, level, weight = match.groups()
    return _PREDICTOR + '/_prediction_heads/' + (
        _HEAD_PATHS[head] % (level, weight))
  return None


def original_paths(names, second_stage_dropout=False):
  """{name: object path} of a model's variables, or None.

  Args:
    names: the model's variable names (global_step excluded) in the order
      the variables were created.
    second_stage_dropout: a two-stage model's second-stage box predictor
      has dropout (`use_dropout`), which shifts its layers.

  Returns:
    The original's object path of each name, or None when some name has
    no path in the layouts above.
  """
  if faster_rcnn_object_paths.is_faster_rcnn(names):
    return faster_rcnn_object_paths.original_paths(names,
                                                   second_stage_dropout)
  paths = object_path_parts.backbone_paths(names, _BACKBONE)
  paths.update(object_path_parts.fpn_paths(names, _EXTRACTOR, '_'))
  known = keras_object_paths.known_paths(names)
  for name in names:
    if name in known:
      paths[name] = known[name][0]
    elif name not in paths:
      paths[name] = _added_layer_path(name)
      if paths[name] is None:
        return None
  return paths
