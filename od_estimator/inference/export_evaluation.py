"""Metrics of an exported detector on labeled TFRecords, as model_main's.

The export runs on each record's image, one at a time (model_main's eval
batch); its detections and the record's groundtruth (labeled_records), both
in pixels, go to the evaluators eval_config.metrics_set names, the ones
model_main builds (metrics/eval_util), so the metrics carry model_main's
names and, on the records model_main evaluated, its values. Mask sets
take the records' masks (PNG or numerical, as the first record with masks
holds them) and the export's detection_masks pasted into the image and
thresholded at 0.5, as model_main's evaluation does.
"""
import numpy as np
import tensorflow as tf

from od_estimator.checks import record_scanner
from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.inference import exported_model
from od_estimator.inference import labeled_records
from od_estimator.metrics import eval_util
from od_estimator.metrics import metric_sets
from od_estimator.protos import eval_pb2
from od_estimator.utils import label_map_util

_DET = fields.DetectionResultFields


def eval_config_for(eval_metrics=None, pipeline_config_path=None,
                    per_category=False):
  """The EvalConfig to evaluate with.

  Args:
    eval_metrics: comma-separated metrics_set names, or None.
    pipeline_config_path: a pipeline.config whose eval_config is taken
      (its metrics_set replaced by eval_metrics when given), or None.
    per_category: also report each category's COCO mAP.

  Raises:
    config_util.ConfigError: an unusable config or metrics set.
  """
  eval_config = eval_pb2.EvalConfig()
  if pipeline_config_path:
    eval_config.CopyFrom(config_util.get_configs_from_pipeline_file(
        pipeline_config_path)['eval_config'])
  if eval_metrics:
    del eval_config.metrics_set[:]
    eval_config.metrics_set.extend(
        name.strip() for name in eval_metrics.split(',') if name.strip())
  if per_category:
    eval_config.include_metrics_per_category = True
  return eval_config


def categories_of(label_map_path, flag='--label_map_path'):
  """The label map's categories ([{'id', 'name'}]), one error line if bad."""
  try:
    return label_map_util.create_categories_from_labelmap(label_map_path)
  except label_map_util.LabelMapError as error:
    raise exported_model.ExportedModelError('%s: %s' % (
        flag, error)) from None


def absolute_detections(raw, height, width, known_ids, label_map_path):
  """An export's detections of one image, in pixels, for the evaluators.

  Args:
    raw: exported_model's detect output.
    height: the image's height in pixels.
    width: its width.
    known_ids: the label map's ids.
    label_map_path: named by the error.

  Returns:
    detection_boxes [M, 4] float32 pixels, detection_scores [M],
    detection_classes [M] int64 1-based, M the image's num_detections.

  Raises:
    exported_model.ExportedModelError: for a class id the label map lacks.
  """
  count = int(raw['num_detections'])
  classes = np.round(raw['detection_classes'][:count]).astype(np.int64)
  unknown = sorted(set(classes.tolist()) - set(known_ids))
  if unknown:
    raise exported_model.ExportedModelError(
        'the model detects class id %s, which --label_map_path=%s lacks '
        '(its ids: %s): pass the label map the model was trained with.' % (
            unknown[0], label_map_path, _ranges(sorted(known_ids))))
  # float32, as model_main's evaluation scales them.
  scale = np.float32([height, width, height, width])
  return {_DET.detection_boxes: raw['detection_boxes'][:count] * scale,
          _DET.detection_scores: raw['detection_scores'][:count],
          _DET.detection_classes: classes}


def _ranges(ids):
  """'1..3, 7' for [1, 2, 3, 7]."""
  parts, start = [], None
  for i, value in enumerate(ids):
    if start is None:
      start = value
    if i + 1 == len(ids) or ids[i + 1] != value + 1:
      parts.append(str(start) if start == value else '%d..%d' % (start,
                                                                 value))
      start = None
  return ', '.join(parts)


def _mask_type(model, paths, metrics_set):
  """The records' mask encoding, for mask metrics set `metrics_set`.

  Raises:
    exported_model.ExportedModelError: the model predicts no masks, or no
      record holds image/object/mask.
  """
  if not model.has_masks:
    raise exported_model.ExportedModelError(
        'metrics set %s evaluates masks, but the model has no %s output: '
        'evaluate a Mask R-CNN export, or a box metrics set.' % (
            metrics_set, exported_model.MASKS_KEY))
  for _, _, serialized in labeled_records.serialized_records(paths):
    mask_type = record_scanner.mask_type_of(
        tf.train.Example.FromString(serialized))
    if mask_type:
      return mask_type
  raise exported_model.ExportedModelError(
      'metrics set %s evaluates masks, but no record of %s holds '
      'image/object/mask.' % (metrics_set, ', '.join(paths)))


def _image_masks(model, raw, height, width):
  """uint8 [M, height, width] 0/1 masks of the image's M num_detections."""
  count = int(raw['num_detections'])
  return model.image_masks(
      {exported_model.MASKS_KEY: raw[exported_model.MASKS_KEY][:count],
       'detection_boxes': raw['detection_boxes'][:count]}, height, width)


def evaluate(model, paths, label_map_path, eval_config, observe=None,
             log=None):
  """Runs the model over the records; returns the evaluators' metrics.

  Args:
    model: an exported_model detector.
    paths: the TFRecord files (labeled_records.record_paths).
    label_map_path: the records' label map.
    eval_config: eval_pb2.EvalConfig (eval_config_for).
    observe: optional fn(image_id, LabeledImage, detections) called per
      image with absolute_detections' dict (the report's collector).
    log: fn(str) for warnings; default none.

  Returns:
    ({metric name: float}, number of images), the metrics in the
    evaluators' order.

  Raises:
    exported_model.ExportedModelError: a record that cannot be evaluated or
      a label map that does not fit the records or the model.
    config_util.ConfigError: an unusable metrics set.
  """
  categories = categories_of(label_map_path)
  known_ids = [category['id'] for category in categories]
  evaluators = eval_util.get_evaluators(eval_config, categories)
  mask_sets = [name for name in metric_sets.configured(eval_config)
               if metric_sets.needs_masks(name)]
  mask_type = _mask_type(model, paths, mask_sets[0]) if mask_sets else None
  decoder = labeled_records.GroundtruthDecoder(label_map_path, max(known_ids),
                                               mask_type)
  image_id, unknown_classes = 0, 0
  try:
    for path, index, serialized in labeled_records.serialized_records(paths):
      labeled = decoder.decode(serialized, '%s:%d' % (path, index))
      unknown_classes += labeled.unknown_classes
      height, width = labeled.image.shape[:2]
      raw = model.detect(labeled.image, labeled.encoded, labeled.name,
                         serialized)
      detections = absolute_detections(raw, height, width, known_ids,
                                       label_map_path)
      if mask_type:
        detections[_DET.detection_masks] = _image_masks(model, raw, height,
                                                        width)
      image_id += 1
      for evaluator in evaluators:
        evaluator.add_image(image_id, labeled.groundtruth, detections)
      if observe:
        observe(image_id, labeled, detections)
  finally:
    decoder.close()
  if not image_id:
    raise exported_model.ExportedModelError(
        '--input_tfrecord_paths: %s hold no record.' % ', '.join(paths))
  if unknown_classes and log:
    log('warning: %d groundtruth box(es) have a class text that '
        '--label_map_path=%s lacks; they are left out, as model_main does.'
        % (unknown_classes, label_map_path))
  metrics = {}
  for evaluator in evaluators:
    metrics.update(evaluator.evaluate())
  return metrics, image_id
