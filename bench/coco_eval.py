r"""COCO box evaluation: our evaluator against pycocotools run directly.

The same random groundtruth and detections (default 1,500 images x 100
detections over 80 classes) go through
  ours              CocoDetectionEvaluator (add per image, then evaluate();
                    the default backend),
  pycocotools       COCO / loadRes / COCOeval evaluate, accumulate,
                    summarize, called directly on COCO-format dicts, and
  faster-coco-eval  the same calls to faster-coco-eval's COCO and
                    COCOeval_faster alone (its own speed, so our overhead
                    or gain over it shows),
timed side by side (wall clock, and process CPU time, steadier on a
shared machine); the 12 summary numbers must be identical to pycocotools'.
With --repeats=N each is timed N times, interleaved, and the fastest kept.

  .venv/bin/python bench/coco_eval.py [--num_images=1500] [--repeats=1]
"""
import argparse
import contextlib
import io
import os
import sys
import time

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.core import standard_fields as fields  # pylint: disable=g-import-not-at-top
from od_estimator.metrics import coco_evaluation  # pylint: disable=g-import-not-at-top
from od_estimator.metrics import coco_tools  # pylint: disable=g-import-not-at-top


def _boxes(rng, count, size=640.0):
  """[count, 4] absolute ymin, xmin, ymax, xmax boxes inside the image."""
  corner = rng.uniform(0, size * 0.8, (count, 2))
  extent = rng.uniform(8, size * 0.4, (count, 2))
  far = np.minimum(corner + extent, size)
  return np.concatenate([corner, far], axis=1)


def make_data(num_images, num_detections, num_classes, seed=0):
  """Per image: groundtruth boxes/classes, and detections near them."""
  rng = np.random.default_rng(seed)
  images = []
  for _ in range(num_images):
    num_boxes = int(rng.integers(1, 16))
    gt_boxes = _boxes(rng, num_boxes)
    gt_classes = rng.integers(1, num_classes + 1, num_boxes)
    # Half the detections jitter a groundtruth box, half are random.
    source = rng.integers(0, num_boxes, num_detections)
    jitter = rng.normal(0, 6, (num_detections, 4))
    det_boxes = np.where(
        (np.arange(num_detections) % 2 == 0)[:, None],
        gt_boxes[source] + jitter, _boxes(rng, num_detections))
    det_boxes = np.sort(np.clip(det_boxes, 0, 640).reshape(-1, 2, 2),
                        axis=1).reshape(-1, 4)
    det_classes = np.where(rng.uniform(size=num_detections) < 0.7,
                           gt_classes[source],
                           rng.integers(1, num_classes + 1, num_detections))
    images.append((gt_boxes, gt_classes, det_boxes,
                   rng.uniform(size=num_detections), det_classes))
  return images


class Clock:
  """Wall-clock and process CPU seconds of the timed stretches."""

  def __init__(self):
    self.wall = self.cpu = 0.0
    self._wall = self._cpu = None

  def start(self):
    self._wall, self._cpu = time.perf_counter(), time.process_time()

  def stop(self):
    self.wall += time.perf_counter() - self._wall
    self.cpu += time.process_time() - self._cpu


def ours(images, categories):
  evaluator = coco_evaluation.CocoDetectionEvaluator(categories)
  clock = Clock()
  clock.start()
  for image_id, (gt_boxes, gt_classes, boxes, scores, classes) in enumerate(
      images):
    evaluator.add_single_ground_truth_image_info(image_id, {
        fields.InputDataFields.groundtruth_boxes: gt_boxes,
        fields.InputDataFields.groundtruth_classes: gt_classes})
    evaluator.add_single_detected_image_info(image_id, {
        fields.DetectionResultFields.detection_boxes: boxes,
        fields.DetectionResultFields.detection_scores: scores,
        fields.DetectionResultFields.detection_classes: classes})
  metrics = evaluator.evaluate()
  clock.stop()
  return clock, [metrics[coco_evaluation.PREFIX + name]
                   for name, _ in coco_tools.COCO_METRIC_NAMES_AND_INDEX]


def reference(images, categories, library='pycocotools'):
  """pycocotools (or faster-coco-eval, library='faster_coco_eval') run
  directly on COCO-format dicts built from the arrays."""
  coco_class, eval_class = _library(library)
  clock = Clock()
  clock.start()
  annotations, detections = [], []
  for image_id, (gt_boxes, gt_classes, boxes, scores, classes) in enumerate(
      images, start=1):
    for box, coco_box, label in zip(
        gt_boxes, coco_tools.boxes_to_coco(gt_boxes), gt_classes):
      annotations.append({
          'id': len(annotations) + 1, 'image_id': image_id,
          'category_id': int(label), 'bbox': coco_box,
          'area': float((box[2] - box[0]) * (box[3] - box[1])),
          'iscrowd': 0})
    for box, score, label in zip(coco_tools.boxes_to_coco(boxes), scores,
                                 classes):
      detections.append({'image_id': image_id, 'category_id': int(label),
                         'bbox': box, 'score': float(score)})
  with contextlib.redirect_stdout(io.StringIO()):
    groundtruth = coco_class()
    groundtruth.dataset = {
        'images': [{'id': i} for i in range(1, len(images) + 1)],
        'annotations': annotations, 'categories': categories}
    groundtruth.createIndex()
    coco_eval = eval_class(groundtruth, groundtruth.loadRes(detections),
                           'bbox')
    coco_eval.evaluate()
    coco_eval.accumulate()
    coco_eval.summarize()
  clock.stop()
  return clock, [float(v) for v in coco_eval.stats]


def _library(name):
  """(COCO class, COCOeval class) of pycocotools or faster_coco_eval."""
  if name == 'faster_coco_eval':
    import faster_coco_eval  # pylint: disable=g-import-not-at-top
    return faster_coco_eval.COCO, faster_coco_eval.COCOeval_faster
  return COCO, COCOeval


def compare(ours_run, reference_run, repeats):
  """Times ours_run() and reference_run(library) of pycocotools and
  faster_coco_eval (each -> (Clock, 12 stats)) `repeats` times,
  interleaved, keeping the fastest; returns the report: each side's wall and
  CPU seconds, pycocotools' time over each other side's, and whether their
  numbers are identical to pycocotools' (and the largest difference)."""
  runs = [('ours', ours_run),
          ('pycocotools', lambda: reference_run('pycocotools')),
          ('faster_coco_eval', lambda: reference_run('faster_coco_eval'))]
  best = {}
  for _ in range(repeats):
    for name, function in runs:
      clock, stats = function()
      wall_s, cpu_s, _ = best.get(name, (clock.wall, clock.cpu, stats))
      best[name] = (min(wall_s, clock.wall), min(cpu_s, clock.cpu), stats)
  report = {}
  for name, _ in runs:
    report['%s_s' % name] = best[name][0]
    report['%s_cpu_s' % name] = best[name][1]
  reference = best['pycocotools']
  for name, prefix in (('ours', ''), ('faster_coco_eval', 'faster_coco_eval_')):
    report[prefix + 'speedup'] = reference[0] / best[name][0]
    report[prefix + 'cpu_speedup'] = reference[1] / best[name][1]
  for name, prefix in (('ours', ''), ('faster_coco_eval', 'faster_coco_eval_')):
    report[prefix + 'identical'] = best[name][2] == reference[2]
    report[prefix + 'max_abs_difference'] = float(np.max(np.abs(
        np.subtract(best[name][2], reference[2]))))
  report['mAP'] = best['ours'][2][0]
  return report


def parse_args(argv, description, num_images):
  """(flags, categories) of a COCO evaluation benchmark."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument('--num_images', type=int, default=num_images)
  parser.add_argument('--num_detections', type=int, default=100)
  parser.add_argument('--num_classes', type=int, default=80)
  parser.add_argument('--repeats', type=int, default=1)
  parser.add_argument('--json', action='store_true')
  args = parser.parse_args(argv)
  return args, [{'id': i, 'name': 'class_%d' % i}
                for i in range(1, args.num_classes + 1)]


def main(argv=None):
  args, categories = parse_args(argv, __doc__.split('\n')[0], 1500)
  images = make_data(args.num_images, args.num_detections, args.num_classes)
  report = compare(lambda: ours(images, categories),
                   lambda library: reference(images, categories, library),
                   args.repeats)
  print('COCO evaluation of %d images x %d detections, %d classes:' % (
      args.num_images, args.num_detections, args.num_classes))
  common.report(report, args.json)
  return 0 if report['identical'] else 1


if __name__ == '__main__':
  sys.exit(main())
