"""NASNet-A (Zoph et al., https://arxiv.org/abs/1707.07012), tf-slim layers.

tf_slim ships no NASNet, so this builds NASNet-A with the scope and layer
names of the tf-slim model zoo's classification network, so that its
checkpoints (e.g. `nasnet-a_large_04_10_2017`) restore unchanged. The
network has no enclosing scope: `conv0`, `conv0_bn`, `cell_stem_0`,
`cell_stem_1`, `cell_<n>` (normal cells), `reduction_cell_<i>`, the
auxiliary head `aux_<n>/aux_logits/...` and `final_layer/FC`.

A cell combines its two inputs (the previous cell's output and the one
before it) in five pairwise combinations `comb_iter_<k>/{left,right}`;
its output concatenates the hidden states no combination used. Only NHWC
is built.
"""
import dataclasses

import tensorflow as tf
import tf_slim as slim


@dataclasses.dataclass(frozen=True)
class NasNetConfig:
  """The hyperparameters of a NASNet-A network.

  Attributes:
    num_cells: normal cells (the reduction cells come on top).
    num_conv_filters: filters of a cell's operations at filter scaling 1.
    stem_multiplier: conv0 has 32 * stem_multiplier filters.
    filter_scaling_rate: filter growth at each reduction cell.
    num_reduction_layers: reduction cells, spread evenly over the cells.
    drop_path_keep_prob: keep probability of drop path at the last cell
      once fully scheduled (1.0: no drop path).
    total_training_steps: global steps over which drop path ramps in.
    skip_reduction_layer_input: whether a normal cell after a reduction
      cell takes the cell before the reduction as its second input.
    use_aux_head: whether training with classes builds the auxiliary head.
    dense_dropout_keep_prob: dropout keep probability before the logits.
  """
  num_cells: int = 18
  num_conv_filters: int = 168
  stem_multiplier: float = 3.0
  filter_scaling_rate: float = 2.0
  num_reduction_layers: int = 2
  drop_path_keep_prob: float = 0.7
  total_training_steps: int = 250000
  skip_reduction_layer_input: bool = True
  use_aux_head: bool = True
  dense_dropout_keep_prob: float = 0.5

  @property
  def total_num_cells(self):
    """Cells counted by the drop path schedule: normal, reduction, stem."""
    return self.num_cells + self.num_reduction_layers + NUM_STEM_CELLS


# NASNet-A large, the ImageNet model of the original's zoo (331 x 331).
LARGE = NasNetConfig()
NUM_STEM_CELLS = 2


@dataclasses.dataclass(frozen=True)
class _CellSpec:
  """A searched cell: per combination, two (operation, input) pairs.

  hiddenstate_indices index the cell's hidden states: 0 is the 1x1
  projection of the cell input, 1 the (matched) previous input, 2.. the
  combinations' outputs. used_hiddenstates marks the states some
  combination reads; the others are concatenated into the output.
  """
  operations: tuple
  hiddenstate_indices: tuple
  used_hiddenstates: tuple


NORMAL_CELL = _CellSpec(
    operations=('separable_5x5_2', 'separable_3x3_2', 'separable_5x5_2',
                'separable_3x3_2', 'avg_pool_3x3', 'none', 'avg_pool_3x3',
                'avg_pool_3x3', 'separable_3x3_2', 'none'),
    hiddenstate_indices=(0, 1, 1, 1, 0, 1, 1, 1, 0, 0),
    used_hiddenstates=(1, 0, 0, 0, 0, 0, 0))
REDUCTION_CELL = _CellSpec(
    operations=('separable_5x5_2', 'separable_7x7_2', 'max_pool_3x3',
                'separable_7x7_2', 'avg_pool_3x3', 'separable_5x5_2', 'none',
                'avg_pool_3x3', 'separable_3x3_2', 'max_pool_3x3'),
    hiddenstate_indices=(0, 1, 0, 1, 0, 1, 3, 2, 2, 0),
    used_hiddenstates=(1, 1, 1, 0, 0, 0, 0))


def nasnet_large_arg_scope(weight_decay=5e-5, batch_norm_decay=0.9997,
                           batch_norm_epsilon=1e-3):
  """The classification network's arg_scope (the original's defaults).

  Convolutions have no bias and no activation (cells apply ReLU before
  each convolution and batch norm after it), a fan-out variance scaling
  initializer and L2 weight decay; batch norm has a scale.

  Returns:
    an arg_scope dict for slim.arg_scope.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  initializer = slim.variance_scaling_initializer(mode='FAN_OUT')
  with slim.arg_scope(
      [slim.fully_connected, slim.conv2d, slim.separable_conv2d],
      weights_regularizer=regularizer, weights_initializer=initializer):
    with slim.arg_scope([slim.fully_connected], activation_fn=None,
                        scope='FC'):
      with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                          activation_fn=None, biases_initializer=None):
        with slim.arg_scope([slim.batch_norm], decay=batch_norm_decay,
                            epsilon=batch_norm_epsilon, scale=True,
                            fused=True) as scope:
          return scope


def reduction_layers(num_cells, num_reduction_layers):
  """Normal cell indices a reduction cell comes before ([6, 12] for 18, 2)."""
  return [int(float(pool) / (num_reduction_layers + 1) * num_cells)
          for pool in range(1, num_reduction_layers + 1)]


def factorized_reduction(net, output_filters, stride):
  """Halves a map's resolution (stride 2) without skipping pixels.

  Two strided 1x1 convolutions of output_filters / 2, the second on the
  map shifted by one pixel, concatenated. At stride 1, a 1x1 convolution.

  Args:
    net: [batch, height, width, depth] float32.
    output_filters: even depth of the result.
    stride: 1 or 2.

  Returns:
    [batch, ceil(height / stride), ceil(width / stride), output_filters].
  """
  if output_filters % 2:
    raise ValueError('factorized_reduction needs an even output_filters, '
                     'got %d' % output_filters)
  if stride == 1:
    net = slim.conv2d(net, output_filters, 1, scope='path_conv')
    return slim.batch_norm(net, scope='path_bn')
  strides = [1, stride, stride, 1]
  path1 = tf.nn.avg_pool2d(net, 1, strides, 'VALID')
  path1 = slim.conv2d(path1, output_filters // 2, 1, scope='path1_conv')
  # Pad bottom and right, then drop the first row and column.
  path2 = tf.pad(net, [[0, 0], [0, 1], [0, 1], [0, 0]])[:, 1:, 1:, :]
  path2 = tf.nn.avg_pool2d(path2, 1, strides, 'VALID')
  path2 = slim.conv2d(path2, output_filters // 2, 1, scope='path2_conv')
  return slim.batch_norm(tf.concat([path1, path2], 3), scope='final_path_bn')


def scheduled_keep_prob(keep_prob, cell_num, total_num_cells, step,
                        total_training_steps):
  """The drop path keep probability of a cell at a global step.

  The drop rate 1 - keep_prob grows linearly with depth, reaching it at
  the last cell, and with training, reaching it at total_training_steps.

  Args:
    keep_prob: the final keep probability of the last cell.
    cell_num: the cell's position counting stem and reduction cells.
    total_num_cells: NasNetConfig.total_num_cells.
    step: the global step, a scalar tensor or number.
    total_training_steps: steps over which the rate ramps in.

  Returns:
    a float32 scalar tensor.
  """
  layer_ratio = (cell_num + 1) / float(total_num_cells)
  keep_prob = 1.0 - layer_ratio * (1.0 - keep_prob)
  step_ratio = tf.minimum(
      1.0, tf.cast(step, tf.float32) / float(total_training_steps))
  return 1.0 - step_ratio * (1.0 - keep_prob)


def drop_path(net, keep_prob):
  """Zeroes whole examples with probability 1 - keep_prob, rescales others.

  Args:
    net: [batch, height, width, depth] float32.
    keep_prob: float32 scalar.

  Returns:
    net's shape and dtype.
  """
  noise = keep_prob + tf.random.uniform([tf.shape(net)[0], 1, 1, 1])
  return net / keep_prob * tf.floor(noise)


def _global_step():
  """The graph's global step, created at the root scope if missing."""
  step = tf.compat.v1.train.get_global_step()
  if step is not None:
    return step
  root = tf.compat.v1.VariableScope(reuse=tf.compat.v1.AUTO_REUSE, name='')
  with tf.compat.v1.variable_scope(root), tf.compat.v1.name_scope(None):
    return tf.compat.v1.train.get_or_create_global_step()


def _separable_stack(net, operation, filters, stride):
  """`separable_<k>x<k>_<n>`: n times ReLU, separable conv, batch norm."""
  _, size, count = operation.split('_')
  kernel = int(size.split('x')[0])
  for layer in range(1, int(count) + 1):
    net = tf.nn.relu(net)
    net = slim.separable_conv2d(
        net, filters, kernel, depth_multiplier=1, stride=stride,
        scope='separable_{0}x{0}_{1}'.format(kernel, layer))
    net = slim.batch_norm(net, scope='bn_sep_{0}x{0}_{1}'.format(kernel,
                                                                 layer))
    stride = 1
  return net


class Cell:
  """A NASNet-A normal or reduction cell, called once per position."""

  def __init__(self, spec, num_conv_filters, drop_path_keep_prob,
               total_num_cells, total_training_steps, is_training):
    """Creates the cell.

    Args:
      spec: NORMAL_CELL or REDUCTION_CELL.
      num_conv_filters: NasNetConfig.num_conv_filters.
      drop_path_keep_prob: final keep probability (1.0: no drop path).
      total_num_cells: NasNetConfig.total_num_cells.
      total_training_steps: NasNetConfig.total_training_steps.
      is_training: whether drop path applies.
    """
    self._spec = spec
    self._num_conv_filters = num_conv_filters
    self._drop_path_keep_prob = drop_path_keep_prob
    self._total_num_cells = total_num_cells
    self._total_training_steps = total_training_steps
    self._is_training = is_training

  def __call__(self, net, scope, filter_scaling, stride, prev_layer,
               cell_num):
    """Runs the cell.

    Args:
      net: [batch, height, width, depth] output of the previous cell.
      scope: variable scope, e.g. 'cell_3' or 'reduction_cell_0'.
      filter_scaling: the cell's operations have num_conv_filters *
        filter_scaling filters.
      stride: 2 for reduction cells.
      prev_layer: the cell before, or None (net is used).
      cell_num: position counting stem and reduction cells (drop path).

    Returns:
      [batch, height / stride, width / stride, filters * unused states].
    """
    filters = int(self._num_conv_filters * filter_scaling)
    spec = self._spec
    with tf.compat.v1.variable_scope(scope):
      prev_layer = self._match_prev_layer(prev_layer, net, filters)
      net = tf.nn.relu(net)
      net = slim.conv2d(net, filters, 1, scope='1x1')
      states = [slim.batch_norm(net, scope='beginning_bn'), prev_layer]
      for k in range(5):
        with tf.compat.v1.variable_scope('comb_iter_%d' % k):
          outputs = []
          for side, i in (('left', 2 * k), ('right', 2 * k + 1)):
            index = spec.hiddenstate_indices[i]
            with tf.compat.v1.variable_scope(side):
              outputs.append(self._operation(
                  states[index], spec.operations[i], filters,
                  stride if index < 2 else 1, cell_num))
          with tf.compat.v1.variable_scope('combine'):
            states.append(outputs[0] + outputs[1])
      with tf.compat.v1.variable_scope('cell_output'):
        return self._concat_unused(states)

  @staticmethod
  def _match_prev_layer(prev_layer, net, filters):
    """prev_layer brought to net's width and the cell's filters."""
    if prev_layer is None:
      return net
    if int(prev_layer.shape[2]) != int(net.shape[2]):
      return factorized_reduction(tf.nn.relu(prev_layer), filters, 2)
    if int(prev_layer.shape[3]) != filters:
      prev_layer = slim.conv2d(tf.nn.relu(prev_layer), filters, 1,
                               scope='prev_1x1')
      return slim.batch_norm(prev_layer, scope='prev_bn')
    return prev_layer

  def _operation(self, net, operation, filters, stride, cell_num):
    """One side of a combination: separable stack, pooling or identity."""
    input_filters = int(net.shape[3])
    if operation.startswith('separable'):
      net = _separable_stack(net, operation, filters, stride)
    elif operation == 'none':
      if stride > 1 or input_filters != filters:
        net = slim.conv2d(tf.nn.relu(net), filters, 1, stride=stride,
                          scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
      return net
    else:
      pool, _, size = operation.split('_')
      layer = {'avg': slim.avg_pool2d, 'max': slim.max_pool2d}[pool]
      net = layer(net, int(size.split('x')[0]), stride=stride,
                  padding='SAME')
      if input_filters != filters:
        net = slim.conv2d(net, filters, 1, scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
    return self._drop_path(net, cell_num)

  def _drop_path(self, net, cell_num):
    if not self._is_training or self._drop_path_keep_prob >= 1.0:
      return net
    keep_prob = scheduled_keep_prob(
        self._drop_path_keep_prob, cell_num, self._total_num_cells,
        _global_step(), self._total_training_steps)
    return drop_path(net, keep_prob)

  def _concat_unused(self, states):
    """Concatenates unused states, reduced to the last state's shape."""
    final_width = int(states[-1].shape[2])
    final_filters = int(states[-1].shape[3])
    outputs = []
    for index, (state, used) in enumerate(
        zip(states, self._spec.used_hiddenstates)):
      if used:
        continue
      width = int(state.shape[2])
      if width != final_width or int(state.shape[3]) != final_filters:
        with tf.compat.v1.variable_scope('reduction_%d' % index):
          state = factorized_reduction(state, final_filters,
                                       2 if width != final_width else 1)
      outputs.append(state)
    return tf.concat(outputs, 3)


def cells(config, is_training):
  """(normal cell, reduction cell) of a network of `config`."""
  keep_prob = config.drop_path_keep_prob if is_training else 1.0
  return tuple(
      Cell(spec, config.num_conv_filters, keep_prob, config.total_num_cells,
           config.total_training_steps, is_training)
      for spec in (NORMAL_CELL, REDUCTION_CELL))


def build_cells(cell_outputs, config, is_training, start_cell_num,
                true_cell_num, filter_scaling, end_point=None):
  """Normal cells start_cell_num.. of `config`, reduction cells among them.

  Args:
    cell_outputs: outputs so far, the last two feeding the next cell.
    config: a NasNetConfig.
    is_training: whether drop path applies.
    start_cell_num: the first normal cell's index.
    true_cell_num: its position counting stem and reduction cells.
    filter_scaling: filter scaling of the cells before start_cell_num.
    end_point: called with (end point name, tensor) after each cell
      ('Reduction_Cell_<i>', 'Cell_<n>'); returns True to stop there.

  Returns:
    (net, stopped): the last cell's output, and whether end_point stopped.
  """
  normal_cell, reduction_cell = cells(config, is_training)
  reductions = reduction_layers(config.num_cells,
                                config.num_reduction_layers)
  end_point = end_point or (lambda name, net: False)
  cell_outputs = list(cell_outputs)
  net = cell_outputs[-1]
  for cell_num in range(start_cell_num, config.num_cells):
    prev_layer = cell_outputs[-2]
    if cell_num in reductions:
      filter_scaling *= config.filter_scaling_rate
      index = reductions.index(cell_num)
      net = reduction_cell(net, 'reduction_cell_%d' % index, filter_scaling,
                           2, cell_outputs[-2], true_cell_num)
      if end_point('Reduction_Cell_%d' % index, net):
        return net, True
      true_cell_num += 1
      cell_outputs.append(net)
    if not config.skip_reduction_layer_input:
      prev_layer = cell_outputs[-2]
    net = normal_cell(net, 'cell_%d' % cell_num, filter_scaling, 1,
                      prev_layer, true_cell_num)
    if end_point('Cell_%d' % cell_num, net):
      return net, True
    true_cell_num += 1
    cell_outputs.append(net)
  return net, False


def _stem(images, config, is_training):
  """conv0 and the two stem cells (reduction cells of 1/4 and 1/2 scale)."""
  net = slim.conv2d(images, int(32 * config.stem_multiplier), 3, stride=2,
                    padding='VALID', scope='conv0')
  net = slim.batch_norm(net, scope='conv0_bn')
  _, stem_cell = cells(config, is_training)
  cell_outputs = [None, net]
  filter_scaling = 1.0 / config.filter_scaling_rate**NUM_STEM_CELLS
  for cell_num in range(NUM_STEM_CELLS):
    net = stem_cell(net, 'cell_stem_%d' % cell_num, filter_scaling, 2,
                    cell_outputs[-2], cell_num)
    cell_outputs.append(net)
    filter_scaling *= config.filter_scaling_rate
  return cell_outputs


def _aux_head(net, num_classes, scope):
  """Auxiliary classifier logits on a cell's output."""
  with tf.compat.v1.variable_scope(scope):
    with tf.compat.v1.variable_scope('aux_logits'):
      net = slim.avg_pool2d(tf.nn.relu(net), 5, stride=3, padding='VALID')
      net = slim.conv2d(net, 128, 1, scope='proj')
      net = tf.nn.relu(slim.batch_norm(net, scope='aux_bn0'))
      net = slim.conv2d(net, 768, net.shape[1:3].as_list(), padding='VALID')
      net = tf.nn.relu(slim.batch_norm(net, scope='aux_bn1'))
      return slim.fully_connected(slim.flatten(net), num_classes)


def nasnet(images, config=LARGE, num_classes=None, is_training=True,
           final_endpoint=None):
  """NASNet-A for ImageNet, up to its logits or final_endpoint.

  Batch norm and dropout run in training mode when is_training, as in the
  original (its network sets batch norm's mode itself). Call inside
  nasnet_large_arg_scope().

  Args:
    images: [batch, height, width, 3] float32 in [-1, 1] (331 x 331 for
      the large model's checkpoint).
    config: a NasNetConfig.
    num_classes: logits to build (1001 for ImageNet), or None for the
      globally pooled features.
    is_training: whether the network is being trained.
    final_endpoint: stop after this end point ('Stem', 'Cell_<n>',
      'Reduction_Cell_<i>').

  Returns:
    (net, end_points): logits [batch, num_classes], the pooled features
    [batch, depth], or the final_endpoint's tensor; end_points maps names
    to tensors ('AuxLogits' when the auxiliary head is built).
  """
  end_points = {}

  def end_point(name, net):
    end_points[name] = net
    return name == final_endpoint

  reductions = reduction_layers(config.num_cells,
                                config.num_reduction_layers)
  aux_cell = reductions[1] - 1 if len(reductions) >= 2 else None
  build_aux = config.use_aux_head and num_classes and is_training

  def cell_end_point(name, net):
    if end_point(name, net):
      return True
    if build_aux and name == 'Cell_%d' % aux_cell:
      end_points['AuxLogits'] = _aux_head(net, num_classes,
                                          'aux_%d' % aux_cell)
    return False

  with slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    cell_outputs = _stem(images, config, is_training)
    if end_point('Stem', cell_outputs[-1]):
      return cell_outputs[-1], end_points
    net, stopped = build_cells(
        cell_outputs, config, is_training, start_cell_num=0,
        true_cell_num=NUM_STEM_CELLS, filter_scaling=1.0,
        end_point=cell_end_point)
    if stopped:
      return net, end_points
    with tf.compat.v1.variable_scope('final_layer'):
      net = tf.reduce_mean(tf.nn.relu(net), [1, 2])
      if end_point('global_pool', net) or not num_classes:
        return net, end_points
      net = slim.dropout(net, config.dense_dropout_keep_prob, scope='dropout')
      logits = slim.fully_connected(net, num_classes)
      end_points['Logits'] = logits
      end_points['Predictions'] = tf.nn.softmax(logits, name='predictions')
  return logits, end_points
