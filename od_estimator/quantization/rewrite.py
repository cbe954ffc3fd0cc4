"""Quantization-aware graph rewrites: the original's create_training_graph /
create_eval_graph, in place on a TF 2.15 graph (no tf.contrib).

Both fold batch norms, then insert FakeQuant ops (see quantize.py). The
min/max variables go to GLOBAL_VARIABLES (and slim's MODEL_VARIABLES), so
savers made afterwards include them.
"""
import tensorflow as tf

from od_estimator.quantization import fold_batch_norms
from od_estimator.quantization import quantize

SUPPORTED_BITS = (8,)


def _create_graph(graph, is_training, weight_bits=8, activation_bits=8,
                  quant_delay=None, freeze_bn_delay=None):
  graph = graph or tf.compat.v1.get_default_graph()
  for name, bits in (('weight_bits', weight_bits),
                     ('activation_bits', activation_bits)):
    if bits not in SUPPORTED_BITS:
      raise ValueError('%s=%r: only 8-bit quantization is supported'
                       % (name, bits))
  with graph.as_default():
    fold_batch_norms.fold_batch_norms(
        graph, is_training, freeze_batch_norm_delay=freeze_bn_delay)
    return quantize.quantize(
        graph, is_training, weight_bits=weight_bits,
        activation_bits=activation_bits, quant_delay=quant_delay)


def create_training_graph(graph=None, quant_delay=0, weight_bits=8,
                          activation_bits=8, freeze_bn_delay=None):
  """Rewrites a training graph in place for quantization-aware training.

  Args:
    graph: the tf.Graph (default: the default graph), after the loss and
      before the optimizer, so gradients see the FakeQuant ops.
    quant_delay: steps (of `fake_quantization_step`) trained in float before
      the FakeQuant ops take effect; ranges are learned from the start.
    weight_bits, activation_bits: 8 (the only supported value).
    freeze_bn_delay: None (batch statistics throughout, as the original's
      create_training_graph and the object-detection builder), or the step
      from which batch norms use their moving statistics, frozen.

  Returns:
    The number of FakeQuant insertions.
  """
  return _create_graph(graph, True, weight_bits, activation_bits,
                       quant_delay, freeze_bn_delay)


def create_eval_graph(graph=None, weight_bits=8, activation_bits=8):
  """Rewrites an evaluation / export graph in place: batch norms folded with
  their moving statistics, FakeQuant ops reading the learned ranges.

  Returns:
    The number of FakeQuant insertions.
  """
  return _create_graph(graph, False, weight_bits, activation_bits)
