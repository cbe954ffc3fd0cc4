"""Tests for od_estimator.anchor_generators.grid_anchor_generator (and the
shared AnchorGenerator base class behaviour)."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.core import anchor_generator
from od_estimator.core import box_list


def _reference_grid(grid_h, grid_w, scales, aspect_ratios, base, stride,
                    offset):
  """Plain numpy grid anchors: rows, then columns, then aspect ratio, then
  scale (the scale varies fastest inside a cell)."""
  boxes = []
  for i in range(grid_h):
    for j in range(grid_w):
      yc = i * stride[0] + offset[0]
      xc = j * stride[1] + offset[1]
      for ratio in aspect_ratios:
        for s in scales:
          h = s / np.sqrt(ratio) * base[0]
          w = s * np.sqrt(ratio) * base[1]
          boxes.append([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2])
  return np.array(boxes, dtype=np.float64).reshape(-1, 4)


def test_tiny_grid_exact_corners(execute):
  # base 8x8, scale 1; ratio 1 -> h = w = 8; ratio 4 -> sqrt 2, h = 8 / 2 = 4,
  # w = 8 * 2 = 16. Centers: y = i*10 + 1 in {1, 11}; x = j*20 + 2 in {2, 22}.
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[1.0], aspect_ratios=[1.0, 4.0], base_anchor_size=[8, 8],
        anchor_stride=[10, 20], anchor_offset=[1, 2])
    (anchors,) = generator.generate([(2, 2)])
    return anchors.get()

  expected = [
      # cell (0, 0), center (1, 2)
      [1 - 4, 2 - 4, 1 + 4, 2 + 4], [1 - 2, 2 - 8, 1 + 2, 2 + 8],
      # cell (0, 1), center (1, 22)
      [1 - 4, 22 - 4, 1 + 4, 22 + 4], [1 - 2, 22 - 8, 1 + 2, 22 + 8],
      # cell (1, 0), center (11, 2)
      [11 - 4, 2 - 4, 11 + 4, 2 + 4], [11 - 2, 2 - 8, 11 + 2, 2 + 8],
      # cell (1, 1), center (11, 22)
      [11 - 4, 22 - 4, 11 + 4, 22 + 4], [11 - 2, 22 - 8, 11 + 2, 22 + 8],
  ]
  np.testing.assert_array_equal(execute(graph_fn), expected)


def test_scale_varies_fastest_within_a_cell(execute):
  # 1x1 grid at (0, 0), base 4: (ratio 1, s 1) 4x4, (ratio 1, s 2) 8x8,
  # (ratio 4, s 1) h 4/2 = 2, w 4*2 = 8, (ratio 4, s 2) h 4, w 16.
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[1.0, 2.0], aspect_ratios=[1.0, 4.0], base_anchor_size=[4, 4],
        anchor_stride=[1, 1], anchor_offset=[0, 0])
    return generator.generate([(1, 1)])[0].get()

  np.testing.assert_array_equal(execute(graph_fn), [
      [-2, -2, 2, 2], [-4, -4, 4, 4], [-1, -4, 1, 4], [-2, -8, 2, 8]])


def test_defaults_match_numpy_reference(execute):
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator()
    return generator.generate([(3, 4)])[0].get()

  # Defaults: scales and ratios (0.5, 1, 2), base 256, stride 16, offset 0.
  expected = _reference_grid(3, 4, (0.5, 1.0, 2.0), (0.5, 1.0, 2.0),
                             (256, 256), (16, 16), (0, 0))
  np.testing.assert_allclose(execute(graph_fn), expected, rtol=1e-6)


def test_static_shape_and_fields():
  with tf.Graph().as_default():
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[0.5, 1.0], aspect_ratios=[0.5, 1.0, 2.0])
    assert generator.num_anchors_per_location() == [6]
    (anchors,) = generator.generate([(5, 7)])
    # 5 * 7 cells * 2 scales * 3 ratios.
    assert anchors.get().shape.as_list() == [210, 4]
    assert anchors.num_boxes_static() == 210
    assert anchors.get_field('feature_map_index').shape.as_list() == [210]
    assert anchors.get().name.startswith('GridAnchorGenerator/')


def test_feature_map_index_is_zero(execute):
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[1.0], aspect_ratios=[1.0])
    return generator.generate([(2, 3)])[0].get_field('feature_map_index')

  np.testing.assert_array_equal(execute(graph_fn), np.zeros(6))


def test_dynamic_feature_map_size(execute):
  def graph_fn(height, width):
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[0.5, 1.0], aspect_ratios=[1.0, 2.0], base_anchor_size=[10, 20],
        anchor_stride=[4, 6], anchor_offset=[2, 3])
    (anchors,) = generator.generate([(height, width)])
    assert anchors.num_boxes_static() is None
    return anchors.get()

  expected = _reference_grid(3, 2, (0.5, 1.0), (1.0, 2.0), (10, 20), (4, 6),
                             (2, 3))
  result = execute(graph_fn, [np.int32(3), np.int32(2)], dynamic=True)
  np.testing.assert_allclose(result, expected, rtol=1e-6)


def test_feature_map_shape_as_tensor(execute):
  def graph_fn(shape):
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[1.0], aspect_ratios=[1.0], base_anchor_size=[2, 2],
        anchor_stride=[1, 1], anchor_offset=[0, 0])
    return generator.generate([shape])[0].get()

  # A [2] shape tensor (1, 2): centers (0, 0) and (0, 1), boxes 2x2.
  np.testing.assert_array_equal(
      execute(graph_fn, [np.array([1, 2], np.int32)]),
      [[-1, -1, 1, 1], [-1, 0, 1, 2]])


def test_tensor_parameters(execute):
  def graph_fn(base, stride, offset):
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[1.0], aspect_ratios=[1.0], base_anchor_size=base,
        anchor_stride=stride, anchor_offset=offset)
    return generator.generate([(1, 2)])[0].get()

  # Box 6x4 at centers (1, 2) and (1, 2 + 5).
  result = execute(graph_fn, [np.array([6., 4.], np.float32),
                              np.array([3., 5.], np.float32),
                              np.array([1., 2.], np.float32)])
  np.testing.assert_array_equal(result, [[-2, 0, 4, 4], [-2, 5, 4, 9]])


def test_empty_grid(execute):
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator()
    (anchors,) = generator.generate([(0, 4)])
    assert anchors.get().shape.as_list() == [0, 4]
    return anchors.get()

  assert execute(graph_fn).shape == (0, 4)


def test_no_scales_gives_no_anchors(execute):
  # The builder passes [] for unset proto scales/aspect_ratios.
  def graph_fn():
    generator = grid_anchor_generator.GridAnchorGenerator(
        scales=[], aspect_ratios=[])
    assert generator.num_anchors_per_location() == [0]
    return generator.generate([(3, 3)])[0].get()

  assert execute(graph_fn).shape == (0, 4)


def test_tile_anchors_elementwise_pairs(execute):
  # Pairs (scale 1, ratio 1) and (scale 2, ratio 4) on a 1x1 grid at (5, 5)
  # with base 2x2: 2x2 box, then h 2*2/2 = 2, w 2*2*2 = 8.
  def graph_fn():
    anchors = grid_anchor_generator.tile_anchors(
        1, 1, [1.0, 2.0], [1.0, 4.0], [2.0, 2.0], [1.0, 1.0], [5.0, 5.0])
    assert isinstance(anchors, box_list.BoxList)
    return anchors.get()

  np.testing.assert_array_equal(execute(graph_fn),
                                [[4, 4, 6, 6], [4, 1, 6, 9]])


@pytest.mark.parametrize('shapes', [
    [(2, 2), (1, 1)],  # two feature maps for a one-layer generator
    [],
])
def test_wrong_number_of_feature_maps(shapes):
  generator = grid_anchor_generator.GridAnchorGenerator()
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='num_anchors_per_location'):
      generator.generate(shapes)


@pytest.mark.parametrize('shapes', [[(2, 2, 2)], [5], (((2, 2),))])
def test_bad_feature_map_shapes(shapes):
  generator = grid_anchor_generator.GridAnchorGenerator()
  with tf.Graph().as_default():
    with pytest.raises(ValueError):
      generator.generate(shapes)


def test_generator_reusable_across_graphs(execute):
  # Parameters must not be turned into tensors of the first graph.
  generator = grid_anchor_generator.GridAnchorGenerator(
      scales=[1.0], aspect_ratios=[1.0], base_anchor_size=[2, 2],
      anchor_stride=[1, 1], anchor_offset=[0, 0])
  first = execute(lambda: generator.generate([(1, 1)])[0].get())
  second = execute(lambda: generator.generate([(1, 1)])[0].get())
  np.testing.assert_array_equal(first, [[-1, -1, 1, 1]])
  np.testing.assert_array_equal(second, first)


class _TwoMapsUnchecked(anchor_generator.AnchorGenerator):
  """Declares one map but opts out of the feature map count check."""

  def name_scope(self):
    return 'Unchecked'

  @property
  def check_num_anchors(self):
    return False

  def num_anchors_per_location(self):
    return [1]

  def _generate(self, feature_map_shape_list):
    return [grid_anchor_generator.tile_anchors(h, w, [1.0], [1.0], [1., 1.],
                                               [1., 1.], [0., 0.])
            for h, w in feature_map_shape_list]


def test_check_num_anchors_can_be_disabled(execute):
  def graph_fn():
    anchors_list = _TwoMapsUnchecked().generate([(1, 1), (1, 2)])
    return [anchors.get() for anchors in anchors_list]

  first, second = execute(graph_fn)
  assert first.shape == (1, 4) and second.shape == (2, 4)


def test_abstract_base_cannot_be_instantiated():
  with pytest.raises(TypeError):
    anchor_generator.AnchorGenerator()
