"""automl EfficientDet checkpoints as ours: which value feeds each variable.

automl's TF1 network (efficientdet_arch) names its variables

  efficientnet-b0/stem/{conv2d,tpu_batch_normalization}/...
  efficientnet-b0/blocks_<i>/{conv2d,conv2d_1,depthwise_conv2d,
      tpu_batch_normalization[_1,_2],se/conv2d[_1]}/...
  resample_p<l>/{conv2d,bn}/...                 (levels above the backbone)
  fpn_cells/cell_<c>/fnode<j>/resample_<k>_<offset>_<n>/{conv2d,bn}/...
  fpn_cells/cell_<c>/fnode<j>/WSM[_<k>]         (one scalar per input)
  fpn_cells/cell_<c>/fnode<j>/op_after_combine<n>/{conv,bn}/...
  {class,box}_net/{class,box}-<i>/...           (shared separable convs)
  {class,box}_net/{class,box}-<i>-bn-<level>/...
  {class,box}_net/{class,box}-predict/...

with an `/ExponentialMovingAverage` copy of each in trained checkpoints.
Block i is our stack_<s>/block_<b> in order; the expansion block's layers
are conv2d, tpu_batch_normalization, ..., the projection conv2d_1 and
tpu_batch_normalization_2 (a block without expansion starts at its
depthwise conv). BiFPN node j of cell c is our node of iteration c + 1 at
the same place (both build the same top-down then bottom-up nodes), whose
input k is automl's `offset`: the cell's inputs are 0 .. levels - 1, its
nodes follow; n is the node's own id (levels + j). The fast-attention
scalars become our [inputs, 1] combine weights.

The two lineages order a cell's anchors differently (automl: scale outer,
aspect ratio inner; ours: aspect ratio outer, scale inner), so the
prediction layers' outputs are reordered, exactly.
"""
import collections
import re

import numpy as np
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import bifpn
from od_estimator.nets import efficientnet

EMA = 'ExponentialMovingAverage'
# Last names of optimizer slots and moving averages in automl's checkpoints.
_TRAINING_STATE = (EMA, 'Momentum', 'RMSProp', 'RMSProp_1', 'Adam', 'Adam_1')
_TRAINING_VARIABLES = ('global_step', 'beta1_power', 'beta2_power')
_BACKBONE_LEVELS = 5
# Our block layer -> automl's, with and without an expansion layer.
_EXPANDED = {
    'expand_conv2d': 'conv2d', 'expand_bn': 'tpu_batch_normalization',
    'depthwise_conv2d': 'depthwise_conv2d',
    'depthwise_bn': 'tpu_batch_normalization_1',
    'se_reduce_conv2d': 'se/conv2d', 'se_expand_conv2d': 'se/conv2d_1',
    'project_conv2d': 'conv2d_1', 'project_bn': 'tpu_batch_normalization_2'}
_NOT_EXPANDED = dict(_EXPANDED, depthwise_bn='tpu_batch_normalization',
                     project_conv2d='conv2d',
                     project_bn='tpu_batch_normalization_1')
_BLOCK = re.compile(r'^(stack_\d+/block_\d+)/(\w+)/(\w+)$')
_NODE = re.compile(r'^[^/]+/bifpn/node_(\d+)/[^/]+/(.+)$')
_PREDICTOR = 'WeightSharedConvolutionalBoxPredictor/'
_TOWER = re.compile(r'^(Box|Class)PredictionTower/conv2d_(\d+)/'
                    r'(?:BatchNorm/feature_(\d+)/)?(\w+)$')
_HEADS = {'WeightSharedConvolutionalBoxHead/BoxPredictor/': 'box',
          'WeightSharedConvolutionalClassHead/ClassPredictor/': 'class'}

# Where a variable's value comes from: automl names (several for combine
# weights, stacked) and the output block size to reorder by anchor (0: none).
Source = collections.namedtuple('Source', ['names', 'anchor_block'])

Geometry = collections.namedtuple('Geometry', [
    'model_name', 'min_level', 'max_level', 'num_iterations', 'num_scales',
    'num_aspect_ratios', 'num_classes'])


def _backbone_source(name, names, geometry):
  prefix = geometry.model_name
  if name.startswith('stem_'):
    layer, _, weight = name[len('stem_'):].partition('/')
    layer = {'conv2d': 'conv2d', 'bn': 'tpu_batch_normalization'}[layer]
    return '%s/stem/%s/%s' % (prefix, layer, weight)
  match = _BLOCK.match(name)
  if not match:
    return None
  block, layer, weight = match.groups()
  index = efficientnet.block_names(prefix).index(block)
  layers = (_EXPANDED if block + '/expand_conv2d/kernel' in names else
            _NOT_EXPANDED)
  return '%s/blocks_%d/%s/%s' % (prefix, index, layers[layer], weight)


def _cell_ids(geometry, cell, cell_nodes):
  """{our node name: automl node id} of BiFPN cell `cell` (0-based)."""
  levels = range(geometry.min_level, geometry.max_level + 1)
  ids = {}
  for offset, level in enumerate(levels):
    kind = 'dn' if cell and level == geometry.min_level else 'up'
    ids['%d_%s_lvl_%d' % (cell, kind, level)] = offset
  for index, node in enumerate(cell_nodes):
    ids[node.name] = len(levels) + index
  return ids


def _bifpn_source(name, geometry):
  match = _NODE.match(name)
  if not match:
    return None
  index, rest = int(match.group(1)), match.group(2)
  backbone_top = min(geometry.max_level, _BACKBONE_LEVELS)
  all_nodes = bifpn.nodes(geometry.min_level, geometry.max_level,
                          backbone_top, geometry.num_iterations)
  node = all_nodes[index]
  extra = geometry.max_level - backbone_top
  layer = rest.rpartition('/')[0]
  weight = rest.rpartition('/')[2]
  kind = layer.rpartition('/')[2]
  if index < extra:
    # A level above the backbone: automl's resample_p<level>.
    return Source(['resample_p%d/%s/%s' % (
        node.level, {'conv': 'conv2d', 'batchnorm': 'bn'}[kind], weight)], 0)
  per_cell = (len(all_nodes) - extra) // geometry.num_iterations
  cell, position = divmod(index - extra, per_cell)
  first = extra + cell * per_cell
  cell_nodes = all_nodes[first:first + per_cell]
  ids = _cell_ids(geometry, cell, cell_nodes)
  scope = 'fpn_cells/cell_%d/fnode%d' % (cell, position)
  node_id = ids[node.name]
  if rest == 'combine/bifpn_combine_weights':
    return Source(['%s/WSM%s' % (scope, '_%d' % k if k else '')
                   for k in range(len(node.inputs))], 0)
  if rest.startswith('post_combine/'):
    return Source(['%s/op_after_combine%d/%s/%s' % (
        scope, node_id, 'conv' if kind == 'separable_conv' else 'bn',
        weight)], 0)
  input_name = rest.split('/')[0][len('input_'):]
  k = node.inputs.index(input_name)
  return Source(['%s/resample_%d_%d_%d/%s/%s' % (
      scope, k, ids[input_name], node_id,
      {'conv': 'conv2d', 'batchnorm': 'bn'}[kind], weight)], 0)


def _predictor_source(name, geometry):
  rest = name[len(_PREDICTOR):]
  match = _TOWER.match(rest)
  if match:
    head, layer, feature, weight = match.groups()
    head = head.lower()
    if feature is None:
      return Source(['%s_net/%s-%s/%s' % (head, head, layer, weight)], 0)
    return Source(['%s_net/%s-%s-bn-%d/%s' % (
        head, head, layer, geometry.min_level + int(feature), weight)], 0)
  for prefix, head in _HEADS.items():
    if rest.startswith(prefix):
      weight = rest[len(prefix):]
      block = 4 if head == 'box' else geometry.num_classes
      return Source(['%s_net/%s-predict/%s' % (head, head, weight)],
                    block if weight != 'depthwise_kernel' else 0)
  return None


def sources(names, geometry):
  """{our variable name: Source} for the variables of our graph.

  Raises:
    errors.UserInputError: a variable automl's network has no counterpart of.
  """
  found = {}
  for name in names:
    if name.startswith(_PREDICTOR):
      source = _predictor_source(name, geometry)
    else:
      source = _bifpn_source(name, geometry)
      if source is None:
        backbone = _backbone_source(name, names, geometry)
        source = backbone and Source([backbone], 0)
    if source is None:
      raise errors.UserInputError(
          'convert_automl: our variable %s has no counterpart in automl\'s '
          'network.' % name)
    found[name] = source
  return found


def anchor_permutation(num_scales, num_aspect_ratios, block):
  """Output channel of automl's head for each of ours (block per anchor)."""
  return np.array([(scale * num_aspect_ratios + aspect) * block + item
                   for aspect in range(num_aspect_ratios)
                   for scale in range(num_scales)
                   for item in range(block)])


def is_training_state(name):
  """Whether a checkpoint key is a step, optimizer slot or moving average."""
  return (name in _TRAINING_VARIABLES or
          name.rpartition('/')[2] in _TRAINING_STATE)


def converted_values(prefix, shapes, geometry, use_moving_averages=True):
  """{our variable name: numpy value} from automl's checkpoint at prefix.

  Args:
    prefix: automl checkpoint prefix.
    shapes: {our variable name: shape list}.
    geometry: Geometry of the model.
    use_moving_averages: take `<name>/ExponentialMovingAverage` where the
      checkpoint holds it.

  Returns:
    ({our name: float32 array}, number of moving averages used).

  Raises:
    errors.UserInputError: a value missing or of another shape, or model
      values of the checkpoint nothing takes (another network).
  """
  reader = tf.train.load_checkpoint(prefix)
  held = reader.get_variable_to_shape_map()
  if any('/.ATTRIBUTES/' in key for key in held):
    raise errors.UserInputError(
        'convert_automl: %s is an object-based (TF2 Keras) checkpoint; give '
        'one of automl\'s name-based checkpoints (its released '
        'efficientdet-d0 ones, or main.py\'s model.ckpt-N).' % prefix)
  used, averaged, values = set(), 0, {}
  for name, source in sorted(sources(list(shapes), geometry).items()):
    parts = []
    for key in source.names:
      if key not in held:
        raise errors.UserInputError(
            'convert_automl: %s has no %s (for our %s): not a checkpoint of '
            'automl\'s %s with these hparams?' % (
                prefix, key, name, geometry.model_name))
      used.add(key)
      if use_moving_averages and key + '/' + EMA in held:
        key += '/' + EMA
        averaged += 1
      parts.append(np.asarray(reader.get_tensor(key), np.float32))
    # Several sources: a node's fast-attention scalars, as [inputs, 1].
    value = (np.reshape(parts, [len(parts), 1]) if len(parts) > 1 else
             parts[0])
    if source.anchor_block and value.shape[-1] == (
        geometry.num_scales * geometry.num_aspect_ratios *
        source.anchor_block):
      value = value[..., anchor_permutation(
          geometry.num_scales, geometry.num_aspect_ratios,
          source.anchor_block)]
    if list(value.shape) != list(shapes[name]):
      raise errors.UserInputError(
          'convert_automl: %s holds %s of shape %s, our %s needs %s (check '
          '--hparams num_classes, num_scales, aspect_ratios, '
          'fpn_num_filters).' % (prefix, ', '.join(source.names),
                                 list(value.shape), name, shapes[name]))
    values[name] = value
  left = sorted(key for key in held
                if key not in used and not is_training_state(key))
  if left:
    raise errors.UserInputError(
        'convert_automl: %s holds %d model value(s) our converted %s does '
        'not take, e.g. %s: a checkpoint of another network?' % (
            prefix, len(left), geometry.model_name, ', '.join(left[:3])))
  return values, averaged


def frozen_names(var_freeze_expr, names, geometry):
  """Our variable names whose automl source var_freeze_expr matches.

  automl freezes the variables whose name (with its ':0') the expression
  matches from the start (re.match); ours is frozen when any of its
  sources is.
  """
  if not var_freeze_expr:
    return []
  try:
    pattern = re.compile(var_freeze_expr)
  except re.error as error:
    raise errors.UserInputError('--hparams var_freeze_expr=%r is not a '
                                'regular expression: %s' % (
                                    var_freeze_expr, error)) from None
  return sorted(name for name, source in sources(names, geometry).items()
                if any(pattern.match(key + ':0') for key in source.names))


def freeze_expressions(frozen, names):
  """Few regular expressions that match exactly the `frozen` of `names`.

  A folder of names (`stack_3/`, `.../node_00/`) all of which are frozen
  becomes one '^<folder>/' expression; other frozen names are matched whole.
  """
  frozen = set(frozen)
  expressions = []

  def visit(folder, members):
    heads = sorted({name[len(folder):].split('/')[0] for name in members})
    for head in heads:
      path = folder + head
      inside = [name for name in members
                if name == path or name.startswith(path + '/')]
      if all(name in frozen for name in inside):
        expressions.append('^%s%s' % (re.escape(path),
                                      '$' if inside == [path] else '/'))
      elif any(name in frozen for name in inside):
        visit(path + '/', [name for name in inside if name != path])

  visit('', list(names))
  return expressions


def write(prefix, values):
  """Writes {name: numpy value} as a name-based checkpoint at prefix."""
  names = sorted(values)
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=names,
        shape_and_slices=[''] * len(names),
        tensors=[tf.constant(values[name]) for name in names]))
  return prefix
