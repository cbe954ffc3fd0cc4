"""The original's TF2 object paths of its two-stage models.

The layout of original_object_paths for the Faster R-CNN and Mask R-CNN
models of the TF2 names (the `_keras` feature extractor types); M stands
for `model/`, N for `layer_with_weights-N`, <w> for the weight's name.

The feature extractor, held as two Keras models,
M_feature_extractor_for_proposal_features (P) and
M_feature_extractor_for_box_classifier_features (B):

  ResNet C4 (faster_rcnn_resnet{50,101,152}_keras)
    conv1_*, conv2..4_block*/<w>      P/N/<w>
    conv5_block*/<w>                  B/N/<w>
      N counting each part's layers in the Keras ResNet's order
      (object_path_parts);
  ResNet FPN (faster_rcnn_resnet{50,101,152}_fpn_keras)
    conv*/<w> (all of the ResNet)     P/classification_backbone/N/<w>
    private__resnet_fpn/...           P/fpn_features_generator/...,
                                      P/coarse_feature_layers/...
                                      (object_path_parts)
    dense, freezable_batch_norm, dense_1 (the box head)
                                      B/layer_with_weights-<0, 1, 2>/<w>;
  Inception-ResNet v2 (faster_rcnn_inception_resnet_v2_keras): its module
    tells (models/keras_object_paths).

The heads:

  RPNConv/<w>, RPNBatchNorm/<w>
      M_first_stage_box_predictor_first_conv/layer_with_weights-<0|1>/<w>;
  FirstStageBoxPredictor/Convolutional<Box|Class>Head_<i>/<predictor>/<w>
      M_first_stage_box_predictor/_prediction_heads/<box_encodings|
      class_predictions_with_background>/<i>/<_box_encoder_layers|
      _class_predictor_layers>/0/<w> (i: the pyramid level's head);
  mask_rcnn_keras_box_predictor/mask_rcnn_<box|class>_head/
  <BoxEncodingPredictor|ClassPredictor>_dense/<w>
      M_mask_rcnn_box_predictor/<_box_prediction_head/_box_encoder_layers|
      _class_prediction_head/_class_predictor_layers>/<j>/<w>, the layers
      being flatten, dropout (with `use_dropout`), dense;
  mask_rcnn_keras_box_predictor/mask_rcnn_mask_head/<layer>/<w>
      M_mask_rcnn_box_predictor/_third_stage_heads/mask_predictions/
      _mask_predictor_layers/<j>/<w>: each conv before the last is conv,
      batch norm (or an identity), activation, so MaskPredictor_conv2d_<i>
      is 3i and MaskPredictor_batchnorm_<i> 3i + 1; after those k convs an
      upsampling (with convolve_then_upsample) at 3k, then
      MaskPredictor_upsample_conv2d 3k + 1, MaskPredictor_upsample_batchnorm
      3k + 2 (and its activation); MaskPredictor_last_conv2d last.

(tests/data/tf2_checkpoint_keys/faster_rcnn_resnet50_v1_*.txt,
mask_rcnn_inception_resnet_v2_1024x1024_coco17_gpu-8.txt.)
"""
import re

from od_estimator.export import object_path_parts
from od_estimator.models import keras_object_paths

_MODEL = 'model/'
_PROPOSAL = _MODEL + '_feature_extractor_for_proposal_features'
_BOX_CLASSIFIER = _MODEL + '_feature_extractor_for_box_classifier_features'
_BOX_CLASSIFIER_STAGE = 5
_RESNET_LAYER = re.compile(r'^conv(\d)_\w+$')
_FPN_SCOPE = 'private__resnet_fpn/'
_FPN_BOX_HEAD = ('dense', 'freezable_batch_norm', 'dense_1')
_RPN_FEATURES = re.compile(r'^RPN(Conv|BatchNorm)/(\w+)$')
_RPN_FEATURE_LAYERS = ('Conv', 'BatchNorm')
_RPN_FEATURES_PATH = _MODEL + '_first_stage_box_predictor_first_conv'
_FIRST_STAGE_HEADS = re.compile(
    r'^FirstStageBoxPredictor/Convolutional(Box|Class)Head_(\d+)/'
    r'(?:BoxEncodingPredictor|ClassPredictor)/(\w+)$')
_SECOND_STAGE_HEADS = re.compile(
    r'^mask_rcnn_keras_box_predictor/mask_rcnn_(box|class)_head/'
    r'(?:BoxEncodingPredictor|ClassPredictor)_dense/(\w+)$')
_MASK_HEAD = re.compile(
    r'^mask_rcnn_keras_box_predictor/mask_rcnn_mask_head/MaskPredictor_'
    r'(?:(conv2d|batchnorm)_(\d+)|upsample_(conv2d|batchnorm)|last_conv2d)/'
    r'(\w+)$')
_FIRST_STAGE_PATHS = {
    'Box': 'box_encodings/%s/_box_encoder_layers/0/',
    'Class': 'class_predictions_with_background/%s/_class_predictor_layers/0/',
}
_SECOND_STAGE_PATHS = {
    'box': '_box_prediction_head/_box_encoder_layers/%d/',
    'class': '_class_prediction_head/_class_predictor_layers/%d/',
}
_MASK_LAYERS = (_MODEL + '_mask_rcnn_box_predictor/_third_stage_heads/'
                'mask_predictions/_mask_predictor_layers/%d/%s')
# Layers per mask head conv: conv, batch norm, activation.
_LAYERS_PER_CONV = 3


def is_faster_rcnn(names):
  """Whether names are of a two-stage model with the TF2 RPN."""
  return any(_RPN_FEATURES.match(name) for name in names)


def _c4_paths(names):
  """{name: path} of a C4 ResNet's layers among names."""
  parts = {_PROPOSAL: [], _BOX_CLASSIFIER: []}
  for name in names:
    match = _RESNET_LAYER.match(name.split('/')[0])
    if match and name.count('/') == 1:
      parts[_BOX_CLASSIFIER if int(match.group(1)) == _BOX_CLASSIFIER_STAGE
            else _PROPOSAL].append(name)
  paths = {}
  for holder, part in parts.items():
    paths.update(object_path_parts.backbone_paths(part, holder))
  return paths


def _fpn_extractor_paths(names):
  """{name: path} of a ResNet FPN extractor's values among names."""
  paths = object_path_parts.backbone_paths(
      [name for name in names if _RESNET_LAYER.match(name.split('/')[0])],
      _PROPOSAL + '/classification_backbone')
  paths.update(object_path_parts.fpn_paths(
      [name for name in names if name.startswith(_FPN_SCOPE)], _PROPOSAL,
      ''))
  for name in names:
    layer, _, weight = name.partition('/')
    if layer in _FPN_BOX_HEAD and '/' not in weight:
      paths[name] = '%s/layer_with_weights-%d/%s' % (
          _BOX_CLASSIFIER, _FPN_BOX_HEAD.index(layer), weight)
  return paths


def _mask_head_paths(names):
  """{name: path} of the mask head's values among names."""
  matches = {name: _MASK_HEAD.match(name) for name in names}
  matches = {name: match for name, match in matches.items() if match}
  convs = len({match.group(2) for match in matches.values()
               if match.group(1) == 'conv2d'})
  upsamples = any(match.group(3) for match in matches.values())
  paths = {}
  for name, match in matches.items():
    kind, index, upsample, weight = match.groups()
    if kind:
      layer = int(index) * _LAYERS_PER_CONV + (kind == 'batchnorm')
    elif upsample:
      layer = convs * _LAYERS_PER_CONV + 1 + (upsample == 'batchnorm')
    else:
      layer = convs * _LAYERS_PER_CONV + (1 + _LAYERS_PER_CONV) * upsamples
    paths[name] = _MASK_LAYERS % (layer, weight)
  return paths


def _head_path(name, second_stage_dropout):
  """The path of an RPN or box predictor value, or None."""
  match = _RPN_FEATURES.match(name)
  if match:
    layer, weight = match.groups()
    return '%s/layer_with_weights-%d/%s' % (
        _RPN_FEATURES_PATH, _RPN_FEATURE_LAYERS.index(layer), weight)
  match = _FIRST_STAGE_HEADS.match(name)
  if match:
    head, level, weight = match.groups()
    return (_MODEL + '_first_stage_box_predictor/_prediction_heads/' +
            _FIRST_STAGE_PATHS[head] % level + weight)
  match = _SECOND_STAGE_HEADS.match(name)
  if match:
    head, weight = match.groups()
    return (_MODEL + '_mask_rcnn_box_predictor/' +
            _SECOND_STAGE_PATHS[head] % (1 + second_stage_dropout) + weight)
  return None


def original_paths(names, second_stage_dropout=False):
  """{name: object path} of a two-stage model's variables, or None.

  Args:
    names: the model's variable names in creation order.
    second_stage_dropout: the second-stage box predictor has dropout.

  Returns:
    The paths, or None when a name is outside the layout above (e.g. a
    TF1 extractor's).
  """
  if any(name.startswith(_FPN_SCOPE) for name in names):
    paths = _fpn_extractor_paths(names)
  else:
    paths = _c4_paths(names)
  paths.update({name: detection for name, (detection, _) in
                keras_object_paths.known_paths(names).items()})
  paths.update(_mask_head_paths(names))
  for name in names:
    if name not in paths:
      paths[name] = _head_path(name, second_stage_dropout)
      if paths[name] is None:
        return None
  return paths
