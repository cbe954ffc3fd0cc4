"""COCO mask evaluator: the original's names, numbers equal to pycocotools'
segm evaluation run directly on the same masks (crowd groundtruth too)."""
import contextlib
import json
import io

import numpy as np
import pytest
import tensorflow as tf
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from od_estimator.metrics import eval_util
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_evaluation
from od_estimator.protos import eval_pb2
from od_estimator.config import config_util

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORIES = [{'id': 1, 'name': 'cat'}, {'id': 3, 'name': 'dog'}]
SUMMARY = ('Precision/mAP', 'Precision/mAP@.50IOU', 'Precision/mAP@.75IOU',
           'Precision/mAP (small)', 'Precision/mAP (medium)',
           'Precision/mAP (large)', 'Recall/AR@1', 'Recall/AR@10',
           'Recall/AR@100', 'Recall/AR@100 (small)',
           'Recall/AR@100 (medium)', 'Recall/AR@100 (large)')


def _blob(rng, height, width):
  """A binary mask: a random ellipse, with its box (ymin, xmin, ymax, xmax)."""
  cy, cx = rng.uniform(10, height - 10), rng.uniform(10, width - 10)
  ry, rx = rng.uniform(3, height / 3), rng.uniform(3, width / 3)
  y, x = np.mgrid[:height, :width]
  mask = (((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1).astype(np.uint8)
  return mask, _box(mask)


def _box(mask):
  """The box (ymin, xmin, ymax, xmax) of a mask's pixels; [0, 0, 1, 1] for
  an empty mask."""
  rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
  if not len(rows):
    return np.array([0, 0, 1, 1], np.float64)
  return np.array([rows[0], cols[0], rows[-1] + 1, cols[-1] + 1], np.float64)


def _random_set(seed=0, num_images=10):
  """Images of varied sizes: groundtruth masks (some crowd), and detections
  that shift them, plus false positives (one of a class not in the map)."""
  rng = np.random.RandomState(seed)
  images = []
  for i in range(num_images):
    height, width = rng.randint(40, 120), rng.randint(40, 120)
    n = rng.randint(1, 4)
    masks, boxes = zip(*[_blob(rng, height, width) for _ in range(n)])
    masks = np.stack(masks)
    labels = rng.choice([1, 3], size=n)
    crowd = np.zeros(n, bool)
    crowd[0] = i % 4 == 0
    shifted = np.stack([np.roll(m, rng.randint(-3, 4, 2), axis=(0, 1))
                        for m in masks])
    extra = np.stack([_blob(rng, height, width)[0] for _ in range(2)])
    images.append({
        'id': 'img%d' % i, 'masks': masks, 'boxes': np.stack(boxes),
        'labels': labels, 'crowd': crowd,
        'det_masks': np.concatenate([shifted, extra]),
        'scores': rng.uniform(0.1, 1.0, size=n + 2),
        'det_labels': np.concatenate([labels, [rng.choice([1, 3]), 2]])})
  return images


def _fill(evaluator, images):
  for image in images:
    evaluator.add_single_ground_truth_image_info(image['id'], {
        _IN.groundtruth_boxes: image['boxes'],
        _IN.groundtruth_classes: image['labels'],
        _IN.groundtruth_is_crowd: image['crowd'],
        _IN.groundtruth_instance_masks: image['masks']})
    evaluator.add_single_detected_image_info(image['id'], {
        _DET.detection_scores: image['scores'],
        _DET.detection_classes: image['det_labels'],
        _DET.detection_masks: image['det_masks']})


def _pycocotools_direct(images):
  """segm evaluation written straight against pycocotools, the groundtruth
  area being the box area (as the original's mask evaluator)."""
  category_ids = {c['id'] for c in CATEGORIES}
  gt = {'images': [], 'annotations': [], 'categories': CATEGORIES}
  dets = []
  for index, image in enumerate(images, start=1):
    height, width = image['masks'].shape[1:]
    gt['images'].append({'id': index, 'height': height, 'width': width})
    for mask, box, label, crowd in zip(image['masks'], image['boxes'],
                                       image['labels'], image['crowd']):
      y0, x0, y1, x1 = box
      gt['annotations'].append({
          'id': len(gt['annotations']) + 1, 'image_id': index,
          'category_id': int(label), 'bbox': [x0, y0, x1 - x0, y1 - y0],
          'area': (x1 - x0) * (y1 - y0), 'iscrowd': int(crowd),
          'segmentation': mask_utils.encode(np.asfortranarray(mask))})
    for mask, score, label in zip(image['det_masks'], image['scores'],
                                  image['det_labels']):
      if label in category_ids:
        dets.append({'image_id': index, 'category_id': int(label),
                     'segmentation': mask_utils.encode(
                         np.asfortranarray(mask)), 'score': score})
  with contextlib.redirect_stdout(io.StringIO()):
    coco = COCO()
    coco.dataset = gt
    coco.createIndex()
    evaluation = COCOeval(coco, coco.loadRes(dets), 'segm')
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
  return evaluation


@pytest.mark.parametrize('backend', ['faster', 'pycocotools'])
def test_numbers_equal_pycocotools_segm_run_directly(backend):
  images = _random_set()
  evaluator = coco_evaluation.CocoMaskEvaluator(
      CATEGORIES, include_metrics_per_category=True, backend=backend)
  _fill(evaluator, images)
  metrics = evaluator.evaluate()
  reference = _pycocotools_direct(images)
  assert any(crowd.any() for crowd in (i['crowd'] for i in images))
  # faster-coco-eval's C++ accumulation may round a precision 1 ulp apart.
  tolerance = 0 if backend == 'pycocotools' else 1e-12
  for index, name in enumerate(SUMMARY):
    assert metrics['DetectionMasks_' + name] == pytest.approx(
        reference.stats[index], abs=tolerance, rel=0), name
  assert 0.3 < metrics['DetectionMasks_Precision/mAP@.50IOU'] <= 1.0
  for k, category in enumerate(CATEGORIES):
    precision = reference.eval['precision'][:, :, k, 0, 2]
    expected = precision[precision > -1].mean()
    assert metrics['DetectionMasks_PerformanceByCategory/mAP/' +
                   category['name']] == pytest.approx(expected,
                                                      abs=tolerance, rel=0)
  assert set(metrics) == set(evaluator.metric_names())


def test_edge_cases_equal_pycocotools_segm_run_directly():
  """Numbers to the bit with: an image without detections, empty
  detection and groundtruth masks, masks touching every border (full
  height, so runs cross columns), a crowd, uint8 values above 1, masks
  taller than 255 rows (summed in two chunks) and 8-byte-wide rows."""
  rng = np.random.RandomState(5)
  images = _random_set(seed=7, num_images=6)
  images[0].update(det_masks=images[0]['det_masks'][:0],
                   scores=images[0]['scores'][:0],
                   det_labels=images[0]['det_labels'][:0])
  image = images[1]
  image['det_masks'][0] = 0
  image['masks'][-1] = 0
  height, width = image['masks'].shape[1:]
  image['masks'][0] = 0
  image['masks'][0, :, :width // 3] = 1
  image['boxes'][0] = [0, 0, height, width // 3]
  image['det_masks'][1] = 0
  image['det_masks'][1, :, :width // 2] = 1
  image['det_labels'][1] = image['labels'][0]
  image['crowd'][0] = True
  images[2]['det_masks'] = images[2]['det_masks'] * np.uint8(3)
  # A tall image whose width is a multiple of 8.
  tall = _random_set(seed=11, num_images=1)[0]
  tall['masks'] = np.repeat(tall['masks'], 5, axis=1)[:, :, :48]
  tall['det_masks'] = np.repeat(tall['det_masks'], 5, axis=1)[:, :, :48]
  tall['masks'][0] = 0
  tall['masks'][0, 2:320, 8:30] = 1
  tall['boxes'] = np.stack([_box(m) for m in tall['masks']])
  tall['det_masks'][0] = np.roll(tall['masks'][0], rng.randint(1, 9), 0)
  images.append(tall)
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(evaluator, images)
  metrics = evaluator.evaluate()
  binary = [dict(i, det_masks=(i['det_masks'] > 0).astype(np.uint8))
            for i in images]
  reference = _pycocotools_direct(binary)
  assert [metrics['DetectionMasks_' + name] for name in SUMMARY] == [
      float(v) for v in reference.stats]


def test_names_are_the_originals():
  evaluator = coco_evaluation.CocoMaskEvaluator(
      CATEGORIES, include_metrics_per_category=True)
  assert evaluator.metric_names() == (
      ['DetectionMasks_' + name for name in SUMMARY] +
      ['DetectionMasks_PerformanceByCategory/mAP/cat',
       'DetectionMasks_PerformanceByCategory/mAP/dog'])


def test_perfect_masks_score_one():
  images = _random_set(seed=1, num_images=3)
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  for image in images:
    evaluator.add_single_ground_truth_image_info(image['id'], {
        _IN.groundtruth_boxes: image['boxes'],
        _IN.groundtruth_classes: image['labels'],
        _IN.groundtruth_instance_masks: image['masks']})
    evaluator.add_single_detected_image_info(image['id'], {
        _DET.detection_scores: np.ones(len(image['labels'])),
        _DET.detection_classes: image['labels'],
        _DET.detection_masks: image['masks']})
  assert evaluator.evaluate()['DetectionMasks_Precision/mAP'] == 1.0


def test_any_positive_pixel_is_the_mask_as_the_original():
  # The original binarizes masks of any dtype (masks > 0).
  images = _random_set(seed=3, num_images=3)
  expected = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(expected, images)
  scaled = [dict(image, masks=image['masks'] * np.uint8(255),
                 det_masks=image['det_masks'].astype(np.float32) * 0.7)
            for image in images]
  # uint8 detections above 1 in one image (binarized in MaskCrops' read).
  scaled[1]['det_masks'] = images[1]['det_masks'] * np.uint8(7)
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(evaluator, scaled)
  assert evaluator.evaluate() == expected.evaluate()
  assert evaluator.groundtruth_dict() == expected.groundtruth_dict()
  assert evaluator.detections_list() == expected.detections_list()


def test_bad_masks_are_refused():
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  boxes = np.array([[0, 0, 4, 4]], np.float64)
  with pytest.raises(ValueError, match='needs groundtruth_instance_masks'):
    evaluator.add_single_ground_truth_image_info('a', {
        _IN.groundtruth_boxes: boxes, _IN.groundtruth_classes: [1]})
  evaluator.add_single_ground_truth_image_info('a', {
      _IN.groundtruth_boxes: boxes, _IN.groundtruth_classes: [1],
      _IN.groundtruth_instance_masks: np.ones([1, 8, 8], np.uint8)})
  with pytest.raises(ValueError, match='incompatible'):
    evaluator.add_single_detected_image_info('a', {
        _DET.detection_scores: [1.0], _DET.detection_classes: [1],
        _DET.detection_masks: np.ones([1, 8, 9], np.uint8)})
  # The refused masks left nothing behind: good ones are still taken.
  evaluator.add_single_detected_image_info('a', {
      _DET.detection_scores: [1.0], _DET.detection_classes: [1],
      _DET.detection_masks: np.ones([1, 8, 8], np.uint8)})
  # pycocotools' precision 1 / (1 + eps) of a single true positive.
  assert evaluator.evaluate()['DetectionMasks_Precision/mAP'] == (
      1 / (1 + np.spacing(1)))


def _eval_dict(images, max_boxes=4, max_detections=6):
  """A batched eval dict of uint8 masks padded to the largest image, as
  eval_util.result_dict_for_batched_example gives it."""
  height = max(i['masks'].shape[1] for i in images)
  width = max(i['masks'].shape[2] for i in images)
  batch = len(images)
  out = {
      _IN.key: np.array([i['id'].encode() for i in images]),
      _IN.original_image_spatial_shape: np.array(
          [i['masks'].shape[1:] for i in images], np.int32),
      _IN.num_groundtruth_boxes: np.array([len(i['labels']) for i in images],
                                          np.int32),
      _DET.num_detections: np.array([len(i['scores']) for i in images],
                                    np.int32),
      _IN.groundtruth_boxes: np.zeros([batch, max_boxes, 4], np.float32),
      _IN.groundtruth_classes: np.zeros([batch, max_boxes], np.int64),
      _IN.groundtruth_is_crowd: np.zeros([batch, max_boxes], bool),
      _IN.groundtruth_instance_masks: np.zeros(
          [batch, max_boxes, height, width], np.uint8),
      _DET.detection_boxes: np.zeros([batch, max_detections, 4], np.float32),
      _DET.detection_scores: np.zeros([batch, max_detections], np.float32),
      _DET.detection_classes: np.zeros([batch, max_detections], np.int64),
      _DET.detection_masks: np.zeros([batch, max_detections, height, width],
                                     np.uint8),
  }
  for b, image in enumerate(images):
    n, m = len(image['labels']), len(image['scores'])
    h, w = image['masks'].shape[1:]
    out[_IN.groundtruth_boxes][b, :n] = image['boxes']
    out[_IN.groundtruth_classes][b, :n] = image['labels']
    out[_IN.groundtruth_is_crowd][b, :n] = image['crowd']
    out[_IN.groundtruth_instance_masks][b, :n, :h, :w] = image['masks']
    out[_DET.detection_scores][b, :m] = image['scores']
    out[_DET.detection_classes][b, :m] = image['det_labels']
    out[_DET.detection_masks][b, :m, :h, :w] = image['det_masks']
  return out


def test_metric_ops_of_padded_batches_equal_the_evaluator():
  images = _random_set(seed=2, num_images=4)
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(evaluator, images)
  expected = evaluator.evaluate()
  with tf.Graph().as_default():
    feeds, placeholders = {}, {}
    for name, value in _eval_dict(images[:2]).items():
      placeholders[name] = tf.compat.v1.placeholder(
          tf.as_dtype(value.dtype), [None] * value.ndim)
    config = eval_pb2.EvalConfig(metrics_set=['coco_detection_metrics',
                                              'coco_mask_metrics'])
    ops = eval_util.get_eval_metric_ops_for_evaluators(config, CATEGORIES,
                                                       placeholders)
    assert 'DetectionBoxes_Precision/mAP' in ops
    update = tf.group(*[update for _, update in ops.values()])
    with tf.compat.v1.Session() as sess:
      for batch in (images[:2], images[2:]):
        feeds = {placeholders[name]: value
                 for name, value in _eval_dict(batch).items()}
        sess.run(update, feeds)
      values = sess.run({name: value for name, (value, _) in ops.items()})
  for name, value in expected.items():
    assert values[name] == pytest.approx(value, abs=1e-6), name


def test_metric_ops_without_detection_boxes_or_counts_as_the_original():
  # The original's mask evaluator reads neither detection_boxes nor the
  # per-image counts (every row counts without them).
  images = _random_set(seed=4, num_images=2)
  for image in images:
    image['det_masks'] = image['det_masks'][:3]
    image['scores'], image['det_labels'] = (image['scores'][:3],
                                            image['det_labels'][:3])
  expected = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(expected, images[:1])
  eval_dict = _eval_dict(images[:1], max_boxes=len(images[0]['labels']),
                         max_detections=3)
  for name in (_DET.detection_boxes, _IN.num_groundtruth_boxes,
               _DET.num_detections):
    del eval_dict[name]
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  with tf.Graph().as_default():
    ops = evaluator.get_estimator_eval_metric_ops(
        {name: tf.constant(value) for name, value in eval_dict.items()})
    with tf.compat.v1.Session() as sess:
      sess.run(ops['DetectionMasks_Precision/mAP'][1])
      values = sess.run({name: value for name, (value, _) in ops.items()})
  assert values == pytest.approx(expected.evaluate())


def test_a_model_without_masks_is_refused_naming_what_to_do():
  config = eval_pb2.EvalConfig(metrics_set=['coco_mask_metrics'])
  with tf.Graph().as_default():
    eval_dict = {name: tf.constant(value) for name, value in
                 _eval_dict(_random_set(num_images=1)).items()
                 if name != _DET.detection_masks}
    with pytest.raises(config_util.ConfigError,
                       match="'coco_mask_metrics' needs detection masks.*"
                       'predict_instance_masks'):
      eval_util.get_eval_metric_ops_for_evaluators(config, CATEGORIES,
                                                   eval_dict)
    with pytest.raises(ValueError, match="CocoMaskEvaluator needs "
                       "'detection_masks'"):
      coco_evaluation.CocoMaskEvaluator(
          CATEGORIES).get_estimator_eval_metric_ops(eval_dict)


def test_eval_config_per_category_options_reach_the_mask_evaluator():
  config = eval_pb2.EvalConfig(metrics_set=['coco_mask_metrics'],
                               include_metrics_per_category=True,
                               all_metrics_per_category=True)
  (evaluator,) = eval_util.get_evaluators(config, CATEGORIES)
  names = evaluator.metric_names()
  assert 'DetectionMasks_PerformanceByCategory/mAP/dog' in names
  assert 'DetectionMasks_Recall/AR@100 ByCategory/cat' in names


def test_dumped_detections_are_pycocotools_rles(tmp_path):
  images = _random_set(seed=4, num_images=3)
  evaluator = coco_evaluation.CocoMaskEvaluator(CATEGORIES)
  _fill(evaluator, images)
  path = str(tmp_path / 'detections.json')
  evaluator.dump_detections_to_json_file(path)
  with open(path) as f:
    dumped = json.load(f)
  expected = []
  for index, image in enumerate(images, start=1):
    known = image['det_labels'] != 2  # Class 2 is not in the label map.
    rles = mask_utils.encode(np.asfortranarray(
        image['det_masks'][known].transpose(1, 2, 0)))
    expected += [{'image_id': index, 'category_id': int(label),
                  'segmentation': {'size': list(rle['size']),
                                   'counts': rle['counts'].decode()},
                  'score': float(score)}
                 for rle, label, score in zip(rles, image['det_labels'][known],
                                              image['scores'][known])]
  assert dumped == expected
  # Groundtruth sizes and RLEs as pycocotools'.
  groundtruth = evaluator.groundtruth_dict()
  assert [(i['height'], i['width']) for i in groundtruth['images']] == [
      image['masks'].shape[1:] for image in images]
  assert [a['segmentation']['counts'] for a in groundtruth['annotations']] == [
      rle['counts'].decode() for image in images for rle in mask_utils.encode(
          np.asfortranarray(image['masks'].transpose(1, 2, 0)))]
