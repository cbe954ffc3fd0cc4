"""Tests for od_estimator.command_line (the commands' error plumbing)."""
import json
import os
import signal

from google.protobuf import text_format
import pytest
import tensorflow as tf

from od_estimator import command_line
from od_estimator import detect
from od_estimator import errors
from od_estimator.estimator import model_lib
from od_estimator.export import tflite_conversion
from od_estimator.builders import box_coder_builder
from od_estimator.builders import post_processing_builder
from od_estimator.protos import box_coder_pb2
from od_estimator.protos import post_processing_pb2
from od_estimator.config import config_util
from od_estimator.utils import interrupts
from od_estimator.utils import label_map_util
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


@pytest.mark.parametrize('tf_config, expected', [
    ("{cluster: {chief: ['a:1']}}", 'TF_CONFIG is not valid JSON'),
    ('["chief"]', 'TF_CONFIG must be a JSON object'),
    (json.dumps({'cluster': {'chief': ['a:1']},
                 'task': {'type': 'worker', 'index': 0}}),
     'TF_CONFIG does not describe a usable task')])
def test_unusable_tf_config_is_one_line(capsys, monkeypatch, tf_config,
                                        expected):
  monkeypatch.setattr('sys.argv', ['model_main'])
  monkeypatch.setenv('TF_CONFIG', tf_config)

  def main(argv):
    del argv  # Unused.
    tf.estimator.RunConfig()  # As every training command does first.
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      main, lambda: None, 'doc', __name__))
  assert code == 1
  assert err.count('\n') == 1
  assert err.startswith('error: ' + expected)


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
  assert (code, err) == (1, 'error: checkpoint ck missing. Check the paths '
                         'in the flags and the pipeline config.\n')


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


@pytest.mark.parametrize('error,expected', [
    (tf.errors.NotFoundError(None, None,
                             '/data/model.ckpt-5.index; No such file or '
                             'directory'),
     '/data/model.ckpt-5.index was not found (/data/model.ckpt-5.index; No '
     'such file or directory). Check the paths in the flags and the '
     'pipeline config.'),
    (tf.errors.PermissionDeniedError(None, None,
                                     '/srv/train/events.out; Permission '
                                     'denied'),
     'permission denied: /srv/train/events.out. Make it readable (and its '
     'folder writable) by this user, or choose another path.'),
    (tf.errors.DataLossError(None, None, 'truncated record at 120 in '
                             'gs://bucket/train.record-00001'),
     'gs://bucket/train.record-00001 is damaged or truncated (truncated '
     'record at 120 in gs://bucket/train.record-00001). Recreate or '
     're-download it.'),
    (tf.errors.ResourceExhaustedError(None, None, 'write failed: No space '
                                      'left on device /mnt/x/model.ckpt'),
     'no space left on the device holding /mnt/x/model.ckpt (write failed: '
     'No space left on device /mnt/x/model.ckpt). Free some space or '
     'write to another disk.'),
    (tf.errors.NotFoundError(None, None, 'Key Conv/weights not found in '
                             'checkpoint\n\t [[{{node save/RestoreV2}}]]'),
     'Key Conv/weights not found in checkpoint: the checkpoint was written '
     'by another model than the pipeline config builds.'),
    (tf.errors.ResourceExhaustedError(None, None, 'Quota exceeded'),
     'a resource ran out: Quota exceeded'),
    (tf.errors.UnavailableError(None, None, 'Socket closed'),
     'a service did not answer in time (Socket closed). Check the network '
     'and retry.'),
    # A graph execution error: the node's Python stack is left out.
    (tf.errors.ResourceExhaustedError(None, None, (
        "Graph execution error:\n\nDetected at node 'save/SaveV2' defined "
        'at (most recent call last):\n  File "/usr/lib/od/export.py", line '
        "9, in main\nNode: 'save/SaveV2'\n/data/out/model.ckpt.tmp; No "
        'space left on device\n\t [[{{node save/SaveV2}}]]')),
     'no space left on the device holding /data/out/model.ckpt.tmp '
     '(/data/out/model.ckpt.tmp; No space left on device). Free some space '
     'or write to another disk.'),
    (tf.errors.InvalidArgumentError(None, None, 'shape mismatch'), None),
    (tf.errors.InternalError(None, None, 'cuDNN failed'), None),
])
def test_tensorflow_errors_are_told_apart(error, expected):
  assert command_line.describe_op_error(error, environ={}) == expected


def test_out_of_memory_names_the_batch_and_image_size():
  error = tf.errors.ResourceExhaustedError(
      None, None, 'OOM when allocating tensor with shape[16,160,160,32]. '
      'Hint: more details follow')
  path = tiny_ssd.DEMO_CONFIG
  assert command_line.describe_op_error(error, path) == (
      'out of memory (OOM when allocating tensor with shape[16,160,160,32]). '
      'Lower the batch size (train_config.batch_size, now 16; '
      'eval_config.batch_size, now 1, in evaluation), then the image size '
      '(model.ssd.image_resizer fixed_shape_resizer { height: 160 width: 160 '
      '}) in %s.' % path)


def test_a_lost_cluster_task_names_the_cluster():
  tf_config = {'cluster': {'chief': ['host0:2222'],
                           'worker': ['host1:2222', 'host2:2222']},
               'task': {'type': 'worker', 'index': 1}}
  error = tf.errors.DeadlineExceededError(None, None, 'deadline exceeded')
  assert command_line.describe_op_error(
      error, environ={'TF_CONFIG': json.dumps(tf_config)}) == (
          'a task of the TF_CONFIG cluster did not answer (deadline '
          'exceeded). This task is worker 1 of the cluster chief host0:2222, '
          'worker host1:2222 host2:2222: check that every task is running '
          'and these addresses are reachable from here.')


def test_the_boundary_prints_one_line_for_a_signal(capsys, monkeypatch):
  monkeypatch.setattr('sys.argv', ['model_main'])

  def main(argv):
    del argv  # Unused.
    os.kill(os.getpid(), signal.SIGINT)
    raise AssertionError('not stopped')

  before = [signal.getsignal(signum) for signum in interrupts.SIGNALS]
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      main, lambda: None, 'doc', __name__))
  assert (code, err) == (130, 'Ctrl-C: model_main stopped\n')
  assert [signal.getsignal(signum) for signum in interrupts.SIGNALS] == before
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(interrupts.Interrupted('SIGTERM', 143, 'the export')),
      'export_inference_graph', 'doc', __name__, []))
  assert (code, err) == (143, 'SIGTERM: the export stopped\n')


def test_the_boundary_classifies_training_and_export_errors(capsys,
                                                            monkeypatch):
  monkeypatch.setattr('sys.argv', ['model_main'])
  monkeypatch.setattr(command_line, '_flag', {
      'pipeline_config_path': tiny_ssd.DEMO_CONFIG}.get)
  oom = tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_training(
      _raiser(oom), lambda: None, 'doc', 'od_estimator.model_main'))
  assert code == 1 and err.count('\n') == 1
  assert err.startswith('error: out of memory (OOM when allocating). Lower '
                        'the batch size (train_config.batch_size, now 16;')
  denied = tf.errors.PermissionDeniedError(None, None, '/x/y; denied')
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(denied), 'prog', 'doc', __name__, []))
  assert (code, err) == (1, 'error: permission denied: /x/y. Make it '
                         'readable (and its folder writable) by this user, '
                         'or choose another path.\n')


def test_detect_and_label_map_errors_are_user_input_errors(capsys, tmp_path):
  assert issubclass(detect.DetectError, errors.UserInputError)
  # --post_training_quantize reads eval_input_reader, whose label map
  # path does not resolve here.
  config = config_util.create_pipeline_proto_from_configs(
      config_util.get_configs_from_pipeline_file(tiny_ssd.DEMO_CONFIG))
  config.eval_input_reader[0].label_map_path = str(tmp_path / 'missing.pbtxt')
  with pytest.raises(label_map_util.LabelMapError) as raised:
    tflite_conversion.representative_dataset(config, 1)
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(raised.value), 'export_tflite_ssd_graph', 'doc', __name__, []))
  assert (code, err) == (1, 'error: %s\n' % raised.value)
  assert 'missing.pbtxt' in err


def test_config_error_is_defined_with_the_user_input_errors():
  assert errors.ConfigError.__module__ == 'od_estimator.errors'
  assert issubclass(errors.ConfigError, errors.UserInputError)
  from od_estimator.config import config_text  # pylint: disable=g-import-not-at-top
  assert config_text.ConfigError is errors.ConfigError
  assert config_util.ConfigError is errors.ConfigError
  assert str(errors.ConfigError('bad', path='a.config', line=3,
                                field='model', hint='fix it')) == (
                                    'a.config:3: field `model`: bad (hint: '
                                    'fix it)')


@pytest.mark.parametrize('error,expected', [
    # gs:// with no route to Google: TF raises FailedPrecondition.
    (tf.errors.FailedPreconditionError(
        None, None, "Error executing an HTTP request: libcurl code 6 meaning "
        "'Couldn't resolve host name', error details: Could not resolve "
        'host: www.googleapis.com\n\t when reading metadata of '
        'gs://bucket/label_map.pbtxt'),
     'gs://bucket/label_map.pbtxt cannot be reached from here'),
    (tf.errors.UnimplementedError(
        None, None, "File system scheme 's3' not implemented (file: "
        "'s3://bucket/train.record')"),
     's3://bucket/train.record: this TensorFlow has no file system for that '
     'scheme'),
    (tf.errors.PermissionDeniedError(
        None, None, 'Error executing an HTTP request: HTTP response code 403 '
        'when reading gs://bucket/model/checkpoint'),
     'permission denied: gs://bucket/model/checkpoint.'),
    (tf.errors.NotFoundError(
        None, None, 'Error executing an HTTP request: HTTP response code 404 '
        'when reading gs://bucket/data/train.record'),
     'gs://bucket/data/train.record was not found'),
])
def test_remote_paths_out_of_reach_name_the_path(capsys, error, expected):
  described = command_line.describe_op_error(error, environ={})
  assert described.startswith(expected)
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(error), 'prog', 'doc', __name__, []))
  assert code == 1 and err.count('\n') == 1
  assert err.startswith('error: ' + expected)
  assert 'a bug in od_estimator' not in err


def test_out_of_memory_without_a_readable_config_names_the_settings():
  error = tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating')
  assert command_line.describe_op_error(error, '/nowhere/pipeline.config') == (
      'out of memory (OOM when allocating). Lower the batch size '
      '(train_config.batch_size; eval_config.batch_size in evaluation), then '
      'the image size (model.*.image_resizer) in /nowhere/pipeline.config.')


def test_an_unreachable_tpu_or_master_is_named(capsys, monkeypatch):
  error = tf.errors.UnavailableError(None, None, 'Socket closed')
  assert command_line.describe_op_error(
      error, environ={}, cluster_flags={'--tpu_name': 'my-tpu',
                                        '--master': None}) == (
          'the cluster of --tpu_name=my-tpu did not answer (Socket closed). '
          'Check that it is running and reachable from here.')
  # At the boundary, the flag comes from the command's flags.
  monkeypatch.delenv('TF_CONFIG', raising=False)
  monkeypatch.setattr(command_line, '_flag', {
      'master': 'grpc://10.0.0.2:8470'}.get)
  code, err = _exit_and_stderr(capsys, lambda: command_line.run_export(
      _raiser(tf.errors.DeadlineExceededError(None, None, 'deadline')),
      'prog', 'doc', __name__, []))
  assert (code, err) == (1, 'error: the cluster of --master=grpc://10.0.0.2:'
                         '8470 did not answer (deadline). Check that it is '
                         'running and reachable from here.\n')

