"""file_safety: one-step replacement, staged outputs, links never followed."""
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.utils import dataset_util
from od_estimator.utils import file_safety
from tests import file_trees


_tree = file_trees.tree


def test_write_file_replaces_in_one_step(tmp_path):
  path = tmp_path / 'pipeline.config'
  path.write_text('old')
  file_safety.write_file(str(path), 'new')
  assert path.read_text() == 'new'
  assert os.listdir(tmp_path) == ['pipeline.config']


def test_a_failed_write_keeps_the_old_file(tmp_path):
  path = tmp_path / 'pipeline.config'
  path.write_text('old')
  with pytest.raises(RuntimeError):
    with file_safety.replacing(str(path)) as f:
      f.write('half of the ne')
      raise RuntimeError('disk gone')
  assert path.read_text() == 'old'
  assert os.listdir(tmp_path) == ['pipeline.config']


def test_a_killed_write_keeps_the_old_file(tmp_path):
  path = tmp_path / 'pipeline.config'
  path.write_text('old')
  script = textwrap.dedent("""
      import os, sys
      from od_estimator.utils import file_safety
      with file_safety.replacing(sys.argv[1]) as f:
        f.write('half')
        f.flush()
        os._exit(9)
  """)
  subprocess.run([sys.executable, '-c', script, str(path)], check=False)
  assert path.read_text() == 'old'


def test_a_link_is_replaced_not_written_through(tmp_path):
  elsewhere = tmp_path / 'elsewhere.txt'
  elsewhere.write_text('keep me')
  (tmp_path / 'out').mkdir()
  link = tmp_path / 'out' / 'pipeline.config'
  link.symlink_to(elsewhere)
  file_safety.write_file(str(link), 'new')
  assert elsewhere.read_text() == 'keep me'
  assert not link.is_symlink() and link.read_text() == 'new'


def test_remove_never_follows_links(tmp_path):
  outside = tmp_path / 'outside'
  outside.mkdir()
  (outside / 'precious.pb').write_bytes(b'data')
  out = tmp_path / 'out'
  (out / 'saved_model').mkdir(parents=True)
  (out / 'saved_model' / 'inner_link').symlink_to(outside)
  (out / 'link').symlink_to(outside)
  before = _tree(outside)
  file_safety.remove(str(out / 'link'), str(out))
  file_safety.remove(str(out / 'saved_model'), str(out))
  assert _tree(outside) == before
  assert os.listdir(out) == []


def test_remove_refuses_paths_outside_the_folder(tmp_path):
  (tmp_path / 'out').mkdir()
  (tmp_path / 'other').mkdir()
  with pytest.raises(errors.UserInputError, match='outside'):
    file_safety.remove(str(tmp_path / 'out' / '..' / 'other'),
                       str(tmp_path / 'out'))
  assert (tmp_path / 'other').is_dir()


def _stage(directory, overwrite, content='new', fail=False):
  with file_safety.staged_outputs(str(directory), ['saved_model', 'a.pb'],
                                  overwrite, '--output_directory') as staging:
    os.mkdir(os.path.join(staging, 'saved_model'))
    with open(os.path.join(staging, 'saved_model', 'saved_model.pb'),
              'w') as f:
      f.write(content)
    if fail:
      raise RuntimeError('export failed')
    with open(os.path.join(staging, 'a.pb'), 'w') as f:
      f.write(content)


def test_staged_outputs_refuse_to_replace_without_overwrite(tmp_path):
  _stage(tmp_path, overwrite=False, content='old')
  before = _tree(tmp_path)
  with pytest.raises(errors.UserInputError,
                     match='a.pb, saved_model.*--overwrite'):
    _stage(tmp_path, overwrite=False)
  assert _tree(tmp_path) == before


def test_staged_outputs_keep_the_old_ones_when_the_new_fail(tmp_path):
  _stage(tmp_path, overwrite=False, content='old')
  before = _tree(tmp_path)
  with pytest.raises(RuntimeError):
    _stage(tmp_path, overwrite=True, fail=True)
  assert _tree(tmp_path) == before


def test_staged_outputs_replace_with_overwrite(tmp_path):
  _stage(tmp_path, overwrite=False, content='old')
  (tmp_path / 'unrelated.txt').write_text('mine')
  _stage(tmp_path, overwrite=True)
  assert _tree(tmp_path) == {'a.pb': b'new',
                             'saved_model/saved_model.pb': b'new',
                             'unrelated.txt': b'mine'}


def test_staged_outputs_replace_a_link_without_touching_its_target(tmp_path):
  outside = tmp_path / 'outside'
  outside.mkdir()
  (outside / 'saved_model.pb').write_bytes(b'precious')
  out = tmp_path / 'out'
  out.mkdir()
  (out / 'saved_model').symlink_to(outside)
  _stage(out, overwrite=True)
  assert _tree(outside) == {'saved_model.pb': b'precious'}
  assert (out / 'saved_model' / 'saved_model.pb').read_text() == 'new'
  assert not (out / 'saved_model').is_symlink()


def test_a_directory_destination_that_is_a_file_is_one_error(tmp_path):
  (tmp_path / 'export').write_text('a file')
  with pytest.raises(errors.UserInputError, match='is a file'):
    _stage(tmp_path / 'export' / 'sub', overwrite=True)


def test_a_failed_staging_leaves_no_new_folder(tmp_path):
  with pytest.raises(RuntimeError):
    _stage(tmp_path / 'new' / 'export', overwrite=False, fail=True)
  assert os.listdir(tmp_path) == []


class _Killed(BaseException):
  """Stands for a SIGKILL: nothing in file_safety catches a BaseException
  raised in the move into place, so no cleanup runs, as after a kill."""


@pytest.mark.parametrize('kill_at', [1, 2, 3, 4])
def test_a_move_into_place_killed_midway_is_completed_next_time(
    tmp_path, monkeypatch, kill_at):
  _stage(tmp_path, overwrite=False, content='old')
  renames, rename = [], os.rename

  def dying_rename(*args):
    renames.append(args)
    if len(renames) == kill_at:
      raise _Killed()
    rename(*args)
  with monkeypatch.context() as patch:
    patch.setattr(os, 'rename', dying_rename)
    with pytest.raises(_Killed):
      _stage(tmp_path, overwrite=True)
  # Old and new are both whole, one of them in a hidden folder.
  assert sorted(value for value in _tree(tmp_path).values()
                if isinstance(value, bytes)) == [b'new'] * 2 + [b'old'] * 2
  # The next run completes the interrupted move, though it fails itself.
  with pytest.raises(RuntimeError):
    _stage(tmp_path, overwrite=True, content='third', fail=True)
  assert _tree(tmp_path) == {'a.pb': b'new',
                             'saved_model/saved_model.pb': b'new'}


def _write_url(path, content):
  with file_safety.replacing(path) as f:
    f.write(content)


def _read_url(path):
  with tf.io.gfile.GFile(path) as f:
    return f.read()


def test_staged_outputs_on_an_object_store_write_in_place(tmp_path):
  """No rename there: old outputs go (with overwrite) before new are written."""
  directory = 'ram://%s/export' % tmp_path.name
  tf.io.gfile.makedirs(directory + '/saved_model')
  _write_url(directory + '/saved_model/saved_model.pb', 'old')
  _write_url(directory + '/a.pb', 'old')
  _write_url(directory + '/notes.txt', 'mine')
  with pytest.raises(errors.UserInputError, match='a.pb, saved_model.*--overwrite.*removed before'):
    _stage(directory, overwrite=False)
  assert _read_url(directory + '/a.pb') == 'old'
  with file_safety.staged_outputs(directory, ['saved_model', 'a.pb'], True,
                                  '--output_directory') as staging:
    assert staging == directory
    assert sorted(tf.io.gfile.listdir(directory)) == ['notes.txt']
    _write_url(directory + '/a.pb', 'new')
  assert _read_url(directory + '/a.pb') == 'new'


def _write_shards(prefix, records, fail=False):
  with dataset_util.open_sharded_output_tfrecords(prefix, 2) as writers:
    for index, record in enumerate(records):
      writers[index % 2].write(record)
    if fail:
      raise RuntimeError('conversion failed')


def _read_shards(prefix):
  return [list(tf.data.TFRecordDataset(name).as_numpy_iterator())
          for name in dataset_util.sharded_filenames(prefix, 2)]


def test_a_failed_conversion_keeps_the_earlier_shards(tmp_path):
  prefix = str(tmp_path / 'train.record')
  _write_shards(prefix, [b'a', b'b', b'c'])
  before = _tree(tmp_path)
  with pytest.raises(RuntimeError):
    _write_shards(prefix, [b'x', b'y'], fail=True)
  assert _tree(tmp_path) == before
  _write_shards(prefix, [b'x', b'y'])
  assert _read_shards(prefix) == [[b'x'], [b'y']]
  assert len(os.listdir(tmp_path)) == 2


def test_a_linked_shard_is_replaced_not_written_through(tmp_path):
  elsewhere = tmp_path / 'elsewhere.record'
  elsewhere.write_bytes(b'precious')
  (tmp_path / 'out').mkdir()
  prefix = str(tmp_path / 'out' / 'train.record')
  os.symlink(str(elsewhere), dataset_util.sharded_filenames(prefix, 2)[0])
  _write_shards(prefix, [b'x', b'y'])
  assert elsewhere.read_bytes() == b'precious'
  assert _read_shards(prefix) == [[b'x'], [b'y']]
