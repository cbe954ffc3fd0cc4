"""Quiet output: our lines only, a progress bar on a terminal, plain lines
elsewhere; --verbosity and --tf_log bring TensorFlow's messages back.

Two short trainings resume the shared one-step tiniest model (the fake
extractor's Faster R-CNN; model_main_tf2 trains without evaluating),
forked from the test run's warm interpreter (tests/plain_command.py): one
with stderr on a pseudo-terminal, one on a pipe with both flags. The bars
of evaluations and dataset tools are drawn in this process on a
pseudo-terminal of its own.
"""
import io
import logging
import os
import re
import select
import shutil
import subprocess

import pytest

from od_estimator import command_line
from od_estimator.estimator import progress
from od_estimator.utils import progress_bar
from od_estimator.utils import quiet_output
from tests import log_capture
from tests import plain_command

# TensorFlow's lines, hidden by default: its Python-side INFO (the
# Estimator's), its deprecation warnings, its own logger's copy of lines.
_TF_LINES = ('Graph was finalized', 'is deprecated', 'INFO:tensorflow:')
_FIRST_STEP = re.compile(r'\] step 2/3, loss [\d.]+ \(first step after '
                         r'resuming from step 1\)\r?\n')


def _training(one_step_fake_faster_rcnn, tmp_path):
  """model_main_tf2's command line training the copied model to step 3."""
  _, _, trained = one_step_fake_faster_rcnn
  model_dir = str(tmp_path / 'model')
  shutil.copytree(trained, model_dir)
  return plain_command.command('tests.fake_extractor_command') + [
      'od_estimator.model_main_tf2',
      '--pipeline_config_path=%s' % os.path.join(model_dir,
                                                 'pipeline.config'),
      '--model_dir=%s' % model_dir, '--num_train_steps=3',
      '--log_every_n_steps=1']


def _on_terminal(argv):
  """Runs argv with stderr on a pseudo-terminal; (status, what it showed)."""
  terminal, command_side = os.openpty()
  process = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=command_side)
  os.close(command_side)
  shown = b''
  while True:
    ready, _, _ = select.select([terminal], [], [], 1)
    if not ready:
      if process.poll() is not None:
        break
      continue
    try:
      chunk = os.read(terminal, 65536)
    except OSError:  # The command's side closed (EIO).
      break
    if not chunk:
      break
    shown += chunk
  os.close(terminal)
  return process.wait(), shown.decode(errors='replace')


def test_training_on_a_terminal_draws_a_bar_and_hides_tensorflow(
    one_step_fake_faster_rcnn, tmp_path):
  status, shown = _on_terminal(_training(one_step_fake_faster_rcnn,
                                         tmp_path))
  assert status == 0, shown[-3000:]
  # The first step after the resume, as a line; the last step on the bar.
  assert _FIRST_STEP.search(shown), shown
  assert '\r[####################] 100% step 3/3, loss ' in shown, shown
  assert '\x1b[K' in shown
  # What is restored, from TensorFlow's lines; none of its others.
  assert 'Restoring parameters from ' in shown
  for noise in _TF_LINES:
    assert noise not in shown, (noise, shown)


def test_elsewhere_plain_lines_and_the_flags_bring_tensorflow_back(
    one_step_fake_faster_rcnn, tmp_path):
  result = subprocess.run(
      _training(one_step_fake_faster_rcnn, tmp_path) + [
          '--verbosity=0', '--tf_log'],
      stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  log = result.stderr
  assert '\r' not in log and '\x1b' not in log
  assert _FIRST_STEP.search(log), log[-3000:]
  lines = [line for line in log.splitlines() if '] step ' in line]
  assert 'step 3/3, loss ' in lines[-1] and 'ETA 0:00:00' in lines[-1]
  for noise in _TF_LINES:
    assert noise in log, (noise, log[-3000:])


def test_tensorflow_cpp_log_level_is_raised_unless_asked_or_set():
  environ = {}
  quiet_output.before_tensorflow(environ, ['model_main', '--model_dir=m'])
  assert environ == {'TF_CPP_MIN_LOG_LEVEL': '2'}
  for argv in (['x', '--tf_log'], ['x', '--tf_log=true'],
               ['x', '--notf_log', '--tf_log=1']):
    environ = {}
    quiet_output.before_tensorflow(environ, argv)
    assert not environ, argv
  environ = {'TF_CPP_MIN_LOG_LEVEL': '0'}
  quiet_output.before_tensorflow(environ, ['x', '--tf_log=false'])
  assert environ == {'TF_CPP_MIN_LOG_LEVEL': '0'}


def test_help_says_how_to_bring_tensorflow_back(capsys):
  # pylint: disable-next=protected-access
  command_line._print_help('A command.', __name__)
  shown = capsys.readouterr().out
  assert '--verbosity' in shown and '--[no]tf_log' in shown


def _record(pathname, message, level=logging.INFO):
  return logging.LogRecord('tensorflow', level, pathname, 1, message, None,
                           None)


def test_tensorflow_python_lines_are_filtered_unless_verbosity_is_given():
  tf_file = os.path.join(os.path.dirname(logging.__file__), 'estimator.py')
  ours = os.path.join(os.path.dirname(progress.__file__), 'model_lib.py')
  logger = logging.getLogger('tensorflow')
  try:
    quiet_output.quiet(python_side=True)
    assert not logger.filter(_record(tf_file, 'Calling model_fn.'))
    assert logger.filter(_record(ours, 'Reading 2 file(s)'))
    assert logger.filter(_record(tf_file, 'Restoring parameters from m/c'))
    assert logger.filter(_record(tf_file, 'failed', logging.ERROR))
    deprecation = _record(os.path.join(os.path.dirname(tf_file),
                                       'deprecation.py'), 'f is deprecated')
    assert not logger.filter(deprecation)
    # --tf_log alone: deprecations, not the rest.
    quiet_output.quiet(python_side=True, tf_log=True)
    assert logger.filter(deprecation)
    assert not logger.filter(_record(tf_file, 'Calling model_fn.'))
    # --verbosity: the rest.
    quiet_output.quiet(python_side=False)
    assert logger.filter(_record(tf_file, 'Calling model_fn.'))
  finally:
    quiet_output.quiet(python_side=True)


@pytest.fixture
def terminal():
  """(a stream on a pseudo-terminal, fn() -> what it showed)."""
  reader, writer = os.openpty()
  stream = io.TextIOWrapper(open(writer, 'wb', buffering=0), write_through=True)

  def shown():
    data = b''
    # A pseudo-terminal hands data on a moment later.
    while select.select([reader], [], [], 0.2)[0]:
      data += os.read(reader, 65536)
    return data.decode()

  yield stream, shown
  stream.close()
  os.close(reader)


def _evaluation_around_a_count(monkeypatch, stream, items):
  """Step 7's evaluation (3 images, then 5) around a count of `items`,
  shown on `stream` as sys.stderr; returns the lines logged."""
  # Here, not in a fixture: pytest sets its own before each test's body.
  monkeypatch.setattr('sys.stderr', stream)
  with log_capture.absl_messages() as lines:
    display = progress.EvaluationDisplay(step=7)
    display.update(3)
    counter = progress_bar.Count(items, 2)
    for index in range(items):
      counter.update(index)
    counter.end()
    display.end(5)
  return lines


def test_evaluation_and_dataset_tools_draw_bars_on_a_terminal(terminal,
                                                              monkeypatch):
  stream, shown = terminal
  lines = _evaluation_around_a_count(monkeypatch, stream, 4)
  shown = shown()
  assert '\revaluating step 7: 3 image(s)\x1b[K' in shown
  # The last item's bar is drawn at once, and its line kept.
  assert '\r[###############.....]  75% On image 3 of 4\x1b[K\r\n' in shown
  assert lines[0].startswith('evaluated step 7: 5 image(s) in ')
  assert len(lines) == 1


def test_evaluation_and_dataset_tools_log_lines_elsewhere(monkeypatch):
  stderr = io.StringIO()
  lines = _evaluation_around_a_count(monkeypatch, stderr, 5)
  assert lines[0] == 'evaluating step 7'
  assert lines[1:4] == ['On image 0 of 5', 'On image 2 of 5',
                        'On image 4 of 5']
  assert lines[4].startswith('evaluated step 7: 5 image(s) in ')
  # No bar was drawn (the log's own handler may write its lines there).
  assert '\r' not in stderr.getvalue() and '\x1b' not in stderr.getvalue()
  assert '%]' not in stderr.getvalue()
