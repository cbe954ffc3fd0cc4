"""Tests for the COCO Camera Traps Beam pipeline (DirectRunner)."""
import glob
import hashlib
import json
import logging
import re
import sys

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.dataset_tools.context_rcnn import (
    create_cococameratraps_tfexample_main as cct)
from tests.command_modules import run_command

pytest.importorskip('apache_beam')

_TOOL = 'dataset_tools.context_rcnn.create_cococameratraps_tfexample_main'
_CATEGORIES = [{'id': 0, 'name': 'empty'}, {'id': 1, 'name': 'deer'},
               {'id': 2, 'name': 'fox'}]


def _image(image_id, file_name, width=64, height=48, frame_num=0):
  return {'id': image_id, 'file_name': file_name, 'width': width,
          'height': height, 'location': 'loc1', 'seq_id': 'seq1',
          'seq_num_frames': 4, 'frame_num': frame_num,
          'date_captured': '2020-01-01 01:0%d:00' % frame_num}


def _dataset():
  """Five images: boxes, a PNG, none, a missing file, an image label."""
  images = [_image('a', 'a.jpg'), _image('b', 'b.png', frame_num=1),
            _image('c', 'c.jpg', frame_num=2),
            _image('missing', 'nowhere.jpg', frame_num=3),
            _image(7, 'e.jpg', width=32, height=32)]
  images[-1].update(seq_id='seq2', seq_num_frames=1, location=3)
  annotations = [
      {'id': 1, 'image_id': 'a', 'category_id': 1, 'bbox': [8, 12, 16, 24]},
      # An image-level label: its class, no box.
      {'id': 2, 'image_id': 'a', 'category_id': 2},
      {'id': 3, 'image_id': 'b', 'category_id': 2, 'bbox': [0, 0, 32, 48],
       'area': 99.0},
      # Beyond the right edge: left out with its class.
      {'id': 4, 'image_id': 'b', 'category_id': 1, 'bbox': [60, 0, 8, 8]},
      {'id': 5, 'image_id': 7, 'category_id': 0},
  ]
  return {'images': images, 'annotations': annotations,
          'categories': _CATEGORIES}


def _write_tree(root, data):
  image_dir = root / 'images'
  image_dir.mkdir()
  rng = np.random.default_rng(0)
  for image in data['images']:
    if image['file_name'] == 'nowhere.jpg':
      continue
    pixels = rng.integers(0, 255, [image['height'], image['width'], 3],
                          np.uint8)
    Image.fromarray(pixels).save(str(image_dir / image['file_name']))
  annotations_file = root / 'annotations.json'
  annotations_file.write_text(json.dumps(data))
  return str(image_dir), str(annotations_file)


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """One DirectRunner run: (result, examples by source id, image dir)."""
  root = tmp_path_factory.mktemp('cct')
  image_dir, annotations_file = _write_tree(root, _dataset())
  prefix = str(root / 'out' / 'cct.record')
  warnings = []
  handler = logging.Handler(logging.WARNING)
  handler.emit = lambda record: warnings.append(record.getMessage())
  logging.getLogger(cct.__name__).addHandler(handler)
  try:
    result = run_command(_TOOL, [
        '--image_directory', image_dir, '--input_annotations_file',
        annotations_file, '--output_tfrecord_prefix', prefix,
        '--num_images_per_shard', '2', '--alsologtostderr',
        '--runner=DirectRunner'])
  finally:
    logging.getLogger(cct.__name__).removeHandler(handler)
  shards = sorted(glob.glob(prefix + '-*'))
  examples = {}
  for shard in shards:
    for record in tf.data.TFRecordDataset(shard).as_numpy_iterator():
      example = tf.train.Example.FromString(record)
      source_id = example.features.feature[
          'image/source_id'].bytes_list.value[0].decode()
      examples[source_id] = example
  return result, shards, examples, image_dir, warnings


def _values(example, key):
  feature = example.features.feature[key]
  return list(getattr(feature, feature.WhichOneof('kind')).value)


def test_writes_one_example_per_readable_image_in_shards(converted):
  result, shards, examples, _, warnings = converted
  assert result.returncode == 0, result.stderr[-3000:]
  # ceil(5 images / 2 per shard) shards, with Beam's (the original's) names.
  assert [s[-len('-00000-of-00003'):] for s in shards] == [
      '-%05d-of-00003' % i for i in range(3)]
  assert sorted(examples) == ['7', 'a', 'b', 'c']
  assert 'wrote 4 tf.Example(s)' in result.stdout
  assert 'left out 1 image(s)' in result.stdout
  assert 'and 1 box(es)' in result.stdout
  # The left-out file is logged by name.
  assert [w for w in warnings if 'nowhere.jpg' in w]


def test_camera_trap_fields(converted):
  _, _, examples, image_dir, _ = converted
  a = examples['a']
  with open(image_dir + '/a.jpg', 'rb') as f:
    encoded = f.read()
  assert _values(a, 'image/encoded') == [encoded]
  assert _values(a, 'image/key/sha256') == [
      hashlib.sha256(encoded).hexdigest().encode()]
  assert _values(a, 'image/format') == [b'jpeg']
  assert _values(a, 'image/filename') == [b'a.jpg']
  assert _values(a, 'image/height') == [48]
  assert _values(a, 'image/width') == [64]
  assert _values(a, 'image/location') == [b'loc1']
  assert _values(a, 'image/seq_id') == [b'seq1']
  assert _values(a, 'image/seq_num_frames') == [4]
  assert _values(a, 'image/seq_frame_num') == [0]
  assert _values(a, 'image/date_captured') == [b'2020-01-01 01:00:00']
  assert _values(examples['b'], 'image/format') == [b'png']
  assert _values(examples['b'], 'image/seq_frame_num') == [1]
  # Integer ids and locations are written as text.
  assert _values(examples['7'], 'image/location') == [b'3']


def test_boxes_and_classes_as_the_original(converted):
  _, _, examples, _, _ = converted
  a, b = examples['a'], examples['b']
  np.testing.assert_allclose(_values(a, 'image/object/bbox/xmin'), [0.125])
  np.testing.assert_allclose(_values(a, 'image/object/bbox/xmax'), [0.375])
  np.testing.assert_allclose(_values(a, 'image/object/bbox/ymin'), [0.25])
  np.testing.assert_allclose(_values(a, 'image/object/bbox/ymax'), [0.75])
  # The image-level label keeps its class without a box.
  assert _values(a, 'image/object/class/label') == [1, 2]
  assert _values(a, 'image/object/class/text') == [b'deer', b'fox']
  np.testing.assert_allclose(_values(a, 'image/object/area'), [16 * 24 / 2])
  assert _values(a, 'image/class/label') == [1]
  assert _values(a, 'image/class/text') == [b'deer']
  # The box beyond the edge goes with its class; the given area is kept.
  assert _values(b, 'image/object/class/label') == [2]
  np.testing.assert_allclose(_values(b, 'image/object/area'), [99.0])
  # No annotation: the 'empty' image class and no objects.
  c = examples['c']
  assert _values(c, 'image/class/label') == [0]
  assert _values(c, 'image/class/text') == [b'empty']
  assert not _values(c, 'image/object/bbox/xmin')
  assert 'image/object/class/label' not in c.features.feature
  # An image-level label only: classes, no boxes.
  assert _values(examples['7'], 'image/object/class/label') == [0]
  assert not _values(examples['7'], 'image/object/bbox/xmin')


def test_our_decoder_reads_the_output(converted):
  _, _, examples, _, _ = converted
  decoder = tf_example_decoder.TfExampleDecoder()
  values = tf.nest.map_structure(lambda t: t.numpy(), decoder.decode(
      tf.constant(examples['b'].SerializeToString())))
  assert values[fields.InputDataFields.image].shape == (48, 64, 3)
  np.testing.assert_allclose(
      values[fields.InputDataFields.groundtruth_boxes], [[0, 0, 1, 0.5]])
  assert list(values[fields.InputDataFields.groundtruth_classes]) == [2]


def _run_on(tmp_path, data=None, annotations_file=None, extra=()):
  image_dir = str(tmp_path)
  if data is not None:
    annotations_file = tmp_path / 'annotations.json'
    annotations_file.write_text(json.dumps(data))
  return run_command(_TOOL, [
      '--image_directory', image_dir, '--input_annotations_file',
      str(annotations_file), '--output_tfrecord_prefix',
      str(tmp_path / 'out' / 'x')] + list(extra))


def _error_lines(result):
  return [line for line in result.stderr.splitlines()
          if line.startswith('error:')]


def test_missing_annotations_file_is_one_line(tmp_path):
  result = _run_on(tmp_path, annotations_file=tmp_path / 'none.json')
  assert result.returncode == 1
  assert len(_error_lines(result)) == 1
  assert 'annotations file' in result.stderr
  assert 'none.json' in result.stderr
  assert 'Traceback' not in result.stderr


def test_unusable_annotations_are_named_before_the_pipeline(tmp_path):
  data = _dataset()
  del data['images'][1]['seq_id']
  data['annotations'][0]['category_id'] = 42
  data['annotations'][2]['image_id'] = 'nope'
  result = _run_on(tmp_path, data)
  assert result.returncode == 1
  lines = _error_lines(result)
  assert len(lines) == 3, result.stderr
  assert "images[1] (id 'b') lacks seq_id" in lines[0]
  assert 'category_id 42' in result.stderr
  assert "image_id 'nope'" in result.stderr
  assert not (tmp_path / 'out').exists() or not list(
      (tmp_path / 'out').iterdir())


def test_no_images_is_an_error(tmp_path):
  result = _run_on(tmp_path, {'images': [], 'annotations': [],
                              'categories': []})
  assert result.returncode == 1
  assert 'lists no images' in result.stderr


def test_unknown_flag_is_refused(tmp_path):
  result = _run_on(tmp_path, _dataset(), extra=[
      '--num_image_per_shard=3', '--runner=DirectRunner'])
  assert result.returncode == 1
  assert _error_lines(result) == [
      'error: unknown flag --num_image_per_shard: neither a flag of this tool '
      'nor an Apache Beam pipeline option of --runner=DirectRunner; see '
      '--help for the tool\'s flags']


def test_bad_shard_size_is_refused(tmp_path):
  result = _run_on(tmp_path, _dataset(), extra=['--num_images_per_shard=0'])
  assert result.returncode == 2
  assert 'must be at least 1' in result.stderr


def test_without_beam_one_line_names_the_extra(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, 'apache_beam', None)
  result = _run_on(tmp_path, _dataset())
  assert result.returncode == 1
  lines = _error_lines(result)
  assert lines == [line for line in result.stderr.splitlines()
                   if line.strip()]
  assert re.fullmatch(
      r'error: Apache Beam is not installed \(.+\); this tool is a Beam '
      r'pipeline: pip install od_estimator\[beam\]', lines[0]), lines


@pytest.mark.parametrize('tool', [_TOOL, 'dataset_tools.context_rcnn.'
                                  'add_context_to_examples'])
def test_help_needs_no_beam(tool, monkeypatch):
  monkeypatch.setitem(sys.modules, 'apache_beam', None)
  result = run_command(tool, ['--help'])
  assert result.returncode == 0
  assert 'Apache Beam pipeline options (--runner=...)' in result.stdout
