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


# The images in the worst images grid, unless told otherwise.
NUM_WORST_IMAGES = 16


class WorstImages:
  """The `size` worst images seen so far, and never more.

  An image's badness is its number of errors (misses, false detections
  and wrong classes: confusion_matrix's ImageErrors.total); of two images
  as bad, the earlier stays. A min-heap on (errors, -image_id) holds the
  kept pictures, so memory does not grow with the number of images, and
  `keeps` tells beforehand whether an image would be kept, so that only
  those are drawn.
  """

  def __init__(self, size):
    """Keeps at most `size` images (0: none)."""
    self.size = size
    self._heap = []  # (errors, -image_id, caption, picture)

  def __len__(self):
    return len(self._heap)

  def keeps(self, errors, image_id):
    """Whether an image with `errors` errors would be kept now.

    Args:
      errors: its badness; an image with none is never kept.
      image_id: its id, unique among the images offered.
    """
    if not errors or not self.size:
      return False
    return (len(self._heap) < self.size or
            (errors, -image_id) > self._heap[0][:2])

  def add(self, errors, image_id, caption, picture):
    """Keeps the image if `keeps` says so, dropping the least bad kept one
    when full."""
    if not self.keeps(errors, image_id):
      return
    item = (errors, -image_id, caption, picture)
    if len(self._heap) < self.size:
      heapq.heappush(self._heap, item)
    else:
      heapq.heapreplace(self._heap, item)

  def worst_first(self):
    """[(caption, picture)], the most errors first."""
    return [(caption, picture) for _, _, caption, picture in
            sorted(self._heap, key=lambda item: item[:2], reverse=True)]


class ReportCollector:
  """Collects what the report shows, image by image (export_evaluation's
  `observe`, eval_plots' batches)."""

  def __init__(self, categories, iou_threshold=0.5, min_score=0.5,
               num_worst=NUM_WORST_IMAGES):
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
    self.confusion = confusion_matrix.ConfusionMatrix(
        [c['id'] for c in self.categories], iou_threshold, min_score)
    self.curves = pascal_evaluation.PascalDetectionEvaluator(
        self.categories, matching_iou_threshold=iou_threshold)
    self.worst = WorstImages(num_worst)

  def __call__(self, image_id, labeled, detections):
    """Counts one image.

    Args:
      image_id: unique among the images counted.
      labeled: has .groundtruth (boxes in the detections' unit, 1-based
        classes), .name (for its caption) and .image (uint8 [H, W, 3], read
        only when the image is kept for the worst images grid).
      detections: boxes, scores and 1-based classes.
    """
    groundtruth = labeled.groundtruth
    self.curves.add_image(image_id, groundtruth, detections)
    errors = self.confusion.add(
        groundtruth[_IN.groundtruth_boxes],
        groundtruth[_IN.groundtruth_classes], detections[_DET.detection_boxes],
        detections[_DET.detection_scores], detections[_DET.detection_classes])
    if self.worst.keeps(errors.total, image_id):
      self.worst.add(errors.total, image_id,
                     '%s: %s' % (labeled.name, errors),
                     report_drawings.fit_tile(self._drawn(
                         labeled.image, groundtruth, detections)))

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
  pictures = {
      CURVES_FILE: curves_picture(collector),
      CONFUSION_FILE: confusion_picture(collector),
      WORST_FILE: worst_picture(collector),
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


def worst_picture(collector):
  """The grid of the worst images, the most errors first, each captioned
  with its name and errors (a PIL image)."""
  worst = collector.worst.worst_first()
  return report_drawings.image_grid([picture for _, picture in worst],
                                    [caption for caption, _ in worst])


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
