"""export_inference_graph reports the usual user mistakes in one line.

Each runs in process through the command's main(argv), every flag given
explicitly (absl keeps values between parses). export_tflite_ssd_graph
defines the same flags, so its CLI is tested in a subprocess in
test_export_tflite_ssd_graph.py.
"""
import pytest

from tests.command_modules import import_command

from tests import small_checkpoints
from tests import tiny_ssd

export_inference_graph = import_command('export_inference_graph')


@pytest.fixture
def fake_checkpoint(tmp_path):
  """An intact checkpoint: enough to pass the checkpoint lookup."""
  return small_checkpoints.save(tmp_path, [1])[0]


def test_damaged_checkpoint_names_file_and_intact_one(capsys, tmp_path):
  # The newest checkpoint's data cut short, the older one beside it intact.
  older, newest = small_checkpoints.save(tmp_path, [1, 2])
  data = newest + '.data-00000-of-00001'
  small_checkpoints.truncate(data)
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(
                             tmp_path, trained_checkpoint_prefix=newest))
  assert line.startswith('error: checkpoint %s is damaged: %s is truncated' %
                         (newest, data))
  assert 'The last intact checkpoint beside it is %s' % older in line
  assert not (tmp_path / 'out').exists()


def _one_error_line(capsys, main, argv):
  with pytest.raises(SystemExit) as raised:
    main(argv)
  err = capsys.readouterr().err
  lines = err.strip().splitlines()
  assert raised.value.code == 1, err
  assert 'Traceback' not in err
  assert len([line for line in lines if line.startswith('error:')]) == 1, err
  return lines[-1]


def _inference_graph_flags(tmp_path, **flags):
  values = {'input_type': 'image_tensor', 'input_shape': '',
            'pipeline_config_path': tiny_ssd.DEMO_CONFIG,
            'trained_checkpoint_prefix': str(tmp_path / 'model.ckpt-9'),
            'output_directory': str(tmp_path / 'out'), 'config_override': ''}
  values.update(flags)
  return ['--%s=%s' % item for item in values.items()]


def test_missing_checkpoint(capsys, tmp_path):
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(tmp_path))
  assert line.startswith('error: checkpoint not found: %s' % (
      tmp_path / 'model.ckpt-9'))


def test_bad_config_path(capsys, tmp_path):
  missing = str(tmp_path / 'nowhere.config')
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(
                             tmp_path, pipeline_config_path=missing))
  assert missing in line


def test_bad_input_shape(capsys, tmp_path):
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(tmp_path, input_shape='1,a'))
  assert line.startswith('error: --input_shape must be comma-separated')


def test_unknown_input_type(capsys, tmp_path, fake_checkpoint):
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(
                             tmp_path, input_type='jpeg_files',
                             trained_checkpoint_prefix=fake_checkpoint))
  assert "Unknown input type: 'jpeg_files'" in line
  assert 'image_tensor' in line


def test_unsupported_graph_rewriter_bits(capsys, tmp_path, fake_checkpoint):
  line = _one_error_line(capsys, export_inference_graph.main,
                         _inference_graph_flags(
                             tmp_path,
                             trained_checkpoint_prefix=fake_checkpoint,
                             config_override='graph_rewriter { quantization '
                             '{ delay: 10 weight_bits: 16 } }'))
  assert 'graph_rewriter.quantization.weight_bits: 16' in line
  assert 'only 8-bit' in line

