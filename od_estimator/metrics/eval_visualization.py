"""Evaluation images for TensorBoard: detections left, groundtruth right.

The Estimator writes no summary op during evaluation, but it writes any
eval_metric_ops value that is a serialized `Summary` into the eval events
file (tagged '<metric name>/0'). `SideBySideEvalImages` uses that, as the
original's `VisualizeSingleFrameDetections` did: its update op draws the
first `max_examples_to_draw` evaluation images (numpy and Pillow, in a
py_func), and one value op per image returns the PNG summary under
'Detections_Left_Groundtruth_Right/<i>'.
"""
import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluator_base
from od_estimator.utils import visualization_utils

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

SUMMARY_NAME_PREFIX = 'Detections_Left_Groundtruth_Right'


def _nearest_resize(array, height, width):
  """[h, w, ...] → [height, width, ...], nearest neighbour, corners aligned.

  Corner pixels map to corner pixels, as the original's
  resize(NEAREST_NEIGHBOR, align_corners=True) of the retained image.
  """
  in_height, in_width = array.shape[:2]
  return array[_nearest_sources(in_height, height)][
      :, _nearest_sources(in_width, width)]


def _nearest_sources(in_size, out_size):
  """Source index of each output index: TF's float32 scale, halves up."""
  scale = np.float32(in_size - 1) / np.float32(max(out_size - 1, 1))
  return np.floor(np.arange(out_size, dtype=np.float32) * scale +
                  np.float32(0.5)).astype(np.int64)


class _Frame:
  """Maps the retained (resized, maybe padded) image back to original size.

  The retained image and the groundtruth masks share the model's input
  frame: its top-left true_shape part holds the picture, which is resized
  to the original height and width, the frame of the absolute boxes.
  """

  def __init__(self, retained_shape, true_shape, original_shape):
    self.retained_shape = tuple(retained_shape[:2])
    self.true_height, self.true_width = (int(true_shape[0]),
                                         int(true_shape[1]))
    self.height, self.width = int(original_shape[0]), int(original_shape[1])

  def to_original(self, array):
    """[H, W, ...] in the retained frame → [height, width, ...]."""
    array = array[:self.true_height, :self.true_width]
    return _nearest_resize(array, self.height, self.width)

  def picture(self, image):
    """uint8 [height, width, 3]: a retained [H, W, C] image (grey or with
    additional channels) as RGB at its original size."""
    if image.shape[2] == 1:
      image = np.repeat(image, 3, axis=2)
    return self.to_original(image[:, :, :3]).astype(np.uint8)

  def masks(self, masks):
    """[N, h, w] masks → uint8 [N, height, width], from either frame."""
    masks = np.asarray(masks)
    if masks.shape[1:3] == (self.height, self.width):
      return (masks > 0).astype(np.uint8)
    if masks.shape[1:3] != self.retained_shape:
      raise ValueError(
          'Instance masks of size %s match neither the original image (%s) '
          'nor the model input (%s).' % (masks.shape[1:3],
                                         (self.height, self.width),
                                         self.retained_shape))
    return np.stack([self.to_original(mask) > 0 for mask in masks]).astype(
        np.uint8) if len(masks) else np.zeros([0, self.height, self.width],
                                              np.uint8)

  def keypoints(self, keypoints):
    """[N, K, 2] normalized y, x → pixels of the original image."""
    return np.asarray(keypoints) * np.array([self.height, self.width],
                                            np.float32)


class SideBySideEvalImages:
  """Eval metric ops writing detections-and-groundtruth images.

  Each image is the evaluation image at its original size twice, side by
  side: on the left the detections scoring above min_score_thresh (at most
  max_boxes_to_draw, with class name and score as a percentage), on the
  right every groundtruth box with its class name and no score. Instance
  masks and keypoints are drawn when the eval dict has them.
  """

  def __init__(self, category_index, max_examples_to_draw=10,
               max_boxes_to_draw=20, min_score_thresh=0.5, skip_scores=False,
               skip_labels=False, groundtruth_box_visualization_color=None,
               summary_name_prefix=SUMMARY_NAME_PREFIX):
    """Creates the visualization.

    Args:
      category_index: {class id: {'id': id, 'name': name}} from the label
        map; ids it lacks are labelled 'N/A'.
      max_examples_to_draw: images written per evaluation (the first ones
        evaluated); 0 writes none.
      max_boxes_to_draw: most detections drawn per image; 0 or None draws
        every one above the threshold.
      min_score_thresh: detections need a score above this.
      skip_scores: leave scores out of the detection labels.
      skip_labels: leave class names out of the labels (both sides).
      groundtruth_box_visualization_color: when set, the groundtruth boxes
        are also drawn, unlabelled in this color, on the detections side.
      summary_name_prefix: the image names are '<prefix>/<i>'.
    """
    self._category_index = category_index
    self._max_examples = max_examples_to_draw
    self._max_boxes = max_boxes_to_draw
    self._min_score = min_score_thresh
    self._skip_scores = skip_scores
    self._skip_labels = skip_labels
    self._groundtruth_color = groundtruth_box_visualization_color
    self._prefix = summary_name_prefix
    self._images = []
    self.keypoint_edges = None  # (start, end) keypoint pairs to join.

  def names(self):
    """The eval_metric_ops keys, one per image."""
    return ['%s/%d' % (self._prefix, i) for i in range(self._max_examples)]

  def draw(self, image, detections, groundtruth, frame):
    """One side-by-side uint8 [height, 2 * width, 3] image.

    Args:
      image: uint8 [H, W, C] retained image (model input frame).
      detections: {boxes [M, 4] absolute, classes [M] 1-based, scores [M],
        optional masks, keypoints [M, K, 2] normalized}, cut to the image's
        detections.
      groundtruth: {boxes [N, 4] absolute, classes [N] 1-based, optional
        masks, keypoints}, cut to the image's boxes.
      frame: the image's _Frame.
    """
    picture = frame.picture(image)
    left, right = picture.copy(), picture.copy()
    if self._groundtruth_color:
      visualization_utils.visualize_boxes_and_labels_on_image_array(
          left, groundtruth['boxes'], groundtruth['classes'], None,
          self._category_index, max_boxes_to_draw=None,
          groundtruth_box_visualization_color=self._groundtruth_color)
    self._draw_side(left, detections, frame, scores=detections['scores'],
                    max_boxes=self._max_boxes, min_score=self._min_score,
                    skip_scores=self._skip_scores)
    self._draw_side(right, groundtruth, frame,
                    scores=np.ones(len(groundtruth['classes']), np.float32),
                    max_boxes=None, min_score=0.0, skip_scores=True)
    return np.concatenate([left, right], axis=1)

  def _draw_side(self, image, boxes, frame, scores, max_boxes, min_score,
                 skip_scores):
    masks = boxes.get('masks')
    keypoints = boxes.get('keypoints')
    visualization_utils.visualize_boxes_and_labels_on_image_array(
        image, boxes['boxes'], boxes['classes'], scores,
        self._category_index,
        instance_masks=None if masks is None else frame.masks(masks),
        keypoints=None if keypoints is None else frame.keypoints(keypoints),
        keypoint_edges=self.keypoint_edges,
        use_normalized_coordinates=False, max_boxes_to_draw=max_boxes,
        min_score_thresh=min_score, skip_scores=skip_scores,
        skip_labels=self._skip_labels)

  def _add_batch(self, names, *values):
    """py_func body: draws the batch's images while fewer than wanted."""
    batch = dict(zip(names, values))
    # Masks of the eval dict are in the original frame, padded to the
    # batch's largest image (eval_util.result_dict_for_batched_example).
    padded = tuple(np.max(batch[_IN.original_image_spatial_shape], axis=0))
    for i in range(len(batch[_IN.original_image])):
      if len(self._images) >= self._max_examples:
        return
      frame = _Frame(batch[_IN.original_image][i].shape,
                     batch[_IN.true_image_shape][i],
                     batch[_IN.original_image_spatial_shape][i])
      m = int(batch[_DET.num_detections][i])
      n = int(batch[_IN.num_groundtruth_boxes][i])
      detections = {'boxes': batch[_DET.detection_boxes][i][:m],
                    'classes': batch[_DET.detection_classes][i][:m],
                    'scores': batch[_DET.detection_scores][i][:m]}
      groundtruth = {'boxes': batch[_IN.groundtruth_boxes][i][:n],
                     'classes': batch[_IN.groundtruth_classes][i][:n]}
      for source, target, key in (
          (_DET.detection_masks, detections, 'masks'),
          (_DET.detection_keypoints, detections, 'keypoints'),
          (_IN.groundtruth_instance_masks, groundtruth, 'masks'),
          (_IN.groundtruth_keypoints, groundtruth, 'keypoints')):
        if source in batch:
          target[key] = batch[source][i][:m if target is detections else n]
          if key == 'masks' and target[key].shape[1:3] == padded:
            target[key] = target[key][:, :frame.height, :frame.width]
      self._images.append(self.draw(batch[_IN.original_image][i],
                                    detections, groundtruth, frame))

  def _summaries(self):
    """py_func body: serialized image summaries, b'' for missing images."""
    summaries = [image_summary(name, image)
                 for name, image in zip(self.names(), self._images)]
    summaries += [b''] * (self._max_examples - len(summaries))
    self._images = []
    return summaries

  def get_estimator_eval_metric_ops(self, eval_dict):
    """{'<prefix>/<i>': (summary value op, shared update op)}.

    Args:
      eval_dict: eval_util.result_dict_for_batched_example's dict with the
        retained uint8 original_image [B, H, W, C], true_image_shape,
        original_image_spatial_shape, absolute boxes and 1-based classes;
        optionally detection_masks, detection_keypoints,
        groundtruth_instance_masks, groundtruth_keypoints. As the
        original's: num_detections and num_groundtruth_boxes are optional
        (every row counts; detections are drawn by score anyway), and one
        image's dict (result_dict_for_single_example) is accepted.

    Returns:
      The metric ops; empty when max_examples_to_draw is 0. An image not
      drawn (fewer evaluation images) reads b'', which writes nothing.
    """
    if not self._max_examples:
      return {}
    eval_dict = batched(eval_dict)
    names = [_IN.original_image, _IN.true_image_shape,
             _IN.original_image_spatial_shape, _DET.detection_boxes,
             _DET.detection_classes, _DET.detection_scores,
             _DET.num_detections, _IN.groundtruth_boxes,
             _IN.groundtruth_classes, _IN.num_groundtruth_boxes]
    names += [name for name in (
        _DET.detection_masks, _DET.detection_keypoints,
        _IN.groundtruth_instance_masks, _IN.groundtruth_keypoints)
              if name in eval_dict]
    update_op = tf.compat.v1.py_func(
        lambda *values: self._add_batch(names, *values),
        [eval_dict[name] for name in names], [])
    summaries = tf.compat.v1.py_func(self._summaries, [],
                                     [tf.string] * self._max_examples)
    return {name: (summary, update_op)
            for name, summary in zip(self.names(), summaries)}


def original_picture(image, true_shape, original_shape):
  """uint8 [height, width, 3]: the retained uint8 [H, W, C] image of an
  eval dict, cut to its true_shape and resized to its original_shape
  (height, width), the frame of the eval dict's absolute boxes."""
  return _Frame(image.shape, true_shape, original_shape).picture(image)


def image_summary(name, image):
  """A serialized Summary holding uint8 [H, W, 3] `image` as a PNG."""
  return tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
      tag=name, image=tf.compat.v1.Summary.Image(
          height=image.shape[0], width=image.shape[1], colorspace=3,
          encoded_image_string=(
              visualization_utils.encode_image_array_as_png_str(
                  image))))]).SerializeToString()


def batched(eval_dict):
  """eval_dict with a batch dimension and both per-image counts.

  One image's dict has [1, H, W, C] original_image and the other fields
  without their batch dimension.
  """
  eval_dict = {name: value for name, value in eval_dict.items()
               if value is not None}
  if tf.convert_to_tensor(eval_dict[_DET.detection_classes]).shape.rank == 1:
    eval_dict = {name: value if name == _IN.original_image
                 else tf.expand_dims(value, 0)
                 for name, value in eval_dict.items()}
  return evaluator_base.with_counts(eval_dict)
