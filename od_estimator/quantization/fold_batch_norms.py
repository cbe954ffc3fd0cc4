"""Folds fused batch norms into the preceding Conv2D / depthwise conv.

Also folded beyond the original: a batch norm reached from the layer through
one Identity.

The folded layer computes `conv(x, w * gamma / sigma) + (beta - mu * gamma /
sigma)` (ops `<scope>/mul_fold`, `<scope>/<Layer>_Fold`, `<scope>/add_fold`,
`<scope>/BatchNorm_Fold/bias`, as the original named them), and the batch
norm's consumers read `add_fold` instead.

Evaluation (batch norm in inference form): mu, sigma are the moving
statistics. Training (batch norm in training form): the batch norm op stays
in the graph, so its moving averages keep updating, and the fold uses its
batch mean and batch variance (with the fused op's Bessel correction undone).
As in the original, the weights are first scaled by
`correction_scale = sigma_batch / sigma_moving`, so the weights that get
quantized are folded with the slowly-changing moving statistics, and the
layer output is scaled back by `1 / correction_scale` (`post_conv_mul`); the
result equals batch normalization with batch statistics. With
`freeze_batch_norm_delay` (the original's experimental API; its
create_training_graph and the object-detection builder used None) training
switches to the moving statistics, frozen, after that many steps.
"""
import collections

import tensorflow as tf

from od_estimator.quantization import graph_edit
from od_estimator.quantization import quant_ops

_BATCH_NORM_TYPES = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')
_FOLDABLE_TYPES = ('Conv2D', 'DepthwiseConv2dNative')
GRADIENT_OP_TYPE = 'FoldFusedBatchNormGrad'

BatchNormMatch = collections.namedtuple('BatchNormMatch', [
    'layer_op', 'batch_to_space_op', 'bn_op', 'input_tensor', 'weight_tensor',
    'gamma', 'beta', 'epsilon'])


@tf.RegisterGradient(GRADIENT_OP_TYPE)
def _fold_fused_batch_norm_grad(op, unused_grad_y, grad_mean, grad_var,
                                *unused_grads):
  """Gradient through a training batch norm's batch mean and variance.

  The folded training graph reads outputs 1 and 2 of the fused op (batch
  mean, Bessel-corrected batch variance), through which the fused op's own
  gradient does not propagate.
  """
  x = op.inputs[0]
  n = tf.cast(tf.size(x), tf.float32) / tf.cast(tf.size(op.outputs[1]),
                                                tf.float32)
  grad_x = tf.zeros_like(x)
  if grad_mean is not None:
    grad_x += grad_mean / n
  if grad_var is not None:
    grad_x += 2.0 * grad_var * (x - op.outputs[1]) / (n - 1.0)
  return [grad_x] + [None] * (len(op.inputs) - 1)


def find_batch_norms(graph):
  """The fused batch norms directly after a foldable layer, as matches."""
  matches = []
  for bn_op in graph.get_operations():
    if bn_op.type not in _BATCH_NORM_TYPES or graph_edit.is_skipped(bn_op):
      continue
    layer_op = bn_op.inputs[0].op
    if layer_op.type == 'Identity':
      # conv -> Identity (slim normalizer_fn=tf.identity) -> batch norm, as
      # in the weight-shared box predictor's tower; the original left these
      # unfolded (and unquantized), which a fully quantized TFLite model
      # cannot afford.
      layer_op = layer_op.inputs[0].op
    batch_to_space_op = None
    if layer_op.type == 'BatchToSpaceND':
      batch_to_space_op, layer_op = layer_op, layer_op.inputs[0].op
    if layer_op.type not in _FOLDABLE_TYPES or not bn_op.outputs[0].consumers():
      continue
    if bn_op.get_attr('data_format') not in (b'NHWC', 'NHWC'):
      raise ValueError('Folding batch norm %s: only NHWC is supported, not %s'
                       % (bn_op.name, bn_op.get_attr('data_format')))
    matches.append(BatchNormMatch(
        layer_op, batch_to_space_op, bn_op, layer_op.inputs[0],
        layer_op.inputs[1], bn_op.inputs[1], bn_op.inputs[2],
        bn_op.get_attr('epsilon')))
  return matches


def _moving_statistic(bn_op, output_index):
  """The moving mean (1) or variance (2) a training batch norm updates, and
  the `1 - decay` factor of that update.

  Found through its moving-average update `Mul(Sub(moving, batch), 1-decay)`.
  """
  batch_stat = bn_op.outputs[output_index]
  for sub in batch_stat.consumers():
    if sub.type == 'Sub' and sub.inputs[1] is batch_stat:
      for mul in sub.outputs[0].consumers():
        if mul.type == 'Mul':
          return sub.inputs[0], mul.inputs[1]
  raise ValueError('Folding batch norm %s in training: no moving-average '
                   'update of its output %d found' % (bn_op.name, output_index))


def _freeze_moving_averages(bn_op, use_moving_average):
  """Stops the batch norm's moving-average updates once statistics freeze."""
  for index, name in ((1, 'freeze_moving_mean'), (2, 'freeze_moving_var')):
    _, decay = _moving_statistic(bn_op, index)
    consumers = graph_edit.consumer_ops(decay)
    frozen = tf.compat.v1.cond(use_moving_average,
                               lambda: tf.zeros_like(decay),
                               lambda: decay, name=name)
    graph_edit.reroute(frozen, decay, consumers)


def _clone_layer(match, weights):
  """The layer op again, on folded weights (name `<Layer>_Fold`)."""
  op = match.layer_op
  attrs = {name: op.get_attr(name) for name in op.node_def.attr
           if name != 'T' and not name.startswith('_')}
  arg_names = [arg.name for arg in op.op_def.input_arg]
  attrs[arg_names[0]] = match.input_tensor
  attrs[arg_names[1]] = weights
  output = getattr(tf.raw_ops, op.type)(
      name=op.name.split('/')[-1] + '_Fold', **attrs)
  if match.batch_to_space_op is not None:
    b2s = match.batch_to_space_op
    output = tf.compat.v1.batch_to_space_nd(
        output, b2s.inputs[1], b2s.inputs[2],
        name=b2s.name.split('/')[-1] + '_Fold')
  return output


def _depthwise_shape(match, tensor, name):
  # Depthwise filters are [h, w, in, multiplier]: per-channel factors too.
  shape = match.weight_tensor.get_shape().as_list()[2:]
  return tf.reshape(tensor, shape, name=name)


def _corrections(match, mean, variance, freeze_batch_norm_delay):
  """(correction_scale, correction_recip, correction_offset) of training.

  Before the statistics freeze: sigma_b / sigma_mv, its reciprocal, 0 (batch
  statistics). After `freeze_batch_norm_delay` steps of the quantization
  step: sigma_b / sigma_mv, 1, gamma * (mu_b / sigma_b - mu_mv / sigma_mv)
  (moving statistics, whose updates stop).
  """
  bn_op = match.bn_op
  moving_mean, _ = _moving_statistic(bn_op, 1)
  moving_variance, _ = _moving_statistic(bn_op, 2)
  recip_sigma_mv = tf.math.rsqrt(moving_variance + match.epsilon)
  recip_sigma = tf.math.rsqrt(variance + match.epsilon)
  correction_scale = tf.identity(
      tf.divide(recip_sigma_mv, recip_sigma, name='scale_compute'),
      name='correction_scale')
  correction_recip = tf.math.reciprocal(correction_scale,
                                        name='reciprocal_compute')
  correction_offset = tf.multiply(
      match.gamma, mean * recip_sigma - moving_mean * recip_sigma_mv,
      name='offset_compute')
  if freeze_batch_norm_delay is None:
    return (correction_scale, correction_recip,
            tf.zeros_like(correction_offset, name='correction_offset'))
  use_moving_average = tf.greater_equal(
      quant_ops.quantization_step(), freeze_batch_norm_delay,
      name='use_moving_average')
  _freeze_moving_averages(bn_op, use_moving_average)
  correction_recip = tf.compat.v1.cond(
      use_moving_average, lambda: tf.ones_like(correction_recip),
      lambda: correction_recip, name='correction_recip')
  correction_offset = tf.compat.v1.cond(
      use_moving_average, lambda: correction_offset,
      lambda: tf.zeros_like(correction_offset), name='correction_offset')
  return correction_scale, correction_recip, correction_offset


def _fold(match, is_training, freeze_batch_norm_delay):
  graph = match.bn_op.graph
  bn_op = match.bn_op
  scope = graph_edit.context_of(match.layer_op.name)
  prefix = scope + '/' if scope else ''
  train_form = is_training and bn_op.get_attr('is_training')
  with graph.name_scope(prefix or None):
    if bn_op.get_attr('is_training'):
      # Batch statistics; outputs[2] carries Bessel's correction n/(n-1).
      bn_op._set_attr('_gradient_op_type', tf.compat.v1.AttrValue(  # pylint: disable=protected-access
          s=GRADIENT_OP_TYPE.encode()))
      mean = bn_op.outputs[1]
      with graph.name_scope(graph_edit.context_of(bn_op.name) + '/'):
        n = (tf.cast(tf.size(bn_op.inputs[0]), tf.float32) /
             tf.cast(tf.size(mean), tf.float32))
        variance = tf.multiply(bn_op.outputs[2], (n - 1.0) / n,
                               name='Undo_Bessel_Correction')
    else:
      mean, variance = bn_op.inputs[3], bn_op.inputs[4]
    with graph.name_scope(prefix + 'BatchNorm_Fold/'):
      multiplier = match.gamma * tf.math.rsqrt(variance + match.epsilon)
      bias = tf.subtract(match.beta, mean * multiplier, name='bias')
      correction_scale = correction_recip = correction_offset = None
      if train_form:
        with graph.name_scope('batch_norm_correction'):
          correction_scale, correction_recip, correction_offset = (
              _corrections(match, mean, variance, freeze_batch_norm_delay))
      if match.layer_op.type == 'DepthwiseConv2dNative':
        multiplier = _depthwise_shape(match, multiplier, 'scale_reshape')
        if correction_scale is not None:
          correction_scale = _depthwise_shape(match, correction_scale,
                                              'correction_reshape')
    weights = match.weight_tensor
    if correction_scale is not None:
      weights = tf.multiply(correction_scale, weights, name='correction_mult')
    folded_weights = tf.multiply(weights, multiplier, name='mul_fold')
    output = _clone_layer(match, folded_weights)
    if correction_recip is not None:
      output = tf.multiply(correction_recip, output, name='post_conv_mul')
      output = tf.add(output, correction_offset, name='correction_add')
    output = tf.add(output, bias, name='add_fold')
  if graph_edit.reroute(output, bn_op.outputs[0]) == 0:
    raise ValueError('Folding batch norm %s: its output has no consumers'
                     % bn_op.name)


def fold_batch_norms(graph, is_training, freeze_batch_norm_delay=None):
  """Folds every fused batch norm that follows a conv / depthwise conv.

  Args:
    graph: the tf.Graph, edited in place.
    is_training: training rewrite (batch statistics with the correction
      terms) or evaluation rewrite (moving statistics).
    freeze_batch_norm_delay: None (batch statistics throughout training, as
      the original's create_training_graph and the object-detection builder)
      or the value of `fake_quantization_step` from which training uses the
      moving statistics and stops updating them (its experimental API).

  Returns:
    The number of batch norms folded.
  """
  matches = find_batch_norms(graph)
  with graph.as_default():
    for match in matches:
      _fold(match, is_training, freeze_batch_norm_delay)
  return len(matches)
