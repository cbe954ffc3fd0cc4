"""Evaluates an exported detector on labeled TFRecords: `od-estimator
evaluate`.

Usage:
  od-estimator evaluate --saved_model_dir=EXPORT/saved_model \\
      --input_tfrecord_paths=val-*.record --label_map_path=label_map.pbtxt \\
      [--eval_metrics=coco_detection_metrics,pascal_voc_detection_metrics] \\
      [--pipeline_config_path=pipeline.config] [--output_dir=DIR]
  (--inference_graph=EXPORT/frozen_inference_graph.pb instead of
  --saved_model_dir evaluates the frozen graph, --tflite_model=model.tflite
  a TFLite SSD: see inference/tflite_model for the input it is fed.)

The check that an export is as good as its checkpoint: the export runs on
each record's image and the evaluators model_main builds score its
detections against the records' groundtruth, printing one `name: value`
line per metric with model_main's names (DetectionBoxes_Precision/mAP,
PascalBoxes_Precision/mAP@0.5IOU, ...). On the records model_main
evaluated, a faithful export gives model_main's numbers.

The metrics sets are --eval_metrics, else the eval_config.metrics_set of
--pipeline_config_path (whose other eval_config fields apply too), else
coco_detection_metrics. Mask sets (coco_mask_metrics, ...) need a model
with detection_masks and records with image/object/mask (PNG or
numerical). With --output_dir, a report.html with pictures is
written there (see evaluation_report) and per-category COCO mAP is
computed for its table.
"""
import argparse
import sys

from od_estimator.inference import command_runs
from od_estimator.metrics import evaluation_report
from od_estimator.inference import exported_model
from od_estimator.inference import export_evaluation
from od_estimator.inference import labeled_records
from od_estimator.utils import file_safety
from od_estimator.utils import flag_checks


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator evaluate',
      description='Evaluates an exported detector on labeled TFRecords, '
                  'with model_main\'s metrics.')
  model = parser.add_mutually_exclusive_group(required=True)
  model.add_argument('--saved_model_dir',
                     help='the saved_model/ directory of an export (or the '
                          'export directory holding it).')
  model.add_argument('--inference_graph',
                     help='an export\'s frozen_inference_graph.pb.')
  model.add_argument('--tflite_model',
                     help='a .tflite SSD with TFLite_Detection_PostProcess '
                          '(export_tflite_ssd_graph, converted).')
  parser.add_argument('--input_tfrecord_paths', required=True,
                      help='comma-separated list of TFRecords of tf.Examples '
                           'with groundtruth (globs allowed).')
  parser.add_argument('--label_map_path', required=True,
                      help='the records\' label map.')
  parser.add_argument('--eval_metrics', default=None,
                      help='comma-separated eval_config.metrics_set names '
                           '(default: --pipeline_config_path\'s, else '
                           'coco_detection_metrics).')
  parser.add_argument('--pipeline_config_path', default=None,
                      help='a pipeline.config whose eval_config is used.')
  parser.add_argument('--output_dir', default=None,
                      help='write report.html, its pictures and '
                           'metrics.json here.')
  parser.add_argument('--iou_threshold', type=flag_checks.fraction,
                      default=0.5,
                      help='report: the IoU of a match in the curves and '
                           'the confusion matrix (default 0.5).')
  parser.add_argument('--min_score_threshold', type=flag_checks.fraction,
                      default=0.5,
                      help='report: the least score of a detection in the '
                           'confusion matrix and the pictures (default '
                           '0.5).')
  parser.add_argument('--num_worst_images', type=flag_checks.at_least(0),
                      default=evaluation_report.NUM_WORST_IMAGES,
                      help='report: images in the worst images grid '
                           '(default %d).' %
                      evaluation_report.NUM_WORST_IMAGES)
  return parser


def _model_path(args):
  return args.saved_model_dir or args.inference_graph or args.tflite_model


def run(args, log=None):
  """Evaluates as the flags say.

  Returns:
    ({metric name: value}, number of images, report.html path or None).

  Raises:
    errors.UserInputError: bad flags, records, label map or model, one
      line each.
  """
  log = log or (lambda text: print(text, file=sys.stderr))
  if args.output_dir:
    file_safety.check_directory_destination(args.output_dir, '--output_dir')
  if args.tflite_model and not args.tflite_model.endswith(
      exported_model.TFLITE_SUFFIX):
    raise exported_model.ExportedModelError(
        '--tflite_model=%s: expected a %s file.' % (
            args.tflite_model, exported_model.TFLITE_SUFFIX))
  paths = labeled_records.record_paths(args.input_tfrecord_paths)
  eval_config = export_evaluation.eval_config_for(
      args.eval_metrics, args.pipeline_config_path,
      per_category=bool(args.output_dir))
  categories = export_evaluation.categories_of(args.label_map_path)
  model = exported_model.open_model(_model_path(args))
  collector = evaluation_report.ReportCollector(
      categories, args.iou_threshold, args.min_score_threshold,
      args.num_worst_images) if args.output_dir else None
  try:
    metrics, count = export_evaluation.evaluate(
        model, paths, args.label_map_path, eval_config, observe=collector,
        log=log)
  finally:
    model.close()
  report = None
  if collector:
    report = evaluation_report.write(
        args.output_dir, collector, metrics,
        '%s on %d image(s) of %s' % (
            _model_path(args), count,
            ', '.join(paths)))
  return metrics, count, report


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

  def work():
    metrics, count, report = run(args)
    print('od-estimator evaluate: %d image(s)' % count)
    for name, value in metrics.items():
      print('%s: %.6f' % (name, value))
    if report:
      print('od-estimator evaluate: report -> %s' % report)
    return 0
  return command_runs.run('evaluate', work)


if __name__ == '__main__':
  sys.exit(main())
