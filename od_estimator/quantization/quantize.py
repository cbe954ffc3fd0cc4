"""Inserts FakeQuant ops after weights and activations of matched layers.

Names, ranges and order follow the original's `Quantize`:
  - `<layer context>/weights_quant`: weights, last value, narrow range;
  - `<context>/act_quant`: the activation (the bias add of a final layer),
    moving average, initial range [0, 6]; with a residual add before the
    activation the context is one scope up (the block's scope);
  - `<layer context>/conv_quant` on the layer's output into that add, and
    `<block context>/add_quant` on the add unless a ReLU follows it;
  - `<scope of the add>/post_activation_bypass_quant` on an add after the
    activation, unless a ReLU follows it;
  - then `<op name>/activation_<OpType>_quant` on every remaining Add, AddV2
    or Mul fed by a quantized tensor (through Identity / Reshape /
    BatchToSpaceND / SpaceToBatchND or other such adds and muls), unless its
    one consumer is a ReLU.
The layer context is the name scope of the layer op (`.../Conv2d_0` for
`.../Conv2d_0/Conv2D_Fold`). Ranges start at [-6, 6] except act_quant.
With `quant_delay` > 0 each FakeQuant is bypassed (`<scope>/delayed_quant`
cond) until `fake_quantization_step` reaches it.
"""
import logging

import tensorflow as tf

from od_estimator.quantization import graph_edit
from od_estimator.quantization import layer_matching
from od_estimator.quantization import quant_ops

_FAKE_QUANT_TYPES = ('FakeQuantWithMinMaxVars', 'FakeQuantWithMinMaxArgs',
                     'FakeQuantWithMinMaxVarsPerChannel')
_PASS_THROUGH_TYPES = ('Reshape', 'Identity', 'BatchToSpaceND',
                       'SpaceToBatchND')
_INTERMEDIATE_TYPES = ('Add', 'AddV2', 'Mul')


def _followed_by_fake_quant(tensor):
  # Only direct consumers, as the original checked.
  return any(op.type in _FAKE_QUANT_TYPES for op in tensor.consumers())


class _Quantizer(object):
  """Inserts quantizers with the settings of one rewrite."""

  def __init__(self, graph, is_training, weight_bits, activation_bits,
               ema_decay, quant_delay, vars_collection):
    self.graph = graph
    self.is_training = is_training
    self.weight_bits = weight_bits
    self.activation_bits = activation_bits
    self.ema_decay = ema_decay
    self.quant_delay = quant_delay
    self.vars_collection = vars_collection
    self.inserted = 0

  def insert(self, context, name, producer, consumers, moving_avg=True,
             init_min=-6.0, narrow_range=False, weights=False):
    """Puts a FakeQuant between `producer`'s output and `consumers`."""
    name_prefix = graph_edit.join(context, name)
    # Inside a name scope (e.g. TPU 'TPUReplicate/loop'), scopes nest.
    current = self.graph.get_name_scope()
    if current and name_prefix.startswith(current + '/'):
      name_prefix = name_prefix[len(current) + 1:]
    inputs = producer.outputs[0]
    if _followed_by_fake_quant(inputs):
      return
    quantize = (quant_ops.moving_avg_quantize if moving_avg
                else quant_ops.last_value_quantize)
    kwargs = dict(ema_decay=self.ema_decay) if moving_avg else {}
    quant = quantize(
        inputs, name_prefix, is_training=self.is_training,
        num_bits=self.weight_bits if weights else self.activation_bits,
        narrow_range=narrow_range, init_min=init_min, init_max=6.0,
        vars_collection=self.vars_collection, **kwargs)
    if self.quant_delay and self.quant_delay > 0:
      activate = tf.greater_equal(quant_ops.quantization_step(),
                                  self.quant_delay,
                                  name=name_prefix + '/activate_quant')
      quant = tf.compat.v1.cond(activate, lambda: quant, lambda: inputs,
                                name=name_prefix + '/delayed_quant')
    graph_edit.reroute(quant, inputs, consumers)
    self.inserted += 1


def _relu_follows(op):
  return any(c.type in layer_matching.RELU_TYPES
             for c in graph_edit.consumer_ops(op.outputs[0]))


def _quantize_layer(q, match, consumers_of):
  context = graph_edit.context_of(match.layer_op.name)
  q.insert(context, 'weights_quant', match.weight_tensor.op, [match.layer_op],
           moving_avg=False, narrow_range=True, weights=True)
  quantized = set()
  add_context = context
  if match.bypass_op is not None:
    add_context = graph_edit.context_of(context)
  if match.activation_op is not None:
    q.insert(add_context, 'act_quant', match.activation_op,
             consumers_of(match.activation_op), init_min=0.0)
    quantized.add(match.activation_op)
  if match.bypass_op is not None:
    q.insert(context, 'conv_quant', match.bias_add_op, [match.bypass_op])
    quantized.add(match.bias_add_op)
    if _relu_follows(match.bypass_op):
      logging.info('Skipping %s: an activation follows it',
                   match.bypass_op.name)
    else:
      q.insert(add_context, 'add_quant', match.bypass_op,
               consumers_of(match.bypass_op))
      quantized.add(match.bypass_op)
  post = match.post_activation_bypass_op
  if post is not None:
    if _relu_follows(post):
      logging.info('Skipping %s: an activation follows it', post.name)
    else:
      q.insert(graph_edit.context_of(post.name),
               'post_activation_bypass_quant', post, consumers_of(post))
      quantized.add(post)
  return quantized


def _fed_by_quantized(op):
  """True if an input of `op` comes from a FakeQuant, maybe indirectly."""
  pending, seen = [op], set()
  while pending:
    current = pending.pop()
    if current in seen:
      continue
    seen.add(current)
    for tensor in current.inputs:
      source = tensor.op
      if source.type in _FAKE_QUANT_TYPES or '/delayed_quant' in source.name:
        return True
      if source.type in _INTERMEDIATE_TYPES + _PASS_THROUGH_TYPES:
        pending.append(source)
  return False


def _quantize_intermediate_ops(q, quantized, consumers_of):
  for op in q.graph.get_operations():
    if (op.type not in _INTERMEDIATE_TYPES or op in quantized or
        graph_edit.is_skipped(op)):
      continue
    consumers = graph_edit.consumer_ops(op.outputs[0])
    if len(consumers) == 1 and consumers[0].type in layer_matching.RELU_TYPES:
      continue
    if _fed_by_quantized(op):
      q.insert(op.name, 'activation_%s_quant' % op.type, op, consumers_of(op))


def quantize(graph, is_training, weight_bits=8, activation_bits=8,
             ema_decay=0.999, quant_delay=None,
             vars_collection=tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
  """Inserts the FakeQuant ops into `graph` in place.

  Args:
    graph: the tf.Graph (batch norms already folded).
    is_training: ranges are updated (True) or only read (False).
    weight_bits, activation_bits: bits of the quantizers.
    ema_decay: decay of the activation ranges' moving averages.
    quant_delay: steps of `fake_quantization_step` before quantizing.
    vars_collection: collection of the min/max variables.

  Returns:
    The number of FakeQuant insertions.
  """
  q = _Quantizer(graph, is_training, weight_bits, activation_bits, ema_decay,
                 quant_delay, vars_collection)
  # Consumers as before any insertion, as the original's input map.
  snapshot = {op: graph_edit.consumer_ops(op.outputs[0])
              for op in graph.get_operations() if op.outputs}
  consumers_of = lambda op: snapshot.get(op) or graph_edit.consumer_ops(
      op.outputs[0])
  matches = layer_matching.find_layers(graph)
  quantized = set()
  with graph.as_default():
    for match in matches:
      quantized |= _quantize_layer(q, match, consumers_of)
    _quantize_intermediate_ops(q, quantized, consumers_of)
  return q.inserted
