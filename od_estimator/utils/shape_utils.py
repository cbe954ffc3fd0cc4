"""Shape helpers that keep static dimensions whenever they are known."""
import tensorflow as tf


def combined_static_and_dynamic_shape(tensor):
  """Returns the tensor's shape as a list: ints where static, else scalars.

  Args:
    tensor: any tensor of known rank.

  Returns:
    A list with one entry per dimension: a Python int when the dimension is
    known at graph construction time, otherwise an int32 scalar tensor.
  """
  static = tensor.shape.as_list()
  dynamic = tf.shape(tensor)
  return [dim if dim is not None else dynamic[i]
          for i, dim in enumerate(static)]


def pad_or_clip_tensor(tensor, length):
  """Pads with zeros or clips the first dimension to `length`.

  Args:
    tensor: [N, ...] tensor.
    length: int or int32 scalar tensor.

  Returns:
    [length, ...] tensor; its first dimension is static when `length` is an
    int.
  """
  rank = tensor.shape.ndims
  size = tf.shape(tensor)[0]
  clipped = tensor[:length] if isinstance(length, int) else tf.slice(
      tensor, [0] * rank, tf.concat([[tf.minimum(size, length)],
                                     tf.shape(tensor)[1:]], axis=0))
  pad_rows = tf.maximum(length - tf.shape(clipped)[0], 0)
  paddings = tf.concat([[[0, pad_rows]], tf.zeros([rank - 1, 2], tf.int32)],
                       axis=0)
  padded = tf.pad(clipped, paddings)
  padded.set_shape([length if isinstance(length, int) else None] +
                   tensor.shape.as_list()[1:])
  return padded


def assert_shape_equal(shape_a, shape_b):
  """Asserts two shapes (lists of ints or tensors) are equal.

  Static dimensions are compared now (ValueError); otherwise a runtime
  assertion op is returned.
  """
  if (all(isinstance(d, int) for d in shape_a) and
      all(isinstance(d, int) for d in shape_b)):
    if shape_a != shape_b:
      raise ValueError('Unequal shapes %s, %s' % (shape_a, shape_b))
    return tf.no_op()
  return tf.compat.v1.assert_equal(shape_a, shape_b)


def static_or_dynamic_map_fn(fn, elems, dtype=None, parallel_iterations=32,
                             back_prop=True):
  """Maps fn over the first dimension, unrolled when that is static.

  Unrolling keeps static shapes (needed on TPU) when the batch size is
  known; otherwise falls back to tf.map_fn.

  Args:
    fn: function of one tensor (or a list of tensors when `elems` is a
      list), returning a tensor or a list of tensors.
    elems: a tensor or a list of tensors sharing the first dimension.
    dtype: output dtype(s) for tf.map_fn.
    parallel_iterations: for tf.map_fn.
    back_prop: for tf.map_fn.

  Returns:
    The stacked outputs.
  """
  as_list = isinstance(elems, (list, tuple))
  first = elems[0] if as_list else elems
  size = tf.compat.dimension_value(first.shape[0])
  if size is None or any(
      tf.compat.dimension_value(e.shape[0]) != size
      for e in (elems if as_list else [elems])):
    return tf.map_fn(fn, elems, dtype=dtype,
                     parallel_iterations=parallel_iterations,
                     back_prop=back_prop)
  if as_list:
    outputs = [fn(list(args)) for args in zip(*[tf.unstack(e) for e in elems])]
  else:
    outputs = [fn(arg) for arg in tf.unstack(elems)]
  if isinstance(outputs[0], (list, tuple)):
    return [tf.stack(parts) for parts in zip(*outputs)]
  return tf.stack(outputs)


def pad_or_clip_nd(tensor, output_shape):
  """Pads with zeros or clips each dimension to `output_shape`.

  Args:
    tensor: any tensor.
    output_shape: list with one entry per dimension: an int, or None to keep
      that dimension as it is.

  Returns:
    The tensor with static shape `output_shape` where given.
  """
  if not output_shape:  # A scalar: nothing to pad.
    return tensor
  shape = tf.shape(tensor)
  target = [shape[i] if size is None else size
            for i, size in enumerate(output_shape)]
  clipped = tf.slice(tensor, tf.zeros(len(target), tf.int32),
                     tf.minimum(shape, tf.stack(target)))
  clipped_shape = tf.shape(clipped)
  paddings = tf.stack([tf.zeros(len(target), tf.int32),
                       tf.stack(target) - clipped_shape], axis=1)
  padded = tf.pad(clipped, paddings)
  static = tensor.shape.as_list()
  padded.set_shape([size if size is not None else static[i]
                    for i, size in enumerate(output_shape)])
  return padded
