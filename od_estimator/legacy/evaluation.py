"""What legacy eval.py does besides Estimator.evaluate: the evaluation loop,
the exported visualizations and the exported detections.

As the original's legacy evaluator: every eval_interval_secs the latest
checkpoint of --checkpoint_dir is evaluated, unless already evaluated, up to
max_evals times (0: forever; an attempt without a new checkpoint counts, as
in the original); eval_config.num_examples images are read.
"""
import json
import math
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_tools
from od_estimator.metrics import eval_visualization
from od_estimator.utils import file_safety

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
_PREDICT = tf.estimator.ModeKeys.PREDICT


def write_summaries(metrics, eval_dir):
  """Writes the metrics into eval_dir at their global_step, as the original.

  Scalars are simple values tagged with their metric name; the evaluation
  images (already serialized image summaries) are written as they are.
  """
  step = int(metrics.get('global_step', 0))
  summaries = []
  for name in sorted(metrics):
    value = metrics[name]
    if isinstance(value, bytes):
      if value:
        summaries.append(value)
      continue
    value = np.asarray(value)
    if name != 'global_step' and value.ndim == 0 and (
        value.dtype.kind in 'biuf'):
      summaries.append(tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
          tag=name, simple_value=float(value))]).SerializeToString())
      logging.info('%s: %f', name, value)
  writer = tf.summary.create_file_writer(eval_dir)
  with writer.as_default():
    for summary in summaries:
      tf.summary.experimental.write_raw_pb(summary, step=step)
  writer.close()


def with_image_ids(model_fn):
  """model_fn whose predictions also carry source_id and the image size.

  The eval input must include source_id (include_source_id: true).
  """
  def wrapped(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if mode != _PREDICT:
      return spec
    predictions = dict(spec.predictions)
    for name in (_IN.source_id, _IN.original_image_spatial_shape):
      if name in features:
        predictions[name] = features[name]
    return spec._replace(predictions=predictions)
  return wrapped


def num_batches(eval_config):
  return int(math.ceil(eval_config.num_examples / max(
      eval_config.batch_size, 1)))


def export_visualizations(metrics, export_dir):
  """Writes the evaluation images of `metrics` as export-image-<i>.png.

  Returns:
    The paths written.
  """
  tf.io.gfile.makedirs(export_dir)
  prefix = eval_visualization.SUMMARY_NAME_PREFIX + '/'
  written = []
  for name, value in sorted(metrics.items()):
    if not name.startswith(prefix) or not isinstance(value, bytes) or (
        not value):
      continue
    image = tf.compat.v1.Summary.FromString(value).value[0].image
    path = os.path.join(export_dir, 'export-image-%s.png' %
                        name[len(prefix):])
    file_safety.write_file(path, image.encoded_image_string)
    written.append(path)
  return written


def detections_to_coco(prediction):
  """One image's prediction as COCO results (absolute pixel boxes)."""
  count = int(prediction[_DET.num_detections])
  height, width = prediction[_IN.original_image_spatial_shape][:2]
  boxes = prediction[_DET.detection_boxes][:count] * np.array(
      [height, width, height, width], np.float64)
  image_id = prediction[_IN.source_id]
  if isinstance(image_id, bytes):
    image_id = image_id.decode('utf-8')
  return [{'image_id': image_id, 'category_id': int(category),
           'bbox': box, 'score': float(score)}
          for box, category, score in zip(
              coco_tools.boxes_to_coco(boxes),
              prediction[_DET.detection_classes][:count],
              prediction[_DET.detection_scores][:count])]


def export_detections(estimator, input_fn, checkpoint, eval_config):
  """Writes the detections of num_examples images to export_path (JSON)."""
  results = []
  predictions = estimator.predict(input_fn, checkpoint_path=checkpoint)
  for index, prediction in enumerate(predictions):
    if index >= eval_config.num_examples:
      break
    results.extend(detections_to_coco(prediction))
  file_safety.write_file(eval_config.export_path, json.dumps(results))
  logging.info('Wrote %d detections to %s', len(results),
               eval_config.export_path)


def evaluate_once(estimator, input_fn, checkpoint, eval_config, eval_dir):
  """Evaluates `checkpoint` as eval_config says; returns the metrics."""
  metrics = {}
  if not eval_config.ignore_groundtruth:
    metrics = estimator.evaluate(input_fn, steps=num_batches(eval_config),
                                 checkpoint_path=checkpoint)
    write_summaries(metrics, eval_dir)
    if eval_config.visualization_export_dir:
      export_visualizations(metrics, eval_config.visualization_export_dir)
  if eval_config.export_path:
    export_detections(estimator, input_fn, checkpoint, eval_config)
  return metrics


def repeated_evaluation(evaluate, checkpoint_dir, eval_config):
  """Runs evaluate(checkpoint) on each new checkpoint, as the original.

  Returns:
    The metrics of the last evaluation (None when none was made).
  """
  max_evals = 1 if eval_config.ignore_groundtruth else (
      eval_config.max_evals or None)
  interval = eval_config.eval_interval_secs
  last, attempts, metrics = None, 0, None
  while True:
    start = time.time()
    checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
    if not checkpoint:
      logging.info('No model found in %s. Will try again in %d seconds',
                   checkpoint_dir, interval)
    elif checkpoint == last:
      logging.info('Found already evaluated checkpoint. Will try again in '
                   '%d seconds', interval)
    else:
      last = checkpoint
      metrics = evaluate(checkpoint)
    attempts += 1
    if max_evals and attempts >= max_evals:
      logging.info('Finished evaluation!')
      return metrics
    time.sleep(max(start + interval - time.time(), 0))

