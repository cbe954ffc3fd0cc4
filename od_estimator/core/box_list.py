"""BoxList: a set of boxes with named per-box fields.

Boxes are an [N, 4] float tensor in ymin, xmin, ymax, xmax order, in either
normalized or absolute coordinates (the list does not record which; the
caller knows). Extra fields (scores, classes, masks, keypoints, ...) are
tensors whose first dimension is N.
"""
import tensorflow as tf


class BoxList:
  """A collection of boxes and per-box fields sharing the first dimension."""

  def __init__(self, boxes):
    """Creates a BoxList.

    Args:
      boxes: [N, 4] float32 tensor, ymin, xmin, ymax, xmax.

    Raises:
      ValueError: if boxes is not rank 2 with 4 columns, or not float32.
    """
    if boxes.shape.ndims != 2 or boxes.shape[-1] != 4:
      raise ValueError('boxes must have shape [N, 4], got %s' % boxes.shape)
    if boxes.dtype != tf.float32:
      raise ValueError('boxes must be float32, got %s' % boxes.dtype.name)
    self.data = {'boxes': boxes}

  def num_boxes(self):
    """Returns N as a scalar int32 tensor."""
    return tf.shape(self.data['boxes'])[0]

  def num_boxes_static(self):
    """Returns N as a Python int, or None when it is not known statically."""
    return tf.compat.dimension_value(self.data['boxes'].shape[0])

  def get_all_fields(self):
    """Returns every field name, 'boxes' included."""
    return list(self.data)

  def get_extra_fields(self):
    """Returns the field names other than 'boxes'."""
    return [name for name in self.data if name != 'boxes']

  def add_field(self, field, field_data):
    """Adds or replaces a field whose first dimension is N."""
    self.data[field] = field_data

  def has_field(self, field):
    return field in self.data

  def get(self):
    """Returns the [N, 4] boxes tensor."""
    return self.get_field('boxes')

  def set(self, boxes):
    """Replaces the boxes tensor; it must be [N, 4]."""
    if boxes.shape.ndims != 2 or boxes.shape[-1] != 4:
      raise ValueError('boxes must have shape [N, 4], got %s' % boxes.shape)
    self.data['boxes'] = boxes

  def get_field(self, field):
    """Returns a field's tensor.

    Raises:
      ValueError: naming the field and the fields present when it is absent.
    """
    if field not in self.data:
      raise ValueError('BoxList has no field %r (it has %s)' %
                       (field, sorted(self.data)))
    return self.data[field]

  def set_field(self, field, value):
    """Replaces an existing field's tensor."""
    if field not in self.data:
      raise ValueError('BoxList has no field %r to set' % field)
    self.data[field] = value

  def get_center_coordinates_and_sizes(self, scope=None):
    """Returns [ycenter, xcenter, height, width], each an [N] tensor."""
    with tf.name_scope(scope or 'get_center_coordinates_and_sizes'):
      ymin, xmin, ymax, xmax = tf.unstack(self.get(), axis=1)
      height = ymax - ymin
      width = xmax - xmin
      return [ymin + height / 2., xmin + width / 2., height, width]

  def transpose_coordinates(self, scope=None):
    """Swaps y and x: boxes become xmin, ymin, xmax, ymax."""
    with tf.name_scope(scope or 'transpose_coordinates'):
      ymin, xmin, ymax, xmax = tf.split(self.get(), 4, axis=1)
      self.set(tf.concat([xmin, ymin, xmax, ymax], axis=1))

  def as_tensor_dict(self, fields=None):
    """Returns {field: tensor} for the given fields (default: all)."""
    fields = self.get_all_fields() if fields is None else fields
    missing = [f for f in fields if f not in self.data]
    if missing:
      raise ValueError('BoxList has no fields %s' % missing)
    return {f: self.data[f] for f in fields}
