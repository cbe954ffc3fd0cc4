"""Tests for od_estimator.builders.anchor_generator_builder."""
import math
import os

from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import flexible_grid_anchor_generator
from od_estimator.anchor_generators import grid_anchor_generator
from od_estimator.anchor_generators import multiple_grid_anchor_generator
from od_estimator.anchor_generators import multiscale_grid_anchor_generator
from od_estimator.builders import anchor_generator_builder
from od_estimator.protos import anchor_generator_pb2
from od_estimator.protos import grid_anchor_generator_pb2
from od_estimator.config import config_util
from tests import upstream_folder



def _build(text):
  config = anchor_generator_pb2.AnchorGenerator()
  text_format.Merge(text, config)
  return anchor_generator_builder.build(config)


def _generate(generator, shapes, **params):
  with tf.Graph().as_default():
    anchors_list = generator.generate(shapes, **params)
    with tf.compat.v1.Session() as sess:
      return sess.run([anchors.get() for anchors in anchors_list])


def test_grid_defaults():
  generator = _build('grid_anchor_generator {}')
  assert isinstance(generator, grid_anchor_generator.GridAnchorGenerator)
  assert generator._scales == []
  assert generator._aspect_ratios == []
  assert generator._base_anchor_size == [256, 256]
  assert generator._anchor_stride == [16, 16]
  assert generator._anchor_offset == [0, 0]
  assert generator.num_anchors_per_location() == [0]


def test_grid_faster_rcnn_sample():
  generator = _build("""
    grid_anchor_generator {
      scales: [0.25, 0.5, 1.0, 2.0]
      aspect_ratios: [0.5, 1.0, 2.0]
      height_stride: 16
      width_stride: 16
    }
  """)
  assert generator.num_anchors_per_location() == [12]
  (boxes,) = _generate(generator, [(1, 2)])
  assert boxes.shape == (24, 4)
  # First anchor: ratio 0.5, scale 0.25, base 256 at center (0, 0):
  # h = 0.25 / sqrt(0.5) * 256, w = 0.25 * sqrt(0.5) * 256.
  h = 0.25 / math.sqrt(0.5) * 256
  w = 0.25 * math.sqrt(0.5) * 256
  np.testing.assert_allclose(boxes[0], [-h / 2, -w / 2, h / 2, w / 2],
                             rtol=1e-6)
  # Anchor 12 starts the second cell, 16 px to the right.
  np.testing.assert_allclose(boxes[12], boxes[0] + [0, 16, 0, 16], rtol=1e-6)


def test_grid_all_fields():
  generator = _build("""
    grid_anchor_generator {
      height: 128
      width: 512
      height_stride: 10
      width_stride: 20
      height_offset: 30
      width_offset: 40
      scales: [0.5]
      aspect_ratios: [1.0]
    }
  """)
  assert generator._base_anchor_size == [128, 512]
  assert generator._anchor_stride == [10, 20]
  assert generator._anchor_offset == [30, 40]
  # 0.5 * 128 = 64 high, 0.5 * 512 = 256 wide, centered at (30, 40 + 20).
  boxes = _generate(generator, [(1, 2)])[0]
  np.testing.assert_array_equal(boxes, [[-2, -88, 62, 168],
                                        [-2, -68, 62, 188]])


def test_ssd_standard_300x300_sample():
  generator = _build("""
    ssd_anchor_generator {
      num_layers: 6
      min_scale: 0.2
      max_scale: 0.95
      aspect_ratios: 1.0
      aspect_ratios: 2.0
      aspect_ratios: 0.5
      aspect_ratios: 3.0
      aspect_ratios: 0.3333
    }
  """)
  assert isinstance(generator,
                    multiple_grid_anchor_generator.MultipleGridAnchorGenerator)
  assert generator.num_anchors_per_location() == [3, 6, 6, 6, 6, 6]
  layers = _generate(generator,
                     [(19, 19), (10, 10), (5, 5), (3, 3), (2, 2), (1, 1)])
  # 19*19*3 + (100 + 25 + 9 + 4 + 1) * 6 = 1083 + 834.
  assert sum(layer.shape[0] for layer in layers) == 1917


def test_ssd_defaults():
  generator = _build('ssd_anchor_generator { aspect_ratios: [1.0] }')
  # Scales 0.2 + 0.15 * l (l = 0..5); the lowest layer has the fixed
  # (0.1, 1), (0.2, 2), (0.2, 0.5) boxes, the others (s_l, 1) and the
  # interpolated (sqrt(s_l * s_{l+1}), 1) with s_6 = 1.
  scales = [0.2 + 0.15 * layer for layer in range(6)] + [1.0]
  assert generator._scales[0] == pytest.approx((0.1, 0.2, 0.2))
  assert generator._aspect_ratios[0] == (1.0, 2.0, 0.5)
  for layer in range(1, 6):
    assert generator._scales[layer] == pytest.approx(
        (scales[layer], math.sqrt(scales[layer] * scales[layer + 1])),
        rel=1e-6)
    assert generator._aspect_ratios[layer] == (1.0, 1.0)
  assert generator._base_anchor_size == pytest.approx([1.0, 1.0])
  assert generator._anchor_strides is None
  assert generator._anchor_offsets is None


def test_ssd_custom_scales_and_interpolation_ratio():
  generator = _build("""
    ssd_anchor_generator {
      aspect_ratios: [0.5]
      scales: [0.1, 0.15, 0.2, 0.4, 0.6, 0.8]
      interpolated_scale_aspect_ratio: 0.5
      reduce_boxes_in_lowest_layer: false
    }
  """)
  scales = [0.1, 0.15, 0.2, 0.4, 0.6, 0.8, 1.0]
  for layer in range(6):
    assert generator._scales[layer] == pytest.approx(
        (scales[layer], math.sqrt(scales[layer] * scales[layer + 1])),
        rel=1e-6)
    assert generator._aspect_ratios[layer] == (0.5, 0.5)


def test_ssd_without_interpolated_box():
  generator = _build("""
    ssd_anchor_generator {
      num_layers: 3
      aspect_ratios: [1.0, 2.0]
      interpolated_scale_aspect_ratio: 0.0
      reduce_boxes_in_lowest_layer: false
    }
  """)
  assert generator.num_anchors_per_location() == [2, 2, 2]


def test_ssd_strides_offsets_and_base_size():
  generator = _build("""
    ssd_anchor_generator {
      num_layers: 2
      min_scale: 0.3
      max_scale: 0.8
      aspect_ratios: [1.0]
      reduce_boxes_in_lowest_layer: false
      interpolated_scale_aspect_ratio: 0.0
      base_anchor_height: 2.0
      base_anchor_width: 0.5
      height_stride: 16
      height_stride: 32
      width_stride: 20
      width_stride: 30
      height_offset: 8
      height_offset: 16
      width_offset: 0
      width_offset: 10
    }
  """)
  assert generator._anchor_strides == [(16, 20), (32, 30)]
  assert generator._anchor_offsets == [(8, 0), (16, 10)]
  assert generator._base_anchor_size == [2.0, 0.5]
  # Layer 1 on a 64 x 64 image: scale 0.8 -> 1.6 x 0.4 (normalized); center
  # (16 / 64, 10 / 64) = (0.25, 0.15625).
  _, layer1 = _generate(generator, [(2, 2), (1, 1)], im_height=64,
                        im_width=64)
  np.testing.assert_allclose(
      layer1, [[0.25 - 0.8, 0.15625 - 0.2, 0.25 + 0.8, 0.15625 + 0.2]],
      rtol=1e-6)


def test_ssd_unpaired_strides_fail():
  with pytest.raises(ValueError, match='height_stride'):
    _build("""
      ssd_anchor_generator {
        num_layers: 2
        aspect_ratios: [1.0]
        height_stride: [16, 32]
        width_stride: [16]
      }
    """)


def test_multiscale_retinanet_sample():
  generator = _build("""
    multiscale_anchor_generator {
      min_level: 3
      max_level: 7
      anchor_scale: 4.0
      aspect_ratios: [1.0, 2.0, 0.5]
      scales_per_octave: 2
    }
  """)
  assert isinstance(
      generator, multiscale_grid_anchor_generator.MultiscaleGridAnchorGenerator)
  assert generator.num_anchors_per_location() == [6] * 5
  layers = _generate(generator, [(80, 80), (40, 40), (20, 20), (10, 10),
                                 (5, 5)], im_height=640, im_width=640)
  # 6 * (6400 + 1600 + 400 + 100 + 25).
  assert sum(layer.shape[0] for layer in layers) == 6 * 8525
  # Normalized: every center lies inside the image.
  centers = (layers[0][:, :2] + layers[0][:, 2:]) / 2
  assert centers.min() > 0 and centers.max() < 1


def test_multiscale_defaults_and_three_scales():
  generator = _build("""
    multiscale_anchor_generator {
      aspect_ratios: [1.0, 2.0, 0.5]
      scales_per_octave: 3
    }
  """)
  # Defaults: levels 3..7, anchor scale 4, normalized coordinates.
  assert [info['level'] for info in generator._anchor_grid_info] == [
      3, 4, 5, 6, 7]
  for info in generator._anchor_grid_info:
    level = info['level']
    scales, ratios, base, stride = info['info']
    assert scales == pytest.approx([1.0, 2 ** (1 / 3), 2 ** (2 / 3)])
    assert ratios == [1.0, 2.0, 0.5]
    assert base == [4.0 * 2**level] * 2
    assert stride == [2**level] * 2
  assert generator._normalize_coordinates
  layers = _generate(generator, [(80, 80), (40, 40), (20, 20), (10, 10),
                                 (5, 5)], im_height=640, im_width=640)
  assert sum(layer.shape[0] for layer in layers) == 76725


def test_multiscale_pixel_coordinates():
  generator = _build("""
    multiscale_anchor_generator {
      min_level: 5
      max_level: 5
      anchor_scale: 1.0
      aspect_ratios: [1.0]
      scales_per_octave: 1
      normalize_coordinates: false
    }
  """)
  assert not generator._normalize_coordinates
  # Stride 32, base 32, offset 16 on a 32 x 32 image: one box [0, 0, 32, 32].
  np.testing.assert_array_equal(
      _generate(generator, [(1, 1)], im_height=32, im_width=32)[0],
      [[0, 0, 32, 32]])


def test_flexible_grid():
  generator = _build("""
    flexible_grid_anchor_generator {
      anchor_grid {
        base_sizes: [1.5]
        aspect_ratios: [1.0]
        height_stride: 16
        width_stride: 20
        height_offset: 8
        width_offset: 9
      }
      anchor_grid {
        base_sizes: [1.0, 2.0]
        aspect_ratios: [1.0, 0.5]
        height_stride: 32
        width_stride: 30
        height_offset: 10
        width_offset: 11
      }
    }
  """)
  assert isinstance(
      generator, flexible_grid_anchor_generator.FlexibleGridAnchorGenerator)
  assert generator._base_sizes == [(1.5,), (1.0, 2.0)]
  assert generator._aspect_ratios == [(1.0,), (1.0, 0.5)]
  assert generator._anchor_strides == [(16, 20), (32, 30)]
  assert generator._anchor_offsets == [(8, 9), (10, 11)]
  assert generator._normalize_coordinates
  assert generator.num_anchors_per_location() == [1, 2]


def test_flexible_grid_pixel_coordinates():
  generator = _build("""
    flexible_grid_anchor_generator {
      anchor_grid {
        base_sizes: [32]
        aspect_ratios: [1.0]
        height_stride: 16
        width_stride: 16
        height_offset: 8
        width_offset: 8
      }
      normalize_coordinates: false
    }
  """)
  # 32 x 32 boxes at (8, 8) and (8, 24).
  np.testing.assert_array_equal(_generate(generator, [(1, 2)])[0],
                                [[-8, -8, 24, 24], [-8, 8, 24, 40]])


def test_empty_config_fails():
  with pytest.raises(ValueError, match='anchor_generator_oneof'):
    _build('')


def test_wrong_config_type_fails():
  with pytest.raises(ValueError, match='AnchorGenerator'):
    anchor_generator_builder.build(
        grid_anchor_generator_pb2.GridAnchorGenerator())


@pytest.mark.parametrize('path', upstream_folder.params())
def test_upstream_sample_configs_build(path):
  name = os.path.basename(path)
  pipeline = config_util.read_pipeline_config(path)
  arch = pipeline.model.WhichOneof('model')
  model = getattr(pipeline.model, arch)
  field = ('anchor_generator' if arch == 'ssd' else
           'first_stage_anchor_generator')
  if not model.HasField(field):
    pytest.skip('%s has no %s' % (name, field))
  generator = anchor_generator_builder.build(getattr(model, field))
  counts = generator.num_anchors_per_location()
  assert counts and all(count > 0 for count in counts)
