"""preprocessor_builder: steps built from text protos like the sample configs."""

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import preprocessor_builder
from od_estimator.core import preprocessor
from od_estimator.core import standard_fields as fields
from od_estimator.protos import preprocessor_pb2
from od_estimator.config import config_util
from tests import upstream_folder


def _build(text):
  return preprocessor_builder.build(
      text_format.Parse(text, preprocessor_pb2.PreprocessingStep()))


def _assert_args(args, expected):
  assert sorted(args) == sorted(expected)
  for key, value in expected.items():
    if isinstance(value, float):
      assert args[key] == pytest.approx(value), key
    else:
      assert args[key] == value, key


# (text proto, op, expected kwargs). Float fields come back as the decimals
# written in the config.
_CASES = [
    ("""normalize_image {
          original_minval: 0.0 original_maxval: 255.0
          target_minval: -1.0 target_maxval: 1.0 }""",
     preprocessor.normalize_image,
     {'original_minval': 0.0, 'original_maxval': 255.0,
      'target_minval': -1.0, 'target_maxval': 1.0}),
    ("""random_horizontal_flip {
          keypoint_flip_permutation: 1 keypoint_flip_permutation: 0
          keypoint_flip_permutation: 2 keypoint_flip_permutation: 3
          keypoint_flip_permutation: 5 keypoint_flip_permutation: 4
          probability: 0.5 }""",
     preprocessor.random_horizontal_flip,
     {'keypoint_flip_permutation': (1, 0, 2, 3, 5, 4), 'probability': 0.5}),
    ('random_horizontal_flip { }', preprocessor.random_horizontal_flip,
     {'keypoint_flip_permutation': None, 'probability': 0.5}),
    ("""random_vertical_flip {
          keypoint_flip_permutation: [1, 0] probability: 0.3 }""",
     preprocessor.random_vertical_flip,
     {'keypoint_flip_permutation': (1, 0), 'probability': 0.3}),
    ("""random_rotation90 {
          keypoint_rot_permutation: [3, 0, 1, 2] probability: 0.5 }""",
     preprocessor.random_rotation90,
     {'keypoint_rot_permutation': (3, 0, 1, 2), 'probability': 0.5}),
    ('random_pixel_value_scale { minval: 0.8 maxval: 1.2 }',
     preprocessor.random_pixel_value_scale, {'minval': 0.8, 'maxval': 1.2}),
    ('random_image_scale { min_scale_ratio: 0.8 max_scale_ratio: 2.2 }',
     preprocessor.random_image_scale,
     {'min_scale_ratio': 0.8, 'max_scale_ratio': 2.2}),
    ('random_rgb_to_gray { probability: 0.8 }',
     preprocessor.random_rgb_to_gray, {'probability': 0.8}),
    # Unset fields take the proto's defaults.
    ('random_adjust_brightness { }', preprocessor.random_adjust_brightness,
     {'max_delta': 0.2}),
    ('random_adjust_contrast { }', preprocessor.random_adjust_contrast,
     {'min_delta': 0.8, 'max_delta': 1.25}),
    ('random_distort_color { }', preprocessor.random_distort_color,
     {'color_ordering': 0}),
    ('normalize_image { original_minval: 0.0 original_maxval: 255.0 }',
     preprocessor.normalize_image,
     {'original_minval': 0.0, 'original_maxval': 255.0,
      'target_minval': 0.0, 'target_maxval': 1.0}),
    ('random_adjust_brightness { max_delta: 0.2 }',
     preprocessor.random_adjust_brightness, {'max_delta': 0.2}),
    ('random_adjust_contrast { min_delta: 0.7 max_delta: 1.1 }',
     preprocessor.random_adjust_contrast,
     {'min_delta': 0.7, 'max_delta': 1.1}),
    ('random_adjust_hue { max_delta: 0.01 }', preprocessor.random_adjust_hue,
     {'max_delta': 0.01}),
    ('random_adjust_saturation { min_delta: 0.75 max_delta: 1.15 }',
     preprocessor.random_adjust_saturation,
     {'min_delta': 0.75, 'max_delta': 1.15}),
    ('random_distort_color { color_ordering: 1 }',
     preprocessor.random_distort_color, {'color_ordering': 1}),
    ('random_jitter_boxes { ratio: 0.1 jitter_mode: SHRINK }',
     preprocessor.random_jitter_boxes, {'ratio': 0.1, 'jitter_mode': 'shrink'}),
    ('random_jitter_boxes { }', preprocessor.random_jitter_boxes,
     {'ratio': 0.05, 'jitter_mode': 'default'}),
    ("""random_crop_image {
          min_object_covered: 0.0 min_aspect_ratio: 0.75
          max_aspect_ratio: 3.0 min_area: 0.75 max_area: 1.0
          overlap_thresh: 0.0 }""",
     preprocessor.random_crop_image,
     {'min_object_covered': 0.0, 'aspect_ratio_range': (0.75, 3.0),
      'area_range': (0.75, 1.0), 'overlap_thresh': 0.0, 'clip_boxes': True,
      'random_coef': 0.0}),
    ("""random_pad_image {
          min_image_height: 10 min_image_width: 20
          max_image_height: 30 max_image_width: 40
          pad_color: [1.0, 2.0, 3.0] }""",
     preprocessor.random_pad_image,
     {'min_image_size': (10, 20), 'max_image_size': (30, 40),
      'pad_color': (1.0, 2.0, 3.0)}),
    ('random_pad_image { }', preprocessor.random_pad_image,
     {'min_image_size': None, 'max_image_size': None, 'pad_color': None}),
    ("""random_absolute_pad_image {
          max_height_padding: 50 max_width_padding: 100 }""",
     preprocessor.random_absolute_pad_image,
     {'max_height_padding': 50, 'max_width_padding': 100, 'pad_color': None}),
    # Unset paddings become 1 (no padding) as in the original.
    ('random_absolute_pad_image { }', preprocessor.random_absolute_pad_image,
     {'max_height_padding': 1, 'max_width_padding': 1, 'pad_color': None}),
    ("""random_crop_pad_image {
          min_object_covered: 0.75 min_aspect_ratio: 0.75
          max_aspect_ratio: 1.5 min_area: 0.25 max_area: 0.875
          overlap_thresh: 0.5 clip_boxes: false random_coef: 0.125 }""",
     preprocessor.random_crop_pad_image,
     {'min_object_covered': 0.75, 'aspect_ratio_range': (0.75, 1.5),
      'area_range': (0.25, 0.875), 'overlap_thresh': 0.5,
      'clip_boxes': False, 'random_coef': 0.125, 'pad_color': None}),
    ("""random_crop_pad_image {
          min_padded_size_ratio: [0.5, 0.75]
          max_padded_size_ratio: [0.5, 0.75]
          pad_color: [0.5, 0.5, 0.5] }""",
     preprocessor.random_crop_pad_image,
     {'min_object_covered': 1.0, 'aspect_ratio_range': (0.75, 1.33),
      'area_range': (0.1, 1.0), 'overlap_thresh': 0.3, 'clip_boxes': True,
      'random_coef': 0.0, 'min_padded_size_ratio': (0.5, 0.75),
      'max_padded_size_ratio': (0.5, 0.75), 'pad_color': (0.5, 0.5, 0.5)}),
    ("""random_crop_to_aspect_ratio {
          aspect_ratio: 0.85 overlap_thresh: 0.35 }""",
     preprocessor.random_crop_to_aspect_ratio,
     {'aspect_ratio': 0.85, 'overlap_thresh': 0.35, 'clip_boxes': True}),
    ("""random_black_patches {
          max_black_patches: 20 probability: 0.95 size_to_image_ratio: 0.12 }""",
     preprocessor.random_black_patches,
     {'max_black_patches': 20, 'probability': 0.95,
      'size_to_image_ratio': 0.12}),
    ("""random_jpeg_quality {
          random_coef: 0.5 min_jpeg_quality: 40 max_jpeg_quality: 90 }""",
     preprocessor.random_jpeg_quality,
     {'random_coef': 0.5, 'min_jpeg_quality': 40, 'max_jpeg_quality': 90}),
    ("""random_patch_gaussian {
          random_coef: 0.5 min_patch_size: 10 max_patch_size: 300
          min_gaussian_stddev: 0.2 max_gaussian_stddev: 1.5 }""",
     preprocessor.random_patch_gaussian,
     {'random_coef': 0.5, 'min_patch_size': 10, 'max_patch_size': 300,
      'min_gaussian_stddev': 0.2, 'max_gaussian_stddev': 1.5}),
    ('drop_label_probabilistically { label: 2 drop_probability: 0.5 }',
     preprocessor.drop_label_probabilistically,
     {'dropped_label': 2, 'drop_probability': 0.5}),
    ('drop_label_probabilistically { label: 2 }',
     preprocessor.drop_label_probabilistically,
     {'dropped_label': 2, 'drop_probability': 1.0}),
    ('remap_labels { original_labels: [1, 2] new_label: 3 }',
     preprocessor.remap_labels, {'original_labels': [1, 2], 'new_label': 3}),
    ('random_resize_method { target_height: 75 target_width: 100 }',
     preprocessor.random_resize_method, {'target_size': [75, 100]}),
    ('scale_boxes_to_pixel_coordinates { }',
     preprocessor.scale_boxes_to_pixel_coordinates, {}),
    ("""resize_image {
          new_height: 75 new_width: 100 method: BICUBIC }""",
     preprocessor.resize_image,
     {'new_height': 75, 'new_width': 100,
      'method': tf.compat.v1.image.ResizeMethod.BICUBIC}),
    ('resize_image { new_height: 75 new_width: 100 }',
     preprocessor.resize_image,
     {'new_height': 75, 'new_width': 100,
      'method': tf.compat.v1.image.ResizeMethod.BILINEAR}),
    ('rgb_to_gray { }', preprocessor.rgb_to_gray, {}),
    ('subtract_channel_mean { means: [1.0, 2.0, 3.0] }',
     preprocessor.subtract_channel_mean, {'means': [1.0, 2.0, 3.0]}),
    ('convert_class_logits_to_softmax { temperature: 2 }',
     preprocessor.convert_class_logits_to_softmax, {'temperature': 2.0}),
    ('adjust_gamma { gamma: 2.2 gain: 2.0 }', preprocessor.adjust_gamma,
     {'gamma': 2.2, 'gain': 2.0}),
    ("""random_square_crop_by_scale {
          scale_min: 0.25 scale_max: 2.0 num_scales: 8 }""",
     preprocessor.random_square_crop_by_scale,
     {'scale_min': 0.25, 'scale_max': 2.0, 'max_border': 128,
      'num_scales': 8}),
    ("""random_scale_crop_and_pad_to_square {
          output_size: 640 scale_min: 0.5 scale_max: 1.5 }""",
     preprocessor.random_scale_crop_and_pad_to_square,
     {'output_size': 640, 'scale_min': 0.5, 'scale_max': 1.5}),
    ('ssd_random_crop { }', preprocessor.ssd_random_crop, {}),
    ('random_self_concat_image { concat_vertical_probability: 0.25 }',
     preprocessor.random_self_concat_image,
     {'concat_vertical_probability': 0.25,
      'concat_horizontal_probability': 0.1}),
    ('random_downscale_to_target_pixels { random_coef: 0.5 '
     'min_target_pixels: 100 }',
     preprocessor.random_downscale_to_target_pixels,
     {'random_coef': 0.5, 'min_target_pixels': 100,
      'max_target_pixels': 500000}),
    ('ssd_random_crop_pad { }', preprocessor.ssd_random_crop_pad, {}),
    ('ssd_random_crop_fixed_aspect_ratio { }',
     preprocessor.ssd_random_crop_fixed_aspect_ratio, {}),
    ('ssd_random_crop_fixed_aspect_ratio { aspect_ratio: 0.75 }',
     preprocessor.ssd_random_crop_fixed_aspect_ratio, {'aspect_ratio': 0.75}),
    ('ssd_random_crop_pad_fixed_aspect_ratio { }',
     preprocessor.ssd_random_crop_pad_fixed_aspect_ratio,
     {'aspect_ratio': 1.0}),
]


@pytest.mark.parametrize('text,function,expected', _CASES,
                         ids=[c[0].split()[0] for c in _CASES])
def test_build_step(text, function, expected):
  built_function, args = _build(text)
  assert built_function is function
  _assert_args(args, expected)
  # Every built op can be run by preprocess() with the default arg map.
  assert built_function in preprocessor.get_default_func_arg_map()


def test_ssd_random_crop_operations():
  function, args = _build("""
    ssd_random_crop {
      operations {
        min_object_covered: 0.0 min_aspect_ratio: 0.875
        max_aspect_ratio: 1.125 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.0 random_coef: 0.375
      }
      operations {
        min_object_covered: 0.25 min_aspect_ratio: 0.75
        max_aspect_ratio: 1.5 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.25 clip_boxes: false random_coef: 0.375
      }
    }""")
  assert function is preprocessor.ssd_random_crop
  assert args == {
      'min_object_covered': [0.0, 0.25],
      'aspect_ratio_range': [(0.875, 1.125), (0.75, 1.5)],
      'area_range': [(0.5, 1.0), (0.5, 1.0)],
      'overlap_thresh': [0.0, 0.25],
      'clip_boxes': [True, False],
      'random_coef': [0.375, 0.375]}


def test_ssd_random_crop_pad_operations():
  function, args = _build("""
    ssd_random_crop_pad {
      operations {
        min_object_covered: 0.0 min_aspect_ratio: 0.875
        max_aspect_ratio: 1.125 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.0 random_coef: 0.375
        min_padded_size_ratio: [1.0, 1.0] max_padded_size_ratio: [2.0, 2.0]
        pad_color_r: 0.5 pad_color_g: 0.5 pad_color_b: 0.5
      }
      operations {
        min_object_covered: 0.25 min_aspect_ratio: 0.75
        max_aspect_ratio: 1.5 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.25 random_coef: 0.375
      }
    }""")
  assert function is preprocessor.ssd_random_crop_pad
  assert args == {
      'min_object_covered': [0.0, 0.25],
      'aspect_ratio_range': [(0.875, 1.125), (0.75, 1.5)],
      'area_range': [(0.5, 1.0), (0.5, 1.0)],
      'overlap_thresh': [0.0, 0.25],
      'clip_boxes': [True, True],
      'random_coef': [0.375, 0.375],
      # The second operation sets no ratios: the op's defaults fill in.
      'min_padded_size_ratio': [(1.0, 1.0), (1.0, 1.0)],
      'max_padded_size_ratio': [(2.0, 2.0), (2.0, 2.0)],
      'pad_color': [(0.5, 0.5, 0.5), (0.0, 0.0, 0.0)]}


def test_ssd_random_crop_fixed_aspect_ratio_operations():
  function, args = _build("""
    ssd_random_crop_fixed_aspect_ratio {
      operations {
        min_object_covered: 0.0 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.0 random_coef: 0.375
      }
      operations {
        min_object_covered: 0.25 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.25 random_coef: 0.375
      }
      aspect_ratio: 0.875
    }""")
  assert function is preprocessor.ssd_random_crop_fixed_aspect_ratio
  assert args == {
      'min_object_covered': [0.0, 0.25], 'aspect_ratio': 0.875,
      'area_range': [(0.5, 1.0), (0.5, 1.0)], 'overlap_thresh': [0.0, 0.25],
      'clip_boxes': [True, True], 'random_coef': [0.375, 0.375]}


def test_ssd_random_crop_pad_fixed_aspect_ratio_operations():
  function, args = _build("""
    ssd_random_crop_pad_fixed_aspect_ratio {
      operations {
        min_object_covered: 0.0 min_aspect_ratio: 0.875
        max_aspect_ratio: 1.125 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.0 random_coef: 0.375
      }
      operations {
        min_object_covered: 0.25 min_aspect_ratio: 0.75
        max_aspect_ratio: 1.5 min_area: 0.5 max_area: 1.0
        overlap_thresh: 0.25 random_coef: 0.375
      }
      aspect_ratio: 0.875
      min_padded_size_ratio: [1.0, 1.0]
      max_padded_size_ratio: [2.0, 2.0]
    }""")
  assert function is preprocessor.ssd_random_crop_pad_fixed_aspect_ratio
  assert args == {
      'min_object_covered': [0.0, 0.25], 'aspect_ratio': 0.875,
      'aspect_ratio_range': [(0.875, 1.125), (0.75, 1.5)],
      'area_range': [(0.5, 1.0), (0.5, 1.0)], 'overlap_thresh': [0.0, 0.25],
      'clip_boxes': [True, True], 'random_coef': [0.375, 0.375],
      'min_padded_size_ratio': (1.0, 1.0), 'max_padded_size_ratio': (2.0, 2.0)}


@pytest.mark.parametrize('text,match', [
    ('autoaugment_image { policy_name: "v3" }', 'policy_name "v3"'),
    ('', 'not set'),
    ('normalize_image { original_minval: 0.0 }', 'original_maxval'),
    ('normalize_image { original_minval: 1.0 original_maxval: 1.0 }',
     'original_maxval'),
    ('subtract_channel_mean { }', 'means'),
    ('random_pad_image { min_image_height: 10 }', 'min_image_width'),
    ('random_crop_pad_image { min_padded_size_ratio: [1.0] }',
     'min_padded_size_ratio'),
    ('ssd_random_crop_pad_fixed_aspect_ratio { max_padded_size_ratio: [1.0] }',
     'max_padded_size_ratio'),
    ('random_resize_method { target_height: 10 }', 'target_width'),
    ('resize_image { new_width: 10 }', 'new_height'),
])
def test_build_errors(text, match):
  with pytest.raises(ValueError, match=match):
    _build(text)


def test_build_rejects_other_messages():
  with pytest.raises(ValueError, match='PreprocessingStep'):
    preprocessor_builder.build(preprocessor_pb2.RandomAdjustHue())


def test_built_steps_run_through_preprocess(execute):
  steps = [_build(text) for text in (
      'random_horizontal_flip { }',
      'random_adjust_brightness { max_delta: 0.0 }',
      'ssd_random_crop { }',
      'random_crop_image { min_object_covered: 0.0 min_area: 0.75 }',
      'normalize_image { original_minval: 0 original_maxval: 255 }')]
  boxes = np.array([[0.1, 0.1, 0.6, 0.6], [0.5, 0.2, 0.9, 0.8]], np.float32)

  def graph_fn(image, boxes, classes):
    return preprocessor.preprocess(
        {fields.InputDataFields.image: image,
         fields.InputDataFields.groundtruth_boxes: boxes,
         fields.InputDataFields.groundtruth_classes: classes},
        steps, preprocessor.get_default_func_arg_map(
            include_label_weights=False))

  out = execute(graph_fn, [np.full([1, 16, 16, 3], 255.0, np.float32), boxes,
                           np.array([1, 2], np.int32)])
  image = out[fields.InputDataFields.image]
  assert image.ndim == 4 and image.shape[0] == 1
  # Brightness delta 0, then [0, 255] -> [0, 1]: a white image stays 1.
  np.testing.assert_allclose(image, 1.0, atol=1e-5)
  num = len(out[fields.InputDataFields.groundtruth_classes])
  assert out[fields.InputDataFields.groundtruth_boxes].shape == (num, 4)


@pytest.mark.parametrize('path', upstream_folder.params())
def test_upstream_data_augmentation_options_build(path):
  configs = config_util.get_configs_from_pipeline_file(path)
  default_map = preprocessor.get_default_func_arg_map(
      include_instance_masks=True, include_keypoints=True)
  for step in configs['train_config'].data_augmentation_options:
    function, args = preprocessor_builder.build(step)
    assert function in default_map
    assert isinstance(args, dict)
