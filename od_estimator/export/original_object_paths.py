"""The object paths the original's TF2 code saves a model's values under.

The original's TF2 checkpoints key each value by its object path from the
checkpoint's root (see utils/checkpoint_contents). For the SSD models we
build with its Keras names, the path follows from the name:

  <layer>/<weight> (the Keras backbone at the graph's root)
      model/_feature_extractor/classification_backbone/
      layer_with_weights-N/<weight>, N counting the backbone's layers that
      have weights, in the order they are built (the Keras application's);
  <extractor>/FeatureMaps/layer_19_<k>_Conv2d_<i>_<size>_<depth>_<type>/<w>
      (type conv or batchnorm)
      model/_feature_extractor/feature_map_generator/convolutions/<i>/<j>/<w>,
      j counting conv, batch norm and activation layers of map i;
  BoxPredictor/Convolutional<Box|Class>Head_<i>/<predictor>/<weight>
      model/_box_predictor/_prediction_heads/<box_encodings|
      class_predictions_with_background>/<i>/<layers>/0/<weight>.

`original_paths` answers for a whole model or not at all: a model with a
value outside these layouts (other backbones' feature pyramids and
predictors, the TF1 names) gets None.
"""
import re

_BACKBONE = 'model/_feature_extractor/classification_backbone'
_FEATURE_MAPS = re.compile(
    r'^[^/]+/FeatureMaps/layer_19_([12])_Conv2d_(\d+)_\d+x\d+(?:_s2)?_\d+_'
    r'(conv|batchnorm)/(\w+)$')
# Layers per feature map convolution: conv, batch norm, activation.
_LAYERS_PER_CONV = 3
_HEADS = re.compile(
    r'^BoxPredictor/Convolutional(Box|Class)Head_(\d+)/'
    r'(?:BoxEncodingPredictor|ClassPredictor)/(kernel|bias)$')
_HEAD_PATHS = {
    'Box': 'box_encodings/%s/_box_encoder_layers/0/%s',
    'Class': 'class_predictions_with_background/%s/_class_predictor_layers/'
             '0/%s',
}


def _added_layer_path(name):
  """The path of a feature map or predictor value, or None."""
  match = _FEATURE_MAPS.match(name)
  if match:
    layer, conv, kind, weight = match.groups()
    index = (int(layer) - 1) * _LAYERS_PER_CONV + (kind == 'batchnorm')
    return 'model/_feature_extractor/feature_map_generator/convolutions/' \
        '%s/%d/%s' % (conv, index, weight)
  match = _HEADS.match(name)
  if match:
    head, level, weight = match.groups()
    return 'model/_box_predictor/_prediction_heads/' + (
        _HEAD_PATHS[head] % (level, weight))
  return None


def original_paths(names):
  """{name: object path} of a model's variables, or None.

  Args:
    names: the model's variable names (global_step excluded) in the order
      the variables were created.

  Returns:
    The original's object path of each name, or None when some name has
    no path in the layouts above.
  """
  paths = {}
  backbone_layers = {}
  for name in names:
    if name.count('/') == 1:
      layer, weight = name.split('/')
      index = backbone_layers.setdefault(layer, len(backbone_layers))
      paths[name] = '%s/layer_with_weights-%d/%s' % (_BACKBONE, index, weight)
      continue
    paths[name] = _added_layer_path(name)
    if paths[name] is None:
      return None
  return paths
