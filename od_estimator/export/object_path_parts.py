"""Parts of the original's TF2 object paths shared by its model families.

- The Keras ResNet's layers with weights, in the Keras application's
  order: the order they are built, except that a block's shortcut conv and
  batch norm follow its third conv and batch norm respectively (the
  functional model's topological order: 1_conv, 1_bn, 2_conv, 2_bn,
  0_conv, 3_conv, 0_bn, 3_bn). `layer_with_weights-N` counts them so.
- A Keras feature pyramid (its FPN generator and the coarser levels added
  above the backbone), below the object E that holds it:

    <scope>/FeatureMaps/top_down/projection_<k>/<w> (k = 1..n)
        E/<p>fpn_features_generator/top_layers/0/<w> for k = n (the
        coarsest level), E/<p>fpn_features_generator/residual_blocks/
        <n-1-k>/0/<w> else;
    <scope>/FeatureMaps/top_down/smoothing_<k>_<conv|depthwise_conv|
    batchnorm>/<w>
        E/<p>fpn_features_generator/conv_layers/<n-1-k>/<0|1>/<w>;
    <scope>/bottom_up_<block|Conv2d_><l>_<conv|depthwise_conv|batchnorm>/<w>
        E/<p>coarse_feature_layers/<l-l0>/<0|1>/<w>, l0 the first
        bottom-up layer's l;

  p is `_` in the SSD extractors, empty in the Faster R-CNN one.
"""
import re

_RESNET_LAYER = re.compile(r'^conv(\d)_block(\d+)_(\d)_(conv|bn)$')
_RESNET_BLOCK_ORDER = ('1_conv', '1_bn', '2_conv', '2_bn', '0_conv', '3_conv',
                       '0_bn', '3_bn')
_FPN = re.compile(
    r'^[^/]+/(?:FeatureMaps/top_down/(projection|smoothing)_(\d+)|'
    r'bottom_up_(?:block|Conv2d_)(\d+))'
    r'(?:_(conv|depthwise_conv|batchnorm))?/(\w+)$')


def keras_layer_order(layer):
  """Sort key of a Keras backbone layer: ResNet block layers in the Keras
  model's order, any other layer where it was built (a stable sort)."""
  match = _RESNET_LAYER.match(layer)
  if not match:
    return (0, 0, 0)
  stage, block, conv, kind = match.groups()
  return (int(stage), int(block),
          _RESNET_BLOCK_ORDER.index('%s_%s' % (conv, kind)))


def backbone_paths(names, holder):
  """{name: object path} of the Keras backbone's values among names: those
  at the graph's root (`<layer>/<w>`), below `holder`, counted in the
  Keras order."""
  at_root = [name for name in names if name.count('/') == 1]
  layers = sorted(dict.fromkeys(name.split('/')[0] for name in at_root),
                  key=keras_layer_order)
  index = {layer: i for i, layer in enumerate(layers)}
  return {name: '%s/layer_with_weights-%d/%s' % (
      holder, index[name.split('/')[0]], name.split('/')[1])
          for name in at_root}


def fpn_paths(names, holder, private_prefix):
  """{name: object path} of the feature pyramid's values among names.

  Args:
    names: variable names of a model.
    holder: object path of the extractor holding the pyramid (E above).
    private_prefix: p above.
  """
  matches = {name: _FPN.match(name) for name in names}
  matches = {name: match for name, match in matches.items() if match}
  projections = [int(match.group(2)) for match in matches.values()
                 if match.group(1) == 'projection']
  coarse = [int(match.group(3)) for match in matches.values()
            if match.group(3)]
  top, first_coarse = max(projections or [0]), min(coarse or [0])
  generator = '%s/%sfpn_features_generator' % (holder, private_prefix)
  paths = {}
  for name, match in matches.items():
    kind, index, coarse_layer, layer, weight = match.groups()
    sublayer = int(layer == 'batchnorm')
    if coarse_layer:
      paths[name] = '%s/%scoarse_feature_layers/%d/%d/%s' % (
          holder, private_prefix, int(coarse_layer) - first_coarse, sublayer,
          weight)
    elif kind == 'projection' and int(index) == top:
      paths[name] = '%s/top_layers/0/%s' % (generator, weight)
    else:
      group = 'residual_blocks' if kind == 'projection' else 'conv_layers'
      paths[name] = '%s/%s/%d/%d/%s' % (generator, group,
                                        top - 1 - int(index), sublayer,
                                        weight)
  return paths
