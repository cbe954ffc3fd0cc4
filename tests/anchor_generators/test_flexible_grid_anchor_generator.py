"""Tests for od_estimator.anchor_generators.flexible_grid_anchor_generator."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import flexible_grid_anchor_generator as fga


def _one_layer(normalize):
  # Sizes 8 (ratio 1) and 16 (ratio 4), stride 10, offset 5.
  return fga.FlexibleGridAnchorGenerator(
      base_sizes=[(8.0, 16.0)], aspect_ratios=[(1.0, 4.0)],
      anchor_strides=[(10, 10)], anchor_offsets=[(5, 5)],
      normalize_coordinates=normalize)


# Size 8 ratio 1 -> 8 x 8 (half 4); size 16 ratio 4 -> h 16/2 = 8 (half 4),
# w 16*2 = 32 (half 16). Centers y = 5; x = 5, 15.
_EXPECTED_ABSOLUTE = [
    [5 - 4, 5 - 4, 5 + 4, 5 + 4], [5 - 4, 5 - 16, 5 + 4, 5 + 16],
    [5 - 4, 15 - 4, 5 + 4, 15 + 4], [5 - 4, 15 - 16, 5 + 4, 15 + 16]]


def test_tiny_grid_exact_corners(execute):
  def graph_fn():
    (anchors,) = _one_layer(False).generate([(1, 2)])
    return anchors.get()

  np.testing.assert_array_equal(execute(graph_fn), _EXPECTED_ABSOLUTE)


def test_normalized_coordinates(execute):
  def graph_fn():
    (anchors,) = _one_layer(True).generate([(1, 2)], im_height=20,
                                           im_width=40)
    return anchors.get()

  expected = np.array(_EXPECTED_ABSOLUTE, np.float64) / [20, 40, 20, 40]
  np.testing.assert_allclose(execute(graph_fn), expected, rtol=1e-6)


def test_two_layers_counts_and_fields(execute):
  def graph_fn():
    generator = fga.FlexibleGridAnchorGenerator(
        base_sizes=[(32.0, 45.0, 64.0), (128.0,)],
        aspect_ratios=[(1.0, 2.0, 0.5), (1.0,)],
        anchor_strides=[(8, 8), (16, 16)], anchor_offsets=[(4, 4), (8, 8)],
        normalize_coordinates=True)
    assert generator.num_anchors_per_location() == [3, 1]
    anchors_list = generator.generate([(4, 5), (2, 3)], im_height=32,
                                      im_width=40)
    # 4*5*3 = 60 and 2*3*1 = 6, known statically.
    assert [a.num_boxes_static() for a in anchors_list] == [60, 6]
    return ([a.get() for a in anchors_list],
            [a.get_field('feature_map_index') for a in anchors_list])

  (first, second), (index0, index1) = execute(graph_fn)
  # Layer 1, cell (1, 2): center (8 + 16, 8 + 32) = (24, 40), 128 x 128.
  np.testing.assert_allclose(
      second[-1], [(24 - 64) / 32, (40 - 64) / 40, (24 + 64) / 32,
                   (40 + 64) / 40], rtol=1e-6)
  assert first.shape == (60, 4)
  # Like the original, every layer's feature_map_index field is zero.
  np.testing.assert_array_equal(index0, np.zeros(60))
  np.testing.assert_array_equal(index1, np.zeros(6))


def test_single_aspect_ratio_applies_to_every_size(execute):
  # Sizes 2 and 6 at ratio 1 on a 1x1 grid centered at (0, 0).
  def graph_fn():
    generator = fga.FlexibleGridAnchorGenerator(
        [(2.0, 6.0)], [(1.0,)], [(1, 1)], [(0, 0)],
        normalize_coordinates=False)
    assert generator.num_anchors_per_location() == [2]
    return generator.generate([(1, 1)])[0].get()

  np.testing.assert_array_equal(execute(graph_fn),
                                [[-1, -1, 1, 1], [-3, -3, 3, 3]])


def test_dynamic_feature_map_size(execute):
  def graph_fn(height, width):
    (anchors,) = _one_layer(False).generate([(height, width)])
    return anchors.get()

  result = execute(graph_fn, [np.int32(1), np.int32(2)], dynamic=True)
  np.testing.assert_array_equal(result, _EXPECTED_ABSOLUTE)


def test_empty_layer_and_empty_map(execute):
  def graph_fn():
    generator = fga.FlexibleGridAnchorGenerator(
        [(), (4.0,)], [(), (1.0,)], [(8, 8), (8, 8)], [(0, 0), (0, 0)],
        normalize_coordinates=False)
    assert generator.num_anchors_per_location() == [0, 1]
    return [a.get() for a in generator.generate([(2, 2), (0, 3)])]

  first, second = execute(graph_fn)
  assert first.shape == (0, 4) and second.shape == (0, 4)


def test_normalized_without_image_size_fails():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Normalized coordinates'):
      _one_layer(True).generate([(1, 2)])


def test_mismatched_lengths_fail():
  with pytest.raises(ValueError, match='anchor_strides'):
    fga.FlexibleGridAnchorGenerator([(1.0,), (2.0,)], [(1.0,), (1.0,)],
                                    [(8, 8)], [(0, 0), (0, 0)])
  with pytest.raises(ValueError, match='aspect_ratios'):
    fga.FlexibleGridAnchorGenerator([(1.0, 2.0, 3.0)], [(1.0, 2.0)],
                                    [(8, 8)], [(0, 0)])


def test_wrong_number_of_feature_maps():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='num_anchors_per_location'):
      _one_layer(False).generate([(1, 1), (1, 1)])
