"""Inception-ResNet v2 as the original's TF2 (Keras) detectors lay it out.

The original's `_keras` Inception-ResNet v2 is the Keras application
(`tf.keras.applications.InceptionResNetV2`) with its layers overridden for
detection. It computes what the slim network of inception_resnet_v2.py
computes with 'SAME' reductions (align_feature_maps), so it is built from
the same blocks; only its variable names differ. Keras names most of its
layers automatically, in the order it builds them: the unnamed
convolutions `conv2d`, `conv2d_1`, ... and their batch norms
`freezable_batch_norm`, `freezable_batch_norm_1`, ... (one each, so conv
and batch norm share a number); only each residual block's projection
(`block35_<i>_conv`, `block17_<i>_conv`, `block8_<i>_conv`) and the last
convolution (`conv_7b`, `conv_7b_bn`) have names of their own.

Those numbers are the ones a process that builds the model once gives
(the names we use); a process that built a Keras model before numbers on
from there, so the original's checkpoints can only be read by object path:
`layer_with_weights-<k>/<weight>`, k counting the layers that have weights
in the functional model's order. That order is not the build order: Keras
sorts a functional model's layers by their longest distance to the output
(farthest first), ties in the order a depth-first walk from the output
meets them. As every block ends in one tensor, this sorts each block on its
own: its branches' layers by distance to the block's end, ties by branch.
"""
import collections
import itertools

from od_estimator.nets import inception_resnet_v2 as irv2
from od_estimator.utils import keras_names

# Keras layers (with and without weights) per slim layer of a branch: a
# convolution is Conv2D, batch norm and activation; a pool is one layer.
_KERAS_LAYERS = {irv2.Conv: 3, irv2.Pool: 1}
# The slim scope of a convolution's batch norm below the convolution's.
_BATCH_NORM = '/BatchNorm'

KerasLayer = collections.namedtuple('KerasLayer', [
    'name',   # Keras layer name, e.g. 'conv2d_8', 'block35_1_conv'
    'scope',  # slim layer scope below InceptionResnetV2, e.g.
              # 'Mixed_5b/Branch_2/Conv2d_0a_1x1/BatchNorm'
    'index',  # k of `layer_with_weights-<k>` in the whole network
    'first_stage',  # whether the proposal features compute it
])


def _keras_name(base, number):
  return base if number == 0 else '%s_%d' % (base, number)


def _block_layers(scope, towers, numbers, projection=None):
  """The weight layers of one block, in the Keras functional order.

  Args:
    scope: the block's slim scope, e.g. 'Repeat/block35_1'; None for the
      stem, one chain of layers without a scope of its own.
    towers: its branches (`Branch_<i>`), e.g. irv2.BLOCK35.
    numbers: iterator of the next Keras numbers of unnamed layers.
    projection: Keras name of a residual block's projection, or None.

  Returns:
    list of (Keras name, slim scope).
  """
  ordered = []  # (-distance to the block's end, branch, name, scope)
  for branch, layers in enumerate(towers):
    prefix = '%s/Branch_%d/' % (scope, branch) if scope else ''
    distance = sum(_KERAS_LAYERS[type(layer)] for layer in layers)
    for layer in layers:
      if isinstance(layer, irv2.Conv):
        number = next(numbers)
        layer_scope = prefix + layer.scope
        ordered.append((-distance, branch, _keras_name('conv2d', number),
                        layer_scope))
        ordered.append((1 - distance, branch,
                        _keras_name('freezable_batch_norm', number),
                        layer_scope + _BATCH_NORM))
      distance -= _KERAS_LAYERS[type(layer)]
  ordered.sort()
  layers = [(name, layer_scope) for _, _, name, layer_scope in ordered]
  if projection:
    layers.append((projection, '%s/%s' % (scope, irv2.PROJECTION)))
  return layers


def _residual_blocks(stack, towers, numbers):
  """_block_layers of each block of a residual stack."""
  scope, name, count, _ = stack
  return [_block_layers('%s/%s_%d' % (scope, name, index), towers, numbers,
                        projection='%s_%d_conv' % (name, index))
          for index in range(1, count + 1)]


def _network_blocks(numbers):
  """[(weight layers of a block in Keras order, whether first stage)]."""
  stem = tuple(irv2.Conv(name, depth, kernel)
               for name, layer, depth, kernel, _, _ in irv2.STEM
               if layer == 'conv')
  first = ([_block_layers(None, (stem,), numbers),
            _block_layers('Mixed_5b', irv2.MIXED_5B, numbers)] +
           _residual_blocks(irv2.BLOCK35_STACK, irv2.BLOCK35, numbers) +
           [_block_layers('Mixed_6a', irv2.MIXED_6A, numbers)] +
           _residual_blocks(irv2.BLOCK17_STACK, irv2.BLOCK17, numbers))
  second = ([_block_layers('Mixed_7a', irv2.MIXED_7A, numbers)] +
            _residual_blocks(irv2.BLOCK8_STACK, irv2.BLOCK8, numbers) +
            # The last, linear block8 (slim's Block8) and the conv to 1536.
            [_block_layers('Block8', irv2.BLOCK8, numbers,
                           projection='block8_10_conv'),
             [('conv_7b', 'Conv2d_7b_1x1'),
              ('conv_7b_bn', 'Conv2d_7b_1x1' + _BATCH_NORM)]])
  return [(block, True) for block in first] + [
      (block, False) for block in second]


def _keras_layers():
  """Every weight layer of the network as a KerasLayer, in Keras order."""
  layers = []
  for block, first_stage in _network_blocks(itertools.count()):
    for name, scope in block:
      layers.append(KerasLayer(name, scope, len(layers), first_stage))
  return layers


LAYERS = _keras_layers()
BY_NAME = {layer.name: layer for layer in LAYERS}
_BY_SCOPE = {layer.scope: layer.name for layer in LAYERS}
# Weight layers of the proposal features (the first stage).
FIRST_STAGE_LAYERS = sum(layer.first_stage for layer in LAYERS)


def keras_variable_name(slim_name):
  """The Keras name of a slim variable of the network.

  Args:
    slim_name: name below the network's scope, e.g.
      'Mixed_5b/Branch_0/Conv2d_1x1/BatchNorm/beta'.

  Returns:
    e.g. 'freezable_batch_norm_5/beta'.

  Raises:
    ValueError: for a variable of no layer of the network.
  """
  layer, weight = keras_names.split_variable(slim_name)
  if layer not in _BY_SCOPE:
    raise ValueError('%r is no variable of the Keras Inception-ResNet v2.'
                     % slim_name)
  return '%s/%s' % (_BY_SCOPE[layer], weight)
