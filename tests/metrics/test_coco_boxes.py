"""coco_tools.boxes_to_coco_array: the one [ymin, xmin, ymax, xmax] → COCO
[x, y, width, height] conversion, used by the evaluators, the COCO export
functions and detect's results, each with its numbers unchanged."""
import numpy as np

from od_estimator import detect
from od_estimator.compat import coco_export
from od_estimator.metrics import coco_tools

# Float32 values whose float32 differences differ from their float64 ones.
BOXES = np.array([[0.1, 0.2, 0.7, 0.9], [0.33, 0.01, 0.5, 0.77]], np.float32)


def _exact_coco(box, subtract):
  ymin, xmin, ymax, xmax = box
  return [float(xmin), float(ymin), float(subtract(xmax, xmin)),
          float(subtract(ymax, ymin))]


def test_float64_by_default_in_the_boxes_dtype_for_none():
  in_float64 = [_exact_coco(box.astype(np.float64), np.subtract)
                for box in BOXES]
  in_float32 = [_exact_coco(box, np.subtract) for box in BOXES]
  assert in_float64 != in_float32
  assert coco_tools.boxes_to_coco(BOXES) == in_float64
  assert coco_tools.boxes_to_coco(BOXES, dtype=None) == in_float32
  assert coco_tools.boxes_to_coco_array(BOXES).dtype == np.float64


def test_the_export_functions_subtract_in_the_boxes_dtype():
  results = coco_export.ExportSingleImageDetectionBoxesToCoco(
      image_id='a', category_id_set={1},
      detection_boxes=BOXES, detection_scores=np.array([0.9, 0.8]),
      detection_classes=np.array([1, 1]))
  assert [result['bbox'] for result in results] == coco_tools.boxes_to_coco(
      BOXES, dtype=None)


def test_detect_scales_the_float64_widths_to_pixels():
  results = detect._coco_results(  # pylint: disable=protected-access
      7, {'detection_boxes': BOXES, 'detection_scores': [0.9, 0.8],
          'detection_classes': [1.0, 2.0]}, height=480, width=640)
  expected = [[xmin * 640, ymin * 480, (xmax - xmin) * 640,
               (ymax - ymin) * 480]
              for ymin, xmin, ymax, xmax in BOXES.tolist()]
  assert [result['bbox'] for result in results] == expected
  assert [result['category_id'] for result in results] == [1, 2]
