"""Drawing on image tensors and plot summaries in TF graphs, under the
original's visualization_utils names (compat.visualization_utils gives
them): draw_bounding_boxes_on_image_tensors, draw_heatmaps_on_image_tensors,
create_visualization_fn, add_cdf_image_summary, add_hist_image_summary and
VisualizeSingleFrameDetections.

The drawing runs in py_funcs with visualization_utils' numpy functions.
The plot summaries are drawn with Pillow (matplotlib is not part of the
stack): same data and summary names, a plainer plot.
"""
import numpy as np
from PIL import Image
from PIL import ImageDraw
import tensorflow as tf

from od_estimator.compat import visualization_maps
from od_estimator.core import shape_utils
from od_estimator.metrics import eval_visualization
from od_estimator.utils import visualization_utils


def create_visualization_fn(category_index, include_masks=False,
                            include_keypoints=False,
                            include_keypoint_scores=False,
                            include_track_ids=False, **kwargs):
  """fn(image, boxes, classes, scores[, masks][, keypoints]
  [, keypoint_scores][, track_ids]) → the drawn image, for a py_func.

  kwargs go to visualize_boxes_and_labels_on_image_array.
  """
  def visualize(image, boxes, classes, scores, *optional):
    optional = list(optional)
    extras = {}
    for included, name in ((include_masks, 'instance_masks'),
                           (include_keypoints, 'keypoints'),
                           (include_keypoint_scores, 'keypoint_scores'),
                           (include_track_ids, 'track_ids')):
      if included:
        extras[name] = np.asarray(optional.pop(0))
    image = np.array(image)  # A writable copy.
    return visualization_utils.visualize_boxes_and_labels_on_image_array(
        image, np.asarray(boxes), np.asarray(classes), np.asarray(scores),
        category_index=category_index, **extras, **kwargs)
  return visualize


def _three_channels(images):
  if images.shape[3] > 3:
    return images[:, :, :, 0:3]
  if images.shape[3] == 1:
    return tf.image.grayscale_to_rgb(images)
  return images


def draw_bounding_boxes_on_image_tensors(
    images, boxes, classes, scores, category_index,
    original_image_spatial_shape=None, true_image_shape=None,
    instance_masks=None, keypoints=None, keypoint_scores=None,
    keypoint_edges=None, track_ids=None, max_boxes_to_draw=20,
    min_score_thresh=0.2, use_normalized_coordinates=True):
  """Draws detections on a batch of image tensors.

  Args:
    images: uint8 [N, H, W, C]; channels past 3 are ignored, 1 channel is
      made RGB.
    boxes: float32 [N, max_detections, 4].
    classes: int [N, max_detections], 1-based.
    scores: float32 [N, max_detections].
    category_index: {id: {'id', 'name'}}.
    original_image_spatial_shape: optional int [N, 2]: each image is
      resized (nearest, corners aligned) to it before drawing.
    true_image_shape: optional int [N, 3]: each image is first cut to its
      unpadded part.
    instance_masks: optional uint8 [N, max_detections, H, W].
    keypoints: optional float32 [N, max_detections, K, 2].
    keypoint_scores: optional float32 [N, max_detections, K].
    keypoint_edges: optional list of (start, end) keypoint pairs.
    track_ids: optional int32 [N, max_detections]; they pick the colors.
    max_boxes_to_draw: most boxes drawn per image.
    min_score_thresh: boxes need a score above this.
    use_normalized_coordinates: boxes and keypoints are normalized.

  Returns:
    uint8 [N, H', W', 3] images with the detections drawn.
  """
  images = _three_channels(images)
  visualize = create_visualization_fn(
      category_index, include_masks=instance_masks is not None,
      include_keypoints=keypoints is not None,
      include_keypoint_scores=keypoint_scores is not None,
      include_track_ids=track_ids is not None,
      use_normalized_coordinates=use_normalized_coordinates,
      max_boxes_to_draw=max_boxes_to_draw, min_score_thresh=min_score_thresh,
      agnostic_mode=False, line_thickness=4, keypoint_edges=keypoint_edges)
  batch = shape_utils.combined_static_and_dynamic_shape(images)[0]
  true_shapes = (tf.fill([batch, 3], -1) if true_image_shape is None
                 else true_image_shape)
  original_shapes = (tf.fill([batch, 2], -1)
                     if original_image_spatial_shape is None
                     else original_image_spatial_shape)
  elems = [true_shapes, original_shapes, images, boxes, classes, scores]
  elems += [value for value in (instance_masks, keypoints, keypoint_scores,
                                track_ids) if value is not None]

  def draw(image_and_detections):
    true_shape, original_shape, image = image_and_detections[:3]
    if true_image_shape is not None:
      image = shape_utils.pad_or_clip_nd(
          image, [true_shape[0], true_shape[1], 3])
    if original_image_spatial_shape is not None:
      image = tf.cast(tf.compat.v1.image.resize_images(
          image[tf.newaxis], original_shape,
          method=tf.image.ResizeMethod.NEAREST_NEIGHBOR,
          align_corners=True)[0], tf.uint8)
    return tf.compat.v1.py_func(
        visualize, [image] + list(image_and_detections[3:]), tf.uint8)

  return tf.map_fn(draw, elems, dtype=tf.uint8, back_prop=False)


def draw_heatmaps_on_image_tensors(images, heatmaps, apply_sigmoid=False):
  """Paints [N, h, w, C] heat maps (resized to the images) on [N, H, W, 3]
  uint8 images; apply_sigmoid first for logits. Returns uint8 images."""
  images = _three_channels(images)
  _, height, width, _ = shape_utils.combined_static_and_dynamic_shape(images)
  if apply_sigmoid:
    heatmaps = tf.math.sigmoid(heatmaps)
  heatmaps = tf.image.resize(heatmaps, [height, width])
  return tf.map_fn(
      lambda pair: tf.compat.v1.py_func(
          visualization_maps.draw_heatmaps_on_image_array, list(pair),
          tf.uint8),
      [images, heatmaps], dtype=tf.uint8, back_prop=False)


_PLOT_SIZE = (640, 480)  # matplotlib's default figure, 6.4 x 4.8 at 100 dpi.
_MARGIN = 60


def _line_plot(x, y, x_label, y_label):
  """uint8 [1, 480, 640, 3]: y against x, with the axes' ranges written."""
  width, height = _PLOT_SIZE
  plot = Image.new('RGB', _PLOT_SIZE, 'white')
  draw = ImageDraw.Draw(plot)
  left, top, right, bottom = _MARGIN, 20, width - 20, height - _MARGIN
  draw.rectangle([left, top, right, bottom], outline='black')
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if x.size:
    x_range = (x.min(), max(x.max(), x.min() + 1e-12))
    y_range = (min(y.min(), 0.0), max(y.max(), 1e-12))
    px = left + (x - x_range[0]) / (x_range[1] - x_range[0]) * (right - left)
    py = bottom - (y - y_range[0]) / (y_range[1] - y_range[0]) * (
        bottom - top)
    draw.line(list(zip(px.tolist(), py.tolist())), fill='#1f77b4', width=2)
    for text, position in (('%.3g' % x_range[0], (left, bottom + 5)),
                           ('%.3g' % x_range[1], (right - 40, bottom + 5)),
                           ('%.3g' % y_range[1], (5, top)),
                           ('%.3g' % y_range[0], (5, bottom - 10))):
      draw.text(position, text, fill='black')
  draw.text(((left + right) // 2 - 50, height - 25), x_label, fill='black')
  draw.text((left, 5), y_label, fill='black')  # Above the axes.
  return np.asarray(plot, np.uint8)[np.newaxis]


def _cdf_plot(values):
  values = np.asarray(values, np.float64).reshape([-1])
  cumulative = np.cumsum(np.sort(values / np.sum(values)))
  fraction = np.arange(cumulative.size, dtype=np.float32) / cumulative.size
  return _line_plot(fraction, cumulative, 'fraction of examples',
                    'cumulative normalized values')


def _hist_plot(values, bins):
  counts, edges = np.histogram(values, bins=bins)
  return _line_plot(edges[:-1], counts, 'value', 'count')


def add_cdf_image_summary(values, name):
  """Adds an image summary `name`: the CDF of the normalized `values`
  (sorted, over the fraction of examples)."""
  plot = tf.compat.v1.py_func(_cdf_plot, [values], tf.uint8)
  return tf.compat.v1.summary.image(name, plot)


def add_hist_image_summary(values, bins, name):
  """Adds an image summary `name`: the histogram (np.histogram with `bins`)
  of `values` as a line of counts."""
  plot = tf.compat.v1.py_func(_hist_plot, [values, bins], tf.uint8)
  return tf.compat.v1.summary.image(name, plot)


class VisualizeSingleFrameDetections(eval_visualization.SideBySideEvalImages):
  """The original's evaluation-image metric ops: detections left,
  groundtruth right, under 'Detections_Left_Groundtruth_Right/<i>'.

  get_estimator_eval_metric_ops(eval_dict) takes
  eval_util.result_dict_for_batched_example's dict; with
  use_normalized_coordinates=True (the original's default) its boxes are
  normalized, otherwise pixels of the original image.
  """

  def __init__(self, category_index, max_examples_to_draw=5,
               max_boxes_to_draw=20, min_score_thresh=0.2,
               use_normalized_coordinates=True,
               summary_name_prefix='Detections_Left_Groundtruth_Right',
               keypoint_edges=None):
    super().__init__(category_index, max_examples_to_draw=max_examples_to_draw,
                     max_boxes_to_draw=max_boxes_to_draw,
                     min_score_thresh=min_score_thresh,
                     summary_name_prefix=summary_name_prefix)
    self._normalized = use_normalized_coordinates
    self.keypoint_edges = keypoint_edges

  def draw(self, image, detections, groundtruth, frame):
    if self._normalized:
      scale = np.array([frame.height, frame.width] * 2, np.float32)
      detections = dict(detections, boxes=detections['boxes'] * scale)
      groundtruth = dict(groundtruth, boxes=groundtruth['boxes'] * scale)
    return super().draw(image, detections, groundtruth, frame)
