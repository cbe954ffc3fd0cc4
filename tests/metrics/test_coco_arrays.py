"""coco_arrays: COCO evaluation of arrays equals pycocotools, bit for bit."""
import contextlib
import io

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_arrays
from od_estimator.metrics import coco_evaluation
from od_estimator.metrics import coco_tools

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORIES = [{'id': 1, 'name': 'a'}, {'id': 2, 'name': 'b'},
              {'id': 5, 'name': 'c'}]


def _pycocotools(images, annotations, detections, iou_type):
  with contextlib.redirect_stdout(io.StringIO()):
    coco = COCO()
    coco.dataset = {'images': images, 'annotations': annotations,
                    'categories': CATEGORIES}
    coco.createIndex()
    evaluation = COCOeval(coco, coco.loadRes(detections), iou_type)
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
  return evaluation


def _random_boxes(seed, num_images=9):
  """Columns of groundtruth and detections meant to reach every branch:
  crowds, all area ranges, tied scores, an image without groundtruth, one
  without detections, and an (image, category) past 100 detections."""
  rng = np.random.default_rng(seed)
  gt, dt = [], []
  for image in range(1, num_images + 1):
    num_gt = 0 if image == 2 else int(rng.integers(1, 8))
    num_dt = 0 if image == 3 else int(rng.integers(0, 30))
    corner = rng.uniform(0, 300, (num_gt, 2))
    size = np.exp(rng.uniform(np.log(3), np.log(250), (num_gt, 2)))
    boxes = np.concatenate([corner, size], 1)
    classes = rng.choice([1, 2, 5], num_gt)
    crowd = rng.uniform(size=num_gt) < 0.2
    if num_gt > 1:
      # A crowd region around the first box: detections on that box
      # overlap it more than the box itself.
      boxes[1] = boxes[0] + [-20, -20, 40, 40]
      classes[1], crowd[:2] = classes[0], [False, True]
    gt.append((np.full(num_gt, image), classes, boxes,
               np.where(rng.uniform(size=num_gt) < 0.3,
                        rng.uniform(10, 20000, num_gt), boxes[:, 2:].prod(1)),
               crowd))
    if image == 4:
      num_dt = 130
    source = rng.integers(0, max(num_gt, 1), num_dt)
    near = (boxes[source] if num_gt else np.full((num_dt, 4), 50.0)) + (
        rng.normal(0, 4, (num_dt, 4)))
    near[:, 2:] = np.abs(near[:, 2:]) + 1
    dt_classes = (np.full(num_dt, 2) if image == 4 else
                  np.where(rng.uniform(size=num_dt) < 0.7,
                           classes[source] if num_gt else 1,
                           rng.choice([1, 2, 5], num_dt)))
    dt.append((np.full(num_dt, image), dt_classes, near,
               np.round(rng.uniform(size=num_dt), 1)))
  groundtruth = {name: np.concatenate([part[i] for part in gt])
                 for i, name in enumerate(
                     ('image_id', 'category_id', 'bbox', 'area', 'iscrowd'))}
  detections = {name: np.concatenate([part[i] for part in dt])
                for i, name in enumerate(
                    ('image_id', 'category_id', 'bbox', 'score'))}
  detections['area'] = detections['bbox'][:, 2] * detections['bbox'][:, 3]
  return groundtruth, detections


@pytest.mark.parametrize('seed', range(6))
def test_box_evaluation_arrays_equal_pycocotools(seed):
  groundtruth, detections = _random_boxes(seed)
  images = list(range(1, 10))
  reference = _pycocotools(
      [{'id': i} for i in images],
      [{'id': index, 'image_id': int(image), 'category_id': int(category),
        'bbox': box, 'area': float(area), 'iscrowd': int(crowd)}
       for index, (image, category, box, area, crowd) in enumerate(zip(
           groundtruth['image_id'], groundtruth['category_id'],
           groundtruth['bbox'].tolist(), groundtruth['area'],
           groundtruth['iscrowd']), 1)],
      [{'image_id': int(image), 'category_id': int(category), 'bbox': box,
        'score': float(score)}
       for image, category, box, score in zip(
           detections['image_id'], detections['category_id'],
           detections['bbox'].tolist(), detections['score'])], 'bbox')
  ours = coco_arrays.evaluate(images, [c['id'] for c in CATEGORIES],
                              groundtruth, detections)
  for name in ('precision', 'recall', 'scores'):
    np.testing.assert_array_equal(ours.eval[name], reference.eval[name],
                                  err_msg=name)
  summary, _ = coco_tools.summarize(ours, CATEGORIES)
  assert list(summary.values()) == [float(v) for v in reference.stats]


def test_box_iou_equals_pycocotools():
  rng = np.random.default_rng(3)
  dt = np.concatenate([rng.uniform(0, 50, (40, 2)),
                       rng.uniform(0, 30, (40, 2))], 1)
  gt = np.concatenate([rng.uniform(0, 50, (7, 2)),
                       rng.uniform(0, 30, (7, 2))], 1)
  crowd = np.array([0, 1, 0, 0, 1, 0, 0])
  expected = mask_utils.iou(dt, gt, crowd)
  rows, columns = np.meshgrid(np.arange(40), np.arange(7), indexing='ij')
  ours = coco_arrays.box_iou(dt[rows.ravel()], gt[columns.ravel()],
                             crowd[columns.ravel()].astype(bool))
  np.testing.assert_array_equal(ours.reshape(40, 7), expected)


def test_mask_evaluator_with_crowds_equals_pycocotools():
  rng = np.random.default_rng(5)
  evaluator = coco_evaluation.CocoMaskEvaluator(
      CATEGORIES, all_metrics_per_category=True)
  images, annotations, detections = [], [], []
  for image in range(1, 7):
    gt_masks = (rng.uniform(size=(4, 24, 32)) < 0.25).astype(np.uint8)
    gt_masks[:, :8] = 0
    classes = rng.choice([1, 2, 5], 4)
    crowd = np.array([False, image % 2 == 0, False, False])
    boxes = rng.uniform(0, 20, (4, 4))
    dt_masks = np.concatenate([
        np.roll(gt_masks, 1, axis=2), gt_masks[:2] * (
            rng.uniform(size=(2, 24, 32)) < 0.8)]).astype(np.uint8)
    dt_classes = np.concatenate([classes, classes[:2]])
    scores = np.round(rng.uniform(size=6), 1)
    evaluator.add_single_ground_truth_image_info(image, {
        _IN.groundtruth_boxes: boxes, _IN.groundtruth_classes: classes,
        _IN.groundtruth_is_crowd: crowd,
        _IN.groundtruth_instance_masks: gt_masks})
    evaluator.add_single_detected_image_info(image, {
        _DET.detection_scores: scores, _DET.detection_classes: dt_classes,
        _DET.detection_masks: dt_masks})
    images.append({'id': image, 'height': 24, 'width': 32})
    for mask, label, is_crowd, (ymin, xmin, ymax, xmax) in zip(
        gt_masks, classes, crowd, boxes):
      annotations.append({
          'id': len(annotations) + 1, 'image_id': image,
          'category_id': int(label), 'iscrowd': int(is_crowd),
          'segmentation': mask_utils.encode(np.asfortranarray(mask)),
          'bbox': [xmin, ymin, xmax - xmin, ymax - ymin],
          'area': float((ymax - ymin) * (xmax - xmin))})
    for mask, label, score in zip(dt_masks, dt_classes, scores):
      detections.append({
          'image_id': image, 'category_id': int(label), 'score': float(score),
          'segmentation': mask_utils.encode(np.asfortranarray(mask))})
  reference = _pycocotools(images, annotations, detections, 'segm')
  metrics = evaluator.evaluate()
  for name, index in coco_tools.COCO_METRIC_NAMES_AND_INDEX:
    assert metrics['DetectionMasks_' + name] == reference.stats[index], name
  for k, category in enumerate(CATEGORIES):
    precision = reference.eval['precision'][:, :, k, 0, 2]
    expected = np.mean(precision[precision > -1])
    assert metrics['DetectionMasks_PerformanceByCategory/mAP/' +
                   category['name']] == expected


def _edge_cases(evaluator):
  """Metrics after each step: no image, groundtruth alone, then detections
  of a class without groundtruth and of an id outside the label map."""
  results = [evaluator.evaluate()]
  evaluator.add_single_ground_truth_image_info('x', {
      _IN.groundtruth_boxes: np.array([[0, 0, 10, 10.]]),
      _IN.groundtruth_classes: np.array([1])})
  results.append(evaluator.evaluate())
  evaluator.add_single_ground_truth_image_info('y', {
      _IN.groundtruth_boxes: np.zeros([0, 4]),
      _IN.groundtruth_classes: np.zeros([0])})
  evaluator.add_single_detected_image_info('y', {
      _DET.detection_boxes: np.array([[0, 0, 10, 10.], [1, 1, 9, 9]]),
      _DET.detection_scores: np.array([.5, .7]),
      _DET.detection_classes: np.array([2, 9])})
  results.append(evaluator.evaluate())
  return results


def test_edge_cases_equal_the_pycocotools_backend():
  assert _edge_cases(coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, all_metrics_per_category=True)) == _edge_cases(
          coco_evaluation.CocoDetectionEvaluator(
              CATEGORIES, all_metrics_per_category=True,
              backend='pycocotools'))
