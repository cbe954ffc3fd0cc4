"""random_scale_crop_and_pad_to_square against the original's behaviour.

The first test follows the original's test (fixed scales, a 512 x 256
image, a 3 x 3 grid of boxes with keypoints at their corners and masks that
are copies of the image); the second fixes the graph and op seeds and
compares every output with a numpy re-implementation driven by the draws
tf.random makes for those seeds in the original's order.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import augment_pad


def _has_unclipped_pair(pairs, size_y, size_x):
  """True if a (min corner, max corner) pair off the borders has the size."""
  for (ymin, xmin), (ymax, xmax) in pairs:
    if (round(ymin, 7) != 0.0 and round(xmin, 7) != 0.0 and
        round(ymax, 7) != 1.0 and round(xmax, 7) != 1.0 and
        round((ymax - ymin) - size_y, 7) == 0.0 and
        round((xmax - xmin) - size_x, 7) == 0.0):
      return True
  return False


@pytest.mark.parametrize('scale', [0.1, 1.0, 2.0])
def test_random_scale_crop_and_pad_to_square(execute, scale):
  image = np.random.RandomState(1).randn(512, 256, 1)
  centers = [0.25, 0.5, 0.75]
  corners = np.array([[cy - 0.05, cx - 0.05, cy + 0.05, cx + 0.05]
                      for cy in centers for cx in centers], np.float32)
  keypoints = corners.reshape([9, 2, 2])
  masks = np.stack([image[:, :, 0]] * 9)

  def graph(image, boxes, masks, keypoints):
    labels = tf.ones([9, 1], tf.int32)
    weights = tf.ones([9, 1])
    new_image, new_boxes, _, _, new_masks, new_keypoints = (
        augment_pad.random_scale_crop_and_pad_to_square(
            image, boxes, labels, weights, masks=masks, keypoints=keypoints,
            scale_min=scale, scale_max=scale, output_size=512))
    return new_image, new_boxes, new_masks, new_keypoints
  out_image, out_boxes, out_masks, out_keypoints = execute(
      graph, [image, corners, masks, keypoints])

  # The longer side becomes int(scale * 512) pixels, the shorter one
  # int(scale * 256); an unclipped box keeps 0.1 of each in the output.
  size_y = 0.1 * int(scale * 512) / 512.0
  size_x = 0.1 * int(scale * 256) / 512.0
  assert _has_unclipped_pair(out_boxes.reshape([-1, 2, 2]), size_y, size_x)
  assert _has_unclipped_pair(out_keypoints, size_y, size_x)
  assert out_image.shape[:2] == (512, 512)
  # Masks are resized like the image (bilinear here), not kept 0/1.
  np.testing.assert_allclose(out_image[:, :, 0], out_masks[0])


def _np_resize_bilinear(array, out_h, out_w):
  """TF1 resize_bilinear (no corner alignment, no half-pixel centres)."""
  in_h, in_w = array.shape[:2]

  def weights(out_size, in_size):
    scale = np.float32(in_size) / np.float32(out_size)
    source = np.arange(out_size, dtype=np.float32) * scale
    low = np.floor(source)
    high = np.minimum(np.ceil(source), in_size - 1).astype(np.int64)
    return low.astype(np.int64), high, (source - low).astype(np.float32)

  top, bottom, y_lerp = weights(out_h, in_h)
  left, right, x_lerp = weights(out_w, in_w)
  x_lerp = x_lerp.reshape([out_w] + [1] * (array.ndim - 2))
  out = np.zeros((out_h, out_w) + array.shape[2:], np.float32)
  for r in range(out_h):
    upper = array[top[r], left] + (array[top[r], right] -
                                   array[top[r], left]) * x_lerp
    lower = array[bottom[r], left] + (array[bottom[r], right] -
                                      array[bottom[r], left]) * x_lerp
    out[r] = upper + (lower - upper) * y_lerp[r]
  return out


def _np_scale_crop_and_pad(image, boxes, masks, keypoints, draws,
                           scale_min, scale_max, output_size):
  """The original's computation in float32 numpy, given its three draws."""
  f32 = np.float32
  unit_scale, unit_y, unit_x = [f32(d) for d in draws]
  scale = unit_scale * (f32(scale_max) - f32(scale_min)) + f32(scale_min)
  height, width = image.shape[:2]
  longest = f32(max(height, width))
  scaled_h = int(scale * f32(output_size) * (f32(height) / longest))
  scaled_w = int(scale * f32(output_size) * (f32(width) / longest))
  offset_y = int(f32(max(0, scaled_h - output_size)) * unit_y)
  offset_x = int(f32(max(0, scaled_w - output_size)) * unit_x)

  def scale_crop_pad(array):
    array = _np_resize_bilinear(array, scaled_h, scaled_w)
    array = array[offset_y:offset_y + output_size,
                  offset_x:offset_x + output_size]
    out = np.zeros((output_size, output_size) + array.shape[2:], np.float32)
    out[:array.shape[0], :array.shape[1]] = array
    return out

  window = (np.array([offset_y, offset_x, offset_y + output_size,
                      offset_x + output_size], f32) /
            np.array([scaled_h, scaled_w] * 2, f32))
  origin = window[:2]
  inverse_size = f32(1.0) / (window[2:] - window[:2])
  moved = (boxes.reshape([-1, 2, 2]) - origin) * inverse_size
  outside = ((moved[:, 0] >= 1.0) | (moved[:, 1] <= 0.0)).any(axis=1)
  keep = np.flatnonzero(~outside)
  new_boxes = np.clip(moved[keep], 0.0, 1.0).reshape([-1, 4])
  new_keypoints = (keypoints[keep] - origin) * inverse_size
  inside = ((new_keypoints >= 0.0) & (new_keypoints <= 1.0)).all(axis=2)
  new_keypoints[~inside] = np.nan
  new_masks = np.stack([scale_crop_pad(mask) for mask in masks[keep]])
  return (scale_crop_pad(image), new_boxes, keep, new_masks, new_keypoints,
          (scale, offset_y, offset_x))


@pytest.mark.parametrize('scale_min, scale_max, op_seed, dynamic', [
    (1.2, 2.0, 3, False),    # Upscaled: a random crop of the scaled image.
    (0.3, 0.9, 5, False),    # Downscaled: the whole image, zero-padded.
    (0.5, 2.0, 11, False),
    (1.2, 2.0, 3, True),     # Unknown input shapes.
])
def test_seeded_outputs_match_numpy_reference(execute, scale_min, scale_max,
                                              op_seed, dynamic):
  graph_seed, output_size = 7, 8
  rng = np.random.RandomState(op_seed)
  image = rng.uniform(size=[10, 7, 2]).astype(np.float32)
  boxes = np.array([[0.05, 0.1, 0.45, 0.6],
                    [0.5, 0.5, 0.5, 0.5],        # No area: kept if inside.
                    [0.6, 0.2, 0.95, 0.9],
                    [0.0, 0.0, 1.0, 1.0],
                    [0.9, 0.85, 1.0, 1.0]], np.float32)
  masks = (rng.uniform(size=[5, 10, 7]) > 0.5).astype(np.float32)
  keypoints = np.stack([boxes[:, :2], boxes[:, 2:],
                        (boxes[:, :2] + boxes[:, 2:]) / 2], axis=1)
  labels = np.arange(1, 6, dtype=np.int32)
  weights = np.linspace(0.1, 0.5, 5).astype(np.float32)
  confidences = weights + 1.0

  def draw_graph():
    # The original draws, each with the op seed: scale, row and column
    # offset fractions.
    tf.compat.v1.set_random_seed(graph_seed)
    return [tf.random.uniform([], seed=op_seed) for _ in range(3)]
  draws = execute(draw_graph)

  def graph(*tensors):
    tf.compat.v1.set_random_seed(graph_seed)
    return augment_pad.random_scale_crop_and_pad_to_square(
        *tensors, scale_min=scale_min, scale_max=scale_max,
        output_size=output_size, seed=op_seed)
  (out_image, out_boxes, out_labels, out_weights, out_masks, out_keypoints,
   out_confidences) = execute(graph, [image, boxes, labels, weights, masks,
                                      keypoints, confidences],
                              dynamic=dynamic)

  (want_image, want_boxes, keep, want_masks, want_keypoints,
   (scale, _, _)) = _np_scale_crop_and_pad(
       image, boxes, masks, keypoints, draws, scale_min, scale_max,
       output_size)
  assert scale_min <= scale < scale_max
  if scale < 1.0:
    np.testing.assert_array_equal(keep, np.arange(5))
  np.testing.assert_allclose(out_image, want_image, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out_boxes, want_boxes, rtol=0, atol=1e-6)
  np.testing.assert_array_equal(out_labels, labels[keep])
  np.testing.assert_array_equal(out_weights, weights[keep])
  np.testing.assert_array_equal(out_confidences, confidences[keep])
  np.testing.assert_allclose(out_masks, want_masks, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out_keypoints, want_keypoints, rtol=0,
                             atol=1e-6)
