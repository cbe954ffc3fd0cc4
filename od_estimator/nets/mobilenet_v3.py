"""MobileNet v3 (https://arxiv.org/abs/1905.02244) and MobileNet EdgeTPU.

Conv defs of the tf-slim model zoo's V3 large, V3 small and EdgeTPU nets,
built by mobilenet_v2.mobilenet_base, so variables keep the original names:
`MobilenetV3/Conv/weights`, `MobilenetV3/expanded_conv_3/squeeze_excite/
Conv/biases`, `MobilenetEdgeTPU/expanded_conv_1/expand/weights` (a 3x3
"fused" expansion), ... . End points are those of mobilenet_v2: 'layer_<n>'
and 'layer_<n>/{expansion,depthwise}_output'.

use_explicit_padding pads the input of each strided or wide conv (fused
expansion, 5x5 depthwise) by its own kernel, so map sizes equal 'SAME' ones.
The original padded whole v3 blocks by the block's kernel instead, which
grew the maps (or failed for EdgeTPU); no released config sets it.
"""
import numpy as np
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v2

Conv = mobilenet_v2.Conv
ExpandedConv = mobilenet_v2.ExpandedConv
GlobalPool = mobilenet_v2.GlobalPool

# Same arg_scope as MobileNet v2 (initializer, L2 on full convs, batch norm).
training_scope = mobilenet_v2.training_scope

# Squeeze-excite bottleneck: a quarter of the channels, a multiple of 8.
_SE_SQUEEZE_FACTOR = 4
_SE_DIVISOR = 8


def hard_swish(x):
  """x * relu6(x + 3) / 6, a cheap piecewise approximation of swish."""
  with tf.name_scope('hard_swish'):
    return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1. / 6.)


def hard_sigmoid(x):
  """relu6(x + 3) / 6, with the rounded 1/6 the released models use."""
  return tf.nn.relu6(x + 3) * 0.16667


def squeeze_excite(net):
  """Rescales channels by a gate computed from their spatial mean.

  Variables, with biases and without batch norm: `squeeze_excite/Conv`
  (c -> c / 4 rounded to a multiple of 8, ReLU) and `squeeze_excite/Conv_1`
  (back to c, hard sigmoid).

  Args:
    net: [batch, height, width, channels] tensor with static channels.

  Returns:
    Tensor of the same shape.
  """
  with tf.compat.v1.variable_scope('squeeze_excite'):
    channels = net.shape.as_list()[3]
    squeezed = mobilenet_v2._make_divisible(  # pylint: disable=protected-access
        channels / _SE_SQUEEZE_FACTOR, _SE_DIVISOR)
    # reduce_mean rather than a pool keeps dynamic image sizes working.
    pooled = tf.reduce_mean(net, axis=[1, 2], keepdims=True)
    squeeze = slim.conv2d(pooled, squeezed, [1, 1], normalizer_fn=None,
                          activation_fn=tf.nn.relu, scope='Conv')
    gate = slim.conv2d(squeeze, channels, [1, 1], normalizer_fn=None,
                       activation_fn=hard_sigmoid, scope='Conv_1')
    return net * gate


def _block(expansion, depth, kernel, stride=1, activation_fn=tf.nn.relu,
           se=False, **kwargs):
  """An inverted residual block with a kernel x kernel depthwise conv."""
  return ExpandedConv(stride=stride, depth=depth, expansion=expansion,
                      kernel=(kernel, kernel), activation_fn=activation_fn,
                      squeeze_excite=squeeze_excite if se else None,
                      **kwargs)


def _fused(expansion, depth, stride=1):
  """A fused block: 3x3 full expansion conv and linear 1x1 projection."""
  return _block(expansion, depth, 3, stride=stride, fused=True)


def _with_reduced_depth(conv_defs, first, last, factor=0.5):
  """Scales the depth of conv_defs[first..last] (inclusive, 0-based)."""
  return [layer._replace(depth=int(round(layer.depth * factor)))
          if first <= i <= last else layer
          for i, layer in enumerate(conv_defs)]


_HS = hard_swish

V3_LARGE = [
    Conv(kernel=[3, 3], stride=2, depth=16, activation_fn=_HS),
    _block(1, 16, 3),
    _block(4, 24, 3, stride=2),
    _block(3, 24, 3),
    _block(3, 40, 5, stride=2, se=True),
    _block(3, 40, 5, se=True),
    _block(3, 40, 5, se=True),
    _block(6, 80, 3, stride=2, activation_fn=_HS),
    _block(2.5, 80, 3, activation_fn=_HS),
    _block(184 / 80, 80, 3, activation_fn=_HS),
    _block(184 / 80, 80, 3, activation_fn=_HS),
    _block(6, 112, 3, activation_fn=_HS, se=True),
    _block(6, 112, 3, activation_fn=_HS, se=True),
    _block(6, 160, 5, stride=2, activation_fn=_HS, se=True),
    _block(6, 160, 5, activation_fn=_HS, se=True),
    _block(6, 160, 5, activation_fn=_HS, se=True),
    Conv(kernel=[1, 1], stride=1, depth=960, activation_fn=_HS),
    GlobalPool(),
    Conv(kernel=[1, 1], stride=1, depth=1280, activation_fn=_HS,
         use_batch_norm=False),
]

V3_SMALL = [
    Conv(kernel=[3, 3], stride=2, depth=16, activation_fn=_HS),
    _block(1, 16, 3, stride=2, se=True),
    _block(72 / 16, 24, 3, stride=2),
    _block(88 / 24, 24, 3),
    _block(4, 40, 5, stride=2, activation_fn=_HS, se=True),
    _block(6, 40, 5, activation_fn=_HS, se=True),
    _block(6, 40, 5, activation_fn=_HS, se=True),
    _block(3, 48, 5, activation_fn=_HS, se=True),
    _block(3, 48, 5, activation_fn=_HS, se=True),
    _block(6, 96, 5, stride=2, activation_fn=_HS, se=True),
    _block(6, 96, 5, activation_fn=_HS, se=True),
    _block(6, 96, 5, activation_fn=_HS, se=True),
    Conv(kernel=[1, 1], stride=1, depth=576, activation_fn=_HS),
    GlobalPool(),
    Conv(kernel=[1, 1], stride=1, depth=1024, activation_fn=_HS,
         use_batch_norm=False),
]

# EdgeTPU-friendly: full (fused) convs instead of depthwise ones early on,
# ReLU throughout, no squeeze-excite. Its first fused block does not expand,
# so it is a bare projection.
V3_EDGETPU = (
    [Conv(kernel=[3, 3], stride=2, depth=32), _fused(1, 16),
     _fused(8, 32, stride=2)] + [_fused(4, 32)] * 3 +
    [_fused(8, 48, stride=2)] + [_fused(4, 48)] * 3 +
    [_block(8, 96, 3, stride=2)] + [_block(4, 96, 3)] * 3 +
    [_block(8, 96, 3, residual=False)] + [_block(4, 96, 3)] * 3 +
    [_block(8, 160, 5, stride=2)] + [_block(4, 160, 5)] * 3 +
    [_block(8, 192, 3), Conv(kernel=[1, 1], stride=1, depth=1280)])

# The SSD extractors' variants: the last stage (layers 14-17 of large, 10-13
# of small) at half depth.
V3_LARGE_DETECTION = _with_reduced_depth(V3_LARGE, 13, 16)
V3_SMALL_DETECTION = _with_reduced_depth(V3_SMALL, 9, 12)


def mobilenet_base(input_tensor, conv_defs=None, scope='MobilenetV3',
                   **kwargs):
  """Builds MobileNet v3 (large unless `conv_defs` says otherwise).

  Layers whose conv def names no activation use ReLU. Use scope
  'MobilenetEdgeTPU' with V3_EDGETPU to match EdgeTPU checkpoints.

  Args:
    input_tensor: [batch, height, width, channels] float tensor.
    conv_defs: list of Conv / ExpandedConv / GlobalPool; default V3_LARGE.
    scope: variable scope (string or VariableScope).
    **kwargs: passed on to mobilenet_v2.mobilenet_base (depth_multiplier,
      min_depth, final_endpoint, output_stride, use_explicit_padding,
      is_training, reuse, ...).

  Returns:
    net: output tensor of the last layer built.
    end_points: dict from end point name to tensor.
  """
  kwargs.setdefault('activation_fn', tf.nn.relu)
  return mobilenet_v2.mobilenet_base(
      input_tensor, conv_defs=V3_LARGE if conv_defs is None else conv_defs,
      scope=scope, **kwargs)
