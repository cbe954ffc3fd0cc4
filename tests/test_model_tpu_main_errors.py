"""model_tpu_main: a Cloud TPU that cannot be found is a flag mistake."""
import pytest
import tensorflow as tf

from od_estimator import command_line
from tests.command_modules import import_command

model_tpu_main = import_command('model_tpu_main')


def _no_tpu(*args, **kwargs):
  del args, kwargs  # Unused.
  raise ValueError('Please provide a TPU Name to connect to.')


def test_unknown_tpu_is_one_line(capsys, monkeypatch, tmp_path):
  monkeypatch.setattr(tf.distribute.cluster_resolver, 'TPUClusterResolver',
                      _no_tpu)
  monkeypatch.setattr('sys.argv', [
      'model_tpu_main', '--use_tpu=true', '--tpu_name=nope',
      '--model_dir=%s' % tmp_path, '--pipeline_config_path=unused.config'])
  with pytest.raises(SystemExit) as raised:
    command_line.run_training(lambda argv: model_tpu_main._run_config(),
                              lambda: str(tmp_path), 'doc', __name__)
  err = capsys.readouterr().err
  assert raised.value.code == 1
  assert err.count('\n') == 1
  assert err.startswith('error: --use_tpu: cannot find the Cloud TPU '
                        '(--tpu_name=nope')
  assert 'Please provide a TPU Name' in err and '--use_tpu=false' in err
