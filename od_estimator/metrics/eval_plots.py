"""Evaluation plots for TensorBoard (model_main --eval_plots).

The pictures `evaluate --output_dir` writes, drawn over a whole training
evaluation and written as image summaries into its events (the Estimator
tags them '<name>/0', see eval_visualization): precision-recall curves per
class at IoU 0.5 (PASCAL's matching) under 'EvalPlots/PrecisionRecall',
the confusion matrix (detections scoring at least
eval_config.min_score_threshold, IoU 0.5) under 'EvalPlots/ConfusionMatrix',
the per-class table (groundtruth boxes, detections scoring at least that,
PASCAL AP at IoU 0.5) under 'EvalPlots/PerClass', and, when the evaluation
retains its original images (eval_config.retain_original_images, the
default), the grid of the NUM_WORST_IMAGES images with the most errors
under 'EvalPlots/WorstImages'. Only those images are kept while the
evaluation runs (evaluation_report.WorstImages), drawn at the grid's tile
size.
"""
import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluation_report
from od_estimator.metrics import eval_visualization

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

CURVES_NAME = 'EvalPlots/PrecisionRecall'
CONFUSION_NAME = 'EvalPlots/ConfusionMatrix'
TABLE_NAME = 'EvalPlots/PerClass'
WORST_NAME = 'EvalPlots/WorstImages'
# Images in the worst images grid: evaluate --num_worst_images' default.
NUM_WORST_IMAGES = evaluation_report.NUM_WORST_IMAGES
_IOU_THRESHOLD = 0.5
# The commands' --eval_plots flag.
FLAG_HELP = ('Each evaluation also writes, as TensorBoard images of its '
             'events (IMAGES, run eval_0), the precision-recall curve of '
             'each class (%s), the confusion matrix (%s), the per-class '
             'table (%s) and the grid of the %d images with the most '
             'misses and false detections (%s; with '
             'eval_config.retain_original_images, the default) '
             '`evaluate --output_dir` draws. Not on a TPU. Off by default.'
             % (CURVES_NAME, CONFUSION_NAME, TABLE_NAME, NUM_WORST_IMAGES,
                WORST_NAME))
_GROUNDTRUTH = (_DET.detection_boxes, _DET.detection_classes,
                _DET.detection_scores, _DET.num_detections,
                _IN.groundtruth_boxes, _IN.groundtruth_classes,
                _IN.num_groundtruth_boxes)
_IMAGES = (_IN.original_image, _IN.true_image_shape,
           _IN.original_image_spatial_shape)


class _Labeled:
  """What ReportCollector reads of one evaluation image; its picture (at
  the original size) is made only when the collector asks for it."""

  def __init__(self, groundtruth, name, batch=None, index=None):
    self.groundtruth = groundtruth
    self.name = name
    self._batch, self._index = batch, index

  @property
  def image(self):
    return eval_visualization.original_picture(
        *[self._batch[name][self._index] for name in _IMAGES])


class EvalPlots:
  """Eval metric ops drawing the report's curves, confusion matrix,
  per-class table and worst images."""

  def __init__(self, categories, min_score=0.5, worst_images=False):
    """Prepares the ops.

    Args:
      categories: the label map's [{'id', 'name'}].
      min_score: the confusion matrix counts detections scoring this.
      worst_images: the eval dict's original_image is the retained uint8
        image: draw the worst images grid too.
    """
    self._categories = categories
    self._min_score = min_score
    self._num_worst = NUM_WORST_IMAGES if worst_images else 0
    self._names = (CURVES_NAME, CONFUSION_NAME, TABLE_NAME) + (
        (WORST_NAME,) if self._num_worst else ())
    self._reset()

  def _reset(self):
    self._collector = evaluation_report.ReportCollector(
        self._categories, _IOU_THRESHOLD, self._min_score, self._num_worst)
    self._images = 0

  def _add_batch(self, names, *values):
    """py_func body: adds the batch's images to the collector."""
    batch = dict(zip(names, values))
    for i in range(len(batch[_DET.detection_classes])):
      m = int(batch[_DET.num_detections][i])
      n = int(batch[_IN.num_groundtruth_boxes][i])
      groundtruth = {
          _IN.groundtruth_boxes: batch[_IN.groundtruth_boxes][i][:n],
          _IN.groundtruth_classes: batch[_IN.groundtruth_classes][i][:n]}
      detections = {name: batch[name][i][:m] for name in (
          _DET.detection_boxes, _DET.detection_scores,
          _DET.detection_classes)}
      self._images += 1
      self._collector(self._images, _Labeled(
          groundtruth, 'image %d' % self._images, batch, i), detections)

  def _summaries(self):
    """py_func body: the serialized image summaries; starts anew."""
    pictures = (evaluation_report.curves_picture(self._collector),
                evaluation_report.confusion_picture(self._collector),
                evaluation_report.per_class_picture(self._collector),
                evaluation_report.worst_picture(self._collector))
    self._reset()
    return [eval_visualization.image_summary(
        name, np.asarray(picture.convert('RGB')))
            for name, picture in zip(self._names, pictures)]

  def get_estimator_eval_metric_ops(self, eval_dict):
    """{each name: (summary value op, shared update op)}.

    Args:
      eval_dict: eval_util.result_dict_for_batched_example's dict (boxes in
        pixels of the original images, 1-based classes; with worst_images,
        the retained original_image, true_image_shape and
        original_image_spatial_shape).
    """
    eval_dict = eval_visualization.batched(eval_dict)
    names = list(_GROUNDTRUTH) + (list(_IMAGES) if self._num_worst else [])
    update_op = tf.compat.v1.py_func(
        lambda *values: self._add_batch(names, *values),
        [eval_dict[name] for name in names], [])
    summaries = tf.compat.v1.py_func(self._summaries, [],
                                     [tf.string] * len(self._names))
    return {name: (summary, update_op)
            for name, summary in zip(self._names, summaries)}
