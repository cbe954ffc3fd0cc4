"""model_main on bad training data: one error line naming the file, exit 1.

The tiniest model (tests/trained_models.py's one_step_fake_faster_rcnn:
the input pipeline's errors do not depend on the network) trains one step;
model_main's relaunch reads a record whose
image/encoded is not an image. It must end in one `error:` line naming the
file and the record's source_id, with the earlier checkpoint left as it
was. A truncated TFRecord and a class label above num_classes fail the same
way, in the training input's first batch: their tests read that batch of
model_main's train_input_fn (no model graph) and check the line the
command prints for its error.
"""
import contextlib
import io
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.checks import record_scanner
from od_estimator.estimator import model_lib
from tests import tiny_ssd
from tests.command_modules import run_command

pytestmark = pytest.mark.usefixtures('fake_extractor')


def _run(config, model_dir, steps):
  return run_command('model_main', [
      '--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
      '--num_train_steps=%d' % steps, '--sample_1_of_n_eval_examples=8'])


def _checkpoint_values(model_dir):
  """(latest checkpoint's step, {variable: value}) of model_dir."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  reader = tf.train.load_checkpoint(checkpoint)
  return int(checkpoint.rsplit('-', 1)[1]), {
      name: reader.get_tensor(name)
      for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope='module')
def trained(one_step_fake_faster_rcnn):
  """One training step; returns (root, config text, train record, model_dir).

  In this process, through model_lib's Estimator as model_main builds it
  (one_step_fake_faster_rcnn, shared by the run; batch 4): the
  relaunches, not this run, are what the tests check, and a model_main run
  would also evaluate and export for nothing.
  """
  root, config, model_dir = one_step_fake_faster_rcnn
  train_record = sorted(tf.io.gfile.glob(str(root / 'data' /
                                             'shapes_train.record-*')))[0]
  with open(config) as f:
    return root, f.read(), train_record, model_dir


def _config_on(trained, tmp_path, bad_record, in_order=False):
  """The trained config reading `bad_record` only (in order if asked)."""
  root, text, _, _ = trained
  train_glob = os.path.join(str(root / 'data'), 'shapes_train.record-*')
  assert train_glob in text
  config = tmp_path / 'pipeline.config'
  text = text.replace(train_glob, bad_record)
  if in_order:
    assert 'train_input_reader {' in text
    text = text.replace('train_input_reader {',
                        'train_input_reader {\n  shuffle: false', 1)
  config.write_text(text)
  return str(config)


def _relaunch_on(trained, tmp_path, bad_record, in_order=False):
  """Trains on `bad_record` only from a copy of the trained model_dir
  (reading its records in order if asked); returns the error line."""
  model_dir_copy = str(tmp_path / 'model')
  shutil.copytree(trained[3], model_dir_copy)
  step, before = _checkpoint_values(model_dir_copy)
  config = _config_on(trained, tmp_path, bad_record, in_order)
  result = _run(config, model_dir_copy, 3)
  assert result.returncode == 1, result.stderr[-3000:]
  error_lines = [line for line in result.stderr.splitlines()
                 if line.startswith('error:')]
  assert len(error_lines) == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  # The relaunch restores and re-saves step 1, then fails before a step.
  after_step, after = _checkpoint_values(model_dir_copy)
  assert after_step == step == 1
  assert sorted(after) == sorted(before)
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  return error_lines[0]


def _first_batch_error_line(trained, tmp_path, bad_record, in_order=False):
  """The `error:` line model_main prints when its training input fails on
  `bad_record` in the first batch (so before a step), as _relaunch_on's.

  The train_input_fn is model_main's (model_lib's, with its overrides);
  the line is the command's for a data error (command_line's boundary:
  record_scanner.describe, printed by errors.fail with exit status 1).
  """
  config = _config_on(trained, tmp_path, bad_record, in_order)
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(tmp_path / 'model'), pipeline_config_path=config)
  with tf.Graph().as_default():
    batch = tf.compat.v1.data.make_one_shot_iterator(
        parts['train_input_fn']()).get_next()
    with tf.compat.v1.Session() as session:
      with pytest.raises(tf.errors.OpError) as raised:
        session.run(batch)
  assert record_scanner.is_data_error(raised.value), raised.value
  stderr = io.StringIO()
  with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_:
    errors.fail(record_scanner.describe(raised.value, config))
  assert exit_.value.code == 1
  lines = stderr.getvalue().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), lines
  return lines[0]


def test_truncated_tfrecord_names_the_file(trained, tmp_path):
  train_record = trained[2]
  bad = str(tmp_path / 'truncated.record')
  with open(train_record, 'rb') as f:
    data = f.read()
  with open(bad, 'wb') as f:
    f.write(data[:len(data) - 100])
  line = _first_batch_error_line(trained, tmp_path, bad)
  assert 'TFRecord file %s is truncated or corrupt' % bad in line


def _bad_image_record(train_record, path):
  """Writes the good records of `train_record`, then one with no image."""
  examples = [tf.train.Example.FromString(serialized)
              for serialized in tf.compat.v1.io.tf_record_iterator(
                  train_record)]
  bad = tf.train.Example()
  bad.CopyFrom(examples[0])
  features = bad.features.feature
  features['image/encoded'].bytes_list.value[:] = [b'not an image']
  features['image/source_id'].bytes_list.value[:] = [b'bad-17']
  features['image/filename'].bytes_list.value[:] = [b'bad_17.png']
  with tf.io.TFRecordWriter(path) as writer:
    for example in examples[:2] + [bad]:
      writer.write(example.SerializeToString())


def test_undecodable_image_names_file_and_source_id(trained, tmp_path):
  bad = str(tmp_path / 'bad_image.record')
  _bad_image_record(trained[2], bad)
  # In order: the shuffle buffer holds many copies of the three records, so
  # shuffled, the two steps' 8 draws could all miss the bad one (~4%).
  line = _relaunch_on(trained, tmp_path, bad, in_order=True)
  assert 'source_id=bad-17, filename=bad_17.png' in line
  assert 'record 2 of %s' % bad in line


def test_class_label_above_num_classes_names_the_record(trained, tmp_path):
  """Was silently trained as background; now one line, before a step."""
  examples = [tf.train.Example.FromString(serialized)
              for serialized in tf.compat.v1.io.tf_record_iterator(
                  trained[2])]
  bad = tf.train.Example()
  bad.CopyFrom(examples[0])
  features = bad.features.feature
  # Numeric labels only (class texts would go through the label map).
  del features['image/object/class/text']
  labels = features['image/object/class/label'].int64_list.value
  labels[:] = [4] * len(labels)
  features['image/source_id'].bytes_list.value[:] = [b'label-4']
  path = str(tmp_path / 'bad_label.record')
  with tf.io.TFRecordWriter(path) as writer:
    for example in examples[:2] + [bad]:
      writer.write(example.SerializeToString())
  line = _first_batch_error_line(trained, tmp_path, path, in_order=True)
  assert line.startswith('error: image/object/class/label holds class ids 4 '
                         'outside 1..num_classes=3')
  assert 'source_id=label-4' in line and 'record 2 of %s' % path in line


@pytest.fixture(scope='module')
def records(tmp_path_factory):
  """Synthetic records and their config, without training (fast tests)."""
  _, text, train_glob = tiny_ssd.written_config(
      tmp_path_factory.mktemp('scanner'))
  return {'text': text, 'train_glob': train_glob,
          'train_record': sorted(tf.io.gfile.glob(train_glob))[0]}


def _config_reading(records, path, tmp_path):
  config = tmp_path / 'pipeline.config'
  config.write_text(records['text'].replace(records['train_glob'], path))
  return str(config)


def test_scanner_finds_a_corrupt_jpeg_by_decoding(tmp_path, records):
  """A valid JPEG header over garbage passes the magic check, not decoding."""
  path = str(tmp_path / 'corrupt.record')
  _bad_image_record(records['train_record'], path)
  serialized = list(tf.compat.v1.io.tf_record_iterator(path))
  example = tf.train.Example.FromString(serialized[2])
  example.features.feature['image/encoded'].bytes_list.value[:] = [
      b'\xff\xd8\xff\xe0' + b'\x00' * 64]
  with tf.io.TFRecordWriter(path) as writer:
    for record in serialized[:2] + [example.SerializeToString()]:
      writer.write(record)
  error = tf.errors.InvalidArgumentError(
      None, None, 'Invalid JPEG data or crop window.\n'
      '\t [[{{node decode_image/DecodeImage}}]]')
  assert record_scanner.is_data_error(error)
  line = record_scanner.describe(error,
                                 _config_reading(records, path, tmp_path))
  assert line == (
      'image/encoded is not a decodable JPEG/PNG/GIF/BMP image in record '
      'source_id=bad-17, filename=bad_17.png (record 2 of %s). Fix or drop '
      'that record.' % path)


def test_scanner_names_the_truncated_file_and_record(tmp_path, records):
  path = str(tmp_path / 'truncated.record')
  with open(records['train_record'], 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:
    f.write(data[:len(data) - 100])
  count = sum(1 for _ in tf.compat.v1.io.tf_record_iterator(
      records['train_record']))
  error = tf.errors.DataLossError(None, None, 'truncated record at 464')
  assert record_scanner.is_data_error(error)
  line = record_scanner.describe(error,
                                 _config_reading(records, path, tmp_path))
  assert line.startswith('TFRecord file %s is truncated or corrupt at '
                         'record %d (after source_id=' % (path, count - 1))


def test_other_errors_are_not_data_errors():
  assert not record_scanner.is_data_error(
      tf.errors.InvalidArgumentError(None, None, 'Incompatible shapes'))
  assert not record_scanner.is_data_error(ValueError('x'))
