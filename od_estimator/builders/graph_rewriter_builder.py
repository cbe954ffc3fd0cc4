"""Builds the quantization graph rewrite of `graph_rewriter` configs.

As the original: the returned function rewrites the default graph in place,
for training (`quant_delay = quantization.delay`) or for evaluation/export,
then adds scalar summaries of the 'quant_vars' collection. 8-bit weights and
activations only; `symmetric: true` is refused because the original's
builder never passed it on (its rewrite was always asymmetric).
"""
import tensorflow as tf

from od_estimator import errors
from od_estimator.quantization import rewrite

QUANT_VARS_COLLECTION = 'quant_vars'


def _check(quantization):
  for field in ('weight_bits', 'activation_bits'):
    bits = getattr(quantization, field)
    if bits not in rewrite.SUPPORTED_BITS:
      raise errors.UserInputError(
          'graph_rewriter.quantization.%s: %d is not supported; only 8-bit '
          'quantization is' % (field, bits))
  if quantization.symmetric:
    raise errors.UserInputError(
        'graph_rewriter.quantization.symmetric: true is not supported; the '
        'rewrite learns asymmetric ranges (remove the field)')


def _summarize_collection(name):
  """Scalar summaries of the collection's tensors, as slim's did."""
  for value in tf.compat.v1.get_collection(name):
    tf.compat.v1.summary.scalar(value.op.name, value)


def build(graph_rewriter_config, is_training):
  """Returns a no-argument function rewriting the default graph.

  Args:
    graph_rewriter_config: a graph_rewriter_pb2.GraphRewriter.
    is_training: training rewrite, or evaluation / export rewrite.
  """
  quantization = graph_rewriter_config.quantization
  _check(quantization)

  def graph_rewrite_fn():
    graph = tf.compat.v1.get_default_graph()
    if is_training:
      rewrite.create_training_graph(graph, quant_delay=quantization.delay)
    else:
      rewrite.create_eval_graph(graph)
    _summarize_collection(QUANT_VARS_COLLECTION)

  return graph_rewrite_fn
