"""validate and the launch refuse a mask_type the records' masks do not have.

The records are the synthetic shapes (PNG masks, as the dataset tool writes
them) and a copy of their first record with the masks as float lists.
"""
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.checks import config_check
from od_estimator.checks import launch_check
from od_estimator.checks import record_scanner
from od_estimator.config import config_util
from od_estimator.protos import input_reader_pb2
from tests import tiny_ssd

def _numerical_copy(png_glob, path):
  """Writes the first record of png_glob with its masks as float lists."""
  first = next(iter(tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(
      png_glob))).take(1))).numpy()
  example = tf.train.Example.FromString(first)
  feature = example.features.feature['image/object/mask']
  masks = [np.asarray(Image.open(io.BytesIO(png)), np.float32).ravel()
           for png in feature.bytes_list.value]
  feature.ClearField('bytes_list')
  feature.float_list.value.extend(np.concatenate(masks) / 255.0)
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(example.SerializeToString())
  return path


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """(config path, PNG-mask train glob, numerical-mask record)."""
  root = tmp_path_factory.mktemp('mask_type')
  path = tiny_ssd.write_config(root, root)
  train = str(root / 'shapes_train.record-*')
  numerical = _numerical_copy(train, str(root / 'numerical.record'))
  return path, train, numerical


def _reader(input_path, mask_type=None, load=True):
  reader = input_reader_pb2.InputReader(load_instance_masks=load)
  reader.tf_record_input_reader.input_path.append(input_path)
  if mask_type:
    reader.mask_type = input_reader_pb2.InstanceMaskType.Value(mask_type)
  return reader


def test_png_masks_read_as_numerical_are_named_with_the_fix(data):
  _, train, _ = data
  problem, hint = record_scanner.mask_type_problem(
      _reader(train), 'train_input_reader')
  first_file = sorted(tf.io.gfile.glob(train))[0]
  assert problem == ('is NUMERICAL_MASKS but record 0 of %s holds '
                     'PNG-encoded masks (bytes) in image/object/mask' %
                     first_file)
  assert hint == 'set mask_type: PNG_MASKS in train_input_reader'


def test_numerical_masks_read_as_png_are_named_with_the_fix(data):
  _, _, numerical = data
  problem, hint = record_scanner.mask_type_problem(
      _reader(numerical, 'PNG_MASKS'), 'eval_input_reader[0]')
  assert 'is PNG_MASKS' in problem and 'numerical masks' in problem
  assert hint == 'set mask_type: NUMERICAL_MASKS in eval_input_reader[0]'


def test_matching_or_unloaded_masks_are_no_problem(data):
  _, train, numerical = data
  for reader in (_reader(train, 'PNG_MASKS'), _reader(numerical),
                 _reader(numerical, 'DEFAULT'),
                 _reader(train, load=False)):
    assert record_scanner.mask_type_problem(reader, 'f') is None


def test_validate_and_the_launch_refuse_the_mismatch_in_one_line(data,
                                                                 tmp_path):
  path, _, numerical = data
  with open(path) as f:
    text = f.read()
  mismatched = str(tmp_path / 'masks.config')
  with open(mismatched, 'w') as f:
    f.write(text.replace('_input_reader {\n',
                         '_input_reader {\n  load_instance_masks: true\n'))
  lines = config_check.validate(mismatched).text().splitlines()
  assert len(lines) == 3, lines
  assert lines[0].startswith(
      'error: %s: field `train_input_reader.mask_type`: is NUMERICAL_MASKS '
      'but record 0 of ' % mismatched)
  assert lines[0].endswith(
      '(hint: set mask_type: PNG_MASKS in train_input_reader)')
  assert '`eval_input_reader[0].mask_type`' in lines[1]
  configs = config_util.get_configs_from_pipeline_file(path)
  for reader in [configs['train_input_config']] + configs[
      'eval_input_configs']:
    reader.load_instance_masks = True
    reader.mask_type = input_reader_pb2.PNG_MASKS
  configs['eval_input_configs'][0].tf_record_input_reader.input_path[:] = [
      numerical]
  with pytest.raises(errors.UserInputErrors) as raised:
    launch_check.check(configs, path, stream=io.StringIO())
  assert [str(p) for p in raised.value.problems[:-1]] == [
      '%s: field `eval_input_reader[0].mask_type`: is PNG_MASKS but record 0 '
      'of %s holds numerical masks (a float list) in image/object/mask '
      '(hint: set mask_type: NUMERICAL_MASKS in eval_input_reader[0])' % (
          path, numerical)]
