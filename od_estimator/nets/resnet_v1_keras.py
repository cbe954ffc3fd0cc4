"""ResNet v1 laid out as the Keras application, built with tf-slim layers.

The original's TF2 detectors use `tf.keras.applications` ResNets with their
layers overridden for detection: convolutions without bias, 'same' padding
except fixed padding before strided KxK convs, 'same' max pooling, and
batch norm / activation / initializer / regularizer from the detector's
hyperparameters. This is not slim's resnet_v1: each stage's stride is on
the first block's 1x1 conv and shortcut (slim strides the last block's 3x3
conv), so the two compute different things. Variables take the Keras
names, below the caller's variable scope:

  conv1_conv/kernel, conv1_bn/{gamma,beta,moving_mean,moving_variance}
  conv<s>_block<b>_<k>_{conv,bn}/...   k = 0 (shortcut), 1, 2, 3

Layer hyperparameters come from the caller's arg_scope: slim.conv2d for the
initializer and regularizer, slim.batch_norm for the batch norm parameters.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import mobilenet_v1
from od_estimator.utils import keras_names

# Blocks per stage (conv2 .. conv5).
_STAGE_BLOCKS = {
    'resnet_v1_50': (3, 4, 6, 3),
    'resnet_v1_101': (3, 4, 23, 3),
    'resnet_v1_152': (3, 8, 36, 3),
}
# Bottleneck depth of each stage; its blocks output 4 times as many.
_STAGE_DEPTHS = (64, 128, 256, 512)
# Batch norm of the Keras ResNet without a hyperparams override.
_BATCH_NORM_DECAY = 0.997
_BATCH_NORM_EPSILON = 1e-5


def output_layer_names(model_name):
  """End points of stages conv2..conv5, e.g. 'conv4_block6_out'.

  Raises:
    ValueError: for an unknown model name.
  """
  if model_name not in _STAGE_BLOCKS:
    raise ValueError('Unknown ResNet %r; expected one of %s.' % (
        model_name, ', '.join(sorted(_STAGE_BLOCKS))))
  return ['conv%d_block%d_out' % (stage, blocks) for stage, blocks in
          enumerate(_STAGE_BLOCKS[model_name], start=2)]


def _keras_name(name):
  """'<layer>/weights' -> '<layer>/kernel'; batch norm names are kept."""
  return '%s/%s' % keras_names.split_variable(name)


class _Layers:
  """Conv, batch norm and activation layers with the detector's settings."""

  def __init__(self, depth_multiplier, min_depth, activation_fn,
               use_batch_norm):
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth
    self._activation_fn = activation_fn or tf.identity
    self._use_batch_norm = use_batch_norm

  def conv(self, net, filters, kernel_size, name, stride=1):
    """Conv without bias; fixed padding before strided KxK kernels."""
    padding = 'SAME'
    if stride > 1 and kernel_size > 1:
      net = mobilenet_v1.fixed_padding(net, [kernel_size, kernel_size])
      padding = 'VALID'
    depth = max(int(filters * self._depth_multiplier), self._min_depth)
    return slim.conv2d(net, depth, [kernel_size, kernel_size],
                       stride=stride, padding=padding, activation_fn=None,
                       normalizer_fn=None, biases_initializer=None,
                       scope=name + '_conv')

  def batch_norm(self, net, name):
    if not self._use_batch_norm:
      return net
    return slim.batch_norm(net, activation_fn=None, scope=name + '_bn')

  def activation(self, net, name):
    with tf.name_scope(name):  # The Keras layer's name, for the ops.
      return self._activation_fn(net)

  def conv_bn(self, net, filters, kernel_size, name, stride=1, act=True):
    net = self.batch_norm(self.conv(net, filters, kernel_size, name, stride),
                          name)
    return self.activation(net, name + '_relu') if act else net


def _block(layers, net, filters, stride, conv_shortcut, name):
  """A bottleneck block (the Keras application's `block1`)."""
  if conv_shortcut:
    shortcut = layers.conv_bn(net, 4 * filters, 1, name + '_0', stride,
                              act=False)
  else:
    shortcut = net
  net = layers.conv_bn(net, filters, 1, name + '_1', stride)
  net = layers.conv_bn(net, filters, 3, name + '_2')
  net = layers.conv_bn(net, 4 * filters, 1, name + '_3', act=False)
  return layers.activation(shortcut + net, name + '_out')


def default_arg_scope(weight_decay):
  """The original's Keras ResNet layers without a hyperparams override.

  Keras' l2(weight_decay) is sum(w**2) * weight_decay, i.e. slim's
  l2_regularizer at twice the scale; the initializer is variance scaling
  with scale 1; batch norm has decay 0.997, epsilon 1e-5 and a scale.

  Args:
    weight_decay: the Keras ResNet's weight_decay.
  """
  with slim.arg_scope(
      [slim.conv2d],
      weights_regularizer=slim.l2_regularizer(2 * weight_decay),
      weights_initializer=tf.compat.v1.variance_scaling_initializer()), \
      slim.arg_scope([slim.batch_norm], decay=_BATCH_NORM_DECAY,
                     epsilon=_BATCH_NORM_EPSILON, center=True,
                     scale=True) as scope:
    return scope


def resnet_v1(inputs, model_name='resnet_v1_50', depth_multiplier=1.0,
              min_depth=8, activation_fn=tf.nn.relu, use_batch_norm=True,
              first_stage=1, last_stage=5):
  """Builds the ResNet trunk (no classification head), or some of its stages.

  Args:
    inputs: [batch, height, width, channels] float32 images, or with
      first_stage > 1 the output of stage first_stage - 1.
    model_name: 'resnet_v1_50', 'resnet_v1_101' or 'resnet_v1_152'.
    depth_multiplier: every conv has max(int(filters * depth_multiplier),
      min_depth) filters.
    min_depth: see depth_multiplier.
    activation_fn: activation after batch norm (None: none).
    use_batch_norm: batch-normalize every conv.
    first_stage: first stage built: 1 (conv1 and pool1) to 5.
    last_stage: last stage built, first_stage to 5.

  Returns:
    dict {end point: tensor} of the stages built: 'conv1_relu', 'pool1_pool'
    and 'conv<s>_block<b>_out' for every block; stage s has stride 2**s
    (conv2: 4 ... conv5: 32).

  Raises:
    ValueError: for an unknown model name or stages out of 1..5.
  """
  output_layer_names(model_name)  # Validates the name.
  if not 1 <= first_stage <= last_stage <= 5:
    raise ValueError('Stages %d to %d are not within 1 to 5.' % (
        first_stage, last_stage))
  layers = _Layers(depth_multiplier, min_depth, activation_fn,
                   use_batch_norm)
  end_points = {}
  net = inputs
  with keras_names.renamed_variables(_keras_name):
    if first_stage == 1:
      net = layers.conv_bn(net, 64, 7, 'conv1', stride=2)
      end_points['conv1_relu'] = net
      net = slim.max_pool2d(net, [3, 3], stride=2, padding='SAME',
                            scope='pool1_pool')
      end_points['pool1_pool'] = net
    for stage, (blocks, filters) in enumerate(
        zip(_STAGE_BLOCKS[model_name], _STAGE_DEPTHS), start=2):
      if not first_stage <= stage <= last_stage:
        continue
      for block in range(1, blocks + 1):
        name = 'conv%d_block%d' % (stage, block)
        first = block == 1
        net = _block(layers, net, filters,
                     stride=2 if first and stage > 2 else 1,
                     conv_shortcut=first, name=name)
        end_points[name + '_out'] = net
  return end_points
