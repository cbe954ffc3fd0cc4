"""Tests for od_estimator.command_line (the commands' error plumbing)."""
import pytest
import tensorflow as tf

from od_estimator import command_line
from od_estimator import model_lib


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


@pytest.mark.parametrize('error', [ValueError('no such file x.record'),
                                   TypeError('no such file x.record')])
def test_training_input_errors_are_one_line(capsys, monkeypatch, error):
  monkeypatch.setattr('sys.argv', ['model_main'])
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(error), lambda: None, 'doc', __name__))
  assert (code, err) == (1, 'error: no such file x.record\n')


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


def test_other_tensorflow_errors_keep_their_traceback(monkeypatch):
  monkeypatch.setattr('sys.argv', ['model_main'])
  error = tf.errors.InvalidArgumentError(None, None, 'shape mismatch')
  with pytest.raises(tf.errors.InvalidArgumentError):
    command_line.run_training(_raiser(error), lambda: None, 'doc', __name__)


def test_export_help_and_errors(capsys):
  assert command_line.run_export(
      _raiser(ValueError('x')), 'prog', 'The doc.', __name__,
      ['--help']) == 0
  assert capsys.readouterr().out.startswith('The doc.\nflags:')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(tf.errors.NotFoundError(None, None, 'checkpoint ck missing')),
      'prog', 'The doc.', __name__, []))
  assert (code, err) == (1, 'error: checkpoint ck missing\n')
