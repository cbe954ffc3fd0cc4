"""The original's TF2 object paths of a Faster R-CNN ResNet Keras (C4) model.

The layout of original_object_paths for the two-stage models built on the
Keras ResNet with the TF2 heads (faster_rcnn_resnet{50,101,152}_keras):

  conv1_*, conv2..4_block*/<w> (the first stage)
      model/_feature_extractor_for_proposal_features/layer_with_weights-N/
      <w>, N counting those layers in the Keras model's order;
  conv5_block*/<w> (the box classifier)
      model/_feature_extractor_for_box_classifier_features/
      layer_with_weights-N/<w>, N counting conv5's layers alike;
  RPNConv/<w>
      model/_first_stage_box_predictor_first_conv/layer_with_weights-0/<w>;
  FirstStageBoxPredictor/Convolutional<Box|Class>Head_0/<predictor>/<w>
      model/_first_stage_box_predictor/_prediction_heads/<box_encodings|
      class_predictions_with_background>/0/<_box_encoder_layers|
      _class_predictor_layers>/0/<w>;
  mask_rcnn_keras_box_predictor/mask_rcnn_<box|class>_head/
  <BoxEncodingPredictor|ClassPredictor>_dense/<w>
      model/_mask_rcnn_box_predictor/<_box_prediction_head/
      _box_encoder_layers|_class_prediction_head/_class_predictor_layers>/
      1/<w> (layer 0 flattens).

(tests/data/tf2_checkpoint_keys/faster_rcnn_resnet50_v1_640x640_*.txt.)
"""
import re

_MODEL = 'model/'
_BOX_CLASSIFIER_STAGE = 5
_RESNET_LAYER = re.compile(r'^conv(\d)_\w+$')
_FIRST_STAGE_HEADS = re.compile(
    r'^FirstStageBoxPredictor/Convolutional(Box|Class)Head_0/'
    r'(?:BoxEncodingPredictor|ClassPredictor)/(\w+)$')
_SECOND_STAGE_HEADS = re.compile(
    r'^mask_rcnn_keras_box_predictor/mask_rcnn_(box|class)_head/'
    r'(?:BoxEncodingPredictor|ClassPredictor)_dense/(\w+)$')
_FIRST_STAGE_PATHS = {
    'Box': 'box_encodings/0/_box_encoder_layers/0/',
    'Class': 'class_predictions_with_background/0/_class_predictor_layers/0/',
}
_SECOND_STAGE_PATHS = {
    'box': '_box_prediction_head/_box_encoder_layers/1/',
    'class': '_class_prediction_head/_class_predictor_layers/1/',
}
_RPN_CONV = 'RPNConv/'


def is_faster_rcnn(names):
  """Whether names are of a two-stage model with the TF2 RPN."""
  return any(name.startswith(_RPN_CONV) for name in names)


def _stage_extractor(layer):
  """The original's extractor attribute holding a ResNet layer, or None."""
  match = _RESNET_LAYER.match(layer)
  if not match:
    return None
  if int(match.group(1)) == _BOX_CLASSIFIER_STAGE:
    return '_feature_extractor_for_box_classifier_features'
  return '_feature_extractor_for_proposal_features'


def original_paths(names, keras_layer_order):
  """{name: object path} of a C4 model's variables, or None.

  Args:
    names: the model's variable names in creation order.
    keras_layer_order: sort key of a ResNet layer name in the Keras
      model's layer order.

  Returns:
    The paths, or None when a name is outside the layout above (e.g. an
    FPN's or a mask head's).
  """
  layers = sorted(dict.fromkeys(
      name.split('/')[0] for name in names
      if name.count('/') == 1 and _stage_extractor(name.split('/')[0])),
                  key=keras_layer_order)
  indices = {}
  for layer in layers:
    extractor = _stage_extractor(layer)
    indices[layer] = sum(_stage_extractor(other) == extractor
                         for other in indices)
  paths = {}
  for name in names:
    layer, _, weight = name.partition('/')
    first_stage = _FIRST_STAGE_HEADS.match(name)
    second_stage = _SECOND_STAGE_HEADS.match(name)
    if layer in indices and '/' not in weight:
      paths[name] = '%s%s/layer_with_weights-%d/%s' % (
          _MODEL, _stage_extractor(layer), indices[layer], weight)
    elif name.startswith(_RPN_CONV) and '/' not in weight:
      paths[name] = (_MODEL + '_first_stage_box_predictor_first_conv/'
                     'layer_with_weights-0/' + weight)
    elif first_stage:
      head, weight = first_stage.groups()
      paths[name] = (_MODEL + '_first_stage_box_predictor/_prediction_heads/'
                     + _FIRST_STAGE_PATHS[head] + weight)
    elif second_stage:
      head, weight = second_stage.groups()
      paths[name] = (_MODEL + '_mask_rcnn_box_predictor/' +
                     _SECOND_STAGE_PATHS[head] + weight)
    else:
      return None
  return paths
