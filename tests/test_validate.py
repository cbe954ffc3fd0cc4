"""Tests for `od-estimator validate` on real files written in a temp dir."""
import os

import pytest

from od_estimator import __main__ as cli
from od_estimator import errors
from od_estimator import validate
from od_estimator.builders import model_builder
from od_estimator.checks import config_check
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from tests import command_modules
from tests import small_checkpoints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_CONFIG = os.path.join(REPO, 'samples', 'configs',
                           'ssd_mobilenet_v2_shapes.config')


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp('validate')
  synth.create_dataset(str(root / 'data'), num_train=2, num_val=1,
                       image_size=32)
  return root


def _good_config(data_dir):
  """The demo config, with paths pointing at the temp data."""
  with open(DEMO_CONFIG) as f:
    return f.read().replace('demo_out/data', str(data_dir / 'data'))


def _run(data_dir, text, capsys, name='pipeline.config'):
  path = data_dir / name
  path.write_text(text)
  code = cli.main(['validate', '--pipeline_config_path=%s' % path])
  return code, capsys.readouterr().out, str(path)


def test_good_config_passes(data_dir, capsys):
  code, out, path = _run(data_dir, _good_config(data_dir), capsys)
  assert code == 0, out
  assert out.strip().endswith('%s: OK' % path)


def test_quantization_aware_config_passes_with_what_it_does(data_dir,
                                                             capsys):
  text = _good_config(data_dir) + (
      'graph_rewriter { quantization { delay: 48000 } }\n')
  code, out, path = _run(data_dir, text, capsys, name='quantized.config')
  assert code == 0, out
  assert out.strip().endswith('%s: OK' % path)
  note = [line for line in out.splitlines() if 'graph_rewriter' in line]
  assert len(note) == 1 and note[0].startswith('note: ')
  assert '8/8 bits' in note[0] and 'from step 48000' in note[0]


def _break(old, new):
  def broken(text):
    assert old in text, old  # the demo config changed: update the case
    return text.replace(old, new, 1)
  return broken


def _truncate(text):
  return text[:text.index('box_predictor')]


BAD_CASES = {
    'syntax_error': (_break('num_classes: 3', 'num_classes 3 {'),
                     ['num_classes']),
    'unknown_field': (_break('batch_size: 16', 'batchsize: 16'),
                      ['train_config.batchsize', 'no field named',
                       '`batch_size`']),
    'wrong_type': (_break('num_steps: 1000', 'num_steps: "many"'),
                   ['train_config.num_steps']),
    'bad_enum': (_break('score_converter: SIGMOID', 'score_converter: SIGMA'),
                 ['score_converter', 'SIGMA', 'accepted values']),
    'truncated_file': (_truncate, ['Expected']),
    'missing_label_map': (_break('shapes_label_map.pbtxt', 'nope.pbtxt'),
                          ['train_input_reader.label_map_path', 'nope.pbtxt',
                           'not found']),
    'glob_matches_nothing': (_break('shapes_train.record-?????-of-00002',
                                    'shapes_tran.record-*'),
                             ['shapes_tran.record-*', 'no file matches']),
    'label_ids_beyond_num_classes': (_break('num_classes: 3',
                                            'num_classes: 2'),
                                     ['beyond num_classes=2', '3 (triangle)']),
    'missing_fine_tune_checkpoint': (
        _break('batch_size: 16', 'batch_size: 16 fine_tune_checkpoint: '
               '"PATH_TO_BE_CONFIGURED/model.ckpt"'),
        ['train_config.fine_tune_checkpoint', 'model.ckpt.index not found',
         'PATH_TO_BE_CONFIGURED']),
    'zero_batch_size': (_break('batch_size: 16', 'batch_size: 0'),
                        ['train_config.batch_size', 'at least 1']),
    'unknown_metrics_set': (_break('"coco_detection_metrics"', '"coco_map"'),
                            ["unknown metrics set 'coco_map'"]),
    'metrics_set_not_supported_yet': (
        _break('"coco_detection_metrics"', '"lvis_mask_metrics"'),
        ["metrics set 'lvis_mask_metrics' is not supported yet",
         'accepted: coco_detection_metrics']),
    'zero_eval_batch_size': (
        _break('"coco_detection_metrics"\n',
               '"coco_detection_metrics" batch_size: 0\n'),
        ['eval_config.batch_size', 'at least 1']),
    'unsupported_meta_architecture': (
        lambda t: 'model { center_net { num_classes: 3 } }' +
        t[t.index('train_config'):],
        ["meta-architecture 'center_net' is not supported"]),
    'missing_closing_brace_at_end': (
        lambda t: t.rstrip()[:-1],
        ['`eval_input_reader` is closed', 'truncated', 'add 1 closing `}`']),
    'unmatched_closing_brace': (
        _break('max_number_of_boxes: 8\n}', 'max_number_of_boxes: 8\n}}'),
        ['no matching opening brace', 'remove it']),
    'missing_closing_brace_mid_file': (
        _break('random_horizontal_flip {} }\n}\n',
               'random_horizontal_flip {} }\n'),
        ['train_config.train_input_reader',
         '`train_input_reader` belongs at the top level']),
    'input_path_is_a_directory': (
        _break('/shapes_train.record-?????-of-00002', ''),
        ['train_input_reader.tf_record_input_reader.input_path',
         'matches only directories']),
    'label_map_is_a_directory': (
        _break('/shapes_label_map.pbtxt', ''),
        ['train_input_reader.label_map_path', 'is a directory']),
    'unsupported_feature_extractor': (
        _break('type: "ssd_mobilenet_v2"', 'type: "ssd_mobilenet_v9"'),
        ["feature_extractor.type 'ssd_mobilenet_v9' is not supported",
         'ssd_mobilenet_v2']),
    'unsupported_augmentation': (
        _break('random_horizontal_flip {}',
               'autoaugment_image { policy_name: "v3" }'),
        ['train_config.data_augmentation_options[0]',
         'policy_name "v3" is not supported']),
    'unsupported_decoder_option': (
        _break('num_readers: 1', 'num_readers: 1 load_dense_pose: true'),
        ['eval_input_reader[0]', 'load_dense_pose is not supported']),
    'multiclass_scores_not_loaded': (
        _break('batch_size: 16', 'batch_size: 16 use_multiclass_scores: true'),
        ['train_config.use_multiclass_scores',
         'train_input_reader.load_multiclass_scores is false',
         'one-hot labels']),
    'context_features_train': (
        _break('max_number_of_boxes: 8', 'max_number_of_boxes: 8 '
               'load_context_features: true'),
        ['train_input_reader.load_context_features', 'Context R-CNN',
         'would ignore them']),
    'context_features_eval': (
        _break('num_readers: 1', 'num_readers: 1 load_context_features: true'),
        ['eval_input_reader[0].load_context_features', 'Context R-CNN']),
    'graph_rewriter_bits': (
        lambda t: t + 'graph_rewriter { quantization { activation_bits: 4 } '
        '}\n',
        ['graph_rewriter.quantization.activation_bits: 4 is not supported',
         'only 8-bit']),
    'zero_learning_rate_base': (
        _break('learning_rate_base: 0.002', 'learning_rate_base: 0.0'),
        ['adam_optimizer.learning_rate.cosine_decay_learning_rate.'
         'learning_rate_base', 'must be positive, got 0']),
    'negative_warmup_learning_rate': (
        _break('warmup_learning_rate: 0.0002', 'warmup_learning_rate: -0.1'),
        ['cosine_decay_learning_rate.warmup_learning_rate',
         'must be zero or positive, got -0.1']),
    'eval_keypoint_edge': (
        _break('metrics_set: "coco_detection_metrics"',
               'metrics_set: "coco_detection_metrics"\n'
               '  keypoint_edge { start: 0 end: 1 }'),
        ['eval_config.keypoint_edge', 'needs a keypoint model']),
    'eval_skip_unlabeled_without_its_metrics': (
        _break('metrics_set: "coco_detection_metrics"',
               'metrics_set: "pascal_voc_detection_metrics"\n'
               '  skip_predictions_for_unlabeled_class: true'),
        ['eval_config.skip_predictions_for_unlabeled_class',
         'precision_at_recall_detection_metrics']),
}

_ADAM = ('cosine_decay_learning_rate {\n'
         '          learning_rate_base: 0.002\n'
         '          total_steps: 1000\n'
         '          warmup_learning_rate: 0.0002\n'
         '          warmup_steps: 100\n'
         '        }')
# Schedule text -> the field refused: every schedule of optimizer.proto.
LEARNING_RATE_CASES = {
    'constant_learning_rate { learning_rate: -0.01 }':
        'constant_learning_rate.learning_rate',
    'exponential_decay_learning_rate { initial_learning_rate: 0 }':
        'exponential_decay_learning_rate.initial_learning_rate',
    'exponential_decay_learning_rate { min_learning_rate: -1e-5 }':
        'exponential_decay_learning_rate.min_learning_rate',
    'exponential_decay_learning_rate { burnin_learning_rate: -1 }':
        'exponential_decay_learning_rate.burnin_learning_rate',
    'manual_step_learning_rate { initial_learning_rate: 0 }':
        'manual_step_learning_rate.initial_learning_rate',
    'manual_step_learning_rate { schedule { step: 10 learning_rate: 0.1 } '
    'schedule { step: 20 learning_rate: 0 } }':
        'manual_step_learning_rate.schedule[1].learning_rate',
    'cosine_decay_learning_rate { learning_rate_base: -0.002 }':
        'cosine_decay_learning_rate.learning_rate_base',
    # Not numbers: every loss would be NaN from the first step.
    'constant_learning_rate { learning_rate: nan }':
        'constant_learning_rate.learning_rate',
    'cosine_decay_learning_rate { learning_rate_base: inf }':
        'cosine_decay_learning_rate.learning_rate_base',
}


@pytest.mark.parametrize('case', sorted(BAD_CASES))
def test_bad_config_fails_with_named_problem(data_dir, capsys, case):
  edit, words = BAD_CASES[case]
  code, out, path = _run(data_dir, edit(_good_config(data_dir)), capsys,
                         name=case + '.config')
  assert code == 1, out
  assert 'Traceback' not in out
  assert out.startswith('error: %s' % path)
  for word in words:
    assert word in out


@pytest.mark.parametrize('schedule', sorted(LEARNING_RATE_CASES))
def test_every_learning_rate_schedule_refuses_non_positive_rates(
    data_dir, capsys, schedule):
  text = _break(_ADAM, schedule)(_good_config(data_dir))
  code, out, _ = _run(data_dir, text, capsys, name='rate.config')
  assert code == 1, out
  field = ('train_config.optimizer.adam_optimizer.learning_rate.' +
           LEARNING_RATE_CASES[schedule])
  assert any(line.startswith('error:') and field in line and
             'a learning rate must be' in line
             for line in out.splitlines()), out


def test_zero_rates_that_mean_none_are_accepted(data_dir, capsys):
  # No burn-in rate, no floor, a warm-up from zero: all valid.
  text = _break(_ADAM, 'exponential_decay_learning_rate { '
                'burnin_learning_rate: 0 min_learning_rate: 0 }')(
                    _good_config(data_dir))
  assert _run(data_dir, text, capsys, name='rate.config')[0] == 0
  text = _break('warmup_learning_rate: 0.0002', 'warmup_learning_rate: 0')(
      _good_config(data_dir))
  assert _run(data_dir, text, capsys, name='rate.config')[0] == 0
  # Manual steps: a warm-up from zero (the original's Context R-CNN
  # configs), and an initial rate a first step of 0 replaces.
  for schedule in ('warmup: true initial_learning_rate: 0 '
                   'schedule { step: 100 learning_rate: 0.002 }',
                   'initial_learning_rate: 0 '
                   'schedule { step: 0 learning_rate: 0.002 }'):
    text = _break(_ADAM, 'manual_step_learning_rate { %s }' % schedule)(
        _good_config(data_dir))
    assert _run(data_dir, text, capsys, name='rate.config')[0] == 0, schedule


def test_supported_meta_architectures_come_from_the_model_registry(
    data_dir, capsys, monkeypatch):
  text = BAD_CASES['unsupported_meta_architecture'][0](_good_config(data_dir))
  code, out, _ = _run(data_dir, text, capsys, name='family.config')
  assert code == 1
  assert "meta-architecture 'center_net' is not supported yet" in out
  assert 'supported: %s)' % ', '.join(
      model_builder.supported_meta_architectures()) in out
  # A family the registry builds (not a refusal) is no longer refused.
  monkeypatch.setitem(model_builder.META_ARCH_BUILDER_MAP, 'center_net',
                      model_builder.META_ARCH_BUILDER_MAP['ssd'])
  code, out, _ = _run(data_dir, text, capsys, name='family.config')
  assert 'is not supported yet' not in out


def test_missing_config_file(tmp_path, capsys):
  code = validate.main(['--pipeline_config_path=%s' % (tmp_path / 'x')])
  assert code == 1
  assert 'file not found' in capsys.readouterr().out


def test_command_line_exit_codes_and_no_traceback(data_dir):
  path = data_dir / 'cli.config'
  path.write_text(_good_config(data_dir).replace('batch_size: 16',
                                                 'batch_size: x'))
  result = command_modules.run_command(
      'validate', ['--pipeline_config_path=%s' % path])
  assert result.returncode == 1
  assert 'train_config.batch_size' in result.stdout
  assert 'Traceback' not in result.stdout + result.stderr


def test_cli_usage(capsys):
  assert cli.main([]) == 0
  assert 'validate' in capsys.readouterr().out
  assert cli.main(['frobnicate']) == 2


def _validate_file(path, capsys):
  code = cli.main(['validate', '--pipeline_config_path=%s' % path])
  out = capsys.readouterr().out
  assert 'Traceback' not in out
  return code, out


def test_empty_file(tmp_path, capsys):
  path = tmp_path / 'empty.config'
  path.write_text('# nothing yet\n')
  code, out = _validate_file(path, capsys)
  assert code == 1
  assert out.startswith('error: %s: the config sets no fields' % path)


def test_directory_instead_of_file(data_dir, capsys):
  code, out = _validate_file(data_dir, capsys)
  assert code == 1
  assert 'error: %s: is a directory, not a config file' % data_dir in out


def test_non_utf8_file(data_dir, capsys):
  path = data_dir / 'latin1.config'
  path.write_bytes(_good_config(data_dir).encode() + b'# caf\xe9\n')
  code, out = _validate_file(path, capsys)
  assert code == 1
  line = _good_config(data_dir).count('\n') + 1
  assert out.startswith('error: %s:%d:6: not UTF-8 text' % (path, line))


def test_byte_order_mark_is_accepted(data_dir, capsys):
  path = data_dir / 'bom.config'
  path.write_bytes(b'\xef\xbb\xbf' + _good_config(data_dir).encode())
  assert _validate_file(path, capsys)[0] == 0


def test_only_the_missing_glob_of_several_is_reported(data_dir, capsys):
  text = _break('shapes_train.record-?????-of-00002"',
                'shapes_train.record-?????-of-00002" '
                'input_path: "nowhere-*.record"')(_good_config(data_dir))
  code, out, _ = _run(data_dir, text, capsys, name='globs.config')
  assert code == 1
  assert out.count('error:') == 1
  assert 'no file matches nowhere-*.record' in out


def test_a_glob_of_empty_files_is_reported(data_dir, capsys):
  """Files without records: training would wait forever for the first."""
  empty = data_dir / 'empty-0.record'
  empty.write_bytes(b'')
  text = _break(str(data_dir / 'data' / 'shapes_val.record-?????-of-00001'),
                str(data_dir / 'empty-*.record'))(_good_config(data_dir))
  code, out, path = _run(data_dir, text, capsys, name='empty_input.config')
  assert code == 1
  assert out.splitlines()[0] == (
      "error: %s: field `eval_input_reader[0].tf_record_input_reader."
      "input_path`: '%s' reads 1 file(s) and every one is empty (0 records): "
      "%s. Write the records first, or point input_path at files that hold "
      "some." % (path, data_dir / 'empty-*.record', empty))


def test_help_describes_scan_records(capsys):
  with pytest.raises(SystemExit):
    validate.main(['--help'])
  help_text = ' '.join(capsys.readouterr().out.split())
  assert ('--scan_records Also read every record of the train and eval '
          'inputs and list each bad one (at most 20) with its file, index '
          'and source_id') in help_text


def test_empty_label_map(data_dir, capsys):
  (data_dir / 'empty.pbtxt').write_text('# no items\n')
  text = _good_config(data_dir).replace(
      str(data_dir / 'data' / 'shapes_label_map.pbtxt'),
      str(data_dir / 'empty.pbtxt'))
  code, out, _ = _run(data_dir, text, capsys, name='empty_map.config')
  assert code == 1
  assert 'empty.pbtxt has no items' in out


def test_damaged_fine_tune_checkpoint(data_dir, capsys):
  # Found before training instead of an OutOfRangeError once it restores.
  prefix, = small_checkpoints.save(data_dir / 'fine_tune', [5])
  small_checkpoints.truncate(prefix + '.data-00000-of-00001')
  text = _good_config(data_dir).replace(
      'batch_size: 16', 'batch_size: 16 fine_tune_checkpoint: "%s"' % prefix)
  code, out, path = _run(data_dir, text, capsys, name='damaged_ft.config')
  assert code == 1
  assert out.startswith('error: %s: field `train_config.fine_tune_checkpoint`'
                        ': checkpoint %s is damaged: %s.data-00000-of-00001 '
                        'is truncated' % (path, prefix, prefix)), out


def test_full_fine_tuning_from_a_folder_passes(data_dir, capsys):
  # The TF2 type, and a folder: fine-tuning reads its latest checkpoint.
  small_checkpoints.save(data_dir / 'fine_tune_folder', [5])
  text = _good_config(data_dir).replace(
      'batch_size: 16', 'batch_size: 16 fine_tune_checkpoint: "%s" '
      'fine_tune_checkpoint_type: "full"' % (data_dir / 'fine_tune_folder'))
  code, out, path = _run(data_dir, text, capsys, name='full_ft.config')
  assert code == 0, out
  assert out.strip().endswith('%s: OK' % path)


def test_relative_paths_are_read_from_the_launch_directory(
    data_dir, capsys, monkeypatch):
  (data_dir / 'relative.config').write_text(
      _good_config(data_dir).replace(str(data_dir) + '/', ''))
  monkeypatch.chdir(data_dir)
  code, out = _validate_file('relative.config', capsys)
  assert code == 0, out
  # From elsewhere the same config fails, and the hint says why.
  monkeypatch.chdir(data_dir / 'data')
  code, out = _validate_file('../relative.config', capsys)
  assert code == 1
  assert 'exists next to the config' in out
  assert str(data_dir / 'data' / 'shapes_label_map.pbtxt') in out


@pytest.mark.parametrize('builder,bug', [
    ('optimizer_builder', TypeError("unsupported operand type(s) for *: "
                                    "'NoneType' and 'float'")),
    ('preprocessor_builder', KeyError('random_horizontal_flip')),
])
def test_a_bug_in_a_builder_keeps_its_traceback(data_dir, capsys,
                                                monkeypatch, builder, bug):
  def broken(*args, **kwargs):
    del args, kwargs  # Unused.
    raise bug
  monkeypatch.setattr(getattr(config_check, builder), 'build', broken)
  with pytest.raises(type(bug)):
    _run(data_dir, _good_config(data_dir), capsys, name='bug.config')


def test_a_builder_refusing_a_value_is_the_config_s_mistake(
    data_dir, capsys, monkeypatch):
  def refuse(*args, **kwargs):
    del args, kwargs  # Unused.
    raise ValueError('momentum must be below 1,\n  got 1.5')
  monkeypatch.setattr(config_check.optimizer_builder, 'build', refuse)
  code, out, path = _run(data_dir, _good_config(data_dir), capsys,
                         name='refused.config')
  assert code == 1
  assert ('error: %s: field `train_config.optimizer`: cannot be built: '
          'momentum must be below 1, got 1.5' % path) in out.splitlines()


def test_a_bug_in_a_check_keeps_its_traceback(data_dir, capsys, monkeypatch):
  def broken(*args):
    del args  # Unused.
    raise AttributeError("'NoneType' object has no attribute 'batch_size'")
  monkeypatch.setattr(config_check, '_check_eval_config', broken)
  with pytest.raises(AttributeError):
    _run(data_dir, _good_config(data_dir), capsys, name='bug.config')
  monkeypatch.undo()
  monkeypatch.setattr(config_check.tpu_check, 'check', broken)
  path = data_dir / 'tpu_bug.config'
  path.write_text(_good_config(data_dir))
  with pytest.raises(AttributeError):
    validate.main(['--pipeline_config_path=%s' % path, '--check_tpu'])


def test_input_the_checks_stop_on_is_a_report_line(data_dir, capsys,
                                                   monkeypatch):
  def stop(*args):
    del args  # Unused.
    raise errors.UserInputError('eval_config: cannot be\n  used')
  monkeypatch.setattr(config_check, '_check_eval_config', stop)
  code, out, path = _run(data_dir, _good_config(data_dir), capsys,
                         name='stop.config')
  assert code == 1
  assert out.splitlines()[0] == (
      'error: %s: checking stopped: eval_config: cannot be used' % path)


def test_a_path_tensorflow_cannot_reach_is_a_report_line(data_dir, capsys):
  pattern = 'nosuchscheme://bucket/train-*.record'
  text = _break('%s/shapes_train.record-?????-of-00002' % (
      data_dir / 'data'), pattern)(_good_config(data_dir))
  code, out, path = _run(data_dir, text, capsys, name='scheme.config')
  assert code == 1
  assert out.startswith(
      'error: %s: checking stopped: %s: this TensorFlow has no file system '
      'for that scheme' % (path, pattern)), out


def test_each_problem_of_a_report_is_one_line():
  report = config_check.Report('a.config')
  report.error('model', 'cannot be built:\n  depth must be\tpositive',
               hint='set\ndepth')
  report.note('one note')
  assert report.text().splitlines() == [
      'error: a.config: field `model`: cannot be built: depth must be '
      'positive (hint: set depth)',
      'note: one note',
      'a.config: 1 problem(s); fix them before training.']


def test_sequence_example_input_with_a_missing_label_map_is_one_problem(
    data_dir, capsys):
  missing = str(data_dir / 'no_such_map.pbtxt')
  text = _good_config(data_dir).replace(
      'train_input_reader {', 'train_input_reader {\n  input_type: '
      'TF_SEQUENCE_EXAMPLE', 1).replace(
          str(data_dir / 'data' / 'shapes_label_map.pbtxt'), missing)
  code, out, _ = _run(data_dir, text, capsys, name='sequence.config')
  assert code == 1
  assert 'label map %s not found' % missing in out
  assert 'label_map_path is not set' not in out


def test_sequence_example_input_is_supported(data_dir, capsys):
  # Both readers of the demo config read tf.SequenceExamples: validate no
  # longer reports the input type (the input functions pick the frames).
  text = _good_config(data_dir).replace(
      'train_input_reader {', 'train_input_reader {\n  input_type: '
      'TF_SEQUENCE_EXAMPLE', 1).replace(
          'eval_input_reader {', 'eval_input_reader {\n  input_type: '
          'TF_SEQUENCE_EXAMPLE', 1)
  assert text.count('TF_SEQUENCE_EXAMPLE') == 2
  code, out, path = _run(data_dir, text, capsys, name='sequences.config')
  assert code == 0, out
  assert out.strip().endswith('%s: OK' % path)
