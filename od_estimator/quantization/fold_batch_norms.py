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
result equals batch normalization with batch statistics. The original froze
the statistics after `freeze_bn_delay` steps only through its experimental
API; its `create_training_graph` (and the object-detection builder) used
None, the one setting supported here.
"""
import collections

import tensorflow as tf

from od_estimator.quantization import graph_edit

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
  """The moving mean (1) or variance (2) that a training batch norm updates.

  Found through its moving-average update `Sub(moving, batch_statistic)`.
  """
  batch_stat = bn_op.outputs[output_index]
  for op in batch_stat.consumers():
    if op.type == 'Sub' and op.inputs[1] is batch_stat:
      return op.inputs[0]
  raise ValueError('Folding batch norm %s in training: no moving-average '
                   'update of its output %d found' % (bn_op.name, output_index))


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


def _fold(match, is_training):
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
          moving_mean = _moving_statistic(bn_op, 1)
          moving_variance = _moving_statistic(bn_op, 2)
          recip_sigma_mv = tf.math.rsqrt(moving_variance + match.epsilon)
          recip_sigma = tf.math.rsqrt(variance + match.epsilon)
          correction_scale = tf.identity(
              tf.divide(recip_sigma_mv, recip_sigma, name='scale_compute'),
              name='correction_scale')
          correction_recip = tf.math.reciprocal(
              correction_scale, name='reciprocal_compute')
          # Non-zero only once statistics are frozen (freeze_bn_delay).
          correction_offset = tf.zeros_like(correction_scale,
                                            name='correction_offset')
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
    freeze_batch_norm_delay: must be None, as in the original's
      create_training_graph.

  Returns:
    The number of batch norms folded.
  """
  if freeze_batch_norm_delay is not None:
    raise ValueError('freeze_batch_norm_delay=%r is not supported; only None '
                     '(batch statistics throughout training, as the '
                     'original\'s create_training_graph)'
                     % (freeze_batch_norm_delay,))
  matches = find_batch_norms(graph)
  with graph.as_default():
    for match in matches:
      _fold(match, is_training)
  return len(matches)
