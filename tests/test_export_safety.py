"""Exports and detect never lose a model nor touch files outside their folder.

Faults are injected for real: symbolic links to folders and files elsewhere,
an export killed with SIGKILL while it writes, output paths that are files.
A checksum of every pre-existing file is compared before and after. The
model is the one-step tiny SSD of tests/trained_models.py and its export
(its as-run pipeline.config); each test works on a copy of that export.
"""
import glob
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import detect
from od_estimator.export import exporter
from od_estimator.utils import file_safety
from tests import file_trees
from tests import plain_command
from tests.command_modules import import_command

export_inference_graph = import_command('export_inference_graph')
export_tflite_ssd_graph = import_command('export_tflite_ssd_graph')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIDDEN = ('.od_estimator-',)  # file_safety's temporary and staging entries


_tree = file_trees.tree


def _visible(tree):
  return {key: value for key, value in tree.items()
          if not key.startswith(HIDDEN)}


def _export_flags(checkpoint, config, output_directory, overwrite=False):
  """Every flag of the command: absl keeps values between in-process runs."""
  return ['--input_type=image_tensor', '--input_shape=',
          '--pipeline_config_path=' + config,
          '--trained_checkpoint_prefix=' + checkpoint,
          '--output_directory=' + str(output_directory),
          '--config_override=', '--nowrite_inference_graph',
          '--additional_output_tensor_names=', '--nouse_side_inputs',
          '--overwrite' if overwrite else '--nooverwrite']


@pytest.fixture(scope='module')
def trained(one_step_tiny_ssd, one_step_tiny_ssd_export):
  """(checkpoint directory, as-run config, label map, an export of it)."""
  root, _, model_dir = one_step_tiny_ssd
  label_map, = glob.glob(os.path.join(str(root), 'data', '*label_map*'))
  return {'checkpoint': model_dir,
          'config': os.path.join(model_dir, 'pipeline.config'),
          'label_map': label_map, 'export': one_step_tiny_ssd_export}


def _succeeds(main, *args, **kwargs):
  """Runs a command's main in process: absl exits with status None or 0."""
  with pytest.raises(SystemExit) as raised:
    main(*args, **kwargs)
  assert not raised.value.code


def _copy_of_export(trained, tmp_path):
  directory = str(tmp_path / 'export')
  shutil.copytree(trained['export'], directory, symlinks=True)
  return directory


def _export(trained, output_directory, overwrite=False):
  export_inference_graph.main(_export_flags(
      trained['checkpoint'], trained['config'], output_directory, overwrite))


def _one_error_line(capsys, run):
  """Runs `run`; returns its single `error:` line (exit status 1)."""
  with pytest.raises(SystemExit) as raised:
    run()
  err = capsys.readouterr().err
  assert raised.value.code == 1, err
  assert 'Traceback' not in err, err
  lines = [line for line in err.splitlines() if 'error:' in line]
  assert len(lines) == 1, err
  return lines[0]


def _assert_serves(export_dir):
  """The export's SavedModel loads in a TF1 session and detects."""
  with tf.Graph().as_default() as graph:
    with tf.compat.v1.Session(graph=graph) as sess:
      meta_graph = tf.compat.v1.saved_model.loader.load(
          sess, ['serve'], os.path.join(export_dir, 'saved_model'))
      signature = meta_graph.signature_def['serving_default']
      boxes = sess.run(signature.outputs['detection_boxes'].name, {
          signature.inputs['inputs'].name: np.zeros([1, 64, 64, 3],
                                                    np.uint8)})
  assert boxes.shape[0] == 1 and boxes.shape[2] == 4


def _outside_folder(tmp_path):
  """A folder elsewhere holding a SavedModel-like file; returns its path."""
  outside = tmp_path / 'elsewhere'
  outside.mkdir()
  (outside / 'saved_model.pb').write_bytes(b'another model')
  (outside / 'variables').mkdir()
  (outside / 'variables' / 'variables.index').write_bytes(b'its weights')
  return outside


def test_reexport_without_overwrite_refuses_and_changes_nothing(
    trained, tmp_path, capsys):
  directory = _copy_of_export(trained, tmp_path)
  before = _tree(directory)
  line = _one_error_line(capsys, lambda: _export(trained, directory))
  assert line.startswith('error: --output_directory=%s already holds ' %
                         directory)
  assert 'frozen_inference_graph.pb' in line and '--overwrite' in line
  assert _tree(directory) == before


def test_saved_model_linked_elsewhere_without_overwrite(trained, tmp_path,
                                                       capsys):
  outside = _outside_folder(tmp_path)
  directory = str(tmp_path / 'export')
  os.mkdir(directory)
  os.symlink(str(outside), os.path.join(directory, 'saved_model'))
  before_outside, before = _tree(str(outside)), _tree(directory)
  line = _one_error_line(capsys, lambda: _export(trained, directory))
  assert 'already holds saved_model' in line
  assert _tree(str(outside)) == before_outside
  assert _tree(directory) == before


def test_write_saved_model_replaces_a_link_without_following_it(tmp_path):
  """The library function, as the export used it before staging."""
  outside = _outside_folder(tmp_path)
  before_outside = _tree(str(outside))
  path = tmp_path / 'export' / 'saved_model'
  path.parent.mkdir()
  path.symlink_to(outside)
  with tf.Graph().as_default() as graph:
    inputs = tf.compat.v1.placeholder(tf.float32, [None], name='x')
    outputs = {'y': tf.identity(inputs * 2.0, name='y')}
  exporter.write_saved_model(str(path), graph.as_graph_def(), inputs, outputs)
  assert _tree(str(outside)) == before_outside
  assert not path.is_symlink()
  assert os.listdir(str(path.parent)) == ['saved_model']
  served = tf.saved_model.load(str(path)).signatures['serving_default']
  np.testing.assert_allclose(served(inputs=tf.constant([1.5]))['y'], [3.0])


def _snapshot(directory):
  """{relative path: (inode, size, mtime)} of the files under directory."""
  found = {}
  for folder, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(folder, name)
      stat = os.lstat(path)
      found[os.path.relpath(path, directory)] = (
          stat.st_ino, stat.st_size, stat.st_mtime_ns)
  return found


def _wait_for_writes(directory, process, timeout=300):
  """Returns once a file under directory is new or changed (the export
  has started writing), or fails when the process ends first."""
  start = _snapshot(directory)
  deadline = time.time() + timeout
  while _snapshot(directory) == start:
    assert process.poll() is None, 'the export ended before writing'
    assert time.time() < deadline, 'the export wrote nothing'
    time.sleep(0.02)


def _break_export(directory, outside):
  """Links an export's entries elsewhere, leaves a stale entry, edits its
  config and adds the user's own file."""
  shutil.rmtree(os.path.join(directory, 'saved_model'))
  os.symlink(str(outside), os.path.join(directory, 'saved_model'))
  os.remove(os.path.join(directory, 'frozen_inference_graph.pb'))
  os.symlink(str(outside / 'saved_model.pb'),
             os.path.join(directory, 'frozen_inference_graph.pb'))
  # Entries of the old export the new one does not write go too.
  with open(os.path.join(directory, 'inference_graph.pbtxt'), 'w') as f:
    f.write('stale')
  with open(os.path.join(directory, 'pipeline.config'), 'a') as f:
    f.write('# edited by hand\n')
  with open(os.path.join(directory, 'notes.txt'), 'w') as f:
    f.write('mine')


def test_export_killed_midway_leaves_the_previous_one_and_reexport_with_overwrite_keeps_the_rest(
    trained, tmp_path):
  """A SIGKILL'd export leaves the previous one whole; the relaunch with
  --overwrite clears what the killed one left and replaces the export:
  links are replaced, never followed; the user's own files stay. (One
  relaunch checks both.)"""
  directory = _copy_of_export(trained, tmp_path)
  before = _tree(directory)
  process = subprocess.Popen(
      plain_command.command('od_estimator.export_inference_graph') +
      _export_flags(trained['checkpoint'], trained['config'], directory,
                    overwrite=True),
      cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    _wait_for_writes(directory, process)
  finally:
    process.send_signal(signal.SIGKILL)
    process.wait()
  assert process.returncode == -signal.SIGKILL
  assert _visible(_tree(directory)) == before
  _assert_serves(directory)
  # The relaunch, onto the killed one's leftovers and a broken export.
  outside = _outside_folder(tmp_path)
  _break_export(directory, outside)
  before_outside = _tree(str(outside))
  _succeeds(_export, trained, directory, overwrite=True)
  assert _tree(str(outside)) == before_outside
  assert set(_tree(directory)) == set(before) | {'notes.txt'}
  assert set(before) == set(_tree(trained['export']))
  assert not os.path.islink(os.path.join(directory, 'saved_model'))
  assert not os.path.islink(
      os.path.join(directory, 'frozen_inference_graph.pb'))
  with open(os.path.join(directory, 'pipeline.config')) as f:
    assert '# edited by hand' not in f.read()
  with open(os.path.join(directory, 'notes.txt')) as f:
    assert f.read() == 'mine'
  _assert_serves(directory)


def test_export_output_directory_that_is_a_file(trained, tmp_path, capsys):
  path = tmp_path / 'some_file'
  path.write_text('keep me')
  line = _one_error_line(capsys, lambda: _export(trained, str(path)))
  assert line == ('error: --output_directory=%s: %s is a file, not a '
                  'directory. Choose another directory.' % (path, path))
  line = _one_error_line(capsys, lambda: _export(trained,
                                                 str(path / 'export')))
  assert 'is a file, not a directory' in line
  assert path.read_text() == 'keep me'
  assert os.listdir(tmp_path) == ['some_file']


def _tflite_flags(trained, output_directory):
  return ['--output_directory=' + str(output_directory),
          '--pipeline_config_path=' + trained['config'],
          '--trained_checkpoint_prefix=' + trained['checkpoint'],
          '--config_override=', '--add_postprocessing_op',
          '--nouse_regular_nms', '--max_detections=10',
          '--max_classes_per_detection=1', '--detections_per_class=100',
          '--noconvert', '--nopost_training_quantize',
          '--representative_examples=100']


def test_tflite_output_directory_that_is_a_file(trained, tmp_path, capsys):
  path = tmp_path / 'some_file'
  path.write_text('keep me')
  line = _one_error_line(capsys, lambda: export_tflite_ssd_graph.main(
      _tflite_flags(trained, path)))
  assert line.startswith('error: --output_directory=%s: %s is a file' % (
      path, path))
  assert path.read_text() == 'keep me'
  assert os.listdir(tmp_path) == ['some_file']


def test_tflite_reexport_replaces_links_without_following_them(trained,
                                                               tmp_path):
  """As the original, a re-export replaces the graph files; in one step."""
  outside = tmp_path / 'elsewhere.pb'
  outside.write_bytes(b'another graph')
  directory = tmp_path / 'tflite'
  directory.mkdir()
  (directory / 'tflite_graph.pb').symlink_to(outside)
  (directory / 'tflite_graph.pbtxt').write_text('old text graph')
  (directory / 'detect.tflite').write_bytes(b'converted by the user')
  _succeeds(export_tflite_ssd_graph.main, _tflite_flags(trained, directory))
  assert outside.read_bytes() == b'another graph'
  assert not (directory / 'tflite_graph.pb').is_symlink()
  graph_def = tf.compat.v1.GraphDef.FromString(
      (directory / 'tflite_graph.pb').read_bytes())
  assert 'TFLite_Detection_PostProcess' in {node.op for node in
                                            graph_def.node}
  assert (directory / 'tflite_graph.pbtxt').read_text() != 'old text graph'
  # Without --convert the user's own conversion is left alone.
  assert (directory / 'detect.tflite').read_bytes() == (
      b'converted by the user')
  assert sorted(os.listdir(directory)) == [
      'detect.tflite', 'tflite_graph.pb', 'tflite_graph.pbtxt']


def _detect(trained, output_dir, input_path):
  return detect.main(['--saved_model_dir=' + trained['export'],
                      '--label_map_path=' + trained['label_map'],
                      '--input=' + input_path,
                      '--output_dir=' + str(output_dir)])


@pytest.fixture
def image(tmp_path):
  path = tmp_path / 'images' / '7.png'
  path.parent.mkdir()
  tf.io.write_file(str(path), tf.io.encode_png(
      np.full([64, 64, 3], 128, np.uint8)))
  return str(path)


def test_detect_output_dir_that_is_a_file(trained, tmp_path, image, capsys):
  path = tmp_path / 'some_file'
  path.write_text('keep me')
  assert _detect(trained, path, image) == 1
  err = capsys.readouterr().err
  assert 'Traceback' not in err
  assert err.strip().splitlines() == [
      'od-estimator detect: error: --output_dir=%s: %s is a file, not a '
      'directory. Choose another directory.' % (path, path)]
  assert path.read_text() == 'keep me'


def test_detect_replaces_linked_outputs_without_following_them(
    trained, tmp_path, image):
  outside = tmp_path / 'elsewhere'
  outside.mkdir()
  out = tmp_path / 'out'
  out.mkdir()
  for name in (detect.DETECTIONS_FILE, detect.IMAGE_IDS_FILE,
               '7_detections.png'):
    (outside / name).write_text('precious')
    (out / name).symlink_to(outside / name)
  before = _tree(str(outside))
  assert _detect(trained, out, image) == 0
  assert _tree(str(outside)) == before
  assert not [name for name in os.listdir(out)
              if os.path.islink(os.path.join(out, name)) or
              name.startswith(file_safety.TEMP_PREFIX)]
  assert (out / '7_detections.png').read_bytes().startswith(b'\x89PNG')


def test_export_into_a_training_directory_is_refused_even_with_overwrite(
    trained, tmp_path, capsys):
  """Its `checkpoint` file would be replaced by the export's."""
  directory = tmp_path / 'model'
  shutil.copytree(trained['checkpoint'], str(directory))
  before = _tree(str(directory))
  line = _one_error_line(capsys, lambda: _export(trained, str(directory),
                                                 overwrite=True))
  assert line == (
      'error: --output_directory=%s holds training checkpoints (e.g. '
      'model.ckpt-0.index); an export there would replace their '
      '`checkpoint` file. Export into another directory.' % directory)
  assert _tree(str(directory)) == before
