r"""COCO metrics of detections exported as COCO results, with coco_tools'
wrappers as the original's evaluation scripts use them.

  python samples/scripts/evaluate_coco_detections.py \
    --groundtruth_json=groundtruth.json --detections_json=detections.json \
    --iou_type=bbox --output_json=metrics.json

groundtruth.json is a COCO dataset dict (coco_tools.ExportGroundtruthToCOCO
writes one; 'segm' needs the images' height and width), detections.json a
list of COCO results (run_inference_tutorial.py writes detections.json and
segments.json). Prints one 'name: value' line per metric.
"""
import json

import tensorflow as tf

from od_estimator.compat import coco_tools
from od_estimator.utils import file_safety

flags = tf.compat.v1.app.flags
flags.DEFINE_string('groundtruth_json', '', 'COCO groundtruth dict.')
flags.DEFINE_string('detections_json', '', 'COCO results list.')
flags.DEFINE_enum('iou_type', 'bbox', ['bbox', 'segm'], 'What to match.')
flags.DEFINE_string('output_json', '', 'Optional file for the metrics.')
FLAGS = flags.FLAGS


def main(_):
  with tf.io.gfile.GFile(FLAGS.groundtruth_json) as f:
    groundtruth_dict = json.load(f)
  with tf.io.gfile.GFile(FLAGS.detections_json) as f:
    detections_list = json.load(f)
  groundtruth = coco_tools.COCOWrapper(
      groundtruth_dict,
      detection_type='bbox' if FLAGS.iou_type == 'bbox' else 'segmentation')
  detections = groundtruth.LoadAnnotations(detections_list)
  evaluator = coco_tools.COCOEvalWrapper(groundtruth, detections,
                                         agnostic_mode=False,
                                         iou_type=FLAGS.iou_type)
  metrics, per_category_ap = evaluator.ComputeMetrics(
      include_metrics_per_category=True)
  metrics.update(per_category_ap)
  metrics = {name: float(value) for name, value in metrics.items()}
  for name, value in metrics.items():
    print('%s: %.4f' % (name, value))
  if FLAGS.output_json:
    file_safety.write_file(FLAGS.output_json, json.dumps(metrics, indent=2))


if __name__ == '__main__':
  tf.compat.v1.app.run()
