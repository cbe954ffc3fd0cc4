"""`od-estimator COMMAND [flags]`: one entry point for the project's tools."""
import importlib
import sys

# Command name -> (module with main(argv) -> exit code, one-line summary).
COMMANDS = {
    'convert_automl': ('od_estimator.compat.convert_automl',
                       'a Google automl EfficientDet checkpoint and hparams '
                       'as our pipeline.config and checkpoint'),
    'detect': ('od_estimator.detect',
               'run an exported model on images; COCO json + drawings'),
    'evaluate': ('od_estimator.inference.evaluate',
                 "an export's metrics on labeled TFRecords (as model_main's),"
                 ' and a report with pictures'),
    'export_onnx': ('od_estimator.export.onnx_command',
                    'an exported SavedModel converted to ONNX (extra: onnx)'),
    'export_tflite_graph_tf2': (
        'od_estimator.compat.export_tflite_graph_tf2',
        "an SSD's SavedModel for TFLite, as the original's TF2 command"),
    'infer_detections': ('od_estimator.inference.infer_detections',
                         "an export's detections added to TFRecords (the "
                         "original's infer_detections)"),
    'inspect_checkpoint': ('od_estimator.checks.inspect_checkpoint',
                           'list what a checkpoint (TF1 or TF2) holds and '
                           'what it feeds'),
    'validate': ('od_estimator.validate',
                 'check a pipeline.config before launch'),
}


def _usage():
  lines = ['usage: od-estimator COMMAND [flags]', '', 'commands:']
  width = max(len(name) for name in COMMANDS)
  lines += ['  %-*s  %s' % (width, name, summary)
            for name, (_, summary) in sorted(COMMANDS.items())]
  lines.append('')
  lines.append('`od-estimator COMMAND --help` describes a command.')
  return '\n'.join(lines)


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  if not argv or argv[0] in ('-h', '--help', 'help'):
    print(_usage())
    return 0
  if argv[0] not in COMMANDS:
    print('od-estimator: unknown command %r\n\n%s' % (argv[0], _usage()),
          file=sys.stderr)
    return 2
  module = importlib.import_module(COMMANDS[argv[0]][0])
  return module.main(argv[1:])


if __name__ == '__main__':
  sys.exit(main())
