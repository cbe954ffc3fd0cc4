"""coco_tools: the original's Export* functions and COCO wrappers."""
import json

import numpy as np
import pytest

from od_estimator.compat import coco_tools
from od_estimator.metrics import coco_tools as metrics_coco_tools
from od_estimator.utils import json_utils

CATEGORIES = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]


def _data():
  rng = np.random.RandomState(3)
  image_ids, gt_boxes, gt_classes = [], [], []
  det_boxes, det_scores, det_classes = [], [], []
  for i in range(4):
    top_left = rng.uniform(0, 60, size=(3, 2))
    size = rng.uniform(10, 50, size=(3, 2))
    boxes = np.concatenate([top_left, top_left + size], 1).astype(np.float32)
    classes = np.array([1, 2, 1 + i % 2])
    image_ids.append('image%d' % i)
    gt_boxes.append(boxes)
    gt_classes.append(classes)
    det_boxes.append(boxes + rng.uniform(-4, 4, boxes.shape).astype(
        np.float32))
    det_scores.append(rng.uniform(0.1, 1, 3).astype(np.float32))
    det_classes.append(np.array([1, 2, 2]))
  return (image_ids, gt_boxes, gt_classes, det_boxes, det_scores,
          det_classes)


def test_export_groundtruth_as_the_original():
  boxes = np.array([[10, 20, 30, 60], [0, 0, 5, 5], [1, 1, 2, 2]],
                   np.float32)
  groundtruth = coco_tools.ExportGroundtruthToCOCO(
      ['a', 'b'], [boxes, boxes[:1]], [np.array([1, 7, 2]), np.array([2])],
      CATEGORIES)
  assert groundtruth['images'] == [{'id': 'a'}, {'id': 'b'}]
  assert groundtruth['categories'] is CATEGORIES
  # Class 7 is dropped but keeps its id; the next image starts after it.
  assert [a['id'] for a in groundtruth['annotations']] == [1, 3, 4]
  first = groundtruth['annotations'][0]
  assert first == {'id': 1, 'image_id': 'a', 'category_id': 1,
                   'bbox': [20.0, 10.0, 40.0, 20.0], 'area': 800.0,
                   'iscrowd': 0}
  single = coco_tools.ExportSingleImageGroundtruthToCoco(
      5, 10, {1, 2}, boxes[:2], np.array([1, 2]),
      groundtruth_is_crowd=np.array([0, 1]),
      groundtruth_area=np.array([0.0, 3.5], np.float32),
      groundtruth_keypoints=np.array([[[1, 2]], [[3, 4]]], np.float32),
      groundtruth_keypoint_visibilities=np.array([[0], [2]]))
  assert [(a['iscrowd'], a['area']) for a in single] == [(0, 800.0),
                                                          (1, 3.5)]
  assert single[1]['keypoints'] == [4.0, 3.0, 2]
  assert [a['num_keypoints'] for a in single] == [0, 1]
  with pytest.raises(ValueError, match='0th dimension'):
    coco_tools.ExportSingleImageGroundtruthToCoco(
        1, 1, {1}, boxes, np.array([1]))


def test_export_detections_writes_four_float_digits(tmp_path):
  path = str(tmp_path / 'detections.json')
  detections = coco_tools.ExportDetectionsToCOCO(
      [1], [np.array([[0.5, 0.25, 1.125, 2.0]], np.float32)],
      [np.array([0.123456], np.float32)], [np.array([2])], CATEGORIES,
      output_path=path)
  assert detections[0]['bbox'] == [0.25, 0.5, 1.75, 0.625]
  text = open(path).read()
  assert '"score": 0.1235' in text and '0.6250' in text
  assert json.loads(text)[0]['category_id'] == 2
  with pytest.raises(ValueError, match='same length'):
    coco_tools.ExportDetectionsToCOCO([1, 2], [], [], [], CATEGORIES)


def test_json_utils_leaves_strings_alone():
  text = json_utils.Dumps({'name': '1.23456', 'x': 1.0, 'y': 2.345678},
                          float_digits=2, sort_keys=True)
  assert text == '{"name": "1.23456", "x": 1.00, "y": 2.35}'


def test_wrappers_give_compute_metrics_numbers():
  (image_ids, gt_boxes, gt_classes, det_boxes, det_scores,
   det_classes) = _data()
  groundtruth_dict = coco_tools.ExportGroundtruthToCOCO(
      image_ids, gt_boxes, gt_classes, CATEGORIES)
  detections_list = coco_tools.ExportDetectionsToCOCO(
      image_ids, det_boxes, det_scores, det_classes, CATEGORIES)
  expected, expected_per_category = metrics_coco_tools.compute_metrics(
      groundtruth_dict, detections_list, include_metrics_per_category=True,
      all_metrics_per_category=True, backend='pycocotools')
  groundtruth = coco_tools.COCOWrapper(groundtruth_dict)
  detections = groundtruth.LoadAnnotations(detections_list)
  assert detections_list[0]['iscrowd'] == 0 and detections_list[0]['id'] == 1
  evaluator = coco_tools.COCOEvalWrapper(groundtruth, detections,
                                         agnostic_mode=False)
  metrics, per_category = evaluator.ComputeMetrics(
      include_metrics_per_category=True, all_metrics_per_category=True,
      super_categories={'pets': ['cat', 'dog']})
  assert list(metrics) == list(expected)
  np.testing.assert_allclose(list(metrics.values()), list(expected.values()))
  for name, value in expected_per_category.items():
    assert per_category[name] == pytest.approx(value)
  assert per_category['PerformanceBySuperCategory/pets'] == pytest.approx(
      np.mean([expected_per_category['PerformanceByCategory/mAP/cat'],
               expected_per_category['PerformanceByCategory/mAP/dog']]))
  assert 'Recall/AR@1 BySuperCategory/pets' in per_category
  assert coco_tools.COCOEvalWrapper(
      groundtruth, groundtruth.LoadAnnotations(
          coco_tools.ExportDetectionsToCOCO(
              image_ids, det_boxes, det_scores, det_classes, CATEGORIES)),
  ).ComputeMetrics()[1] == {}


def test_masks_evaluate_perfectly():
  masks = np.zeros([2, 20, 30], np.uint8)
  masks[0, 2:8, 3:12] = 1
  masks[1, 10:19, 15:29] = 1
  boxes = np.array([[2, 3, 8, 12], [10, 15, 19, 29]], np.float32)
  classes = np.array([1, 2])
  groundtruth = coco_tools.COCOWrapper({
      'images': [{'id': 1, 'height': 20, 'width': 30}],
      'categories': CATEGORIES,
      'annotations': coco_tools.ExportSingleImageGroundtruthToCoco(
          1, 1, {1, 2}, boxes, classes, groundtruth_masks=masks)})
  segments = coco_tools.ExportSegmentsToCOCO(
      [1], [masks[..., None]], [np.array([0.9, 0.8], np.float32)],
      [classes], CATEGORIES)
  assert isinstance(segments[0]['segmentation']['counts'], str)
  results = coco_tools.COCOWrapper(
      groundtruth.dataset, detection_type='segmentation').LoadAnnotations(
          segments)
  metrics, _ = coco_tools.COCOEvalWrapper(
      groundtruth, results, iou_type='segm').ComputeMetrics()
  assert metrics['Precision/mAP'] == pytest.approx(1.0)
  with pytest.raises(ValueError, match='Unsupported detection type'):
    coco_tools.COCOWrapper({}, detection_type='masks')


def test_export_keypoints_as_the_original():
  keypoints = np.array([[[10.4, 20.6], [3, 4], [5, 6]]], np.float32)
  exported = coco_tools.ExportKeypointsToCOCO(
      [7], [keypoints], [np.array([0.5], np.float32)], [np.array([1])],
      [{'id': 1, 'name': 'person', 'num_keypoints': 2}])
  assert exported == [{'image_id': 7, 'category_id': 1,
                       'keypoints': [10, 20, 1, 3, 4, 1], 'score': 0.5}]
  with pytest.raises(ValueError, match='category_id_set'):
    coco_tools.ExportKeypointsToCOCO(
        [7], [keypoints], [np.array([0.5], np.float32)], [np.array([3])],
        CATEGORIES)
