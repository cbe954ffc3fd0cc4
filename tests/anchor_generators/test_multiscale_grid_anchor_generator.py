"""Tests for od_estimator.anchor_generators.multiscale_grid_anchor_generator."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import multiscale_grid_anchor_generator as msg


def _single_level(level, anchor_scale, normalize=False):
  return msg.MultiscaleGridAnchorGenerator(
      min_level=level, max_level=level, anchor_scale=anchor_scale,
      aspect_ratios=[1.0], scales_per_octave=1,
      normalize_coordinates=normalize)


def test_single_level_exact_corners(execute):
  # Level 4: stride 16, base 2 * 16 = 32 (half 16). 48 and 32 are multiples
  # of 16, so the offset is 8: y centers 8, 24, 40; x centers 8, 24.
  def graph_fn():
    generator = _single_level(4, 2.0)
    return generator.generate([(3, 2)], im_height=48, im_width=32)[0].get()

  expected = []
  for yc in (8, 24, 40):
    for xc in (8, 24):
      expected.append([yc - 16, xc - 16, yc + 16, xc + 16])
  np.testing.assert_array_equal(execute(graph_fn), expected)


def test_normalized_coordinates(execute):
  # Level 5: stride 32, base 4 * 32 = 128 (half 64), offset 16: centers 16,
  # 48; divided by the 64 x 128 image.
  def graph_fn():
    generator = _single_level(5, 4.0, normalize=True)
    return generator.generate([(2, 2)], im_height=64, im_width=128)[0].get()

  expected = [[(yc - 64) / 64, (xc - 64) / 128, (yc + 64) / 64,
               (xc + 64) / 128] for yc in (16, 48) for xc in (16, 48)]
  np.testing.assert_allclose(execute(graph_fn), expected, rtol=1e-6)


def test_odd_image_side_gets_no_offset(execute):
  # 65 is not a multiple of 32 -> y offset 0 (centers 0, 32, 64); 64 is ->
  # x offset 16 (centers 16, 48, 80). Base 128, half 64.
  def graph_fn():
    generator = _single_level(5, 4.0)
    return generator.generate([(3, 3)], im_height=65, im_width=64)[0].get()

  expected = [[yc - 64, xc - 64, yc + 64, xc + 64]
              for yc in (0, 32, 64) for xc in (16, 48, 80)]
  np.testing.assert_array_equal(execute(graph_fn), expected)


def test_unit_image_size_means_absolute_with_offset(execute):
  # im 1 x 1 counts as divisible: offset 16; base 1 * 32 -> half 16.
  def graph_fn():
    generator = _single_level(5, 1.0)
    return generator.generate([(2, 2)])[0].get()

  np.testing.assert_array_equal(execute(graph_fn), [
      [0, 0, 32, 32], [0, 32, 32, 64], [32, 0, 64, 32], [32, 32, 64, 64]])


def test_tensor_image_size_always_offsets(execute):
  # Image sizes as tensors: offset stride / 2 = 16 on both axes, even for 65.
  def graph_fn(im_height, im_width):
    generator = _single_level(5, 4.0)
    return generator.generate([(2, 1)], im_height=im_height,
                              im_width=im_width)[0].get()

  result = execute(graph_fn, [np.int32(65), np.int32(40)], dynamic=True)
  np.testing.assert_array_equal(result, [[16 - 64, 16 - 64, 16 + 64, 16 + 64],
                                         [48 - 64, 16 - 64, 48 + 64, 16 + 64]])


def test_tensor_image_size_normalized(execute):
  def graph_fn(im_height, im_width):
    generator = _single_level(5, 4.0, normalize=True)
    return generator.generate([(1, 1)], im_height=im_height,
                              im_width=im_width)[0].get()

  # Center 16, half 64; divided by 64 and 32.
  result = execute(graph_fn, [np.int32(64), np.int32(32)], dynamic=True)
  np.testing.assert_allclose(result, [[-48 / 64, -48 / 32, 80 / 64, 80 / 32]])


def test_aspect_ratio_outer_scale_inner(execute):
  # Level 3: stride 8, base 4 * 8 = 32, offset 4. Two scales per octave:
  # 1 and sqrt(2); ratios 1 and 4 (h = 32 s / 2, w = 32 s * 2 for 4).
  def graph_fn():
    generator = msg.MultiscaleGridAnchorGenerator(
        3, 3, 4.0, [1.0, 4.0], 2, normalize_coordinates=False)
    assert generator.num_anchors_per_location() == [4]
    return generator.generate([(1, 1)], im_height=8, im_width=8)[0].get()

  r2 = np.sqrt(2.0)
  sizes = [(32, 32), (32 * r2, 32 * r2), (16, 64), (16 * r2, 64 * r2)]
  expected = [[4 - h / 2, 4 - w / 2, 4 + h / 2, 4 + w / 2] for h, w in sizes]
  np.testing.assert_allclose(execute(graph_fn), expected, rtol=1e-6)


def test_retinanet_640_levels_3_to_7(execute):
  feature_maps = [(80, 80), (40, 40), (20, 20), (10, 10), (5, 5)]

  def graph_fn():
    generator = msg.MultiscaleGridAnchorGenerator(
        min_level=3, max_level=7, anchor_scale=4.0,
        aspect_ratios=[1.0, 2.0, 0.5], scales_per_octave=3)
    assert generator.num_anchors_per_location() == [9] * 5
    anchors_list = generator.generate(feature_maps, im_height=640,
                                      im_width=640)
    counts = [a.num_boxes_static() for a in anchors_list]
    # 9 * (80^2 + 40^2 + 20^2 + 10^2 + 5^2) = 9 * 8525 = 76725.
    assert counts == [9 * 6400, 9 * 1600, 9 * 400, 9 * 100, 9 * 25]
    assert sum(counts) == 76725
    return [a.get() for a in anchors_list]

  levels = execute(graph_fn)
  assert sum(level.shape[0] for level in levels) == 76725
  # Last anchor of level 7: bottom-right cell, center 4*128 + 64 = 576,
  # ratio 0.5 with scale 2^(2/3): h = 512 * 2^(2/3) / sqrt(0.5).
  h = 512 * 2 ** (2 / 3) / np.sqrt(0.5)
  w = 512 * 2 ** (2 / 3) * np.sqrt(0.5)
  np.testing.assert_allclose(
      levels[4][-1],
      np.array([576 - h / 2, 576 - w / 2, 576 + h / 2, 576 + w / 2]) / 640,
      rtol=1e-5)


def test_two_levels_have_their_own_stride():
  with tf.Graph().as_default():
    generator = msg.MultiscaleGridAnchorGenerator(
        5, 6, 4.0, [1.0, 2.0], 3, normalize_coordinates=False)
    assert generator.num_anchors_per_location() == [6, 6]
    anchors_list = generator.generate([(2, 2), (1, 1)], im_height=64,
                                      im_width=64)
    assert [a.get().shape.as_list() for a in anchors_list] == [[24, 4],
                                                              [6, 4]]
    assert anchors_list[0].get().name.startswith(
        'MultiscaleGridAnchorGenerator/')


def test_no_aspect_ratios_gives_no_anchors(execute):
  def graph_fn():
    generator = msg.MultiscaleGridAnchorGenerator(
        3, 3, 4.0, [], 2, normalize_coordinates=False)
    return generator.generate([(2, 2)], im_height=16, im_width=16)[0].get()

  assert execute(graph_fn).shape == (0, 4)


@pytest.mark.parametrize('im_height,im_width', [(1, 1), (64, 1), (1, 64)])
def test_normalized_without_image_size_fails(im_height, im_width):
  generator = _single_level(5, 1.0, normalize=True)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Normalized coordinates'):
      generator.generate([(2, 2)], im_height=im_height, im_width=im_width)


def test_wrong_number_of_levels():
  generator = msg.MultiscaleGridAnchorGenerator(3, 4, 4.0, [1.0], 1)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='num_anchors_per_location'):
      generator.generate([(8, 8)], im_height=64, im_width=64)
