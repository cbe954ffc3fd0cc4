r"""Converts an exported SavedModel to ONNX: `od-estimator export_onnx`.

Usage:
  od-estimator export_onnx --saved_model_dir=EXPORT/saved_model \
      --output_path=model.onnx [--opset=15]
  python -m od_estimator.export.onnx_command ...   (same flags)

Needs the onnx extra: pip install od_estimator[onnx] (tf2onnx, onnx and
ONNX Runtime). The model keeps the SavedModel's serving_default input
(`inputs`, uint8 [batch, height, width, 3] for an image_tensor export) and
outputs by name, post-processing included (onnx_export.py).

exit status: 0 when the model was written; 1 with a one-line error when the
extra is missing, the SavedModel cannot be read, or an op of its graph has
no ONNX conversion (the error names the ops and nodes).
"""
import argparse
import sys

from od_estimator.export import onnx_export
from od_estimator.inference import command_runs
from od_estimator.utils import flag_checks

_NAME = 'export_onnx'


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator ' + _NAME,
      description='Converts a SavedModel of export_inference_graph to an '
                  'ONNX model (tf2onnx), post-processing included.',
      epilog='Needs: %s' % onnx_export.INSTALL_HINT)
  command_runs.add_saved_model_dir_flag(parser)
  parser.add_argument('--output_path', required=True,
                      help='the .onnx file to write.')
  parser.add_argument('--opset', type=flag_checks.at_least(11),
                      default=onnx_export.DEFAULT_OPSET,
                      help='ONNX opset (default %d).' %
                      onnx_export.DEFAULT_OPSET)
  return parser


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

  def work():
    model = onnx_export.convert_saved_model(
        args.saved_model_dir, args.output_path, opset=args.opset)
    print('od-estimator %s: %s -> %s (opset %d; inputs %s; outputs %s)' % (
        _NAME, args.saved_model_dir, args.output_path, args.opset,
        ', '.join(i.name for i in model.graph.input),
        ', '.join(o.name for o in model.graph.output)))
    return 0
  return command_runs.run(_NAME, work)


if __name__ == '__main__':
  sys.exit(main())
