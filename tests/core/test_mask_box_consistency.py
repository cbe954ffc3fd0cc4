"""Every augmentation that moves boxes moves the instance masks the same way.

Each preprocessing step that takes masks is built from its config (through
preprocessor_builder, as a pipeline.config would) and run several times,
with distinct random draws, on rectangular 0/1 masks of a 24 x 32 image.
After the op, the mask of every kept box must still be 0/1, the image's
size, and its pixels' bounding box must equal the box within one pixel.
The image's channel 0 holds each object's class inside its rectangle, so
a mask paired with the wrong box (or the wrong image region) shows too.
random_scale_crop_and_pad_to_square resizes masks with the image's
(bilinear) method, as the original does: its masks are checked where they
are at least 0.5, within the two pixels bilinear upscaling may move an edge.
"""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.input_pipeline import inputs
from od_estimator.builders import image_resizer_builder
from od_estimator.builders import preprocessor_builder
from od_estimator.core import preprocessor
from od_estimator.core import standard_fields as fields
from od_estimator.protos import image_resizer_pb2
from od_estimator.protos import preprocessor_pb2

F = fields.InputDataFields
HEIGHT, WIDTH = 24, 32
# Pixel rows [y0, y1) and columns [x0, x1) of three separated objects.
REGIONS = [((2, 9), (3, 14)), ((10, 22), (16, 25)), ((13, 20), (26, 31))]
DRAWS = 6  # independent random draws of each op, in one graph
# Steps whose masks are resampled like the image (not kept 0/1).
SOFT_MASK_STEPS = ('random_scale_crop_and_pad_to_square',)

# Every step of preprocessor.proto whose op takes masks, with settings that
# make it crop / pad / scale often (the defaults often leave the image).
STEPS = {
    'random_horizontal_flip': 'random_horizontal_flip {}',
    'random_vertical_flip': 'random_vertical_flip {}',
    'random_rotation90': 'random_rotation90 {}',
    'random_image_scale': ('random_image_scale { min_scale_ratio: 0.5 '
                           'max_scale_ratio: 2.0 }'),
    'random_crop_image': ('random_crop_image { min_object_covered: 0.0 '
                          'min_area: 0.3 max_area: 0.9 overlap_thresh: 0.0 '
                          'min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }'),
    'random_crop_image_unclipped': (
        'random_crop_image { min_object_covered: 0.0 min_area: 0.3 '
        'max_area: 0.9 overlap_thresh: 0.9 clip_boxes: false }'),
    'random_pad_image': 'random_pad_image {}',
    'random_absolute_pad_image': ('random_absolute_pad_image { '
                                  'max_height_padding: 9 '
                                  'max_width_padding: 13 }'),
    'random_crop_pad_image': ('random_crop_pad_image { min_object_covered: '
                              '0.0 min_area: 0.3 max_area: 0.9 '
                              'overlap_thresh: 0.0 }'),
    'random_crop_to_aspect_ratio': ('random_crop_to_aspect_ratio { '
                                    'aspect_ratio: 0.75 }'),
    'ssd_random_crop': 'ssd_random_crop {}',
    'ssd_random_crop_pad': 'ssd_random_crop_pad {}',
    'ssd_random_crop_fixed_aspect_ratio': (
        'ssd_random_crop_fixed_aspect_ratio {}'),
    'ssd_random_crop_pad_fixed_aspect_ratio': (
        'ssd_random_crop_pad_fixed_aspect_ratio {}'),
    'random_resize_method': ('random_resize_method { target_height: 30 '
                             'target_width: 20 }'),
    'resize_image': 'resize_image { new_height: 17 new_width: 45 }',
    'resize_image_nearest': ('resize_image { new_height: 40 new_width: 20 '
                             'method: NEAREST_NEIGHBOR }'),
    'random_square_crop_by_scale': ('random_square_crop_by_scale { '
                                    'max_border: 4 scale_min: 0.5 '
                                    'scale_max: 1.5 }'),
    'random_scale_crop_and_pad_to_square': (
        'random_scale_crop_and_pad_to_square { output_size: 28 '
        'scale_min: 0.5 scale_max: 2.0 }'),
    'drop_label_probabilistically': ('drop_label_probabilistically { '
                                     'label: 2 drop_probability: 0.5 }'),
}

# Ops the original's func_arg_map gives masks but no PreprocessingStep has
# (resize_to_range's padding is covered with the image resizers below).
FUNCTIONS = {
    'resize_to_range': (preprocessor.resize_to_range,
                        {'min_dimension': 30, 'max_dimension': 50}),
    'resize_to_min_dimension': (preprocessor.resize_to_min_dimension,
                                {'min_dimension': 40}),
    'resize_to_max_dimension': (preprocessor.resize_to_max_dimension,
                                {'max_dimension': 20}),
    'random_pad_to_aspect_ratio': (preprocessor.random_pad_to_aspect_ratio,
                                   {'aspect_ratio': 2.0}),
    'retain_boxes_above_threshold': (
        preprocessor.retain_boxes_above_threshold, {'threshold': 0.25}),
}


def rectangle_example(keypoints=False):
  """[1, H, W, 3] image, boxes, classes, weights and 0/1 masks (and a
  keypoint at each box's centre)."""
  masks = np.zeros([len(REGIONS), HEIGHT, WIDTH], np.float32)
  image = np.zeros([1, HEIGHT, WIDTH, 3], np.float32)
  boxes = []
  for i, ((y0, y1), (x0, x1)) in enumerate(REGIONS):
    masks[i, y0:y1, x0:x1] = 1.0
    image[0, y0:y1, x0:x1, 0] = i + 1
    boxes.append([y0 / HEIGHT, x0 / WIDTH, y1 / HEIGHT, x1 / WIDTH])
  classes = np.arange(1, len(REGIONS) + 1, dtype=np.int32)
  example = {F.image: image, F.groundtruth_boxes: np.array(boxes, np.float32),
             F.groundtruth_classes: classes,
             F.groundtruth_weights: classes / 10.0,
             F.groundtruth_instance_masks: masks}
  if keypoints:
    boxes = example[F.groundtruth_boxes]
    example[F.groundtruth_keypoints] = np.stack(
        [(boxes[:, :2] + boxes[:, 2:]) / 2], axis=1).astype(np.float32)
  return example


def mask_extent(mask):
  """Normalized [ymin, xmin, ymax, xmax] of a mask's pixels, or None."""
  rows = np.nonzero(mask.any(axis=1))[0]
  cols = np.nonzero(mask.any(axis=0))[0]
  if not len(rows):
    return None
  height, width = mask.shape
  return np.array([rows[0] / height, cols[0] / width, (rows[-1] + 1) / height,
                   (cols[-1] + 1) / width])


def check_masks_follow_boxes(image, boxes, classes, masks, soft=False):
  """Asserts that every mask lies on its box, within one pixel.

  Args:
    image: [H, W, C] output image (channel 0: class inside each object).
    boxes: [M, 4] normalized boxes.
    classes: [M] 1-based classes (the object's index + 1).
    masks: [M, H, W] masks.
    soft: masks resampled bilinearly: values in [0, 1], the mask is where
      they reach 0.5, within two pixels of the box.
  """
  height, width = image.shape[:2]
  assert masks.shape == (len(boxes), height, width)
  assert len(classes) == len(boxes)
  if soft:
    assert masks.min() >= 0.0 and masks.max() <= 1.0 + 1e-6
    masks = (masks >= 0.5).astype(np.float32)
  assert set(np.unique(masks)) <= {0.0, 1.0}
  pixel = np.array([1.0 / height, 1.0 / width] * 2) * (2 if soft else 1)
  for box, label, mask in zip(boxes, classes, masks):
    extent = mask_extent(mask)
    if extent is None:
      # A crop border can leave a sliver box without any mask pixel.
      assert min((box[2:] - box[:2]) * [height, width]) < 1.0 + 1e-4, box
      continue
    np.testing.assert_array_less(np.abs(extent - box), pixel + 1e-4)
    # The image under the mask shows this object.
    assert abs(image[:, :, 0][mask > 0].max() - label) < 0.5


def _run_option(execute, option, keypoints=False):
  """Outputs (dict of numpy) of DRAWS copies of one option, in one graph."""
  example = rectangle_example(keypoints)
  keys = sorted(example)
  arg_map = preprocessor.get_default_func_arg_map(
      include_instance_masks=True, include_keypoints=keypoints)

  def graph_fn(*tensors):
    tf.compat.v1.set_random_seed(7)
    return [preprocessor.preprocess(dict(zip(keys, tensors)), [option],
                                    arg_map) for _ in range(DRAWS)]

  return execute(graph_fn, [example[k] for k in keys])


def _check_outputs(outputs, soft=False):
  for out in outputs:
    check_masks_follow_boxes(out[F.image][0], out[F.groundtruth_boxes],
                             out[F.groundtruth_classes],
                             out[F.groundtruth_instance_masks], soft=soft)


# Steps whose draws carry keypoints too (test_keypoints_and_masks_...).
KEYPOINT_STEPS = ('random_crop_pad_image', 'ssd_random_crop_pad')
# name -> _run_option's outputs of STEPS[name]: each step is built once.
_step_outputs = {}


def _run_step(execute, name):
  if name not in _step_outputs:
    step = text_format.Parse(STEPS[name],
                             preprocessor_pb2.PreprocessingStep())
    _step_outputs[name] = _run_option(execute,
                                      preprocessor_builder.build(step),
                                      keypoints=name in KEYPOINT_STEPS)
  return _step_outputs[name]


@pytest.mark.parametrize('name', sorted(STEPS))
def test_step_moves_masks_with_boxes(execute, name):
  _check_outputs(_run_step(execute, name), soft=name in SOFT_MASK_STEPS)


@pytest.mark.parametrize('name', sorted(FUNCTIONS))
def test_function_moves_masks_with_boxes(execute, name):
  function, kwargs = FUNCTIONS[name]
  _check_outputs(_run_option(execute, (function, kwargs)))


def test_ops_do_move_boxes(execute):
  """The crops and pads above really move the boxes in some draws."""
  # Guards the test above against settings that leave every image alone:
  # the same draws it checked.
  moved = [any(out[F.image].shape[1:3] != (HEIGHT, WIDTH)
               for out in _run_step(execute, name))
           for name in ('random_crop_image', 'random_crop_pad_image',
                        'ssd_random_crop_pad', 'random_square_crop_by_scale')]
  assert all(moved), moved


def test_jitter_moves_boxes_not_masks(execute):
  """Box jitter is label noise: the masks (the true shapes) stay put."""
  step = text_format.Parse('random_jitter_boxes { ratio: 0.2 }',
                           preprocessor_pb2.PreprocessingStep())
  example = rectangle_example()
  for out in _run_option(execute, preprocessor_builder.build(step)):
    np.testing.assert_array_equal(out[F.groundtruth_instance_masks],
                                  example[F.groundtruth_instance_masks])
    boxes, original = out[F.groundtruth_boxes], example[F.groundtruth_boxes]
    size = np.tile(original[:, 2:] - original[:, :2], 2)
    assert np.all(np.abs(boxes - original) <= 0.2 * size + 1e-6)


def test_keypoints_and_masks_through_crop_pad(execute):
  """random_crop_pad_image / ssd_random_crop_pad carry keypoints too."""
  # The draws test_step_moves_masks_with_boxes checked the masks of.
  for name in KEYPOINT_STEPS:
    for out in _run_step(execute, name):
      boxes = out[F.groundtruth_boxes]
      keypoints = out[F.groundtruth_keypoints][:, 0]
      assert keypoints.shape == (len(boxes), 2)
      for box, point in zip(boxes, keypoints):
        if not np.isnan(point).any():
          assert box[0] - 1e-5 <= point[0] <= box[2] + 1e-5
          assert box[1] - 1e-5 <= point[1] <= box[3] + 1e-5


RESIZERS = {
    'keep_aspect_ratio_padded': """keep_aspect_ratio_resizer {
        min_dimension: 20 max_dimension: 40 pad_to_max_dimension: true }""",
    'keep_aspect_ratio': """keep_aspect_ratio_resizer {
        min_dimension: 36 max_dimension: 64 }""",
    'fixed_shape': 'fixed_shape_resizer { height: 30 width: 20 }',
    'fixed_shape_nearest': """fixed_shape_resizer {
        height: 50 width: 50 resize_method: NEAREST_NEIGHBOR }""",
    'identity': 'identity_resizer {}',
    'pad_to_multiple': 'pad_to_multiple_resizer { multiple: 20 }',
    'conditional_shape': """conditional_shape_resizer {
        condition: SMALLER size_threshold: 40 }""",
}


@pytest.mark.parametrize('name', sorted(RESIZERS))
def test_image_resizer_keeps_masks_on_boxes(execute, name):
  """transform_input_data resizes masks with the model's image resizer."""
  config = text_format.Parse(RESIZERS[name], image_resizer_pb2.ImageResizer())
  resizer = image_resizer_builder.build(config)

  def model_preprocess(images):
    resized, true_shape = resizer(images[0])
    return resized[tf.newaxis], true_shape[tf.newaxis]

  example = rectangle_example()
  example[F.image] = example[F.image][0]
  keys = sorted(example)

  def graph_fn(*tensors):
    out = inputs.transform_input_data(
        dict(zip(keys, tensors)), model_preprocess, resizer, num_classes=3)
    padded = inputs.pad_input_data_to_static_shapes(
        out, max_num_boxes=5, num_classes=3)
    return out, padded

  out, padded = execute(graph_fn, [example[k] for k in keys])
  masks = out[F.groundtruth_instance_masks]
  check_masks_follow_boxes(out[F.image], out[F.groundtruth_boxes],
                           out[F.groundtruth_classes].argmax(axis=1) + 1,
                           masks)
  if 'padded' in name:
    assert masks.shape[1:] == (40, 40)
  # Padding to max_number_of_boxes adds empty masks of the same size.
  padded_masks = padded[F.groundtruth_instance_masks]
  assert padded_masks.shape == (5,) + masks.shape[1:]
  np.testing.assert_array_equal(padded_masks[:3], masks)
  assert not padded_masks[3:].any()
