"""What `evaluate --output_dir` writes: pictures and a report.html.

Files:
  report.html              the metrics, the per-class table and the pictures
  metrics.json             {metric name: value}, as printed (NaN as null)
  precision_recall.png     a precision-recall curve per class (IoU
                           --iou_threshold, PASCAL's matching)
  confusion_matrix.png     groundtruth class (rows) against detected class
                           (columns), background included (confusion_matrix)
  worst_images.png         the images with the most misses, false detections
                           and wrong classes: groundtruth boxes in green,
                           detections (score >= --min_score_threshold) with
                           their labels

The per-class table has a row per label map class: its groundtruth boxes,
its detections scoring at least --min_score_threshold, and one column per
per-category metric of the evaluation (e.g. DetectionBoxes_
PerformanceByCategory/mAP, given per category whenever a report is
written) and the AP at --iou_threshold behind the curves
(PascalBoxes_PerformanceByCategory/AP@<iou>IOU).
"""
import heapq
import html
import io
import json
import math
import os

import numpy as np

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import confusion_matrix
from od_estimator.metrics import report_drawings
from od_estimator.metrics import pascal_evaluation
from od_estimator.utils import file_safety
from od_estimator.utils import label_map_util
from od_estimator.utils import visualization_utils

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

REPORT_FILE = 'report.html'
METRICS_FILE = 'metrics.json'
CURVES_FILE = 'precision_recall.png'
CONFUSION_FILE = 'confusion_matrix.png'
WORST_FILE = 'worst_images.png'
_PER_CATEGORY = 'PerformanceByCategory/'
_GROUNDTRUTH_COLOR = 'LimeGreen'


class ReportCollector:
  """Collects what the report shows, image by image (export_evaluation's
  `observe`)."""

  def __init__(self, categories, iou_threshold=0.5, min_score=0.5,
               num_worst=16):
    """Prepares the counts.

    Args:
      categories: the label map's [{'id', 'name'}].
      iou_threshold: the least IoU of a match (curves, confusion matrix).
      min_score: detections counted, matched and drawn score at least this.
      num_worst: images kept for the grid (0: none, `labeled.image` unused).
    """
    self.categories = sorted(categories, key=lambda c: c['id'])
    self.iou_threshold = iou_threshold
    self.min_score = min_score
    self._num_worst = num_worst
    self.confusion = confusion_matrix.ConfusionMatrix(
        [c['id'] for c in self.categories], iou_threshold, min_score)
    self.curves = pascal_evaluation.PascalDetectionEvaluator(
        self.categories, matching_iou_threshold=iou_threshold)
    self._worst = []  # heap of (errors, -image_id, name, drawn image)

  def __call__(self, image_id, labeled, detections):
    groundtruth = labeled.groundtruth
    self.curves.add_image(image_id, groundtruth, detections)
    errors = self.confusion.add(
        groundtruth[_IN.groundtruth_boxes],
        groundtruth[_IN.groundtruth_classes], detections[_DET.detection_boxes],
        detections[_DET.detection_scores], detections[_DET.detection_classes])
    if not errors.total or not self._num_worst:
      return
    entry = (errors.total, -image_id)
    if len(self._worst) == self._num_worst and entry <= self._worst[0][:2]:
      return
    drawn = self._drawn(labeled.image, groundtruth, detections)
    item = entry + ('%s: %s' % (labeled.name, errors), drawn)
    if len(self._worst) < self._num_worst:
      heapq.heappush(self._worst, item)
    else:
      heapq.heapreplace(self._worst, item)

  def _drawn(self, image, groundtruth, detections):
    """A copy of the image with its groundtruth and kept detections."""
    image = np.array(image)
    visualization_utils.visualize_boxes_and_labels_on_image_array(
        image, groundtruth[_IN.groundtruth_boxes],
        groundtruth[_IN.groundtruth_classes], None, {},
        max_boxes_to_draw=None, line_thickness=2,
        groundtruth_box_visualization_color=_GROUNDTRUTH_COLOR)
    return visualization_utils.visualize_boxes_and_labels_on_image_array(
        image, detections[_DET.detection_boxes],
        detections[_DET.detection_classes], detections[_DET.detection_scores],
        label_map_util.create_category_index(self.categories),
        max_boxes_to_draw=None, min_score_thresh=self.min_score - 1e-9,
        line_thickness=2)

  def worst_images(self):
    """[(caption, drawn image)], the most errors first."""
    return [(caption, image) for _, _, caption, image in
            sorted(self._worst, reverse=True)]

  def per_class_rows(self, metrics):
    """(column titles, rows): a row per class (see the module docstring).

    Args:
      metrics: the evaluation's {metric name: value}.
    """
    metrics = dict(metrics)
    for name, value in self.curves.evaluate().items():
      metrics.setdefault(name, value)
    titles = []
    for name in metrics:
      if _PER_CATEGORY in name:
        title = name.rsplit('/', 1)[0]
        if title not in titles:
          titles.append(title)
    counts = self.confusion.counts
    rows = []
    for i, category in enumerate(self.categories, start=1):
      values = [metrics.get('%s/%s' % (title, category['name']))
                for title in titles]
      rows.append([category['id'], category['name'], int(counts[i].sum()),
                   int(counts[:, i].sum())] + values)
    return (['id', 'class', 'groundtruth boxes',
             'detections >= %g' % self.min_score] + titles), rows


def write(output_dir, collector, metrics, summary):
  """Writes the report's files into output_dir (created if needed).

  Args:
    output_dir: the folder.
    collector: the ReportCollector the evaluation fed.
    metrics: {metric name: value}.
    summary: a line saying what was evaluated.

  Returns:
    The report.html path.
  """
  os.makedirs(output_dir, exist_ok=True)
  worst = collector.worst_images()
  pictures = {
      CURVES_FILE: curves_picture(collector),
      CONFUSION_FILE: confusion_picture(collector),
      WORST_FILE: report_drawings.image_grid(
          [image for _, image in worst], [caption for caption, _ in worst]),
  }
  for name, picture in pictures.items():
    data = io.BytesIO()
    picture.save(data, 'PNG')
    file_safety.write_file(os.path.join(output_dir, name), data.getvalue())
  file_safety.write_file(os.path.join(output_dir, METRICS_FILE),
                         json.dumps({
                             name: None if math.isnan(value) else value
                             for name, value in metrics.items()}, indent=1))
  titles, rows = collector.per_class_rows(metrics)
  path = os.path.join(output_dir, REPORT_FILE)
  file_safety.write_file(path, _html(summary, metrics, titles, rows,
                                     collector))
  return path


def curves_picture(collector):
  """The precision-recall curve of each class with groundtruth and
  detections, titled with its AP (a PIL image)."""
  curves = collector.curves.precision_recall_curves()
  ap = collector.curves.evaluate()
  # metric_names: the summary, then each class's AP in id order.
  ap_names = dict(zip([c['id'] for c in collector.categories],
                      collector.curves.metric_names()[1:]))
  names = {c['id']: c['name'] for c in collector.categories}
  return report_drawings.precision_recall_curves(
      [curves[class_id] for class_id in sorted(curves)],
      ['%s  AP %.3f' % (names[class_id], ap[ap_names[class_id]])
       for class_id in sorted(curves)])


def confusion_picture(collector):
  """The confusion matrix, background first (a PIL image)."""
  return report_drawings.confusion_matrix(
      collector.confusion.counts,
      ['background'] + [c['name'] for c in collector.categories])


def cell_text(value):
  """A table cell: a metric with 4 decimals, a count as it is, '-' none."""
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return '-'
  if isinstance(value, float):
    return '%.4f' % value
  return str(value)


def format_value(value):
  """cell_text for HTML."""
  return html.escape(cell_text(value))


def per_class_picture(collector):
  """The per-class table (per_class_rows) of the collector's own metrics,
  the AP at its IoU threshold (a PIL image)."""
  titles, rows = collector.per_class_rows({})
  return report_drawings.table(
      titles, [[cell_text(value) for value in row] for row in rows])


def _table(titles, rows):
  head = ''.join('<th>%s</th>' % html.escape(title) for title in titles)
  body = ''.join('<tr>%s</tr>' % ''.join(
      '<td>%s</td>' % format_value(value) for value in row) for row in rows)
  return '<table>\n<tr>%s</tr>\n%s\n</table>' % (head, body)


def _html(summary, metrics, titles, rows, collector):
  overall = _table(['metric', 'value'], [
      [name, value] for name, value in metrics.items()
      if _PER_CATEGORY not in name])
  return """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Evaluation report</title>
<style>body{font-family:sans-serif} td,th{border:1px solid #ccc;
padding:2px 8px;text-align:right} table{border-collapse:collapse}</style>
</head><body>
<h1>Evaluation report</h1>
<p>%(summary)s</p>
<h2>Metrics</h2>
%(overall)s
<h2 id="per-class">Per class</h2>
%(per_class)s
<h2>Precision-recall curves (IoU %(iou)g)</h2>
<img src="%(curves)s" alt="precision-recall curves">
<h2>Confusion matrix (IoU %(iou)g, score &gt;= %(score)g)</h2>
<p>Rows: groundtruth class; columns: detected class. Background row: false
detections; background column: missed groundtruth.</p>
<img src="%(confusion)s" alt="confusion matrix">
<h2>Worst images</h2>
<p>Most misses, false detections and wrong classes. Green: groundtruth.</p>
<img src="%(worst)s" alt="worst images">
</body></html>
""" % {'summary': html.escape(summary), 'overall': overall,
       'per_class': _table(titles, rows), 'iou': collector.iou_threshold,
       'score': collector.min_score, 'curves': CURVES_FILE,
       'confusion': CONFUSION_FILE, 'worst': WORST_FILE}
