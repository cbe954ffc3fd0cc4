"""Which groundtruth each detection found: a confusion matrix with background.

An image's detections scoring at least `min_score` are taken by score, best
first; each is matched to the not yet matched groundtruth box (of any class)
it overlaps most, if that IoU reaches `iou_threshold`. A match counts at
(groundtruth class, detected class), right or wrong; a detection matching
nothing at (background, detected class), a false detection; a groundtruth
box no detection matched at (groundtruth class, background), a miss.
"""
import collections

import numpy as np

from od_estimator.metrics import overlaps

BACKGROUND = 0


def match_image(groundtruth_boxes, groundtruth_classes, detection_boxes,
                detection_scores, detection_classes, iou_threshold=0.5,
                min_score=0.5):
  """The (groundtruth class, detected class) pairs of one image.

  Args:
    groundtruth_boxes: [N, 4] ymin, xmin, ymax, xmax (any unit, the same as
      the detections').
    groundtruth_classes: [N] 1-based class ids.
    detection_boxes: [M, 4].
    detection_scores: [M].
    detection_classes: [M] 1-based class ids.
    iou_threshold: the least IoU of a match.
    min_score: detections scoring less are left out.

  Returns:
    [(groundtruth class or BACKGROUND, detected class or BACKGROUND)]: one
    pair per match, per false detection and per missed box.
  """
  groundtruth_boxes = np.asarray(groundtruth_boxes, np.float64).reshape(-1, 4)
  groundtruth_classes = np.asarray(groundtruth_classes, np.int64).reshape(-1)
  scores = np.asarray(detection_scores, np.float64).reshape(-1)
  kept = np.flatnonzero(scores >= min_score)
  kept = kept[np.argsort(-scores[kept], kind='stable')]
  boxes = np.asarray(detection_boxes, np.float64).reshape(-1, 4)[kept]
  classes = np.asarray(detection_classes, np.int64).reshape(-1)[kept]
  with np.errstate(divide='ignore', invalid='ignore'):
    iou = np.nan_to_num(overlaps.BOXES.iou(boxes, groundtruth_boxes))
  taken = np.zeros(len(groundtruth_boxes), bool)
  pairs = []
  for row, detected in enumerate(classes):
    candidates = np.where(taken, -1.0, iou[row]) if len(taken) else iou[row]
    best = int(np.argmax(candidates)) if len(candidates) else -1
    if best >= 0 and candidates[best] >= iou_threshold:
      taken[best] = True
      pairs.append((int(groundtruth_classes[best]), int(detected)))
    else:
      pairs.append((BACKGROUND, int(detected)))
  pairs += [(int(label), BACKGROUND)
            for label in groundtruth_classes[~taken]]
  return pairs


class ConfusionMatrix:
  """Counts over images; row and column 0 are the background.

  Attributes:
    class_ids: the label map's ids, in the order of rows 1.. and columns 1..
    counts: int64 [K + 1, K + 1]; rows the groundtruth class, columns the
      detected class.
  """

  def __init__(self, class_ids, iou_threshold=0.5, min_score=0.5):
    self.class_ids = [int(class_id) for class_id in class_ids]
    self.iou_threshold = iou_threshold
    self.min_score = min_score
    self._index = {class_id: i + 1 for i, class_id in
                   enumerate(self.class_ids)}
    self._index[BACKGROUND] = 0
    size = len(self.class_ids) + 1
    self.counts = np.zeros([size, size], np.int64)

  def add(self, groundtruth_boxes, groundtruth_classes, detection_boxes,
          detection_scores, detection_classes):
    """Adds one image (match_image's arguments); returns its ImageErrors."""
    pairs = match_image(groundtruth_boxes, groundtruth_classes,
                        detection_boxes, detection_scores, detection_classes,
                        self.iou_threshold, self.min_score)
    for truth, detected in pairs:
      if truth in self._index and detected in self._index:
        self.counts[self._index[truth], self._index[detected]] += 1
    return ImageErrors(
        missed=sum(1 for _, detected in pairs if detected == BACKGROUND),
        false=sum(1 for truth, _ in pairs if truth == BACKGROUND),
        confused=sum(1 for truth, detected in pairs
                     if truth != detected and
                     BACKGROUND not in (truth, detected)))


class ImageErrors(collections.namedtuple('ImageErrors',
                                         ['missed', 'false', 'confused'])):
  """One image's missed groundtruth boxes, false detections and matches of
  the wrong class."""

  @property
  def total(self):
    return sum(self)

  def __str__(self):
    return '%d missed, %d false, %d wrong class' % self
