"""The BiFPN of EfficientDet, with the original's TF2 variable names.

The pyramid first adds the levels above the backbone's (1x1 conv + batch
norm where the depth differs, then 3x3 stride-2 max pooling), then repeats
num_iterations times a top-down pass (nodes '<i>_dn_lvl_<l>', from
max_level - 1 down to min_level) and a bottom-up one ('<i>_up_lvl_<l>',
min_level + 1 up to max_level). Each node resamples its inputs to its level
(a 1x1 conv + batch norm for inputs of another depth, nearest-neighbour
upsampling or max pooling), combines them, and applies activation,
3x3 separable conv and batch norm. The outputs are the last iteration's
nodes of each level. Node k (in the order above, two-digit) names its
variables, below the extractor's scope:

  bifpn/node_<k>/<node>/input_<input node>/1x1_pre_sample/{conv,batchnorm}/...
  bifpn/node_<k>/<node>/combine/bifpn_combine_weights   [num inputs, 1]
  bifpn/node_<k>/<node>/post_combine/separable_conv/
      {depthwise_kernel,pointwise_kernel,bias}
  bifpn/node_<k>/<node>/post_combine/batchnorm/...

The backbone levels are nodes '0_up_lvl_<l>'.
"""
import collections

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import feature_map_generators
from od_estimator.utils import keras_names

# Combine methods: how each weights its inputs (None: plain sum).
COMBINE_METHODS = ('fast_attention', 'attention', 'weighted_sum', 'sum')
_FAST_ATTENTION_EPSILON = 0.0001

Node = collections.namedtuple('Node', ['name', 'level', 'inputs'])


def nodes(min_level, max_level, input_max_level, num_iterations):
  """The nodes built on top of backbone levels min_level..input_max_level.

  Returns:
    List of Node (name, level, input node names), in build order.
  """
  built = []
  for level in range(input_max_level + 1, max_level + 1):
    built.append(Node('0_up_lvl_%d' % level, level,
                      ['0_up_lvl_%d' % (level - 1)]))
  for iteration in range(1, num_iterations + 1):
    for level in reversed(range(min_level, max_level)):
      same_level = '%d_up_lvl_%d' % (iteration - 1, level)
      if level == min_level and iteration > 1:
        same_level = '%d_dn_lvl_%d' % (iteration - 1, level)
      built.append(Node('%d_dn_lvl_%d' % (iteration, level), level,
                        [same_level, built[-1].name]))
    for level in range(min_level + 1, max_level + 1):
      inputs = ['%d_up_lvl_%d' % (iteration - 1, level)]
      if level < max_level:
        inputs.append('%d_dn_lvl_%d' % (iteration, level))
      built.append(Node('%d_up_lvl_%d' % (iteration, level), level,
                        inputs + [built[-1].name]))
  return built


def check_combine_method(combine_method, field):
  """Raises UserInputError for a combine method the BiFPN lacks."""
  if combine_method not in COMBINE_METHODS:
    raise errors.UserInputError('%s: combine_method %r is not supported; '
                                'expected one of %s.' % (
                                    field, combine_method,
                                    ', '.join(COMBINE_METHODS)))


def _combine(inputs, combine_method):
  """Sum of the inputs, weighted as combine_method says."""
  if combine_method == 'sum':
    return tf.add_n(inputs)
  # In the inputs' type (a TPU's bfloat16 scope keeps a float32 variable).
  weights = tf.compat.v1.get_variable(
      'bifpn_combine_weights', shape=[len(inputs), 1],
      dtype=inputs[0].dtype.base_dtype,
      initializer=tf.compat.v1.ones_initializer())
  if combine_method == 'attention':
    weights = tf.nn.softmax(weights, axis=0)
  elif combine_method == 'fast_attention':
    weights = tf.nn.relu(weights)
    weights /= tf.reduce_sum(weights) + _FAST_ATTENTION_EPSILON
  # A weighted sum. The original's matmul of the stacked inputs computes
  # the same (up to rounding), but its gradient has shapes XLA (TPU)
  # cannot know.
  return tf.add_n([net * weights[i, 0] for i, net in enumerate(inputs)])


def _resample(net, from_level, to_level, depth, project,
              use_native_resize_op):
  """1x1 conv + batch norm if `project`, then rescale to to_level."""
  if project:
    net = slim.conv2d(net, depth, [1, 1], activation_fn=None,
                      scope='1x1_pre_sample')
  if from_level < to_level:
    stride = 2 ** (to_level - from_level)
    return slim.max_pool2d(net, [stride + 1] * 2, stride=stride,
                           padding='SAME')
  if from_level > to_level:
    scale = 2 ** (from_level - to_level)
    if use_native_resize_op:
      size = tf.shape(net)[1:3] * scale
      return tf.compat.v1.image.resize_nearest_neighbor(net, size)
    return feature_map_generators.nearest_neighbor_upsampling(net,
                                                              scale=scale)
  return net


def _post_combine(net, depth, activation_fn):
  """Activation, then 3x3 separable conv + batch norm."""
  if activation_fn is not None:
    net = activation_fn(net)
  return slim.separable_conv2d(net, depth, [3, 3], depth_multiplier=1,
                               activation_fn=None, scope='post_combine')


def variable_name(name):
  """Keras name of a BiFPN variable (slim name below 'bifpn')."""
  if name.endswith('/bifpn_combine_weights'):
    return name
  layer, weight = keras_names.split_variable(name)
  if layer.endswith('/BatchNorm'):
    return '%s/batchnorm/%s' % (layer[:-len('/BatchNorm')], weight)
  kind = 'separable_conv' if layer.endswith('post_combine') else 'conv'
  return '%s/%s/%s' % (layer, kind, weight)


def bifpn(features, min_level, max_level, num_iterations, depth,
          combine_method='fast_attention', activation_fn=None,
          use_native_resize_op=False):
  """Builds the BiFPN on backbone maps of levels min_level, min_level + 1...

  Build it in the conv_hyperparams' arg_scope (conv2d and separable_conv2d
  with their batch norm); variables get their Keras names below the
  current scope's 'bifpn/'.

  Args:
    features: backbone maps, finest (min_level) first.
    min_level: level of features[0].
    max_level: highest output level.
    num_iterations: top-down + bottom-up passes.
    depth: channels of every node.
    combine_method: one of COMBINE_METHODS.
    activation_fn: applied before each node's separable conv.
    use_native_resize_op: upsample with resize_nearest_neighbor.

  Returns:
    List of max_level - min_level + 1 maps, finest first.
  """
  input_max_level = min_level + len(features) - 1
  maps = {'0_up_lvl_%d' % (min_level + i): (feature, min_level + i)
          for i, feature in enumerate(features)}
  # As the original, backbone maps are projected whatever their depth.
  backbone_nodes = set(maps)
  all_nodes = nodes(min_level, max_level, input_max_level, num_iterations)
  with tf.compat.v1.variable_scope('bifpn'), \
      keras_names.renamed_variables(variable_name):
    for index, node in enumerate(all_nodes):
      with tf.compat.v1.variable_scope('node_%02d/%s' % (index, node.name)):
        resampled = []
        for input_name in node.inputs:
          net, level = maps[input_name]
          with tf.compat.v1.variable_scope('input_' + input_name):
            resampled.append(_resample(
                net, level, node.level, depth,
                project=input_name in backbone_nodes,
                use_native_resize_op=use_native_resize_op))
        if len(resampled) == 1:
          net = resampled[0]
        else:
          with tf.compat.v1.variable_scope('combine'):
            net = _combine(resampled, combine_method)
          net = _post_combine(net, depth, activation_fn)
        maps[node.name] = (net, node.level)
  outputs = all_nodes[-(max_level - min_level + 1):]
  return [maps[node.name][0] for node in outputs]
