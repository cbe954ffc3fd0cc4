"""Evaluation helpers: the configured evaluators and per-batch result dicts.

`eval_config.metrics_set` names evaluators by the original's names (see
metric_sets); each evaluator turns a batched result dict into Estimator
eval_metric_ops.
"""
import tensorflow as tf

from od_estimator.core import standard_fields as fields
# Re-exported: model_lib and callers use them from here.
# pylint: disable=unused-import
from od_estimator.metrics.eval_masks import detection_masks_to_images
from od_estimator.metrics.eval_masks import groundtruth_masks_to_images
from od_estimator.metrics.eval_masks import masks_to_original_images
from od_estimator.metrics.eval_masks import UNFRAMED_MASKS_BOXES
# pylint: enable=unused-import
from od_estimator.config import config_util
from od_estimator.metrics import eval_visualization
from od_estimator.metrics import metric_sets
from od_estimator.core import shape_utils

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

# metrics_set name -> evaluator class (constructed with categories), as the
# original names them; metric_sets has what each set needs.
EVAL_METRICS_CLASS_DICT = {
    name: metric_set.evaluator
    for name, metric_set in metric_sets.METRIC_SETS.items()
    if metric_set.evaluator}
EVAL_DEFAULT_METRIC = metric_sets.DEFAULT


def _metrics_sets(eval_config):
  """Current names of the configured metrics sets, each once, in order."""
  names = []
  for name in metric_sets.configured(eval_config):
    name = metric_sets.check_metrics_set(name)
    if name not in names:
      names.append(name)
  return names


_NO_KEYPOINT_MODEL = ('needs a keypoint model, which od_estimator does not '
                      'build yet')


def eval_config_errors(eval_config):
  """Problems of eval_config fields that cannot be honoured, as ConfigErrors.

  Validate and the training commands' launch check report each; building
  the evaluators raises the first.
  """
  errors = []
  for field in ('parameterized_metric', 'keypoint_edge'):
    if getattr(eval_config, field):
      errors.append(config_util.ConfigError(
          '%s %s' % (field, _NO_KEYPOINT_MODEL),
          field='eval_config.%s' % field,
          hint='remove it; keypoint evaluation and drawing come with '
          'keypoint models'))
  names = [metric_sets.current_name(name)
           for name in metric_sets.configured(eval_config)]
  for field in ('skip_predictions_for_unlabeled_class', 'super_categories'):
    sets = metric_sets.honouring(field)
    if getattr(eval_config, field) and not set(names) & set(sets):
      errors.append(config_util.ConfigError(
          '%s is honoured only by the metrics sets %s; metrics_set is %s' % (
              field, ', '.join(sets), ', '.join(names)),
          field='eval_config.%s' % field,
          hint='add one of them to eval_config.metrics_set, or remove it'))
  for key, names in metric_sets.super_categories_from_eval_config(
      eval_config).items():
    if not names:
      errors.append(config_util.ConfigError(
          'super-category %r lists no category' % key,
          field='eval_config.super_categories',
          hint="give label map names separated by commas, e.g. "
          "{ key: 'vehicle' value: 'car,truck' }"))
  return errors


def check_eval_config(eval_config):
  """Raises the first of eval_config_errors(eval_config), if any.

  Raises:
    config_util.ConfigError: naming the eval_config field.
  """
  errors = eval_config_errors(eval_config)
  if errors:
    raise errors[0]


def evaluator_options_from_eval_config(eval_config):
  """Keyword arguments per configured metrics set, from eval_config fields.

  Only the sets taking eval_config fields (metric_sets.MetricSet.options)
  have an entry.
  """
  options = {}
  for name in metric_sets.configured(eval_config):
    name = metric_sets.current_name(name)
    metric_set = metric_sets.METRIC_SETS.get(name)
    if metric_set and metric_set.options:
      options[name] = metric_sets.evaluator_options(name, eval_config)
  return options


def _named_evaluators(eval_config, categories, evaluator_options=None):
  """[(metrics set name, evaluator)] of eval_config.metrics_set."""
  check_eval_config(eval_config)
  if evaluator_options is None:
    evaluator_options = evaluator_options_from_eval_config(eval_config)
  return [(name, EVAL_METRICS_CLASS_DICT[name](
      categories, **evaluator_options.get(name, {})))
          for name in _metrics_sets(eval_config)]


def get_evaluators(eval_config, categories, evaluator_options=None):
  """Returns the evaluators eval_config.metrics_set names.

  Args:
    eval_config: eval_pb2.EvalConfig.
    categories: list of {'id': 1-based id, 'name': str}.
    evaluator_options: {metrics set: kwargs}; default from eval_config.

  Raises:
    config_util.ConfigError: see metric_sets.check_metrics_set and
      check_eval_config.
  """
  return [evaluator for _, evaluator in _named_evaluators(
      eval_config, categories, evaluator_options)]


def get_eval_metric_ops_for_evaluators(eval_config, categories, eval_dict):
  """Returns the merged eval_metric_ops of every configured evaluator.

  Raises:
    config_util.ConfigError: as get_evaluators, and for a mask metrics set
      whose eval dict lacks masks (metric_sets.check_eval_dict).
  """
  metric_ops = {}
  for name, evaluator in _named_evaluators(eval_config, categories):
    metric_sets.check_eval_dict(name, eval_dict)
    metric_ops.update(evaluator.get_estimator_eval_metric_ops(eval_dict))
  return metric_ops


def visualization_metric_ops(eval_config, categories, eval_dict):
  """Eval metric ops writing the evaluation images (see eval_visualization).

  Args:
    eval_config: eval_pb2.EvalConfig: num_visualizations,
      max_num_boxes_to_visualize, min_score_threshold, skip_scores,
      skip_labels, visualize_groundtruth_boxes with
      groundtruth_box_visualization_color.
    categories: list of {'id': 1-based id, 'name': str}.
    eval_dict: result_dict_for_batched_example's dict holding the retained
      uint8 original images.

  Returns:
    {'Detections_Left_Groundtruth_Right/<i>': (value_op, update_op)}.
  """
  images = eval_visualization.SideBySideEvalImages(
      {category['id']: category for category in categories},
      max_examples_to_draw=eval_config.num_visualizations,
      max_boxes_to_draw=eval_config.max_num_boxes_to_visualize,
      min_score_thresh=eval_config.min_score_threshold,
      skip_scores=eval_config.skip_scores,
      skip_labels=eval_config.skip_labels,
      groundtruth_box_visualization_color=(
          eval_config.groundtruth_box_visualization_color
          if eval_config.visualize_groundtruth_boxes else None))
  return images.get_estimator_eval_metric_ops(eval_dict)


# Per-box label fields carried into the eval dict, padded to max boxes, for
# whichever evaluator reads them (classes are converted apart).
_PER_BOX_GROUNDTRUTH_FIELDS = (
    _IN.groundtruth_boxes, _IN.groundtruth_is_crowd, _IN.groundtruth_area,
    _IN.groundtruth_difficult, _IN.groundtruth_group_of,
    _IN.groundtruth_instance_masks, _IN.groundtruth_keypoints,
    _IN.groundtruth_keypoint_visibilities)


def _pad_boxes_dimension(tensors, max_boxes):
  """Per-image [n, ...] tensors → [B, max_boxes, ...] (zero padded)."""
  return tf.stack([
      shape_utils.pad_or_clip_nd(
          tensor, [max_boxes] + [None] * (tensor.shape.rank - 1))
      for tensor in tensors])


def _labeled_classes(labels):
  """[B, num_classes + 1] k-hot of each image's labeled classes, or None.

  Index = 1-based class id (index 0, the background, is never set). The
  classes come from groundtruth_labeled_classes when the input provides
  them, else from the image-level labels (image/class/label), which the
  input pipeline turns into an all-ones k-hot when an image lists none.
  """
  k_hots = labels.get(_IN.groundtruth_labeled_classes) or labels.get(
      _IN.groundtruth_image_classes)
  if not k_hots:
    return None
  return tf.stack([tf.pad(tf.cast(k_hot, tf.float32),
                          [[fields.LABEL_ID_OFFSET, 0]])
                   for k_hot in k_hots])


def groundtruth_from_labels(labels, max_boxes,
                            label_id_offset=fields.LABEL_ID_OFFSET):
  """Batched groundtruth for the evaluators, from model_fn's labels.

  One path for every meta-architecture: the groundtruth comes from the input
  pipeline's labels, not from the model.

  Args:
    labels: per-image lists (model_lib.unstack_batch) keyed by
      InputDataFields, each tensor cut to the image's boxes or still padded:
      num_groundtruth_boxes, groundtruth_boxes [n, 4] normalized,
      groundtruth_classes [n, num_classes] one-hot without background, and
      any of groundtruth_is_crowd, groundtruth_area, groundtruth_difficult,
      groundtruth_group_of, groundtruth_instance_masks [n, H, W],
      groundtruth_keypoints [n, K, 2], groundtruth_keypoint_visibilities,
      groundtruth_labeled_classes or groundtruth_image_classes
      [num_classes] k-hot.
    max_boxes: rows per image in the result (the input's
      max_number_of_boxes).
    label_id_offset: added to the 0-based class index.

  Returns:
    {field: [B, max_boxes, ...]} with num_groundtruth_boxes [B] (at most
    max_boxes), groundtruth_classes [B, max_boxes] int32 1-based (0 past
    each image's boxes), the present per-box fields zero padded, and
    groundtruth_labeled_classes [B, num_classes + 1] k-hot indexed by class
    id when the labels have image-level classes.
  """
  counts = tf.minimum(
      tf.cast(tf.stack(labels[_IN.num_groundtruth_boxes]), tf.int32),
      max_boxes)
  class_ids = _pad_boxes_dimension(
      [tf.argmax(one_hot, axis=1, output_type=tf.int32) + label_id_offset
       for one_hot in labels[_IN.groundtruth_classes]], max_boxes)
  in_image = tf.expand_dims(tf.range(max_boxes), 0) < tf.expand_dims(
      counts, 1)
  groundtruth = {
      _IN.num_groundtruth_boxes: counts,
      _IN.groundtruth_classes: tf.where(in_image, class_ids,
                                        tf.zeros_like(class_ids)),
  }
  for field in _PER_BOX_GROUNDTRUTH_FIELDS:
    if labels.get(field):
      groundtruth[field] = _pad_boxes_dimension(labels[field], max_boxes)
  labeled = _labeled_classes(labels)
  if labeled is not None:
    groundtruth[_IN.groundtruth_labeled_classes] = labeled
  return groundtruth


def _scale_to_absolute(boxes, image_shapes):
  """[B, N, 4] normalized boxes × per-image [height, width]."""
  sizes = tf.cast(image_shapes[:, :2], tf.float32)
  scale = tf.stack([sizes[:, 0], sizes[:, 1], sizes[:, 0], sizes[:, 1]], 1)
  return boxes * tf.expand_dims(scale, 1)


def _true_image_fractions(images, true_image_shapes):
  """[B, 2] height and width of each true image as fractions of the padded.

  Args:
    images: [B, H, W, C] images at the padded (preprocessed) size.
    true_image_shapes: [B, 3] int32 size of each image inside the padding.
  """
  padded = tf.cast(tf.shape(images)[1:3], tf.float32)
  return tf.cast(true_image_shapes[:, :2], tf.float32) / padded


def result_dict_for_single_example(image, key, detections, groundtruth=None,
                                   class_agnostic=False,
                                   scale_to_absolute=False):
  """result_dict_for_batched_example for one image, without batch dimension.

  As the original's: every groundtruth box counts, and the result has no
  num_detections or num_groundtruth_boxes (the evaluators then take every
  row).

  Args:
    image: [1, H, W, C] image.
    key: scalar string image id.
    detections: postprocess output of the image ([1, ...] tensors).
    groundtruth: optional {field: [num_boxes, ...]}: groundtruth_boxes
      normalized, groundtruth_classes 1-based, optional per-box fields.
    class_agnostic: report every detection and groundtruth box as class 1.
    scale_to_absolute: boxes in pixels of the image instead of normalized.

  Returns:
    {field: tensor}: original_image [1, H, W, C], the others without their
    batch dimension (e.g. detection_boxes [max_detections, 4]).
  """
  max_gt_boxes = None
  if groundtruth:
    max_gt_boxes = tf.shape(groundtruth[_IN.groundtruth_boxes])[0]
    groundtruth = {name: tf.expand_dims(value, 0)
                   for name, value in groundtruth.items()}
  batched = result_dict_for_batched_example(
      image, tf.expand_dims(key, 0),
      {name: value[:1] for name, value in detections.items()},
      groundtruth, class_agnostic, scale_to_absolute,
      max_gt_boxes=max_gt_boxes)
  result = {_IN.original_image: batched.pop(_IN.original_image)}
  for name in (_DET.num_detections, _IN.num_groundtruth_boxes):
    batched.pop(name, None)
  result.update({name: tf.squeeze(value, 0)
                 for name, value in batched.items()})
  return result


def result_dict_for_batched_example(images, keys, detections,
                                    groundtruth=None, class_agnostic=False,
                                    scale_to_absolute=False,
                                    original_image_spatial_shapes=None,
                                    true_image_shapes=None,
                                    max_gt_boxes=None,
                                    label_id_offset=fields.LABEL_ID_OFFSET,
                                    reframe_masks=True):
  """Merges a batch's detections and groundtruth for the evaluators.

  Args:
    images: [B, H, W, C] images (kept as original_image).
    keys: [B] image ids.
    detections: postprocess output (0-based detection_classes; optional
      detection_masks [B, N, mask_height, mask_width] box-relative).
    groundtruth: optional dict (groundtruth_from_labels) with
      groundtruth_boxes [B, N, 4] normalized, groundtruth_classes [B, N]
      1-based, num_groundtruth_boxes [B], and optional fields (is_crowd,
      area, difficult, group_of, masks, keypoints normalized, labeled
      classes) passed through.
    class_agnostic: report every detection as class 1.
    scale_to_absolute: scale boxes by original_image_spatial_shapes.
    original_image_spatial_shapes: [B, 2] int32 original height, width.
    true_image_shapes: [B, 3] size of each image inside `images`' padding.
      Groundtruth boxes and keypoints come normalized to the padded image
      (as the input pipeline gives them) and are renormalized to the true
      image, the frame of the detections (as the original does).
    max_gt_boxes: [B] (or scalar, for every image) number of groundtruth
      boxes of each image, the eval dict's num_groundtruth_boxes (the
      original's name). Defaults to groundtruth's num_groundtruth_boxes.
    label_id_offset: added to 0-based detection classes.
    reframe_masks: convert the masks (see masks_to_original_images); when
      False they stay as given, with the detections' normalized boxes under
      UNFRAMED_MASKS_BOXES, for masks_to_original_images later.

  Returns:
    A dict keyed by the standard field names. Masks are uint8 0/1 in the
    original images' frame, as the mask evaluators take them.

  Raises:
    ValueError: for groundtruth without num_groundtruth_boxes when
      max_gt_boxes is not given (as the original).
  """
  batch = shape_utils.combined_static_and_dynamic_shape(images)[0]
  if original_image_spatial_shapes is None:
    original_image_spatial_shapes = tf.tile(
        tf.expand_dims(tf.shape(images)[1:3], 0), [batch, 1])
  scores = detections[_DET.detection_scores]
  if class_agnostic:
    classes = tf.ones_like(scores, tf.int64)
  else:
    classes = tf.cast(detections[_DET.detection_classes],
                      tf.int64) + label_id_offset
  boxes = detections[_DET.detection_boxes]
  if scale_to_absolute:
    boxes = _scale_to_absolute(boxes, original_image_spatial_shapes)
  result = {
      _IN.original_image: images,
      _IN.key: keys,
      _IN.original_image_spatial_shape: original_image_spatial_shapes,
      _DET.detection_boxes: boxes,
      _DET.detection_scores: scores,
      _DET.detection_classes: classes,
      _DET.num_detections: tf.cast(detections[_DET.num_detections],
                                   tf.int32),
  }
  if true_image_shapes is not None:
    result[_IN.true_image_shape] = true_image_shapes
  if _DET.detection_masks in detections:
    result[_DET.detection_masks] = detections[_DET.detection_masks]
  if groundtruth:
    if max_gt_boxes is None:
      if _IN.num_groundtruth_boxes not in groundtruth:
        raise ValueError('max_gt_boxes must be provided when processing '
                         'batched examples (or groundtruth[%r])' %
                         _IN.num_groundtruth_boxes)
      max_gt_boxes = groundtruth[_IN.num_groundtruth_boxes]
    result.update(groundtruth)
    result[_IN.num_groundtruth_boxes] = tf.broadcast_to(
        tf.cast(max_gt_boxes, tf.int32), [batch])
    if true_image_shapes is not None:
      fractions = _true_image_fractions(images, true_image_shapes)
      result[_IN.groundtruth_boxes] = groundtruth[_IN.groundtruth_boxes] / (
          tf.tile(fractions, [1, 2])[:, tf.newaxis, :])
      if _IN.groundtruth_keypoints in groundtruth:
        result[_IN.groundtruth_keypoints] = groundtruth[
            _IN.groundtruth_keypoints] / fractions[:, tf.newaxis, tf.newaxis]
    if scale_to_absolute:
      result[_IN.groundtruth_boxes] = _scale_to_absolute(
          result[_IN.groundtruth_boxes], original_image_spatial_shapes)
    if class_agnostic:
      result[_IN.groundtruth_classes] = tf.ones_like(
          groundtruth[_IN.groundtruth_classes])
  if (_DET.detection_masks in result or
      _IN.groundtruth_instance_masks in result):
    result[UNFRAMED_MASKS_BOXES] = detections[_DET.detection_boxes]
    if reframe_masks:
      result = masks_to_original_images(result)
  return result
