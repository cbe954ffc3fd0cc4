"""Finds the layers to quantize: conv/depthwise/matmul with their weights,
bias (or folded batch norm), residual add, activation and a residual add
after the activation.

The same chains the original matched, in TF 2.15 graph mode:

    weights (ReadVariableOp | Identity | folded Mul)
        -> layer (Conv2D | DepthwiseConv2dNative | MatMul)
        -> [BatchToSpaceND]
        -> [bias: BiasAdd | Add(V2) | folded post_conv_mul -> correction_add
            -> add_fold]
        -> [bypass: Add(V2)] -> activation (Relu | Relu6 | Identity)
        -> [post-activation bypass: Add(V2)]

Without an activation the bias add is the output to quantize (a final
layer such as a box predictor); a layer feeding another layer directly
(separable conv) has its own output quantized.
"""
import collections

from od_estimator.quantization import graph_edit

QUANTIZABLE_TYPES = ('Conv2D', 'MatMul', 'DepthwiseConv2dNative')
RELU_TYPES = ('Relu', 'Relu6')
ACTIVATION_TYPES = RELU_TYPES + ('Identity',)
ADD_TYPES = ('Add', 'AddV2')
_BIAS_TYPES = ('BiasAdd',) + ADD_TYPES
_WEIGHT_SOURCES = ('ReadVariableOp', 'VariableV2', 'Variable', 'VarHandleOp')
_BATCH_NORM_TYPES = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')

LayerMatch = collections.namedtuple('LayerMatch', [
    'layer_op', 'weight_tensor', 'activation_op', 'bypass_op',
    'post_activation_bypass_op', 'bias_add_op'])


def _reads_variable(tensor):
  """A variable's value, read directly or through Identity ops."""
  op = tensor.op
  while op.type == 'Identity' and op.inputs:
    op = op.inputs[0].op
  return op.type in _WEIGHT_SOURCES


def _weight_tensor(layer_op):
  """The layer's weights input: a variable read or folded weights."""
  candidates = layer_op.inputs[1:2]
  if layer_op.type == 'MatMul':
    candidates = (layer_op.inputs[1], layer_op.inputs[0])
  for tensor in candidates:
    if tensor.op.type == 'Mul' and tensor.op.name.endswith('/mul_fold'):
      return tensor
    if _reads_variable(tensor):
      return tensor
  return None


def _first_consumer(tensor, types):
  for op in graph_edit.consumer_ops(tensor):
    if op.type in types:
      return op
  return None


def _bias_add(output):
  """The bias (or folded batch norm) add reading `output`, or None."""
  post_conv_mul = _first_consumer(output, ('Mul',))
  if post_conv_mul is not None and post_conv_mul.name.endswith(
      '/post_conv_mul'):
    correction_add = _first_consumer(post_conv_mul.outputs[0], ADD_TYPES)
    if correction_add is not None:
      return _first_consumer(correction_add.outputs[0], ADD_TYPES)
  return _first_consumer(output, _BIAS_TYPES)


def _activation_and_bypass(tensor):
  """(activation, bypass) after `tensor`: directly or through an add."""
  activation = _first_consumer(tensor, ACTIVATION_TYPES)
  if activation is not None:
    return activation, None
  for bypass in graph_edit.consumer_ops(tensor):
    if bypass.type in ADD_TYPES:
      activation = _first_consumer(bypass.outputs[0], ACTIVATION_TYPES)
      if activation is not None:
        return activation, bypass
  return None, None


def _skip_activation(activation_op):
  # conv -> Identity -> batch norm (not folded): nothing to quantize there.
  consumers = graph_edit.consumer_ops(activation_op.outputs[0])
  return (activation_op.type == 'Identity' and len(consumers) == 1 and
          consumers[0].type in _BATCH_NORM_TYPES)


def match_layer(layer_op):
  """The LayerMatch of one quantizable op, or None if it is not a layer."""
  weight_tensor = _weight_tensor(layer_op)
  if weight_tensor is None:
    return None
  output = layer_op.outputs[0]
  batch_to_space = _first_consumer(output, ('BatchToSpaceND',))
  if batch_to_space is not None:
    output = batch_to_space.outputs[0]
  bias_add = _bias_add(output)
  after = bias_add.outputs[0] if bias_add is not None else output
  activation, bypass = _activation_and_bypass(after)
  if activation is not None and _skip_activation(activation):
    activation = None
  post_bypass = None
  if activation is not None:
    post_bypass = _first_consumer(activation.outputs[0], ADD_TYPES)
  elif bias_add is not None:
    activation = bias_add
  elif _first_consumer(output, QUANTIZABLE_TYPES) is not None:
    activation = layer_op
  else:
    return None
  if bypass is None:
    bias_add_for_bypass = bias_add
  else:
    bias_add_for_bypass = bias_add if bias_add is not None else layer_op
  return LayerMatch(layer_op, weight_tensor, activation, bypass, post_bypass,
                    bias_add_for_bypass)


def _order_key(match, position):
  """The original's match order: by the pattern that matched the layer
  (post-activation bypass, activation, final bias add, separable conv), then
  by the graph position of the op the pattern ends at. It decides which of
  two quantizers with the same name gets the `_1` suffix."""
  if match.post_activation_bypass_op is not None:
    return (0, position[match.post_activation_bypass_op])
  if match.activation_op is match.layer_op:
    consumer = _first_consumer(match.layer_op.outputs[0], QUANTIZABLE_TYPES)
    return (3, position[consumer])
  if match.activation_op.type in ACTIVATION_TYPES:
    return (1, position[match.activation_op])
  return (2, position[match.activation_op])


def find_layers(graph):
  """LayerMatches of every quantizable layer of `graph`, in the order the
  original quantized them."""
  operations = graph.get_operations()
  position = {op: index for index, op in enumerate(operations)}
  matches = []
  for op in operations:
    if op.type in QUANTIZABLE_TYPES and not graph_edit.is_skipped(op):
      match = match_layer(op)
      if match is not None:
        matches.append(match)
  return sorted(matches, key=lambda match: _order_key(match, position))
