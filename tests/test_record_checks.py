"""Records users get wrong, empty inputs and bad count flags: one line each.

In-graph: the input pipeline fails on such a record with an error
record_scanner traces back to the file, index and source_id. Before
training: the scanner (`validate --scan_records`) lists them, and inputs
without records are refused when the pipeline is built. No training here:
test_data_errors relaunches model_main on one such record.
"""
import os

import pytest
import tensorflow as tf

from od_estimator import detect
from od_estimator import errors
from od_estimator.input_pipeline import inputs
from od_estimator.checks import launch_check
from od_estimator.checks import record_scanner
from od_estimator import validate
from od_estimator.builders import dataset_builder
from od_estimator.dataset_tools import create_coco_tf_record
from od_estimator.dataset_tools import create_pet_tf_record
from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.config import config_util
from tests import tiny_ssd
from tests.command_modules import import_command
from tests.command_modules import run_command

# Two boxes; the demo's label map has 3 classes (circle, square, triangle).
_BOXES = {'ymin': [0.1, 0.2], 'xmin': [0.1, 0.2], 'ymax': [0.5, 0.6],
          'xmax': [0.5, 0.6]}
# Case -> (the record's changes: class labels, weights; or raw bytes).
BAD_RECORDS = {
    'label-0': {'labels': [1, 0]},
    'label-above': {'labels': [2, 4]},
    'fewer-labels': {'labels': [1]},
    'more-weights': {'labels': [1, 2], 'weights': [1.0, 1.0, 1.0]},
    'not-an-example': b'this is not a tf.Example',
}
# What the scanner says of each (after `record N of PATH (source_id=...)`).
SCANNER_PROBLEMS = {
    'label-0': 'image/object/class/label holds class ids 0 outside '
               '1..num_classes=3 (ids are 1-based; 0 is the background)',
    'label-above': 'image/object/class/label holds class ids 4 outside '
                   '1..num_classes=3 (ids are 1-based; 0 is the background)',
    'fewer-labels': 'image/object/class/label has 1 entries for 2 boxes',
    'more-weights': 'image/object/weight has 3 entries for 2 boxes',
    'not-an-example': 'not a tf.train.Example',
}


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """(config path, config text, the train glob, good serialized records)."""
  config, text, train_glob = tiny_ssd.written_config(
      tmp_path_factory.mktemp('record_checks'))
  good = list(tf.compat.v1.io.tf_record_iterator(
      sorted(tf.io.gfile.glob(train_glob))[0]))
  return config, text, train_glob, good


def _bad_record(good, case):
  change = BAD_RECORDS[case]
  if isinstance(change, bytes):
    return change
  example = tf.train.Example.FromString(good)
  features = example.features.feature
  for name, values in _BOXES.items():
    features['image/object/bbox/' + name].float_list.value[:] = values
  # Numeric labels only: with class texts, the label map's ids are used.
  del features['image/object/class/text']
  for key in ('image/object/area', 'image/object/is_crowd',
              'image/object/difficult', 'image/object/mask'):
    del features[key]
  features['image/object/class/label'].int64_list.value[:] = change['labels']
  if 'weights' in change:
    features['image/object/weight'].float_list.value[:] = change['weights']
  features['image/source_id'].bytes_list.value[:] = [case.encode()]
  features['image/filename'].bytes_list.value[:] = [b'%s.png' %
                                                    case.encode()]
  return example.SerializeToString()


def _write(path, records):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return str(path)


def _config_reading(data, directory, train_path, eval_path=None):
  """The config with the train (and eval) input_path replaced."""
  _, text, train_glob, _ = data
  text = text.replace(train_glob, train_path)
  if eval_path:
    val_glob = train_glob.replace('shapes_train', 'shapes_val')
    assert val_glob in text
    text = text.replace(val_glob, eval_path)
  path = os.path.join(str(directory), 'checked.config')
  with open(path, 'w') as f:
    f.write(text)
  return path


@pytest.mark.parametrize('case', sorted(BAD_RECORDS))
def test_input_pipeline_names_the_bad_record(data, tmp_path, case):
  """Read in order: two good records, then the bad one (index 2)."""
  good = data[3]
  path = _write(tmp_path / 'bad.record',
                good[:2] + [_bad_record(good[0], case)])
  config = _config_reading(data, tmp_path, path, eval_path=path)
  configs = config_util.get_configs_from_pipeline_file(config)
  with tf.Graph().as_default():
    dataset = inputs.eval_input(configs['eval_config'],
                                configs['eval_input_configs'][0],
                                tiny_ssd.model_config())
    batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with tf.compat.v1.Session() as session:
      session.run(batch)
      session.run(batch)
      with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        session.run(batch)
  assert record_scanner.is_data_error(raised.value)
  line = record_scanner.describe(raised.value, config)
  if case == 'not-an-example':
    assert line == ('record 2 of %s is not a tf.train.Example. Fix or drop '
                    'that record.' % path)
  else:
    # What is wrong, found by reading the record as the scanner does.
    assert line == ('%s in record source_id=%s, filename=%s.png (record 2 '
                    'of %s). Fix or drop that record.' % (
                        SCANNER_PROBLEMS[case], case, case, path))


def test_good_records_pass_the_in_graph_checks_unchanged(data):
  """The demo records: one-hot classes of their 1-based ids, as before."""
  config, _, train_glob, good = data
  configs = config_util.get_configs_from_pipeline_file(config)
  example = tf.train.Example.FromString(good[0])
  label_ids = record_scanner._label_ids(  # pylint: disable=protected-access
      configs['eval_input_configs'][0].label_map_path)
  expected = [label_ids[text.decode()] - 1 for text in example.features.feature[
      'image/object/class/text'].bytes_list.value]
  path = sorted(tf.io.gfile.glob(train_glob))[0]
  configs['eval_input_configs'][0].tf_record_input_reader.input_path[:] = [
      path]
  with tf.Graph().as_default():
    dataset = inputs.eval_input(configs['eval_config'],
                                configs['eval_input_configs'][0],
                                tiny_ssd.model_config())
    _, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with tf.compat.v1.Session() as session:
      labels = session.run(labels)
  count = labels['num_groundtruth_boxes'][0]
  assert count == len(expected) > 0
  assert list(labels['groundtruth_classes'][0, :count].argmax(axis=1)) == (
      expected)
  assert labels['groundtruth_classes'][0, :count].sum() == count


def test_scanner_lists_every_bad_record(data, tmp_path):
  good = data[3]
  cases = sorted(BAD_RECORDS)
  path = _write(tmp_path / 'bad.record',
                [good[0]] + [_bad_record(good[0], case) for case in cases])
  configs = config_util.get_configs_from_pipeline_file(
      _config_reading(data, tmp_path, path))
  result = record_scanner.scan(configs)
  expected = []
  for index, case in enumerate(cases, 1):
    name = ('' if case == 'not-an-example' else
            ' (source_id=%s, filename=%s.png)' % (case, case))
    expected.append('record %d of %s%s: %s' % (index, path, name,
                                               SCANNER_PROBLEMS[case]))
  assert result.problems == expected
  assert not result.stopped
  # The eval input's 8 good records are read too.
  assert result.records == 1 + len(cases) + 8


def test_scanner_stops_at_its_limit(data, tmp_path):
  good = data[3]
  path = _write(tmp_path / 'bad.record',
                [_bad_record(good[0], 'label-0')] * 3)
  configs = config_util.get_configs_from_pipeline_file(
      _config_reading(data, tmp_path, path))
  result = record_scanner.scan(configs, limit=2)
  assert len(result.problems) == 2 and result.stopped


def test_scanner_passes_the_sample_records(data):
  """Records without area, masks or weights, and with texts, all pass."""
  config = data[0]
  result = record_scanner.scan(config_util.get_configs_from_pipeline_file(
      config))
  assert result.problems == [] and result.records == 16 + 8
  example = tf.train.Example.FromString(data[3][0])
  for key in ('image/object/area', 'image/object/is_crowd',
              'image/object/difficult', 'image/object/mask'):
    del example.features.feature[key]
  assert record_scanner.record_problem(example.SerializeToString(), 3) is None


def _empty_files(directory, count=2):
  paths = [str(directory / ('empty-%d.record' % i)) for i in range(count)]
  for path in paths:
    open(path, 'wb').close()
  return paths


def test_building_an_input_of_empty_files_names_them(data, tmp_path):
  paths = _empty_files(tmp_path)
  configs = config_util.get_configs_from_pipeline_file(data[0])
  reader = configs['train_input_config']
  pattern = str(tmp_path / 'empty-*.record')
  reader.tf_record_input_reader.input_path[:] = [pattern]
  with pytest.raises(errors.UserInputError) as raised:
    dataset_builder.build(reader, batch_size=2)
  assert str(raised.value) == (
      "tf_record_input_reader.input_path %r reads 2 file(s) and every one "
      "is empty (0 records): %s. Write the records first, or point "
      "input_path at files that hold some." % (pattern, ', '.join(paths)))


def test_an_input_pipeline_whose_share_is_empty_is_refused(data, tmp_path):
  """Pipeline 0 of 2 would read only the empty file (the first of two)."""
  empty, full = _empty_files(tmp_path, 2)
  _write(full, data[3][:2])
  configs = config_util.get_configs_from_pipeline_file(data[0])
  reader = configs['train_input_config']
  reader.tf_record_input_reader.input_path[:] = [
      str(tmp_path / 'empty-*.record')]
  context = tf.distribute.InputContext(num_input_pipelines=2,
                                       input_pipeline_id=0)
  with pytest.raises(errors.UserInputError,
                     match='input pipeline 0 of 2 of .* every one is empty '
                     r'\(0 records\): %s\.' % empty):
    dataset_builder.build(reader, batch_size=2, input_context=context)
  dataset_builder.build(reader, batch_size=2, input_context=(
      tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)))


@pytest.mark.parametrize('reader', ['train', 'eval'])
def test_launch_on_empty_inputs_stops_before_the_graph(data, tmp_path,
                                                       reader):
  """Training and evaluation-only launches alike: one line per input."""
  paths = _empty_files(tmp_path)
  pattern = str(tmp_path / 'empty-*.record')
  config = (_config_reading(data, tmp_path, pattern) if reader == 'train' else
            _config_reading(data, tmp_path, data[2], eval_path=pattern))
  configs = config_util.get_configs_from_pipeline_file(config)
  with pytest.raises(errors.UserInputErrors) as raised:
    launch_check.check(configs, config, evaluation_only=reader == 'eval')
  problems = [str(problem) for problem in raised.value.problems]
  assert len(problems) == 2, problems
  assert ('%s_input_reader' % reader) in problems[0]
  assert ('every one is empty (0 records): %s' % ', '.join(paths) in
          problems[0])


def test_unbounded_training_is_said_at_launch(data, tmp_path, capsys):
  config = data[0]
  configs = config_util.get_configs_from_pipeline_file(config)
  configs['train_config'].num_steps = 0
  launch_check.check(configs, config)
  launch_check.check(configs, config, command='legacy_train')
  launch_check.check(configs, config, evaluation_only=True)
  notes = [line for line in capsys.readouterr().err.splitlines()
           if 'num_steps' in line]
  assert notes == [
      'note: train_config.num_steps is 0 and --num_train_steps is not set: '
      'training runs until stopped.',
      'note: train_config.num_steps is 0: training runs until stopped.']


@pytest.mark.parametrize('command, argv, line', [
    ('model_main', ['--num_train_steps=-5'],
     '--num_train_steps=-5: must be at least 0 (leave it unset, or 0, to '
     'train for train_config.num_steps).'),
    ('model_main', ['--sample_1_of_n_eval_examples=0'],
     '--sample_1_of_n_eval_examples=0: must be at least 1 (1 evaluates every '
     'example, n every n-th).'),
    ('model_tpu_main', ['--num_train_steps=-5'],
     '--num_train_steps=-5: must be at least 0 (leave it unset, or 0, to '
     'train for train_config.num_steps).'),
    ('model_tpu_main', ['--iterations_per_loop=0'],
     '--iterations_per_loop=0: must be at least 1.'),
    ('legacy.train', ['--num_clones=0'], '--num_clones=0: must be at least 1.'),
])
def test_count_flags_out_of_range_are_one_line(data, tmp_path, command, argv,
                                               line):
  """Refused by main before the config is read or model_dir written."""
  module = import_command(command)
  flag_values = module.FLAGS
  validators = {name: list(flag_values[name].validators)
                for name in ('model_dir', 'pipeline_config_path')
                if name in flag_values}
  model_dir = tmp_path / 'model'
  flag_values.unparse_flags()
  flag_values([command, '--pipeline_config_path=%s' % data[0],
               '--%s=%s' % ('train_dir' if command == 'legacy.train' else
                            'model_dir', model_dir)] + argv)
  try:
    with pytest.raises(errors.UserInputError) as raised:
      module.main(None)
  finally:
    for name, kept in validators.items():
      flag_values[name].validators[:] = kept
    flag_values.unparse_flags()
  assert str(raised.value) == line
  assert not model_dir.exists()


def test_validate_scan_records_lists_the_bad_records(data, tmp_path, capsys):
  good = data[3]
  path = _write(tmp_path / 'bad.record',
                [good[0], _bad_record(good[0], 'label-above')])
  config = _config_reading(data, tmp_path, path)
  assert validate.main(['--pipeline_config_path=%s' % config]) == 0
  capsys.readouterr()
  assert validate.main(['--pipeline_config_path=%s' % config,
                        '--scan_records']) == 1
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == (
      'error: %s: record 1 of %s (source_id=label-above, '
      'filename=label-above.png): %s (hint: fix or drop that record)' % (
          config, path, SCANNER_PROBLEMS['label-above']))
  assert 'note: --scan_records read 10 records: 1 bad.' in lines


def test_sampling_fewer_records_than_n_still_yields(data, tmp_path):
  """1 of 50 of a repeated 2-record input: every 50th, never an empty
  stream (a repeat of empty epochs would wait forever)."""
  path = _write(tmp_path / 'two.record', data[3][:2])
  configs = config_util.get_configs_from_pipeline_file(data[0])
  reader = configs['train_input_config']
  reader.tf_record_input_reader.input_path[:] = [path]
  reader.sample_1_of_n_examples = 50
  reader.shuffle = False
  with tf.Graph().as_default():
    dataset = dataset_builder.build(reader)
    source_id = tf.compat.v1.data.make_one_shot_iterator(
        dataset).get_next()['source_id']
    with tf.compat.v1.Session() as session:
      options = tf.compat.v1.RunOptions(timeout_in_ms=60000)
      read = [session.run(source_id, options=options) for _ in range(3)]
  first = tf.train.Example.FromString(data[3][0]).features.feature[
      'image/source_id'].bytes_list.value[0]
  # Every 50th of a 2-record stream is its record 0 (epochs 0, 25, 50).
  assert read == [first] * 3


def test_a_dangling_link_among_the_input_files_is_named(data, tmp_path,
                                                        capsys):
  """Was a NotFoundError traceback when the pipeline was built."""
  _write(tmp_path / 'part-0.record', data[3][:2])
  link = tmp_path / 'part-1.record'
  link.symlink_to(tmp_path / 'moved' / 'part-1.record')
  configs = config_util.get_configs_from_pipeline_file(data[0])
  reader = configs['train_input_config']
  reader.tf_record_input_reader.input_path[:] = [
      str(tmp_path / 'part-*.record')]
  with pytest.raises(errors.UserInputError,
                     match='input file %s .* cannot be read: .*No such file'
                     % link):
    dataset_builder.build(reader, batch_size=2)
  config = _config_reading(data, tmp_path, str(tmp_path / 'part-*.record'))
  assert validate.main(['--pipeline_config_path=%s' % config]) == 1
  assert 'input file %s (matched by' % link in capsys.readouterr().out


@pytest.mark.parametrize('module, argv, line', [
    (create_synthetic_tf_record, ['--num_train_shards=0'],
     'argument --num_train_shards: must be at least 1, got 0'),
    (create_synthetic_tf_record, ['--num_train=-3'],
     'argument --num_train: must be at least 0, got -3'),
    (create_coco_tf_record, ['--num_val_shards=0'],
     'argument --num_val_shards: must be at least 1, got 0'),
    (create_pet_tf_record, ['--data_dir=x', '--num_shards=-1'],
     'argument --num_shards: must be at least 1, got -1'),
    (detect, ['--saved_model_dir=x', '--label_map_path=x', '--input=x',
              '--max_boxes=0'],
     'argument --max_boxes: must be at least 1, got 0'),
])
def test_tool_count_flags_out_of_range_are_one_line(tmp_path, capsys, module,
                                                    argv, line):
  """Were a ZeroDivisionError traceback, or empty shards written."""
  output = tmp_path / 'out'
  with pytest.raises(SystemExit) as raised:
    module.main(['--output_dir=%s' % output] + argv)
  assert raised.value.code == 2
  errors_lines = [text for text in capsys.readouterr().err.splitlines()
                  if ' error: ' in text]
  assert len(errors_lines) == 1 and errors_lines[0].endswith(line)
  assert not output.exists()


def test_model_main_on_empty_records_stops_at_once(data, tmp_path):
  """Was: the first checkpoint, then a silent spin ignoring SIGTERM."""
  paths = _empty_files(tmp_path)
  config = _config_reading(data, tmp_path, str(tmp_path / 'empty-*.record'))
  model_dir = tmp_path / 'model'
  result = run_command('model_main', [
      '--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
      '--num_train_steps=2',
      '--hparams_overrides=%s' % tiny_ssd.LIGHT_OVERRIDES])
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  error_lines = [line for line in result.stderr.splitlines()
                 if line.startswith('error:')]
  assert 'every one is empty (0 records): %s' % ', '.join(paths) in (
      error_lines[0])
  assert 'nothing was written to --model_dir' in error_lines[-1]
  assert not model_dir.exists()
