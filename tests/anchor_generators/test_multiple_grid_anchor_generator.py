"""Tests for od_estimator.anchor_generators.multiple_grid_anchor_generator."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import multiple_grid_anchor_generator as mg

# Standard SSD 300x300 feature maps (MobileNet / Inception SSD).
_SSD300_SHAPES = [(19, 19), (10, 10), (5, 5), (3, 3), (2, 2), (1, 1)]
_SSD_RATIOS = (1.0, 2.0, 0.5, 3.0, 0.3333)


def test_tiny_two_layer_exact_corners(execute):
  # Layer 0, 2x2 map: stride 1/2, offset 1/4, centers {0.25, 0.75}; spec
  # (0.5, 1) -> 0.5 x 0.5 boxes. Layer 1, 1x1 map: center 0.5; (1, 1) -> 1 x 1;
  # (1, 4) -> h 1/2, w 2.
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator(
        [[(0.5, 1.0)], [(1.0, 1.0), (1.0, 4.0)]], base_anchor_size=[1.0, 1.0])
    anchors_list = generator.generate([(2, 2), (1, 1)])
    return [anchors.get() for anchors in anchors_list]

  layer0, layer1 = execute(graph_fn)
  np.testing.assert_array_equal(layer0, [
      [0.0, 0.0, 0.5, 0.5], [0.0, 0.5, 0.5, 1.0],
      [0.5, 0.0, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0]])
  np.testing.assert_array_equal(layer1, [
      [0.0, 0.0, 1.0, 1.0], [0.5 - 0.25, 0.5 - 1.0, 0.5 + 0.25, 0.5 + 1.0]])


def test_pixel_strides_on_non_square_image(execute):
  # Image 20 x 40: base size relative to the short side -> h 20/20 = 1,
  # w 20/40 = 0.5; spec (0.5, 1) -> h 0.5, w 0.25. Stride 10 px -> 0.5 in y,
  # 0.25 in x; offset 5 px -> 0.25 in y, 0.125 in x.
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator(
        [[(0.5, 1.0)]], base_anchor_size=[1.0, 1.0],
        anchor_strides=[(10, 10)], anchor_offsets=[(5, 5)])
    (anchors,) = generator.generate([(2, 2)], im_height=20, im_width=40)
    return anchors.get()

  np.testing.assert_array_equal(execute(graph_fn), [
      [0.0, 0.0, 0.5, 0.25], [0.0, 0.25, 0.5, 0.5],
      [0.5, 0.0, 1.0, 0.25], [0.5, 0.25, 1.0, 0.5]])


def test_pixel_strides_without_image_size_stay_in_pixels(execute):
  # im_height = im_width = 1: strides/offsets used as given; base 8 x 8.
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator(
        [[(1.0, 1.0)]], base_anchor_size=[8.0, 8.0],
        anchor_strides=[(16, 16)], anchor_offsets=[(4, 4)])
    return generator.generate([(1, 2)])[0].get()

  np.testing.assert_array_equal(execute(graph_fn),
                                [[0, 0, 8, 8], [0, 16, 8, 24]])


def test_ssd_300_gives_1917_anchors(execute):
  def graph_fn():
    generator = mg.create_ssd_anchors(
        num_layers=6, min_scale=0.2, max_scale=0.95,
        aspect_ratios=_SSD_RATIOS, reduce_boxes_in_lowest_layer=True)
    assert generator.num_anchors_per_location() == [3, 6, 6, 6, 6, 6]
    anchors_list = generator.generate(_SSD300_SHAPES)
    # 19*19*3 + (10*10 + 5*5 + 3*3 + 2*2 + 1*1) * 6 = 1083 + 139*6 = 1917.
    assert [a.num_boxes_static() for a in anchors_list] == [
        1083, 600, 150, 54, 24, 6]
    boxes = tf.concat([a.get() for a in anchors_list], 0)
    assert boxes.shape.as_list() == [1917, 4]
    index = generator.anchor_index_to_feature_map_index(anchors_list)
    assert index.shape.as_list() == [1917]
    return boxes, index

  boxes, index = execute(graph_fn)
  assert boxes.shape == (1917, 4)
  np.testing.assert_array_equal(
      index, np.repeat(np.arange(6), [1083, 600, 150, 54, 24, 6]))

  # First cell of the 19x19 map: center 1/38; specs (0.1, 1), (0.2, 2),
  # (0.2, 0.5): h = s / sqrt(r), w = s * sqrt(r).
  c = 1.0 / 38
  root2 = math.sqrt(2.0)
  expected_first = [
      [c - 0.05, c - 0.05, c + 0.05, c + 0.05],
      [c - 0.1 / root2, c - 0.1 * root2, c + 0.1 / root2, c + 0.1 * root2],
      [c - 0.1 * root2, c - 0.1 / root2, c + 0.1 * root2, c + 0.1 / root2]]
  np.testing.assert_allclose(boxes[:3], expected_first, atol=1e-6)

  # The 1x1 map: center 0.5, scale 0.95 with the five ratios, then the
  # interpolated scale sqrt(0.95 * 1.0) at ratio 1.
  expected_last = []
  for s, r in [(0.95, ratio) for ratio in _SSD_RATIOS] + [
      (math.sqrt(0.95), 1.0)]:
    h, w = s / math.sqrt(r), s * math.sqrt(r)
    expected_last.append([0.5 - h / 2, 0.5 - w / 2, 0.5 + h / 2, 0.5 + w / 2])
  np.testing.assert_allclose(boxes[-6:], expected_last, atol=1e-6)


def test_ssd_scales_are_linear_with_interpolated_box():
  generator = mg.create_ssd_anchors(
      num_layers=3, min_scale=0.2, max_scale=0.8, aspect_ratios=(1.0, 2.0),
      reduce_boxes_in_lowest_layer=False)
  # Scales 0.2, 0.5, 0.8 (step 0.3), then 1.0 for the last interpolation.
  expected = [
      [(0.2, 1.0), (0.2, 2.0), (math.sqrt(0.2 * 0.5), 1.0)],
      [(0.5, 1.0), (0.5, 2.0), (math.sqrt(0.5 * 0.8), 1.0)],
      [(0.8, 1.0), (0.8, 2.0), (math.sqrt(0.8 * 1.0), 1.0)]]
  for specs, expected_specs in zip(generator._box_specs, expected):
    np.testing.assert_allclose(specs, expected_specs, rtol=1e-12)


def test_ssd_without_interpolated_box_and_custom_ratio():
  generator = mg.create_ssd_anchors(
      num_layers=2, aspect_ratios=(1.0,), interpolated_scale_aspect_ratio=0.0,
      reduce_boxes_in_lowest_layer=False)
  assert generator.num_anchors_per_location() == [1, 1]
  generator = mg.create_ssd_anchors(
      num_layers=2, scales=[0.3, 0.6], aspect_ratios=(1.0,),
      interpolated_scale_aspect_ratio=3.0, reduce_boxes_in_lowest_layer=False)
  np.testing.assert_allclose(
      generator._box_specs[1], [(0.6, 1.0), (math.sqrt(0.6), 3.0)])


def test_ssd_explicit_scales_ignore_min_max_and_are_not_mutated():
  scales = [0.1, 0.5]
  generator = mg.create_ssd_anchors(
      num_layers=2, min_scale=0.7, max_scale=0.9, scales=scales,
      aspect_ratios=(1.0,), reduce_boxes_in_lowest_layer=False)
  assert scales == [0.1, 0.5]
  np.testing.assert_allclose(generator._box_specs, [
      [(0.1, 1.0), (math.sqrt(0.1 * 0.5), 1.0)],
      [(0.5, 1.0), (math.sqrt(0.5 * 1.0), 1.0)]])


def test_ssd_base_anchor_size_and_strides(execute):
  # One layer 1x1 with reduced boxes: (0.1, 1), (s, 2), (s, 0.5) with
  # s = min_scale = 0.5 (a single-layer list needs explicit scales).
  # Base 2 x 4 on a square 100 px image; stride 100 px -> 1, offset 50 -> 0.5.
  def graph_fn():
    generator = mg.create_ssd_anchors(
        num_layers=1, scales=[0.5], base_anchor_size=[2.0, 4.0],
        anchor_strides=[(100, 100)], anchor_offsets=[(50, 50)])
    return generator.generate([(1, 1)], im_height=100, im_width=100)[0].get()

  root2 = math.sqrt(2.0)
  sizes = [(0.1 * 2, 0.1 * 4), (0.5 / root2 * 2, 0.5 * root2 * 4),
           (0.5 * root2 * 2, 0.5 / root2 * 4)]
  expected = [[0.5 - h / 2, 0.5 - w / 2, 0.5 + h / 2, 0.5 + w / 2]
              for h, w in sizes]
  np.testing.assert_allclose(execute(graph_fn), expected, rtol=1e-6)


def test_clip_window_clips_without_dropping(execute):
  # 2x1 map: stride (1/2, 1), offset (1/4, 1/2); 1 x 1 boxes ->
  # [-0.25, 0, 0.75, 1] and [0.25, 0, 1.25, 1], clipped to the unit square.
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator(
        [[(1.0, 1.0)]], base_anchor_size=[1.0, 1.0],
        clip_window=tf.constant([0.0, 0.0, 1.0, 1.0]))
    (anchors,) = generator.generate([(2, 1)])
    return anchors.get(), anchors.get_field('feature_map_index')

  boxes, index = execute(graph_fn)
  np.testing.assert_array_equal(boxes, [[0, 0, 0.75, 1], [0.25, 0, 1, 1]])
  np.testing.assert_array_equal(index, [0, 0])


def test_feature_map_index_field(execute):
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator(
        [[(1.0, 1.0)], [(1.0, 1.0), (0.5, 1.0)]])
    anchors_list = generator.generate([(2, 2), (1, 1)])
    return [a.get_field('feature_map_index') for a in anchors_list]

  first, second = execute(graph_fn)
  np.testing.assert_array_equal(first, [0, 0, 0, 0])
  np.testing.assert_array_equal(second, [1, 1])


def test_dynamic_feature_map_sizes_match_static(execute):
  generator = mg.create_ssd_anchors(num_layers=2, aspect_ratios=(1.0, 2.0))

  def dynamic_fn(h0, w0, h1, w1):
    anchors_list = generator.generate([(h0, w0), (h1, w1)],
                                      im_height=60, im_width=80)
    assert anchors_list[0].num_boxes_static() is None
    return [a.get() for a in anchors_list]

  def static_fn():
    anchors_list = generator.generate([(3, 4), (2, 2)],
                                      im_height=60, im_width=80)
    return [a.get() for a in anchors_list]

  dynamic = execute(dynamic_fn, [np.int32(3), np.int32(4), np.int32(2),
                                 np.int32(2)], dynamic=True)
  static = execute(static_fn)
  # 3*4*3 reduced boxes, 2*2*(2 ratios + 1 interpolated).
  assert [d.shape[0] for d in dynamic] == [36, 12]
  for d, s in zip(dynamic, static):
    np.testing.assert_array_equal(d, s)


def test_empty_box_specs_and_empty_map(execute):
  def graph_fn():
    generator = mg.MultipleGridAnchorGenerator([[], [(1.0, 1.0)]])
    assert generator.num_anchors_per_location() == [0, 1]
    return [a.get() for a in generator.generate([(3, 3), (0, 0)])]

  first, second = execute(graph_fn)
  assert first.shape == (0, 4) and second.shape == (0, 4)


@pytest.mark.parametrize('box_specs', [
    [(0.1, 1.0)],  # not a list of lists
    [[[0.1, 1.0]]],  # spec is a list, not a tuple
    [[(0.1, 1.0, 2.0)]],  # not a pair
    ((((0.1, 1.0),),)),
])
def test_bad_box_specs(box_specs):
  with pytest.raises(ValueError, match='box_specs_list'):
    mg.MultipleGridAnchorGenerator(box_specs)


def test_bad_strides_offsets_and_clip_window():
  specs = [[(0.1, 1.0)], [(0.2, 1.0)]]
  with pytest.raises(ValueError, match='anchor_strides'):
    mg.MultipleGridAnchorGenerator(specs, anchor_strides=[(1, 1)])
  with pytest.raises(ValueError, match='anchor_offsets'):
    mg.MultipleGridAnchorGenerator(specs, anchor_offsets=[(1, 1), (1, 1, 1)])
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='clip_window'):
      mg.MultipleGridAnchorGenerator(
          specs, clip_window=tf.constant([0.0, 0.0, 1.0]))


def test_wrong_number_of_feature_maps():
  generator = mg.create_ssd_anchors(num_layers=3)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='num_anchors_per_location'):
      generator.generate([(2, 2), (1, 1)])
    with pytest.raises(ValueError, match='pair'):
      generator.generate([(2, 2), (1, 1), (1, 1, 1)])


def test_single_layer_needs_explicit_scales():
  with pytest.raises(ValueError, match='num_layers'):
    mg.create_ssd_anchors(num_layers=1)
