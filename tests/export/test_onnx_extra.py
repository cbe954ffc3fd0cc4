"""Without the onnx extra, export_onnx fails on one line naming the
install command (the extra hidden from imports where it is installed)."""
import sys


from od_estimator.export import onnx_export
from tests.command_modules import run_command


def test_without_the_extra_one_line_names_it(monkeypatch, tmp_path):
  monkeypatch.setitem(sys.modules, 'tf2onnx', None)  # its import fails
  result = run_command('export.onnx_command', [
      '--saved_model_dir=' + str(tmp_path),
      '--output_path=' + str(tmp_path / 'model.onnx')])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      'od-estimator export_onnx: error: ONNX export needs the onnx extra '
      '(tf2onnx, onnx, onnxruntime), missing tf2onnx: %s' %
      onnx_export.INSTALL_HINT]
