"""SIGTERM and Ctrl-C in long-running commands (utils/interrupts).

Real signals sent to this process (os.kill): the shared scope, the
training hook's evaluation phase, a dataset tool stopped mid-shard. The
command boundary's handling is in test_command_line.
"""
import glob
import os
import signal
import threading

import pytest
import tensorflow as tf

from od_estimator.estimator import preemption
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.utils import file_safety
from od_estimator.utils import interrupts


def _handlers():
  return [signal.getsignal(signum) for signum in interrupts.SIGNALS]


@pytest.mark.parametrize('signum,status,who', [
    (signal.SIGINT, 130, 'Ctrl-C'), (signal.SIGTERM, 143, 'SIGTERM')])
def test_a_signal_becomes_interrupted_and_handlers_come_back(signum, status,
                                                             who):
  before = _handlers()
  with pytest.raises(interrupts.Interrupted) as stopped:
    with interrupts.stopping_on_signals('the work'):
      assert _handlers() != before
      os.kill(os.getpid(), signum)
      raise AssertionError('the signal did not stop the work')
  assert stopped.value.exit_status == status
  assert stopped.value.add('3 of 5 done').line() == (
      '%s: the work stopped; 3 of 5 done' % who)
  assert _handlers() == before


def test_a_second_signal_during_cleanup_interrupts_at_once():
  before = _handlers()
  with pytest.raises(KeyboardInterrupt) as stopped:
    with interrupts.stopping_on_signals('the work'):
      try:
        os.kill(os.getpid(), signal.SIGINT)
      finally:
        os.kill(os.getpid(), signal.SIGINT)  # Cleanup is cut short.
  assert not isinstance(stopped.value, interrupts.Interrupted)
  assert _handlers() == before


def test_a_deferred_block_completes_before_the_signal_is_raised():
  completed = []
  with pytest.raises(interrupts.Interrupted):
    with interrupts.stopping_on_signals('the work') as scope:
      with scope.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        completed.append('file')
      raise AssertionError('the deferred signal was lost')
  assert completed == ['file']


def test_a_serving_task_leaves_signals_to_their_default_action():
  # Inside a command's scope, as a ps task's server.join() runs; the
  # cluster run of test_cluster sends the real SIGTERM.
  with interrupts.stopping_on_signals('serving'):
    interrupts.end_process_on_signals()
    assert _handlers() == [signal.SIG_DFL] * len(interrupts.SIGNALS)


def test_outside_the_main_thread_it_says_so_and_changes_nothing(caplog):
  before = _handlers()
  seen = []

  def work():
    with interrupts.stopping_on_signals('the work'):
      seen.append(_handlers())

  thread = threading.Thread(target=work)
  thread.start()
  thread.join()
  assert seen == [before]
  assert 'the work runs outside the main thread' in caplog.text


def _run_context():
  return tf.compat.v1.train.SessionRunContext(original_args=None,
                                              session=None)


@pytest.mark.parametrize('signum,status', [(signal.SIGINT, 130),
                                           (signal.SIGTERM, 0)])
def test_train_and_evaluate_evaluation_stops_at_once(signum, status):
  # train_and_evaluate evaluates inside the training's checkpoint listener,
  # while the PreemptionHook's handlers would only note the signal.
  before = _handlers()
  hook = preemption.PreemptionHook('train_dir', eval_batch_size=2)
  hook.begin()
  evaluation = hook.evaluation_hook()
  try:
    hook.saving_listener().after_save(None, 120)
    evaluation.begin()
    for _ in range(3):
      evaluation.after_run(None, None)
    with pytest.raises(interrupts.Interrupted) as stopped:
      os.kill(os.getpid(), signum)
      raise AssertionError('the evaluation went on')
    # A second Ctrl-C while the evaluation unwinds stops at once.
    with pytest.raises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGINT)
      raise AssertionError('the second Ctrl-C was ignored')
  finally:
    hook.restore_handlers()
  assert _handlers() == before
  assert stopped.value.exit_status == status
  assert stopped.value.line().endswith(
      'training stopped; the evaluation of step 120 stopped after 6 '
      'image(s); no metrics were written for it; the checkpoint at step 120 '
      'in train_dir is complete: relaunch the same command to resume from '
      'it')


def test_training_steps_still_end_with_a_checkpoint():
  hook = preemption.PreemptionHook('train_dir')
  hook.begin()
  try:
    hook.saving_listener().after_save(None, 5)
    hook.before_run(_run_context())  # The next step: training again.
    os.kill(os.getpid(), signal.SIGTERM)
    context = _run_context()
    hook.after_run(context, None)
    assert context.stop_requested
    with pytest.raises(preemption.TrainingPreempted) as stopped:
      hook.checkpoint_saved(6)
    assert (stopped.value.step, stopped.value.exit_status) == (6, 0)
  finally:
    hook.end(None)


def test_replacing_paths_publish_complete_files_only(tmp_path):
  paths = [str(tmp_path / 'a.record'), str(tmp_path / 'b.record')]
  with pytest.raises(interrupts.Interrupted) as stopped:
    with interrupts.stopping_on_signals('writing'):
      with file_safety.replacing_paths(paths) as temps:
        for temp in temps:
          with open(temp, 'w') as f:
            f.write('partial')
        os.kill(os.getpid(), signal.SIGINT)
  assert os.listdir(tmp_path) == []
  assert stopped.value.kept == [
      'the unfinished %s and 1 more were removed' % paths[0]]
  with file_safety.replacing_paths(paths) as temps:
    for temp in temps:
      with open(temp, 'w') as f:
        f.write('complete')
  assert sorted(os.listdir(tmp_path)) == ['a.record', 'b.record']


def test_a_dataset_tool_stopped_mid_shard_leaves_no_partial_shard(
    tmp_path, monkeypatch, capsys):
  make_example = synth.make_example
  written = []

  def make_then_signal(*args, **kwargs):
    written.append(args[4])
    if len(written) == 6:  # The 2nd of 4 val examples.
      os.kill(os.getpid(), signal.SIGTERM)
    return make_example(*args, **kwargs)

  monkeypatch.setattr(synth, 'make_example', make_then_signal)
  with pytest.raises(SystemExit) as stopped:
    synth.main(['--output_dir=%s' % tmp_path, '--num_train=4',
                '--num_val=4', '--image_size=32', '--num_train_shards=2'])
  assert stopped.value.code == 143
  assert len(written) == 6
  train = sorted(glob.glob(str(tmp_path / 'shapes_train.record-*')))
  assert [os.path.basename(path) for path in train] == [
      'shapes_train.record-00000-of-00002',
      'shapes_train.record-00001-of-00002']
  assert sum(1 for path in train for _ in tf.data.TFRecordDataset(path)) == 4
  assert not glob.glob(str(tmp_path / 'shapes_val*'))
  assert not glob.glob(str(tmp_path / (file_safety.TEMP_PREFIX + '*')))
  err = capsys.readouterr().err
  assert err == ('SIGTERM: create_synthetic_tf_record stopped; the '
                 'unfinished %s was removed\n' % (
                     tmp_path / 'shapes_val.record-00000-of-00001'))


def test_an_interrupted_staged_output_leaves_the_folder_as_it_was(tmp_path):
  (tmp_path / 'saved_model').mkdir()
  (tmp_path / 'saved_model' / 'saved_model.pb').write_text('old export')
  with pytest.raises(interrupts.Interrupted) as stopped:
    with interrupts.stopping_on_signals('the export'):
      with file_safety.staged_outputs(str(tmp_path), ['saved_model'], True,
                                      '--output_directory') as staging:
        os.mkdir(os.path.join(staging, 'saved_model'))
        os.kill(os.getpid(), signal.SIGTERM)
  assert os.listdir(tmp_path) == ['saved_model']
  assert (tmp_path / 'saved_model' / 'saved_model.pb').read_text() == (
      'old export')
  assert stopped.value.line() == (
      'SIGTERM: the export stopped; --output_directory=%s keeps what it held '
      'before; nothing was written there' % tmp_path)
