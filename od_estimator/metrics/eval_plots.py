"""Evaluation plots for TensorBoard (model_main --eval_plots).

The pictures `evaluate --output_dir` writes, drawn over a whole training
evaluation and written as image summaries into its events (the Estimator
tags them '<name>/0', see eval_visualization): precision-recall curves per
class at IoU 0.5 (PASCAL's matching) under 'EvalPlots/PrecisionRecall',
the confusion matrix (detections scoring at least
eval_config.min_score_threshold, IoU 0.5) under 'EvalPlots/ConfusionMatrix',
and the per-class table (groundtruth boxes, detections scoring at least
that, PASCAL AP at IoU 0.5) under 'EvalPlots/PerClass'.
"""
import collections

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
_NAMES = (CURVES_NAME, CONFUSION_NAME, TABLE_NAME)
_IOU_THRESHOLD = 0.5
# The commands' --eval_plots flag.
FLAG_HELP = ('Each evaluation also writes, as TensorBoard images of its '
             'events (IMAGES, run eval_0), the precision-recall curve of '
             'each class (%s), the confusion matrix (%s) and the per-class '
             'table (%s) `evaluate --output_dir` draws. Not on a TPU. Off '
             'by default.' % (CURVES_NAME, CONFUSION_NAME, TABLE_NAME))
# What ReportCollector reads of a labeled image (no image: no worst grid).
_Labeled = collections.namedtuple('_Labeled', ['groundtruth', 'image'])


class EvalPlots:
  """Eval metric ops drawing the report's curves, confusion matrix and
  per-class table."""

  def __init__(self, categories, min_score=0.5):
    """Prepares the ops.

    Args:
      categories: the label map's [{'id', 'name'}].
      min_score: the confusion matrix counts detections scoring this.
    """
    self._categories = categories
    self._min_score = min_score
    self._reset()

  def _reset(self):
    self._collector = evaluation_report.ReportCollector(
        self._categories, _IOU_THRESHOLD, self._min_score, num_worst=0)
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
      self._collector(self._images, _Labeled(groundtruth, None), detections)
      self._images += 1

  def _summaries(self):
    """py_func body: the two serialized image summaries; starts anew."""
    pictures = (evaluation_report.curves_picture(self._collector),
                evaluation_report.confusion_picture(self._collector),
                evaluation_report.per_class_picture(self._collector))
    self._reset()
    return [eval_visualization.image_summary(
        name, np.asarray(picture.convert('RGB')))
            for name, picture in zip(_NAMES, pictures)]

  def get_estimator_eval_metric_ops(self, eval_dict):
    """{CURVES_NAME, CONFUSION_NAME, TABLE_NAME: (summary value op, shared
    update op)}.

    Args:
      eval_dict: eval_util.result_dict_for_batched_example's dict (boxes in
        any one unit, 1-based classes).
    """
    eval_dict = eval_visualization.batched(eval_dict)
    names = [_DET.detection_boxes, _DET.detection_classes,
             _DET.detection_scores, _DET.num_detections,
             _IN.groundtruth_boxes, _IN.groundtruth_classes,
             _IN.num_groundtruth_boxes]
    update_op = tf.compat.v1.py_func(
        lambda *values: self._add_batch(names, *values),
        [eval_dict[name] for name in names], [])
    summaries = tf.compat.v1.py_func(self._summaries, [],
                                     [tf.string] * len(_NAMES))
    return {name: (summary, update_op)
            for name, summary in zip(_NAMES, summaries)}
