"""SSD feature extractors on MobileDet backbones ('ssd_mobiledet_*').

MobileDets (Xiong, Liu et al. 2020, https://arxiv.org/abs/2004.14525) are
searched per hardware target: 'cpu', 'dsp', 'edgetpu' and 'gpu'. Each
backbone is a stem convolution followed by blocks of four kinds:

  * IBNNoExpansion: depthwise KxK, optional squeeze-excite, 1x1 projection.
  * IBN (inverted bottleneck): 1x1 expansion, depthwise KxK, optional
    squeeze-excite, 1x1 projection, optional residual.
  * FusedConv: full KxK expansion, optional squeeze-excite, 1x1 projection,
    optional residual.
  * TuckerConv: 1x1 to a reduced rank, full KxK to another rank, 1x1
    projection, optional residual.

Variables live under `<meta-arch scope>/MobileDet<Target>/` with the names
of the model-zoo checkpoints: the stem `Conv`, block scopes numbered by kind
in build order (`IBN`, `IBN_1`, ..., `FusedConv_3`, `TuckerConv`) holding
`Conv`, `Conv_1`, ... for full convolutions, `SeparableConv2d` for the
depthwise one and `SqueezeExcite/Conv{,_1}`; then the SSD layers on top of
end point C5, e.g. `C5_2_Conv2d_2_3x3_s2_512`.

Unlike the original, the backbone's batch norm mode follows the
meta-architecture (so model.ssd.freeze_batchnorm applies to it too), and
squeeze-excite also works on images of dynamic size.
"""
import dataclasses
from typing import Callable, Tuple

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import feature_map_generators
from od_estimator.models import ssd_feature_extractor

# The backbone's own hyperparameters (conv_hyperparams apply to the SSD
# layers only).
_WEIGHT_DECAY = 4e-5
_BATCH_NORM_DECAY = 0.99
_BATCH_NORM_EPSILON = 0.01

# Guard of the original on the unpadded input (total stride 32).
_MIN_IMAGE_DIM = 33

# Feature maps: end points C4 (stride 16) and C5 (stride 32), then stride-2
# SSD layers of these nominal depths.
_FROM_LAYER = ('C4', 'C5', '', '', '', '')
_LAYER_DEPTH = (-1, -1, 512, 256, 256, 128)

# Std of a unit normal truncated at two standard deviations: dividing by it
# makes the truncated initializer's std the intended one.
_TRUNCATED_NORMAL_STD = 0.87962566103423978


def _round_filters(filters, multiplier, base=8):
  """filters * multiplier rounded half up to a multiple of base (>= base)."""
  rounded = int(int(filters) * multiplier / base + 0.5) * base
  return max(rounded, base)


def _swish6(net):
  """Hard swish: x * relu6(x + 3) / 6."""
  with tf.name_scope('swish6'):
    return net * tf.nn.relu6(net + 3.0) * (1.0 / 6.0)


@dataclasses.dataclass(frozen=True)
class Block:
  """One backbone block; filters are nominal (before the multiplier).

  Attributes:
    kind: 'ibn_no_expansion', 'ibn', 'fused' or 'tucker'.
    filters: output channels.
    expansion: ibn / fused: hidden channels = input channels * expansion.
    kernel_size: the spatial (depthwise or full) convolution's size.
    stride: the spatial convolution's stride.
    residual: add the block's input to its output.
    input_rank_ratio: tucker: first 1x1 to this fraction of the input.
    output_rank_ratio: tucker: KxK conv to this fraction of `filters`.
  """
  kind: str
  filters: int
  expansion: int = 8
  kernel_size: int = 3
  stride: int = 1
  residual: bool = True
  input_rank_ratio: float = 0.25
  output_rank_ratio: float = 0.25


def _ibn(filters, expansion, kernel_size=3, stride=1, residual=True):
  return Block('ibn', filters, expansion, kernel_size, stride, residual)


def _fused(filters, expansion, kernel_size=3, stride=1, residual=True):
  return Block('fused', filters, expansion, kernel_size, stride, residual)


def _tucker(filters, input_rank_ratio, output_rank_ratio, residual=True):
  return Block('tucker', filters, residual=residual,
               input_rank_ratio=input_rank_ratio,
               output_rank_ratio=output_rank_ratio)


@dataclasses.dataclass(frozen=True)
class Architecture:
  """A MobileDet backbone.

  Attributes:
    stem_filters: channels of the stride-2 3x3 stem convolution.
    activation_fn: activation of every layer but the projections.
    use_squeeze_excite: squeeze-excite in ibn, ibn_no_expansion and fused
      blocks.
    stages: (end point name, blocks) pairs; the end point is the output of
      the stage's last block.
  """
  stem_filters: int
  activation_fn: Callable
  use_squeeze_excite: bool
  stages: Tuple[Tuple[str, Tuple[Block, ...]], ...]


# Block lists as published with the model-zoo checkpoints. The first block
# of a stage changes the resolution or the width, so it has no residual.
MOBILEDET_CPU = Architecture(
    stem_filters=16, activation_fn=_swish6, use_squeeze_excite=True, stages=(
        ('C1', (Block('ibn_no_expansion', 8),)),
        ('C2', (_ibn(16, 4, stride=2, residual=False),)),
        ('C3', (_ibn(32, 8, stride=2, residual=False), _ibn(32, 4),
                _ibn(32, 4), _ibn(32, 4))),
        ('C4', (_ibn(72, 8, kernel_size=5, stride=2, residual=False),
                _ibn(72, 8), _ibn(72, 4, kernel_size=5), _ibn(72, 4),
                _ibn(72, 8, residual=False), _ibn(72, 8), _ibn(72, 8),
                _ibn(72, 8))),
        ('C5', (_ibn(104, 8, kernel_size=5, stride=2, residual=False),
                _ibn(104, 4, kernel_size=5), _ibn(104, 4, kernel_size=5),
                _ibn(104, 4), _ibn(144, 8, residual=False))),
    ))

MOBILEDET_DSP = Architecture(
    stem_filters=32, activation_fn=tf.nn.relu6, use_squeeze_excite=False,
    stages=(
        ('C1', (Block('ibn_no_expansion', 24),)),
        ('C2', (_fused(32, 4, stride=2, residual=False), _fused(32, 4),
                _ibn(32, 4), _tucker(32, 0.25, 0.75))),
        ('C3', (_fused(64, 8, stride=2, residual=False), _ibn(64, 4),
                _fused(64, 4), _fused(64, 4))),
        ('C4', (_fused(120, 8, stride=2, residual=False), _ibn(120, 4),
                _ibn(120, 8), _ibn(120, 8), _fused(144, 8, residual=False),
                _ibn(144, 8), _ibn(144, 8), _ibn(144, 8))),
        ('C5', (_ibn(160, 4, stride=2, residual=False), _ibn(160, 4),
                _fused(160, 4), _tucker(160, 0.75, 0.75),
                _ibn(240, 8, residual=False))),
    ))

MOBILEDET_EDGETPU = Architecture(
    stem_filters=32, activation_fn=tf.nn.relu6, use_squeeze_excite=False,
    stages=(
        ('C1', (_tucker(16, 0.25, 0.75, residual=False),)),
        ('C2', (_fused(16, 8, stride=2, residual=False), _fused(16, 4),
                _fused(16, 8), _fused(16, 4))),
        ('C3', (_fused(40, 8, kernel_size=5, stride=2, residual=False),
                _fused(40, 4), _fused(40, 4), _fused(40, 4))),
        ('C4', (_ibn(72, 8, stride=2, residual=False), _ibn(72, 8),
                _fused(72, 4), _fused(72, 4),
                _ibn(96, 8, kernel_size=5, residual=False),
                _ibn(96, 8, kernel_size=5), _ibn(96, 8), _ibn(96, 8))),
        ('C5', (_ibn(120, 8, kernel_size=5, stride=2, residual=False),
                _ibn(120, 8), _ibn(120, 4, kernel_size=5), _ibn(120, 8),
                _ibn(384, 8, kernel_size=5, residual=False))),
    ))

MOBILEDET_GPU = Architecture(
    stem_filters=32, activation_fn=tf.nn.relu6, use_squeeze_excite=False,
    stages=(
        ('C1', (_tucker(16, 0.25, 0.25, residual=False),)),
        ('C2', (_fused(32, 8, stride=2, residual=False),
                _tucker(32, 0.25, 0.25), _tucker(32, 0.25, 0.25),
                _tucker(32, 0.25, 0.25))),
        ('C3', (_fused(64, 8, stride=2, residual=False), _fused(64, 8),
                _fused(64, 8), _fused(64, 4))),
        ('C4', (_fused(128, 8, stride=2, residual=False), _fused(128, 4),
                _fused(128, 4), _fused(128, 4),
                _fused(128, 8, residual=False), _fused(128, 8),
                _fused(128, 8), _fused(128, 8))),
        ('C5', (_fused(128, 4, stride=2, residual=False), _fused(128, 4),
                _fused(128, 4), _fused(128, 4),
                _ibn(384, 8, residual=False))),
    ))


def _conv(net, filters, kernel_size, activation_fn, stride=1,
          use_batch_norm=True):
  """A full convolution (default scope 'Conv', numbered in its scope)."""
  return slim.conv2d(
      net, filters, kernel_size, stride=stride, padding='SAME',
      activation_fn=activation_fn,
      normalizer_fn=slim.batch_norm if use_batch_norm else None,
      weights_initializer=tf.compat.v1.initializers.he_normal(),
      weights_regularizer=slim.l2_regularizer(_WEIGHT_DECAY))


def _depthwise_conv(net, kernel_size, stride, activation_fn):
  """A batch-normalized depthwise convolution (scope 'SeparableConv2d')."""
  # He initialization with the depthwise kernel's true fan-in, k * k.
  stddev = (2.0 / kernel_size**2)**0.5 / _TRUNCATED_NORMAL_STD
  return slim.separable_conv2d(
      net, None, kernel_size, depth_multiplier=1, stride=stride,
      padding='SAME', activation_fn=activation_fn,
      normalizer_fn=slim.batch_norm,
      weights_initializer=tf.compat.v1.initializers.truncated_normal(
          stddev=stddev),
      weights_regularizer=slim.l2_regularizer(_WEIGHT_DECAY))


def _squeeze_excite(net, hidden_filters, activation_fn):
  """Scales channels by a gate computed from their spatial means."""
  with tf.compat.v1.variable_scope(None, default_name='SqueezeExcite'):
    height, width = net.shape.as_list()[1:3]
    if height is not None and width is not None:
      pooled = slim.avg_pool2d(net, [height, width], stride=1,
                               padding='VALID')
    else:
      pooled = tf.reduce_mean(net, axis=[1, 2], keepdims=True)
    hidden = _conv(pooled, hidden_filters, 1, activation_fn,
                   use_batch_norm=False)
    gate = _conv(hidden, int(net.shape[-1]), 1, tf.sigmoid,
                 use_batch_norm=False)
    return gate * net


def _project(net, filters, shortcut, residual):
  # Identity rather than no activation: quantization rewrites expect one.
  net = _conv(net, filters, 1, tf.identity)
  return net + shortcut if residual else net


def _ibn_no_expansion_block(net, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='IBNNoExpansion'):
    net = _depthwise_conv(net, block.kernel_size, block.stride, activation_fn)
    if use_se:
      net = _squeeze_excite(net, _round_filters(net.shape[-1], 0.25),
                            activation_fn)
    return _project(net, filters, None, residual=False)


def _ibn_block(net, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='IBN'):
    shortcut = net
    expanded = int(net.shape[-1]) * block.expansion
    net = _conv(net, expanded, 1, activation_fn)
    net = _depthwise_conv(net, block.kernel_size, block.stride, activation_fn)
    if use_se:
      net = _squeeze_excite(net, _round_filters(expanded, 0.25),
                            activation_fn)
    return _project(net, filters, shortcut, block.residual)


def _fused_block(net, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='FusedConv'):
    shortcut = net
    expanded = int(net.shape[-1]) * block.expansion
    net = _conv(net, expanded, block.kernel_size, activation_fn,
                stride=block.stride)
    if use_se:
      net = _squeeze_excite(net, _round_filters(expanded, 0.25),
                            activation_fn)
    return _project(net, filters, shortcut, block.residual)


def _tucker_block(net, block, filters, activation_fn, use_se):
  del use_se  # Tucker blocks have no squeeze-excite.
  with tf.compat.v1.variable_scope(None, default_name='TuckerConv'):
    shortcut = net
    net = _conv(net, _round_filters(net.shape[-1], block.input_rank_ratio), 1,
                activation_fn)
    net = _conv(net, _round_filters(filters, block.output_rank_ratio),
                block.kernel_size, activation_fn, stride=block.stride)
    return _project(net, filters, shortcut, block.residual)


_BLOCK_FNS = {
    'ibn_no_expansion': _ibn_no_expansion_block,
    'ibn': _ibn_block,
    'fused': _fused_block,
    'tucker': _tucker_block,
}


def mobiledet_base(images, architecture, multiplier=1.0):
  """Builds a MobileDet backbone in the current variable scope.

  Batch norm mode and update collection come from the caller's
  slim.arg_scope; decay and epsilon are set here.

  Args:
    images: [batch, height, width, 3] float32, values in [-1, 1].
    architecture: an Architecture, e.g. MOBILEDET_CPU.
    multiplier: float width multiplier; channel counts are rounded to
      multiples of 8.

  Returns:
    dict {'C1'...'C5': [batch, h, w, d] tensor}, strides 2 to 32.
  """
  activation_fn = architecture.activation_fn
  end_points = {}
  with slim.arg_scope([slim.batch_norm], decay=_BATCH_NORM_DECAY,
                      epsilon=_BATCH_NORM_EPSILON, center=True, scale=True):
    net = _conv(images, _round_filters(architecture.stem_filters, multiplier),
                3, activation_fn, stride=2)
    for end_point, blocks in architecture.stages:
      for block in blocks:
        net = _BLOCK_FNS[block.kind](
            net, block, _round_filters(block.filters, multiplier),
            activation_fn, architecture.use_squeeze_excite)
      end_points[end_point] = net
  return end_points


class SSDMobileDetFeatureExtractorBase(
    ssd_feature_extractor.SymmetricRangeInputsMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """SSD maps from end points C4 and C5 plus stride-2 layers.

  Subclasses set the config type (_TYPE), the variable scope (_SCOPE) and
  the backbone (_ARCHITECTURE).
  Constructor arguments are those of SSDFeatureExtractor.
  """
  _TYPE = None
  _SCOPE = None
  _ARCHITECTURE = None

  def _check_arguments(self):
    """Rejects the options MobileDet cannot honour.

    Raises:
      ValueError: for use_explicit_padding,
        override_base_feature_extractor_hyperparams (the backbone has fixed
        hyperparameters) or num_layers outside [1, 6].
    """
    field = 'model.ssd.feature_extractor.'
    if self._use_explicit_padding:
      raise errors.UserInputError(
          '%suse_explicit_padding is not supported by %r (MobileDet uses '
          "'SAME' padding); set it to false." % (field, self._TYPE))
    if self._override_base_feature_extractor_hyperparams:
      raise errors.UserInputError(
          '%soverride_base_feature_extractor_hyperparams is not supported by '
          '%r: the MobileDet backbone has fixed hyperparameters and '
          'conv_hyperparams apply to the SSD layers only; set it to false.'
          % (field, self._TYPE))
    if not 1 <= self._num_layers <= len(_FROM_LAYER):
      raise errors.UserInputError(
          '%snum_layers must be in [1, %d] for %r, got %d.' %
          (field, len(_FROM_LAYER), self._TYPE,
                        self._num_layers))

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33.

    Returns:
      List of num_layers [batch, h_i, w_i, d_i] float32 feature maps,
      strides 16, 32, 64, ...

    Raises:
      ValueError: if the static image size is below 33.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        _MIN_IMAGE_DIM, preprocessed_inputs)
    images = feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                    self._pad_to_multiple)
    with tf.compat.v1.variable_scope(self._SCOPE, reuse=self._reuse_weights):
      end_points = mobiledet_base(images, self._ARCHITECTURE,
                                  multiplier=self._depth_multiplier)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        return self._multi_resolution_feature_maps(
            {name: end_points[name] for name in ('C4', 'C5')},
            _FROM_LAYER[:self._num_layers], _LAYER_DEPTH[:self._num_layers])


class SSDMobileDetCPUFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """Config type 'ssd_mobiledet_cpu'; variables under .../MobileDetCPU/."""
  _TYPE = 'ssd_mobiledet_cpu'
  _SCOPE = 'MobileDetCPU'
  _ARCHITECTURE = MOBILEDET_CPU


class SSDMobileDetDSPFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """Config type 'ssd_mobiledet_dsp'; variables under .../MobileDetDSP/."""
  _TYPE = 'ssd_mobiledet_dsp'
  _SCOPE = 'MobileDetDSP'
  _ARCHITECTURE = MOBILEDET_DSP


class SSDMobileDetEdgeTPUFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """Config type 'ssd_mobiledet_edgetpu'; under .../MobileDetEdgeTPU/."""
  _TYPE = 'ssd_mobiledet_edgetpu'
  _SCOPE = 'MobileDetEdgeTPU'
  _ARCHITECTURE = MOBILEDET_EDGETPU


class SSDMobileDetGPUFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """Config type 'ssd_mobiledet_gpu'; variables under .../MobileDetGPU/."""
  _TYPE = 'ssd_mobiledet_gpu'
  _SCOPE = 'MobileDetGPU'
  _ARCHITECTURE = MOBILEDET_GPU
