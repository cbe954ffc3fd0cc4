r"""COCO mask evaluation: our evaluator against pycocotools run directly.

The same random binary masks (default 200 images of 480 x 640, 100
detections each over 80 classes; groundtruth ellipses in random boxes, a
tenth of them crowd; detections shifted copies of groundtruth masks or
random ellipses) go through
  ours        CocoMaskEvaluator (add per image: check the masks and read
              their rectangles, pixel counts and overlaps, no RLE; then
              evaluate(), its default backend), and
  pycocotools mask.encode per image, COCO / loadRes / COCOeval('segm')
              evaluate, accumulate, summarize, and
  faster-coco-eval  the same with its own mask.encode, COCO and
              COCOeval_faster alone (its own speed, so our overhead or gain
              over it shows),
timed side by side on the same inputs (mask drawing is not timed; wall
clock and process CPU time); the 12 summary numbers are compared with
pycocotools' (identical, and the largest difference). --repeats as
bench/coco_eval.py.

  .venv/bin/python bench/coco_mask_eval.py [--num_images=200] [--repeats=1]
"""
import contextlib
import io
import os
import sys

import numpy as np
from pycocotools import mask as mask_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_eval  # pylint: disable=g-import-not-at-top,wrong-import-position
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.core import standard_fields as fields  # pylint: disable=g-import-not-at-top
from od_estimator.metrics import coco_evaluation  # pylint: disable=g-import-not-at-top
from od_estimator.metrics import coco_tools  # pylint: disable=g-import-not-at-top

HEIGHT, WIDTH = 480, 640


def _ellipses(boxes):
  """uint8 [N, HEIGHT, WIDTH]: the ellipse inscribed in each box."""
  masks = np.zeros([len(boxes), HEIGHT, WIDTH], np.uint8)
  for mask, (ymin, xmin, ymax, xmax) in zip(masks, boxes.astype(int)):
    ys = np.arange(ymin, ymax)[:, None]
    xs = np.arange(xmin, xmax)[None, :]
    cy, cx = (ymin + ymax - 1) / 2, (xmin + xmax - 1) / 2
    ry, rx = max((ymax - ymin) / 2, 1), max((xmax - xmin) / 2, 1)
    mask[ymin:ymax, xmin:xmax] = ((ys - cy) / ry) ** 2 + (
        (xs - cx) / rx) ** 2 <= 1
  return masks


def _boxes(rng, count):
  corner = rng.uniform(0, [HEIGHT * 0.8, WIDTH * 0.8], (count, 2))
  extent = rng.uniform(6, [HEIGHT * 0.4, WIDTH * 0.4], (count, 2))
  far = np.minimum(corner + extent, [HEIGHT, WIDTH])
  return np.floor(np.concatenate([corner, far], axis=1))


def make_specs(num_images, num_detections, num_classes, seed=0):
  """Per image, what its masks are made of (drawn later, per image)."""
  rng = np.random.default_rng(seed)
  specs = []
  for _ in range(num_images):
    num_boxes = int(rng.integers(1, 16))
    gt_boxes = _boxes(rng, num_boxes)
    source = rng.integers(0, num_boxes, num_detections)
    copies = np.arange(num_detections) % 2 == 0
    specs.append({
        'gt_boxes': gt_boxes,
        'gt_classes': rng.integers(1, num_classes + 1, num_boxes),
        'crowd': rng.uniform(size=num_boxes) < 0.1,
        'source': np.where(copies, source, -1),
        'shift': rng.integers(-6, 7, (num_detections, 2)),
        'random_boxes': _boxes(rng, num_detections),
        'scores': rng.uniform(size=num_detections),
        'det_classes': rng.integers(1, num_classes + 1, num_detections),
    })
  for spec in specs:
    copied = spec['source'] >= 0
    spec['det_classes'][copied] = spec['gt_classes'][
        spec['source'][copied]]
  return specs


def draw(spec):
  """(groundtruth masks, detection masks) of one image, uint8."""
  gt = _ellipses(spec['gt_boxes'])
  det = _ellipses(spec['random_boxes'])
  for i in np.flatnonzero(spec['source'] >= 0):
    det[i] = np.roll(gt[spec['source'][i]], spec['shift'][i], axis=(0, 1))
  return gt, det


def ours(specs, categories):
  evaluator = coco_evaluation.CocoMaskEvaluator(categories)
  clock = coco_eval.Clock()
  for image_id, spec in enumerate(specs):
    gt, det = draw(spec)
    clock.start()
    evaluator.add_single_ground_truth_image_info(image_id, {
        fields.InputDataFields.groundtruth_boxes: spec['gt_boxes'],
        fields.InputDataFields.groundtruth_classes: spec['gt_classes'],
        fields.InputDataFields.groundtruth_is_crowd: spec['crowd'],
        fields.InputDataFields.groundtruth_instance_masks: gt})
    evaluator.add_single_detected_image_info(image_id, {
        fields.DetectionResultFields.detection_scores: spec['scores'],
        fields.DetectionResultFields.detection_classes: spec['det_classes'],
        fields.DetectionResultFields.detection_masks: det})
    clock.stop()
  clock.start()
  metrics = evaluator.evaluate()
  clock.stop()
  return clock, [metrics[coco_evaluation.MASK_PREFIX + name]
                   for name, _ in coco_tools.COCO_METRIC_NAMES_AND_INDEX]


def reference(specs, categories, library='pycocotools'):
  """pycocotools (or faster-coco-eval, library='faster_coco_eval') run
  directly: masks encoded per image, then COCO-format dicts evaluated."""
  coco_class, eval_class = coco_eval._library(library)  # pylint: disable=protected-access
  encode = mask_utils.encode
  if library == 'faster_coco_eval':
    from faster_coco_eval.core import mask as faster_mask  # pylint: disable=g-import-not-at-top
    encode = faster_mask.encode

  def _encode(masks):
    return encode(np.asfortranarray(masks.transpose(1, 2, 0)))

  annotations, detections = [], []
  clock = coco_eval.Clock()
  for image_id, spec in enumerate(specs, start=1):
    gt, det = draw(spec)
    clock.start()
    for box, rle, label, crowd in zip(
        spec['gt_boxes'], _encode(gt), spec['gt_classes'], spec['crowd']):
      ymin, xmin, ymax, xmax = box
      annotations.append({
          'id': len(annotations) + 1, 'image_id': image_id,
          'category_id': int(label), 'segmentation': rle,
          'bbox': [xmin, ymin, xmax - xmin, ymax - ymin],
          'area': float((ymax - ymin) * (xmax - xmin)),
          'iscrowd': int(crowd)})
    for rle, score, label in zip(_encode(det), spec['scores'],
                                 spec['det_classes']):
      detections.append({'image_id': image_id, 'category_id': int(label),
                         'segmentation': rle, 'score': float(score)})
    clock.stop()
  clock.start()
  with contextlib.redirect_stdout(io.StringIO()):
    groundtruth = coco_class()
    groundtruth.dataset = {
        'images': [{'id': i, 'height': HEIGHT, 'width': WIDTH}
                   for i in range(1, len(specs) + 1)],
        'annotations': annotations, 'categories': categories}
    groundtruth.createIndex()
    evaluation = eval_class(groundtruth, groundtruth.loadRes(detections),
                            'segm')
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
  clock.stop()
  return clock, [float(v) for v in evaluation.stats]


def main(argv=None):
  args, categories = coco_eval.parse_args(argv, __doc__.split('\n')[0], 200)
  specs = make_specs(args.num_images, args.num_detections, args.num_classes)
  report = coco_eval.compare(
      lambda: ours(specs, categories),
      lambda library: reference(specs, categories, library), args.repeats)
  print('COCO mask evaluation of %d images (%dx%d) x %d detections, %d '
        'classes:' % (args.num_images, HEIGHT, WIDTH, args.num_detections,
                      args.num_classes))
  common.report(report, args.json)
  return 0 if report['identical'] else 1


if __name__ == '__main__':
  sys.exit(main())
