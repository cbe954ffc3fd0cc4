"""The report's bounded keeper of the worst images (evaluation_report)."""
import numpy as np
import pytest

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import evaluation_report
from od_estimator.metrics import report_drawings

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields


def _worst_by_sorting(scores, size):
  """The ids a full sort keeps: most errors first, the earlier on ties."""
  ranked = sorted((-errors, image_id) for image_id, errors in
                  enumerate(scores) if errors)
  return [image_id for _, image_id in ranked[:size]]


@pytest.mark.parametrize('size', [0, 1, 5, 300])
def test_keeps_the_worst_images_and_never_more(size):
  rng = np.random.default_rng(3)
  scores = rng.integers(0, 6, size=200)  # Many ties, some error-free.
  worst = evaluation_report.WorstImages(size)
  for image_id, errors in enumerate(scores):
    kept = worst.keeps(errors, image_id)
    worst.add(errors, image_id, str(image_id), None)
    assert len(worst) <= size
    assert kept == (str(image_id) in
                    [caption for caption, _ in worst.worst_first()])
  assert [int(caption) for caption, _ in worst.worst_first()] == (
      _worst_by_sorting(scores, size))


class _Labeled:
  """A labeled image counting how often its picture is read."""

  reads = 0

  def __init__(self, name, groundtruth_boxes):
    self.name = name
    self.groundtruth = {
        _IN.groundtruth_boxes: np.array(groundtruth_boxes, np.float32),
        _IN.groundtruth_classes: np.ones(len(groundtruth_boxes), np.int32)}

  @property
  def image(self):
    _Labeled.reads += 1
    return np.zeros([40, 60, 3], np.uint8)


def test_collector_draws_only_the_images_it_keeps():
  collector = evaluation_report.ReportCollector(
      [{'id': 1, 'name': 'cat'}], num_worst=2)
  no_detections = {_DET.detection_boxes: np.zeros([0, 4], np.float32),
                   _DET.detection_scores: np.zeros([0], np.float32),
                   _DET.detection_classes: np.zeros([0], np.int32)}
  box = [5, 5, 20, 20]
  # Missed boxes per image: 1, 0, 2, 1, 3; the last 1 is never drawn
  # (two worse are kept by then), nor the error-free image.
  for image_id, misses in enumerate([1, 0, 2, 1, 3], start=1):
    collector(image_id, _Labeled('im%d' % image_id, [box] * misses),
              no_detections)
  assert _Labeled.reads == 3
  worst = collector.worst.worst_first()
  assert [caption.split(':')[0] for caption, _ in worst] == ['im5', 'im3']
  # Kept at the grid's tile size, whatever the image's.
  assert {picture.size for _, picture in worst} == {
      (report_drawings.TILE, round(report_drawings.TILE * 40 / 60))}
  grid = evaluation_report.worst_picture(collector)
  assert grid.size == report_drawings.grid_size(2)
