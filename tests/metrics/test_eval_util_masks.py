"""eval_util: masks reach the evaluators binary, at each original image size
(detections reframed from their boxes, groundtruth resized), as the
original's evaluation does."""
import numpy as np
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.compat import ops

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields


def _detections(rng, batch=2, max_detections=3, mask_size=4):
  boxes = np.sort(rng.uniform(0, 1, size=(batch, max_detections, 2, 2)),
                  axis=2)
  boxes = np.stack([boxes[..., 0, 0], boxes[..., 0, 1], boxes[..., 1, 0],
                    boxes[..., 1, 1]], axis=-1).astype(np.float32)
  return {
      _DET.detection_boxes: boxes,
      _DET.detection_scores: np.full([batch, max_detections], 0.5,
                                     np.float32),
      _DET.detection_classes: np.zeros([batch, max_detections], np.float32),
      _DET.num_detections: np.array([3, 1], np.float32),
      _DET.detection_masks: rng.uniform(
          size=(batch, max_detections, mask_size, mask_size)).astype(
              np.float32),
  }


def test_detection_masks_are_reframed_per_image_and_padded(execute):
  rng = np.random.RandomState(0)
  detections = _detections(rng)
  shapes = np.array([[9, 14], [12, 7]], np.int32)
  names = sorted(detections)

  def graph_fn(images, shapes, *values):
    result = eval_util.result_dict_for_batched_example(
        images, np.array([b'a', b'b']), dict(zip(names, values)),
        scale_to_absolute=True, original_image_spatial_shapes=shapes)
    expected = [ops.reframe_box_masks_to_image_masks(
        detections[_DET.detection_masks][i],
        detections[_DET.detection_boxes][i], shapes[i, 0], shapes[i, 1])
                for i in range(2)]
    return result[_DET.detection_masks], expected

  masks, expected = execute(
      graph_fn, [np.zeros([2, 16, 16, 3], np.uint8), shapes] +
      [detections[name] for name in names], dynamic=True)
  assert masks.shape == (2, 3, 12, 14) and masks.dtype == np.uint8
  np.testing.assert_array_equal(masks[0, :, :9, :14],
                                expected[0] > 0.5)
  np.testing.assert_array_equal(masks[1, :1, :12, :7],
                                expected[1][:1] > 0.5)
  assert masks[0, :, 9:].sum() == 0 and masks[1, :, :, 7:].sum() == 0
  assert masks[1, 1:].sum() == 0  # Past num_detections.
  assert masks.sum() > 0


def test_groundtruth_masks_are_cut_to_the_true_image_and_resized(execute):
  rng = np.random.RandomState(1)
  masks = (rng.uniform(size=(2, 2, 8, 8)) < 0.5).astype(np.float32)
  true_shapes = np.array([[6, 8, 3], [8, 5, 3]], np.int32)
  shapes = np.array([[11, 15], [4, 3]], np.int32)
  groundtruth = {
      _IN.groundtruth_boxes: np.zeros([2, 2, 4], np.float32),
      _IN.groundtruth_classes: np.ones([2, 2], np.int32),
      _IN.num_groundtruth_boxes: np.array([2, 2], np.int32),
      _IN.groundtruth_instance_masks: masks,
  }
  detections = _detections(rng)
  del detections[_DET.detection_masks]

  def graph_fn():
    constant = lambda values: {k: tf.constant(v) for k, v in values.items()}
    return eval_util.result_dict_for_batched_example(
        tf.zeros([2, 8, 8, 3], tf.uint8), tf.constant([b'a', b'b']),
        constant(detections), constant(groundtruth),
        original_image_spatial_shapes=tf.constant(shapes),
        true_image_shapes=tf.constant(true_shapes))[
            _IN.groundtruth_instance_masks]

  result = execute(graph_fn)
  assert result.shape == (2, 2, 11, 15) and result.dtype == np.uint8
  for i in range(2):
    true = masks[i, :, :true_shapes[i, 0], :true_shapes[i, 1]]
    height, width = shapes[i]
    # Nearest neighbour with corners aligned: output pixel k samples input
    # k * (in - 1) / (out - 1) in float32, halves rounded up.
    def sources(size, out):
      scale = np.float32(size - 1) / np.float32(max(out - 1, 1))
      return np.floor(np.arange(out, dtype=np.float32) * scale +
                      np.float32(0.5)).astype(int)
    rows, cols = sources(true.shape[1], height), sources(true.shape[2], width)
    np.testing.assert_array_equal(result[i, :, :height, :width],
                                  true[:, rows][:, :, cols])
    assert result[i, :, height:].sum() == 0
    assert result[i, :, :, width:].sum() == 0


def test_masks_converted_later_equal_masks_converted_at_once(execute):
  """The TPU path: the eval dict keeps the masks unframed (with the
  detections' normalized boxes) and the host's metric_fn converts them."""
  rng = np.random.RandomState(2)
  detections = _detections(rng)
  groundtruth = {
      _IN.groundtruth_boxes: np.zeros([2, 2, 4], np.float32),
      _IN.groundtruth_classes: np.ones([2, 2], np.int32),
      _IN.num_groundtruth_boxes: np.array([2, 1], np.int32),
      _IN.groundtruth_instance_masks: (
          rng.uniform(size=(2, 2, 8, 8)) < 0.5).astype(np.float32),
  }

  def graph_fn():
    constant = lambda values: {k: tf.constant(v) for k, v in values.items()}
    results = [eval_util.result_dict_for_batched_example(
        tf.zeros([2, 8, 8, 3], tf.uint8), tf.constant([b'a', b'b']),
        constant(detections), constant(groundtruth), scale_to_absolute=True,
        original_image_spatial_shapes=tf.constant([[9, 14], [12, 7]]),
        true_image_shapes=tf.constant([[8, 6, 3], [7, 8, 3]]),
        reframe_masks=reframe) for reframe in (True, False)]
    at_once, unframed = results
    assert eval_util.UNFRAMED_MASKS_BOXES not in at_once
    later = eval_util.masks_to_original_images(unframed)
    assert eval_util.UNFRAMED_MASKS_BOXES not in later
    return at_once, unframed, later

  at_once, unframed, later = execute(graph_fn)
  np.testing.assert_array_equal(unframed[_DET.detection_masks],
                                detections[_DET.detection_masks])
  np.testing.assert_array_equal(unframed[eval_util.UNFRAMED_MASKS_BOXES],
                                detections[_DET.detection_boxes])
  assert set(later) == set(at_once)
  for name in at_once:
    np.testing.assert_array_equal(later[name], at_once[name], err_msg=name)
  assert at_once[_IN.groundtruth_instance_masks].shape == (2, 2, 12, 14)
