"""Abstract anchor generator.

An anchor generator places a fixed set of reference boxes (anchors) on every
cell of one or more convolutional feature maps. The number of anchors per
cell is fixed at construction time, while the feature map sizes are given
only when anchors are generated, so one generator serves any input size
(fully convolutional models). For example 3 anchors per cell on an 8x8 map
plus 6 per cell on a 4x4 map gives 3*8*8 + 6*4*4 = 288 anchors.
"""
import abc

import tensorflow as tf


class AnchorGenerator(abc.ABC):
  """Base class: subclasses implement name_scope, num_anchors_per_location
  and _generate."""

  @abc.abstractmethod
  def name_scope(self):
    """Returns the name scope (a string) for the anchor generation ops."""

  @property
  def check_num_anchors(self):
    """Whether generate() checks the feature map count.

    Subclasses may override this to return False when the number of feature
    maps is not known when the generator is constructed.

    Returns:
      bool, True by default.
    """
    return True

  @abc.abstractmethod
  def num_anchors_per_location(self):
    """Returns a list of ints: anchors per cell, one per feature map."""

  def generate(self, feature_map_shape_list, **params):
    """Builds the anchors for a list of feature maps.

    Args:
      feature_map_shape_list: list of (height, width) pairs, one per feature
        map, e.g. [(19, 19), (10, 10)]. Each value is a Python int (static
        anchor count) or an int scalar tensor (count known only at run time).
      **params: generator specific options, e.g. im_height, im_width.

    Returns:
      list of BoxList, one per feature map, each holding
      height * width * num_anchors_per_location()[i] anchors ordered with the
      anchor index varying fastest, then x, then y.

    Raises:
      ValueError: if check_num_anchors is set and the number of feature maps
        differs from len(num_anchors_per_location()).
    """
    if self.check_num_anchors and (
        len(feature_map_shape_list) != len(self.num_anchors_per_location())):
      raise ValueError(
          'Got %d feature map shapes but num_anchors_per_location has %d '
          'entries; they must be equal.' %
          (len(feature_map_shape_list), len(self.num_anchors_per_location())))
    with tf.name_scope(self.name_scope()):
      anchors_list = self._generate(feature_map_shape_list, **params)
      if self.check_num_anchors:
        # A named identity gives each layer's anchors a stable op inside the
        # generator's scope, which later graph rewrites and exports look up.
        for anchors in anchors_list:
          anchors.set(tf.identity(anchors.get()))
      return anchors_list

  @abc.abstractmethod
  def _generate(self, feature_map_shape_list, **params):
    """Builds the anchors; see generate(). Returns a list of BoxList."""

  def anchor_index_to_feature_map_index(self, boxlist_list):
    """Maps every anchor to the index of the feature map it belongs to.

    Args:
      boxlist_list: the list of BoxList returned by generate().

    Returns:
      [num_anchors] int32 tensor: i for every anchor of boxlist_list[i].
    """
    indices = []
    for i, boxes in enumerate(boxlist_list):
      num_boxes = boxes.num_boxes_static()
      if num_boxes is None:
        num_boxes = boxes.num_boxes()
      indices.append(tf.fill([num_boxes], i))
    return tf.concat(indices, axis=0)


def unpack_feature_map_shape(shape):
  """Splits one feature map shape into (height, width).

  Args:
    shape: a (height, width) tuple or list of ints or int scalar tensors, or
      an int tensor of static shape [2].

  Returns:
    (height, width), each a Python int or an int scalar tensor.

  Raises:
    ValueError: if shape is not a pair.
  """
  if isinstance(shape, (tuple, list)) and len(shape) == 2:
    return shape[0], shape[1]
  if tf.is_tensor(shape) and shape.shape.as_list() == [2]:
    return shape[0], shape[1]
  raise ValueError('A feature map shape must be a (height, width) pair, '
                   'got %r.' % (shape,))
