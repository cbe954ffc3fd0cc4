"""Tests for od_estimator.command_line (the commands' error plumbing)."""
import os

from google.protobuf import text_format
import pytest
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator import model_lib
from od_estimator.builders import box_coder_builder
from od_estimator.builders import post_processing_builder
from od_estimator.protos import box_coder_pb2
from od_estimator.protos import post_processing_pb2
from od_estimator.utils import config_util
from tests import tiny_ssd


def _raiser(error):
  def main(argv):
    del argv  # Unused.
    raise error
  return main


def _exit_and_stderr(capsys, call):
  with pytest.raises(SystemExit) as raised:
    call()
  return raised.value.code, capsys.readouterr().err


def test_fail_prints_one_line(capsys):
  code, err = _exit_and_stderr(
      capsys, lambda: command_line.fail('bad\n   config'))
  assert (code, err) == (1, 'error: bad config\n')


@pytest.mark.parametrize('error', [
    errors.UserInputError('no such file x.record'),
    config_util.ConfigError('no such file x.record', path='a.config')])
def test_training_input_errors_are_one_line(capsys, monkeypatch, error):
  monkeypatch.setattr('sys.argv', ['model_main'])
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(error), lambda: None, 'doc', __name__))
  assert (code, err) == (1, 'error: %s\n' % error)


def _assert_bug_report(err, text):
  lines = err.strip().splitlines()
  assert lines[0] == 'Traceback (most recent call last):'
  assert text in lines[-2]
  assert lines[-1].startswith('error: this is a bug in od_estimator')
  assert 'pipeline.config' in lines[-1]


@pytest.mark.parametrize('error', [
    ValueError('shapes do not match in the box predictor'),
    TypeError('unsupported operand'), KeyError('detection_boxes')])
def test_code_errors_keep_traceback_and_ask_for_report(capsys, monkeypatch,
                                                       error):
  monkeypatch.setattr('sys.argv', ['model_main'])
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(error), lambda: None, 'doc', __name__))
  assert code == 1
  _assert_bug_report(err, type(error).__name__)


def test_export_code_errors_keep_traceback(capsys):
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(ValueError('rank mismatch')), 'prog', 'The doc.', __name__, []))
  assert code == 1
  _assert_bug_report(err, 'ValueError: rank mismatch')


def test_model_dir_under_a_file_is_one_line(capsys, monkeypatch, tmp_path):
  monkeypatch.setattr('sys.argv', ['model_main'])
  (tmp_path / 'file').write_text('x')
  model_dir = str(tmp_path / 'file' / 'model')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(AssertionError('main must not run')), lambda: model_dir, 'doc',
      __name__))
  assert code == 1
  assert err.count('\n') == 1
  assert err.startswith('error: --model_dir=%s: %s is a file' % (
      model_dir, tmp_path / 'file'))


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes anywhere')
def test_read_only_model_dir_is_one_line(capsys, monkeypatch, tmp_path):
  monkeypatch.setattr('sys.argv', ['model_main'])
  read_only = tmp_path / 'read_only'
  read_only.mkdir()
  read_only.chmod(0o500)
  try:
    code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
        _raiser(AssertionError('main must not run')),
        lambda: str(read_only / 'model'), 'doc', __name__))
  finally:
    read_only.chmod(0o700)
  assert code == 1
  assert err.count('\n') == 1
  assert 'is not writable' in err


def test_non_finite_loss_names_step_and_checkpoint(capsys, monkeypatch,
                                                   tmp_path):
  monkeypatch.setattr('sys.argv', ['model_main'])
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(step.initializer)
      prefix = tf.compat.v1.train.Saver().save(
          session, str(tmp_path / 'model.ckpt'), global_step=7)
  error = tf.errors.InvalidArgumentError(
      None, None, '%s [at step] [9]' % model_lib.NON_FINITE_LOSS)
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(error), lambda: str(tmp_path), 'doc', __name__))
  assert code == 1
  assert 'loss became NaN or Inf at step 9' in err
  assert prefix in err


def test_other_tensorflow_errors_keep_their_traceback(capsys, monkeypatch):
  monkeypatch.setattr('sys.argv', ['model_main'])
  error = tf.errors.InvalidArgumentError(None, None, 'shape mismatch')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(error), lambda: None, 'doc', __name__))
  assert code == 1
  _assert_bug_report(err, 'shape mismatch')


def test_export_help_and_errors(capsys):
  assert command_line.run_export(
      _raiser(errors.UserInputError('x')), 'prog', 'The doc.', __name__,
      ['--help']) == 0
  assert capsys.readouterr().out.startswith('The doc.\nflags:')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(tf.errors.NotFoundError(None, None, 'checkpoint ck missing')),
      'prog', 'The doc.', __name__, []))
  assert (code, err) == (1, 'error: checkpoint ck missing\n')


@pytest.mark.parametrize('mistake', [
    # An override naming no field.
    lambda: config_util.merge_external_params_with_configs(
        config_util.get_configs_from_pipeline_file(tiny_ssd.DEMO_CONFIG),
        kwargs_dict={'model.ssd.no_such_field': 1}),
    # A config value the builders cannot use.
    lambda: box_coder_builder.build(text_format.Parse(
        'mean_stddev_box_coder { stddev: 0 }', box_coder_pb2.BoxCoder())),
    lambda: post_processing_builder.build(text_format.Parse(
        'batch_non_max_suppression { iou_threshold: 2 }',
        post_processing_pb2.PostProcessing())),
])
def test_config_mistakes_deep_in_the_code_are_user_input_errors(
    capsys, monkeypatch, mistake):
  with pytest.raises(errors.UserInputError) as raised:
    mistake()
  monkeypatch.setattr('sys.argv', ['model_main'])
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(raised.value), lambda: None, 'doc', __name__))
  assert code == 1 and err.count('\n') == 1 and err.startswith('error: ')
