"""COCO evaluator: names, numbers equal to pycocotools run directly, ops."""
import contextlib
import io

import numpy as np
import pytest
import tensorflow as tf
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_evaluation

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
CATEGORIES = [{'id': 1, 'name': 'cat'}, {'id': 3, 'name': 'dog'}]


def _random_set(seed=0, num_images=12):
  """Per image: groundtruth and noisy detections, absolute coordinates."""
  rng = np.random.RandomState(seed)
  images = []
  for i in range(num_images):
    n = rng.randint(1, 4)
    top_left = rng.uniform(0, 200, size=(n, 2))
    size = rng.uniform(10, 150, size=(n, 2))
    gt = np.concatenate([top_left, top_left + size], axis=1)
    labels = rng.choice([1, 3], size=n)
    crowd = np.zeros(n, bool)
    crowd[0] = i % 5 == 0
    noise = rng.normal(0, 8, size=(n, 4))
    extra = rng.uniform(0, 250, size=(2, 4))
    extra[:, 2:] = extra[:, :2] + 30
    det = np.concatenate([gt + noise, extra])
    images.append({
        'id': 'img%d' % i, 'gt': gt, 'labels': labels, 'crowd': crowd,
        'det': det, 'scores': rng.uniform(0.1, 1.0, size=len(det)),
        'det_labels': np.concatenate([labels, rng.choice([1, 3], size=2)])})
  return images


def _pycocotools_direct(images):
  """The same evaluation written straight against pycocotools."""
  gt = {'images': [], 'annotations': [], 'categories': CATEGORIES}
  dets = []
  for index, image in enumerate(images, start=1):
    gt['images'].append({'id': index})
    for box, label, crowd in zip(image['gt'], image['labels'],
                                 image['crowd']):
      y0, x0, y1, x1 = box
      gt['annotations'].append({
          'id': len(gt['annotations']) + 1, 'image_id': index,
          'category_id': int(label), 'bbox': [x0, y0, x1 - x0, y1 - y0],
          'area': (x1 - x0) * (y1 - y0), 'iscrowd': int(crowd)})
    for box, score, label in zip(image['det'], image['scores'],
                                 image['det_labels']):
      y0, x0, y1, x1 = box
      dets.append({'image_id': index, 'category_id': int(label),
                   'bbox': [x0, y0, x1 - x0, y1 - y0], 'score': score})
  with contextlib.redirect_stdout(io.StringIO()):
    coco = COCO()
    coco.dataset = gt
    coco.createIndex()
    evaluation = COCOeval(coco, coco.loadRes(dets), 'bbox')
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
  return evaluation


def _fill(evaluator, images):
  for image in images:
    evaluator.add_single_ground_truth_image_info(image['id'], {
        _IN.groundtruth_boxes: image['gt'],
        _IN.groundtruth_classes: image['labels'],
        _IN.groundtruth_is_crowd: image['crowd']})
    evaluator.add_single_detected_image_info(image['id'], {
        _DET.detection_boxes: image['det'],
        _DET.detection_scores: image['scores'],
        _DET.detection_classes: image['det_labels']})


@pytest.mark.parametrize('backend', ['faster', 'pycocotools'])
def test_numbers_equal_pycocotools_run_directly(backend):
  images = _random_set()
  evaluator = coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, include_metrics_per_category=True, backend=backend)
  _fill(evaluator, images)
  metrics = evaluator.evaluate()
  reference = _pycocotools_direct(images)
  names = ['Precision/mAP', 'Precision/mAP@.50IOU', 'Precision/mAP@.75IOU',
           'Precision/mAP (small)', 'Precision/mAP (medium)',
           'Precision/mAP (large)', 'Recall/AR@1', 'Recall/AR@10',
           'Recall/AR@100', 'Recall/AR@100 (small)',
           'Recall/AR@100 (medium)', 'Recall/AR@100 (large)']
  for index, name in enumerate(names):
    assert metrics['DetectionBoxes_' + name] == pytest.approx(
        reference.stats[index], abs=1e-9), name
  assert 0.2 < metrics['DetectionBoxes_Precision/mAP@.50IOU'] <= 1.0
  # Per category mAP: mean of valid precision entries for that category.
  for k, category in enumerate(CATEGORIES):
    precision = reference.eval['precision'][:, :, k, 0, 2]
    expected = precision[precision > -1].mean()
    assert metrics['DetectionBoxes_PerformanceByCategory/mAP/' +
                   category['name']] == pytest.approx(expected, abs=1e-9)


def test_all_metrics_per_category_names():
  evaluator = coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, all_metrics_per_category=True)
  _fill(evaluator, _random_set(num_images=4))
  metrics = evaluator.evaluate()
  assert 'DetectionBoxes_Precision/mAP ByCategory/dog' in metrics
  assert 'DetectionBoxes_Recall/AR@100 (large) ByCategory/cat' in metrics
  assert set(metrics) == set(evaluator.metric_names())


def test_perfect_detections_score_one_and_empty_detections_zero():
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  gt = np.array([[10., 10., 60., 80.]])
  evaluator.add_single_ground_truth_image_info('a', {
      _IN.groundtruth_boxes: gt, _IN.groundtruth_classes: np.array([3])})
  evaluator.add_single_detected_image_info('a', {
      _DET.detection_boxes: gt, _DET.detection_scores: np.array([.9]),
      _DET.detection_classes: np.array([3])})
  # pycocotools' precision 1 / (1 + eps) of a single true positive.
  assert evaluator.evaluate()['DetectionBoxes_Precision/mAP'] == (
      1 / (1 + np.spacing(1)))
  evaluator.clear()
  evaluator.add_single_ground_truth_image_info('a', {
      _IN.groundtruth_boxes: gt, _IN.groundtruth_classes: np.array([3])})
  evaluator.add_single_detected_image_info('a', {
      _DET.detection_boxes: np.zeros([0, 4]),
      _DET.detection_scores: np.zeros([0]),
      _DET.detection_classes: np.zeros([0])})
  assert evaluator.evaluate()['DetectionBoxes_Precision/mAP'] == 0.0


def test_detections_need_groundtruth_first():
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  with pytest.raises(ValueError, match='Missing groundtruth'):
    evaluator.add_single_detected_image_info('x', {})


def test_estimator_metric_ops_match_the_evaluator():
  images = _random_set(seed=3, num_images=6)
  expected_evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  _fill(expected_evaluator, images)
  expected = expected_evaluator.evaluate()

  def pad(rows, length, width=None):
    out = np.zeros((length,) + ((width,) if width else ()), np.float32)
    out[:len(rows)] = rows
    return out

  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  with tf.Graph().as_default():
    batch = {
        _IN.key: tf.compat.v1.placeholder(tf.string, [None]),
        _IN.groundtruth_boxes: tf.compat.v1.placeholder(tf.float32,
                                                        [None, 5, 4]),
        _IN.groundtruth_classes: tf.compat.v1.placeholder(tf.float32,
                                                          [None, 5]),
        _IN.groundtruth_is_crowd: tf.compat.v1.placeholder(tf.bool,
                                                           [None, 5]),
        _IN.num_groundtruth_boxes: tf.compat.v1.placeholder(tf.int32, [None]),
        _DET.detection_boxes: tf.compat.v1.placeholder(tf.float32,
                                                       [None, 8, 4]),
        _DET.detection_scores: tf.compat.v1.placeholder(tf.float32, [None, 8]),
        _DET.detection_classes: tf.compat.v1.placeholder(tf.float32,
                                                         [None, 8]),
        _DET.num_detections: tf.compat.v1.placeholder(tf.int32, [None]),
    }
    ops = evaluator.get_estimator_eval_metric_ops(batch)
    update = next(iter(ops.values()))[1]
    with tf.compat.v1.Session() as sess:
      for start in range(0, len(images), 2):
        chunk = images[start:start + 2]
        sess.run(update, {
            batch[_IN.key]: [im['id'] for im in chunk],
            batch[_IN.groundtruth_boxes]: [pad(im['gt'], 5, 4) for im in chunk],
            batch[_IN.groundtruth_classes]: [pad(im['labels'], 5)
                                             for im in chunk],
            batch[_IN.groundtruth_is_crowd]: [pad(im['crowd'], 5) > 0
                                              for im in chunk],
            batch[_IN.num_groundtruth_boxes]: [len(im['gt']) for im in chunk],
            batch[_DET.detection_boxes]: [pad(im['det'], 8, 4)
                                          for im in chunk],
            batch[_DET.detection_scores]: [pad(im['scores'], 8)
                                           for im in chunk],
            batch[_DET.detection_classes]: [pad(im['det_labels'], 8)
                                            for im in chunk],
            batch[_DET.num_detections]: [len(im['det']) for im in chunk]})
      values = sess.run({name: op[0] for name, op in ops.items()})
  for name, value in expected.items():
    assert values[name] == pytest.approx(value, abs=1e-6), name


def _labeled_images(evaluator, labeled_first=None):
  """image1: class 1 found, plus a confident class-3 false positive."""
  box = np.array([[10., 10., 50., 50.]])
  groundtruth = {_IN.groundtruth_boxes: box,
                 _IN.groundtruth_classes: np.array([1])}
  if labeled_first is not None:
    groundtruth[_IN.groundtruth_labeled_classes] = labeled_first
  evaluator.add_single_ground_truth_image_info('image1', groundtruth)
  evaluator.add_single_detected_image_info('image1', {
      _DET.detection_boxes: np.array([[10., 10., 50., 50.],
                                      [60., 60., 90., 90.]]),
      _DET.detection_scores: np.array([0.8, 0.95]),
      _DET.detection_classes: np.array([1, 3])})
  evaluator.add_single_ground_truth_image_info('image2', {
      _IN.groundtruth_boxes: box, _IN.groundtruth_classes: np.array([3])})
  evaluator.add_single_detected_image_info('image2', {
      _DET.detection_boxes: box, _DET.detection_scores: np.array([0.5]),
      _DET.detection_classes: np.array([3])})
  return evaluator.evaluate()


def test_skip_predictions_for_unlabeled_class():
  # Only class 1 was labeled in image1 ([num_classes + 1] k-hot by id).
  labeled = np.array([0, 1, 0, 0])
  kept = _labeled_images(coco_evaluation.CocoDetectionEvaluator(CATEGORIES),
                         labeled)
  skipped = _labeled_images(coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, skip_predictions_for_unlabeled_class=True), labeled)
  assert kept['DetectionBoxes_Precision/mAP'] < 1.0
  assert skipped['DetectionBoxes_Precision/mAP'] == pytest.approx(1.0)
  # Without labeled classes nothing is dropped.
  unlabeled = _labeled_images(coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, skip_predictions_for_unlabeled_class=True))
  assert unlabeled['DetectionBoxes_Precision/mAP'] == pytest.approx(
      kept['DetectionBoxes_Precision/mAP'])


def test_super_category_map_is_the_mean_of_its_categories():
  evaluator = coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, include_metrics_per_category=True,
      super_categories={'pets': ['cat', 'dog'], 'felines': ['cat']})
  metrics = _labeled_images(evaluator)
  cat = metrics['DetectionBoxes_PerformanceByCategory/mAP/cat']
  dog = metrics['DetectionBoxes_PerformanceByCategory/mAP/dog']
  assert cat != dog
  assert metrics['DetectionBoxes_PerformanceBySuperCategory/pets'] == (
      pytest.approx((cat + dog) / 2))
  assert metrics['DetectionBoxes_PerformanceBySuperCategory/felines'] == (
      pytest.approx(cat))
  assert {'DetectionBoxes_PerformanceBySuperCategory/pets',
          'DetectionBoxes_PerformanceBySuperCategory/felines'} <= set(
              evaluator.metric_names())
  # Reported without per-category metrics too.
  alone = _labeled_images(coco_evaluation.CocoDetectionEvaluator(
      CATEGORIES, super_categories={'pets': ['cat', 'dog']}))
  assert alone['DetectionBoxes_PerformanceBySuperCategory/pets'] == (
      pytest.approx((cat + dog) / 2))
  assert 'DetectionBoxes_PerformanceByCategory/mAP/cat' not in alone


def test_super_category_of_unknown_names_is_refused():
  with pytest.raises(ValueError, match=r'eval_config.super_categories.*'
                     r"'horse'.*cat, dog"):
    coco_evaluation.CocoDetectionEvaluator(
        CATEGORIES, super_categories={'pets': ['cat', 'horse']})


def test_metric_ops_of_single_images_without_counts_as_the_original():
  # The original's users feed one image per step, without
  # num_groundtruth_boxes or num_detections.
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  with tf.Graph().as_default():
    image_id = tf.compat.v1.placeholder(tf.string, shape=())
    groundtruth_boxes = tf.compat.v1.placeholder(tf.float32, shape=(None, 4))
    groundtruth_classes = tf.compat.v1.placeholder(tf.float32, shape=(None))
    detection_boxes = tf.compat.v1.placeholder(tf.float32, shape=(None, 4))
    detection_scores = tf.compat.v1.placeholder(tf.float32, shape=(None))
    detection_classes = tf.compat.v1.placeholder(tf.float32, shape=(None))
    eval_metric_ops = evaluator.get_estimator_eval_metric_ops({
        _IN.key: image_id,
        _IN.groundtruth_boxes: groundtruth_boxes,
        _IN.groundtruth_classes: groundtruth_classes,
        _DET.detection_boxes: detection_boxes,
        _DET.detection_scores: detection_scores,
        _DET.detection_classes: detection_classes})
    _, update_op = eval_metric_ops['DetectionBoxes_Precision/mAP']
    with tf.compat.v1.Session() as sess:
      for name, box, label in (('image1', [100., 100., 200., 200.], 1),
                               ('image2', [50., 50., 100., 100.], 3),
                               ('image3', [25., 25., 50., 50.], 3)):
        sess.run(update_op, {
            image_id: name, groundtruth_boxes: np.array([box]),
            groundtruth_classes: np.array([label]),
            detection_boxes: np.array([box, [0., 0., 5., 5.]]),
            detection_scores: np.array([.8, .1]),
            detection_classes: np.array([label, 1])})
      metrics = sess.run({key: value_op for key, (value_op, _)
                          in eval_metric_ops.items()})
  # Low-scored false positives ranked after every true positive: AP 1.
  assert metrics['DetectionBoxes_Precision/mAP'] == pytest.approx(1.0)


def test_batched_metric_ops_without_counts_use_every_row():
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  box = np.array([10., 10., 60., 80.], np.float32)
  with tf.Graph().as_default():
    eval_dict = {
        _IN.key: tf.constant(['a', 'b']),
        _IN.groundtruth_boxes: tf.constant(np.array([[box, box + 100]] * 2)),
        _IN.groundtruth_classes: tf.constant([[1., 3.]] * 2),
        # Image b misses its dog: only a row count can say so.
        _DET.detection_boxes: tf.constant(np.array([[box, box + 100],
                                                    [box, box]])),
        _DET.detection_scores: tf.constant([[.9, .8], [.9, .1]]),
        _DET.detection_classes: tf.constant([[1., 3.], [1., 1.]]),
    }
    ops = evaluator.get_estimator_eval_metric_ops(eval_dict)
    with tf.compat.v1.Session() as sess:
      sess.run(ops['DetectionBoxes_Precision/mAP'][1])
      metrics = sess.run({k: v[0] for k, v in ops.items()})
  # Cat: 2 of 2 found; dog: 1 of 2 found -> recall (1 + 0.5) / 2.
  assert metrics['DetectionBoxes_Recall/AR@100'] == pytest.approx(0.75)


def _padded_batch_ops(evaluator, **optional):
  """Metric ops of the original's padded batch: image1 and image2 carry a
  padding row (class -1) after their one box; image3 has two boxes."""
  eval_dict = {
      _IN.key: tf.constant(['image1', 'image2', 'image3']),
      _IN.groundtruth_boxes: tf.constant(
          [[[100., 100., 200., 200.], [-1., -1., -1., -1.]],
           [[50., 50., 100., 100.], [-1., -1., -1., -1.]],
           [[25., 25., 50., 50.], [10., 10., 15., 15.]]]),
      _IN.groundtruth_classes: tf.constant([[1., -1.], [3., -1.], [2., 2.]]),
      _DET.detection_boxes: tf.constant(
          [[[100., 100., 200., 200.], [0., 0., 0., 0.]],
           [[50., 50., 100., 100.], [0., 0., 0., 0.]],
           [[25., 25., 50., 50.], [10., 10., 15., 15.]]]),
      _DET.detection_scores: tf.constant([[.8, 0.], [.7, 0.], [.95, .9]]),
      _DET.detection_classes: tf.constant([[1., -1.], [3., -1.], [2., 2.]]),
  }
  eval_dict.update({name: tf.constant(value)
                    for name, value in optional.items()})
  return evaluator.get_estimator_eval_metric_ops(eval_dict)


def _run(ops):
  with tf.compat.v1.Session() as sess:
    sess.run(ops['DetectionBoxes_Precision/mAP'][1])
    return sess.run({name: value for name, (value, _) in ops.items()})


def test_padded_batches_with_the_originals_count_names():
  # The original's box evaluator reads the per-image counts as
  # 'num_groundtruth_boxes_per_image' and 'num_det_boxes_per_image'; its
  # test's labels: class 3 is not in the label map.
  categories = [{'id': 0, 'name': 'person'}, {'id': 1, 'name': 'cat'},
                {'id': 2, 'name': 'dog'}]
  with tf.Graph().as_default():
    metrics = _run(_padded_batch_ops(
        coco_evaluation.CocoDetectionEvaluator(categories),
        num_groundtruth_boxes_per_image=np.array([1, 1, 2], np.int32),
        num_det_boxes_per_image=np.array([1, 1, 2], np.int32)))
  # The original's numbers: the padding rows are neither groundtruth nor
  # detections; with one detection per image, dog's AR@1 is 1/2, cat's 1.
  expected = {'Precision/mAP': 1.0, 'Precision/mAP@.50IOU': 1.0,
              'Precision/mAP@.75IOU': 1.0, 'Precision/mAP (large)': 1.0,
              'Precision/mAP (medium)': -1.0, 'Precision/mAP (small)': 1.0,
              'Recall/AR@1': 0.75, 'Recall/AR@10': 1.0, 'Recall/AR@100': 1.0,
              'Recall/AR@100 (large)': 1.0, 'Recall/AR@100 (medium)': -1.0,
              'Recall/AR@100 (small)': 1.0}
  assert metrics == pytest.approx(
      {'DetectionBoxes_' + name: value for name, value in expected.items()})
  # The counts are read: one detection of image3 leaves a dog unfound.
  with tf.Graph().as_default():
    metrics = _run(_padded_batch_ops(
        coco_evaluation.CocoDetectionEvaluator(categories),
        num_groundtruth_boxes_per_image=np.array([1, 1, 2], np.int32),
        num_det_boxes_per_image=np.array([1, 1, 1], np.int32)))
  assert metrics['DetectionBoxes_Recall/AR@100'] == pytest.approx(0.75)


def test_images_not_annotated_are_skipped_as_the_original():
  categories = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]
  with tf.Graph().as_default():
    metrics = _run(_padded_batch_ops(
        coco_evaluation.CocoDetectionEvaluator(categories),
        num_groundtruth_boxes=np.array([1, 1, 2], np.int32),
        num_detections=np.array([1, 1, 1], np.int32),
        is_annotated=np.array([True, True, False])))
  # Without image3 (whose second dog is missed) every box is found.
  assert metrics['DetectionBoxes_Recall/AR@100'] == pytest.approx(1.0)
  # Only the cat is evaluated: no dog groundtruth is left.
  assert metrics['DetectionBoxes_Precision/mAP (large)'] == pytest.approx(
      1.0)
