"""Shape helpers that keep static dimensions whenever they are known.

The public names, arguments and results are the original's
(object_detection.utils.shape_utils), so scripts written for it work.
"""
import tensorflow as tf


def _is_tensor(value):
  return isinstance(value, (tf.Tensor, tf.SparseTensor, tf.Variable))


def _scalar_length(length):
  """An int stays an int; a tensor of shape [] or [1] becomes a scalar."""
  return tf.reshape(length, []) if _is_tensor(length) else length


def _with_first_dim(tensor, length):
  """Sets the first static dimension when `length` is a Python int."""
  if not _is_tensor(length):
    tensor.set_shape([length] + tensor.shape.as_list()[1:])
  return tensor


def get_dim_as_int(dim):
  """A dimension (tf.compat.v1.Dimension or int or None) as int or None."""
  return tf.compat.dimension_value(dim)


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


def pad_tensor(t, length):
  """Pads the first dimension with zeros up to `length`.

  Args:
    t: [N, ...] tensor.
    length: int, or int32 tensor of shape [] or [1], at least N.

  Returns:
    [length, ...] tensor, its first dimension static when `length` is an int.
  """
  size = _scalar_length(length)
  paddings = [[0, size - tf.shape(t)[0]]] + [[0, 0]] * (t.shape.ndims - 1)
  return _with_first_dim(tf.pad(t, paddings), length)


def clip_tensor(t, length):
  """Keeps the first `length` entries of the first dimension.

  Args:
    t: [N, ...] tensor.
    length: int, or int32 tensor of shape [] or [1], at most N.

  Returns:
    [length, ...] tensor, its first dimension static when `length` is an int.
  """
  return _with_first_dim(tf.gather(t, tf.range(_scalar_length(length))),
                         length)


def pad_or_clip_tensor(t, length):
  """Pads with zeros or clips the first dimension to `length`.

  Args:
    t: [N, ...] tensor.
    length: int or int32 scalar tensor.

  Returns:
    [length, ...] tensor; its first dimension is static when `length` is an
    int.
  """
  return pad_or_clip_nd(t, [_scalar_length(length)] + [None] *
                        (t.shape.ndims - 1))


def pad_or_clip_nd(tensor, output_shape):
  """Pads with zeros or clips each dimension to `output_shape`.

  Args:
    tensor: any tensor.
    output_shape: list with one entry per dimension: an int, an int scalar
      tensor, or None to keep that dimension as it is.

  Returns:
    The tensor with shape `output_shape`; static where the entry is an int
    (or None over a static dimension).
  """
  if not output_shape:  # A scalar: nothing to pad.
    return tensor
  shape = tf.shape(tensor)
  target = tf.stack([shape[i] if size is None else tf.cast(size, tf.int32)
                     for i, size in enumerate(output_shape)])
  clipped = tf.slice(tensor, tf.zeros_like(target),
                     tf.minimum(shape, target))
  paddings = tf.stack([tf.zeros_like(target), target - tf.shape(clipped)],
                      axis=1)
  padded = tf.pad(clipped, paddings)
  static = tensor.shape.as_list()
  padded.set_shape([static[i] if size is None else tf.get_static_value(size)
                    for i, size in enumerate(output_shape)])
  return padded


def _check_map_fn_elems(elems):
  """Only a tensor or a list/tuple of tensors can be unstacked."""
  parts = elems if isinstance(elems, (list, tuple)) else [elems]
  if not parts or not all(tf.is_tensor(part) for part in parts):
    raise ValueError('`elems` must be a Tensor or list of Tensors.')
  return parts


def _stack_outputs(outputs):
  if all(tf.is_tensor(output) for output in outputs):
    return tf.stack(outputs)
  if all(isinstance(output, (list, tuple)) and
         all(tf.is_tensor(entry) for entry in output) for output in outputs):
    return [tf.stack(parts) for parts in zip(*outputs)]
  raise ValueError('`fn` should return a Tensor or a list of Tensors.')


def static_or_dynamic_map_fn(fn, elems, dtype=None, parallel_iterations=32,
                             back_prop=True):
  """Maps fn over the first dimension, unrolled when that is static.

  Unrolling keeps static shapes (needed on TPU) when the batch size is
  known and non-zero; otherwise falls back to tf.map_fn.

  Args:
    fn: function of one tensor (or a list of tensors when `elems` is a
      list), returning a tensor or a list of tensors.
    elems: a tensor or a list of tensors sharing the first dimension.
    dtype: output dtype(s) for tf.map_fn.
    parallel_iterations: for tf.map_fn.
    back_prop: for tf.map_fn.

  Returns:
    The stacked outputs: a tensor, or a list of tensors.

  Raises:
    ValueError: if `elems` is not a tensor or a list of tensors (nested
      structures are not supported), or `fn` returns something else than a
      tensor or a list of tensors.
  """
  parts = _check_map_fn_elems(elems)
  sizes = {tf.compat.dimension_value(part.shape[0])
           if part.shape.ndims else None for part in parts}
  if len(sizes) != 1 or not next(iter(sizes)):
    return tf.map_fn(fn, elems, dtype=dtype,
                     parallel_iterations=parallel_iterations,
                     back_prop=back_prop)
  if isinstance(elems, (list, tuple)):
    outputs = [fn(list(args)) for args in zip(*[tf.unstack(e) for e in elems])]
  else:
    outputs = [fn(arg) for arg in tf.unstack(elems)]
  return _stack_outputs(outputs)


def check_min_image_dim(min_dim, image_tensor):
  """Checks that [batch, height, width, channels] images are min_dim or more.

  Args:
    min_dim: the smallest height and width allowed, in pixels.
    image_tensor: [batch, height, width, channels] tensor.

  Returns:
    `image_tensor` when its height and width are static; otherwise an identity
    of it that asserts their size at run time.

  Raises:
    ValueError: if a static height or width is smaller than min_dim.
  """
  height, width = image_tensor.shape.as_list()[1:3]
  if height is None or width is None:
    shape = tf.shape(image_tensor)
    check = tf.Assert(
        tf.logical_and(tf.greater_equal(shape[1], min_dim),
                       tf.greater_equal(shape[2], min_dim)),
        ['image size must be >= {} in both height and width.'.format(min_dim)])
    with tf.control_dependencies([check]):
      return tf.identity(image_tensor)
  if height < min_dim or width < min_dim:
    raise ValueError(
        'image size must be >= %d in both height and width; image dim = %d,%d'
        % (min_dim, height, width))
  return image_tensor


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


def assert_shape_equal_along_first_dimension(shape_a, shape_b):
  """Like assert_shape_equal, for the first dimension of both shapes only."""
  if isinstance(shape_a[0], int) and isinstance(shape_b[0], int):
    if shape_a[0] != shape_b[0]:
      raise ValueError('Unequal first dimension %s, %s' % (shape_a[0],
                                                           shape_b[0]))
    return tf.no_op()
  return tf.compat.v1.assert_equal(shape_a[0], shape_b[0])


def assert_box_normalized(boxes, maximum_normalized_coordinate=1.1):
  """An assert op checking every box coordinate is in [0, maximum].

  Args:
    boxes: [..., 4] float tensor.
    maximum_normalized_coordinate: the largest coordinate accepted (1.1 leaves
      room for boxes slightly past the border).

  Returns:
    The tf.Assert op (fails at run time, printing the boxes).
  """
  return tf.Assert(
      tf.logical_and(
          tf.less_equal(tf.reduce_max(boxes), maximum_normalized_coordinate),
          tf.greater_equal(tf.reduce_min(boxes), 0)), [boxes])


def flatten_dimensions(inputs, first, last):
  """Merges dimensions [first, last) of `inputs` into one.

  Args:
    inputs: a K-d tensor.
    first: first dimension merged.
    last: one past the last dimension merged.

  Returns:
    A (K - (last - first) + 1)-d tensor; static where the inputs' are.

  Raises:
    ValueError: if first >= K or last > K.
  """
  ndims = inputs.shape.ndims
  if first >= ndims or last > ndims:
    raise ValueError('`first` and `last` must be less than inputs.shape.ndims. '
                     'found {} and {} respectively while ndims is {}'.format(
                         first, last, ndims))
  shape = combined_static_and_dynamic_shape(inputs)
  merged = shape[first:last]
  if all(isinstance(dim, int) for dim in merged):
    product = 1
    for dim in merged:
      product *= dim
  else:
    product = tf.reduce_prod(tf.stack(merged))
  return tf.reshape(inputs, shape[:first] + [product] + shape[last:])


def flatten_first_n_dimensions(inputs, n):
  """Merges the first n dimensions: a K-d tensor becomes (K - n + 1)-d."""
  return flatten_dimensions(inputs, first=0, last=n)


def expand_first_dimension(inputs, dims):
  """Splits the first dimension of `inputs` into `dims`.

  Args:
    inputs: a K-d tensor.
    dims: list of ints or int32 scalar tensors whose product is the first
      dimension of `inputs`.

  Returns:
    A (K + len(dims) - 1)-d tensor.

  Raises:
    tf.errors.InvalidArgumentError: if the product of `dims` differs from
      the first dimension (when building the graph if both are static,
      otherwise when it runs).
  """
  shape = combined_static_and_dynamic_shape(inputs)
  check = tf.compat.v1.assert_equal(
      shape[0], tf.reduce_prod(tf.stack(dims)),
      message='First dimension of `inputs` cannot be expanded into provided '
      '`dims`')
  with tf.control_dependencies([check]):
    return tf.reshape(inputs, list(dims) + shape[1:])


def resize_images_and_return_shapes(inputs, image_resizer_fn):
  """Resizes each image of a batch; returns the batch and the true shapes.

  Args:
    inputs: [batch, height, width, channels] float32 images.
    image_resizer_fn: function of one image returning (resized image, its
      true [height, width, channels] int32 shape).

  Returns:
    (resized [batch, new_height, new_width, channels] float32,
     true_image_shapes [batch, 3] int32).

  Raises:
    ValueError: if `inputs` is not float32.
  """
  if inputs.dtype != tf.float32:
    raise ValueError('`resize_images_and_return_shapes` expects a'
                     ' tf.float32 tensor')
  resized, true_image_shapes = static_or_dynamic_map_fn(
      image_resizer_fn, elems=inputs, dtype=[tf.float32, tf.int32])
  return resized, true_image_shapes


def sum_to_shape(gradient, tensor):
  """`gradient` summed over the axes along which `tensor` was broadcast.

  Static shapes and the losses' (a last axis of 1 or not) avoid
  BroadcastGradientArgs, whose unknown output shapes a TPU refuses.
  """
  shape, full = tensor.shape, gradient.shape
  if shape.is_fully_defined() and full.is_fully_defined():
    lead = full.rank - shape.rank
    axes = list(range(lead)) + [lead + axis for axis, size in enumerate(shape)
                                if size == 1 and full[lead + axis] != 1]
    return (tf.reshape(tf.reduce_sum(gradient, axes), shape.as_list())
            if axes else gradient)
  if shape.rank and shape.rank == full.rank and shape[-1] is not None:
    return (tf.reduce_sum(gradient, axis=-1, keepdims=True)
            if shape[-1] == 1 and full[-1] != 1 else gradient)
  axes, _ = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(tensor),
                                             s1=tf.shape(gradient))
  return tf.reshape(tf.reduce_sum(gradient, axes), tf.shape(tensor))
