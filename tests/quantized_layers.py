"""Which layers of a quantization-rewritten graph are fake-quantized.

For the tests of graph_rewriter configs: every convolution / matmul that
predictions depend on must read fake-quantized weights and have its output
fake-quantized, within a few ops either way.
"""
_LAYER_TYPES = ('Conv2D', 'DepthwiseConv2dNative', 'MatMul')
_FAKE_QUANT = 'FakeQuantWithMinMaxVars'
# The original's rewrite skipped the weight-shared predictor tower's layers
# (convolution -> Identity -> batch norm per level: layer_matching's
# _skip_activation), so they stay float in the fpnlite config too.
_SKIPPED_BY_THE_ORIGINAL = '/PredictionTower/'
# Ops between a layer and its quantizer: bias, folding, batch-to-space,
# activations, residual adds and the quant-delay switch.
_MAX_HOPS = 6


def _upstream_layers(tensors):
  """The convolution / matmul ops the tensors depend on (not gradients)."""
  seen, stack, layers = set(), [t.op for t in tensors], []
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    if op.type in _LAYER_TYPES:
      layers.append(op)
    stack.extend(t.op for t in op.inputs)
  return layers


def _reaches_fake_quant(start_ops, step):
  """Whether a FakeQuant is within _MAX_HOPS ops along `step`."""
  frontier = list(start_ops)
  for _ in range(_MAX_HOPS):
    if any(op.type == _FAKE_QUANT for op in frontier):
      return True
    frontier = [nxt for op in frontier for nxt in step(op)]
  return any(op.type == _FAKE_QUANT for op in frontier)


def _producers(op):
  return [t.op for t in op.inputs]


def _consumers(op):
  return [c for t in op.outputs for c in t.consumers()]


def prediction_layers(outputs):
  """The layers the output tensors depend on, as the rewrite sees them.

  Training-time folding keeps each batch-norm'd convolution unfolded too,
  for the batch statistics only: not a layer of the predictions; the
  layers the original skipped are left out too.
  """
  return [op for op in _upstream_layers(outputs)
          if not all(c.type.startswith('FusedBatchNorm')
                     for c in _consumers(op)) and
          _SKIPPED_BY_THE_ORIGINAL not in op.name]


def unquantized(layers):
  """(names of layers whose weights are not fake-quantized, names of
  layers whose outputs are not)."""
  return ([op.name for op in layers
           if not _reaches_fake_quant([op.inputs[1].op], _producers)],
          [op.name for op in layers
           if not _reaches_fake_quant([op], _consumers)])
