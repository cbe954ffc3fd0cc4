"""Tests for od_estimator.dataset_tools.create_pascal_tf_record."""
import os
import xml.etree.ElementTree as ElementTree

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.dataset_tools import create_pascal_tf_record as pascal
from tests.command_modules import run_command

# The VOC ids of these classes in the original's pascal_label_map.pbtxt.
_LABEL_MAP = """
item { id: 1 name: 'aeroplane' }
item { id: 12 name: 'dog' }
item { id: 15 name: 'person' }
"""


def _object_xml(name, box, pose='Unspecified', truncated=0, difficult=0):
  xmin, ymin, xmax, ymax = box
  return ('<object><name>%s</name><pose>%s</pose><truncated>%d</truncated>'
          '<difficult>%d</difficult><bndbox><xmin>%s</xmin><ymin>%s</ymin>'
          '<xmax>%s</xmax><ymax>%s</ymax></bndbox></object>' % (
              name, pose, truncated, difficult, xmin, ymin, xmax, ymax))


def _add_image(year_dir, image_id, width, height, objects):
  Image.fromarray(np.full([height, width, 3], 90, np.uint8)).save(
      str(year_dir / 'JPEGImages' / (image_id + '.jpg')), format='JPEG')
  (year_dir / 'Annotations' / (image_id + '.xml')).write_text(
      '<annotation><folder>%s</folder><filename>%s.jpg</filename>'
      '<size><width>%d</width><height>%d</height><depth>3</depth></size>'
      '<segmented>0</segmented>%s</annotation>' % (
          year_dir.name, image_id, width, height, ''.join(objects)))


def _make_voc_tree(root):
  """VOC2007 with images 000001 (50x40) and 000002 (20x10) in `train`."""
  year_dir = root / 'VOCdevkit' / 'VOC2007'
  for sub in ('Annotations', 'JPEGImages', 'ImageSets/Main'):
    (year_dir / sub).mkdir(parents=True)
  _add_image(year_dir, '000001', 50, 40, [
      _object_xml('dog', (5, 4, 25, 20), pose='Left', truncated=1),
      _object_xml('person', (10, 8, 50, 40), pose='Frontal', difficult=1)])
  _add_image(year_dir, '000002', 20, 10, [
      _object_xml('aeroplane', (2, 1, 18, 9))])
  # VOC lists every image of a set in each class file, with a +-1 flag.
  (year_dir / 'ImageSets/Main/aeroplane_train.txt').write_text(
      '000001 -1\n000002  1\n')
  (year_dir / 'ImageSets/Main/aeroplane_val.txt').write_text('000002  1\n')
  label_map = root / 'pascal_label_map.pbtxt'
  label_map.write_text(_LABEL_MAP)
  return str(root / 'VOCdevkit'), str(label_map)


def _read(path):
  return [tf.train.Example.FromString(r.numpy()).features.feature
          for r in tf.data.TFRecordDataset(path)]


def _box(feature):
  """[N, 4] ymin, xmin, ymax, xmax."""
  return np.stack([np.array(feature['image/object/bbox/' + k].float_list.value)
                   for k in ('ymin', 'xmin', 'ymax', 'xmax')], axis=-1)


def _ints(feature, key):
  return list(feature[key].int64_list.value)


def _bytes(feature, key):
  return list(feature[key].bytes_list.value)


def test_cli_writes_voc_examples(tmp_path):
  data_dir, label_map = _make_voc_tree(tmp_path)
  output = tmp_path / 'out' / 'pascal_train.record'
  result = run_command('dataset_tools.create_pascal_tf_record', [
      '--data_dir', data_dir, '--set', 'train', '--year', 'VOC2007',
      '--output_path', str(output), '--label_map_path', label_map])
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'wrote 2 images and 3 objects' in result.stdout

  first, second = _read(str(output))
  assert _ints(first, 'image/height') == [40]
  assert _ints(first, 'image/width') == [50]
  assert _bytes(first, 'image/filename') == [b'000001.jpg']
  assert _bytes(first, 'image/source_id') == [b'000001.jpg']
  assert _bytes(first, 'image/format') == [b'jpeg']
  assert len(_bytes(first, 'image/key/sha256')[0]) == 64
  # dog: x 5..25 of 50, y 4..20 of 40; person: x 10..50, y 8..40.
  np.testing.assert_allclose(_box(first), [[4 / 40, 5 / 50, 20 / 40, 25 / 50],
                                           [8 / 40, 10 / 50, 1.0, 1.0]],
                             rtol=1e-6)
  assert _ints(first, 'image/object/class/label') == [12, 15]
  assert _bytes(first, 'image/object/class/text') == [b'dog', b'person']
  assert _ints(first, 'image/object/difficult') == [0, 1]
  assert _ints(first, 'image/object/truncated') == [1, 0]
  assert _bytes(first, 'image/object/view') == [b'Left', b'Frontal']

  # aeroplane: x 2..18 of 20, y 1..9 of 10.
  np.testing.assert_allclose(_box(second), [[0.1, 0.1, 0.9, 0.9]], rtol=1e-6)
  assert _ints(second, 'image/object/class/label') == [1]
  assert _ints(second, 'image/object/difficult') == [0]


def test_ignore_difficult_instances(tmp_path):
  data_dir, label_map = _make_voc_tree(tmp_path)
  output = str(tmp_path / 'easy.record')
  pascal.main(['--data_dir', data_dir, '--output_path', output,
               '--label_map_path', label_map, '--ignore_difficult_instances'])
  first, second = _read(output)
  # The difficult person of image 000001 is dropped, the dog kept.
  assert _ints(first, 'image/object/class/label') == [12]
  assert _ints(first, 'image/object/difficult') == [0]
  np.testing.assert_allclose(_box(first), [[0.1, 0.1, 0.5, 0.5]], rtol=1e-6)
  assert _ints(second, 'image/object/class/label') == [1]


def test_val_set_and_merged_years(tmp_path):
  data_dir, label_map = _make_voc_tree(tmp_path)
  output = str(tmp_path / 'val.record')
  pascal.main(['--data_dir', data_dir, '--set', 'val', '--output_path',
               output, '--label_map_path', label_map])
  assert [_bytes(f, 'image/filename') for f in _read(output)] == [
      [b'000002.jpg']]

  # merged reads VOC2007 then VOC2012; images live under their own folder.
  voc2012 = tmp_path / 'VOCdevkit' / 'VOC2012'
  for sub in ('Annotations', 'JPEGImages', 'ImageSets/Main'):
    (voc2012 / sub).mkdir(parents=True)
  _add_image(voc2012, '2008_000003', 16, 16, [])
  (voc2012 / 'ImageSets/Main/aeroplane_val.txt').write_text(
      '2008_000003 -1\n\n')
  pascal.main(['--data_dir', data_dir, '--set', 'val', '--year', 'merged',
               '--output_path', output, '--label_map_path', label_map])
  examples = _read(output)
  assert [_bytes(f, 'image/filename') for f in examples] == [
      [b'000002.jpg'], [b'2008_000003.jpg']]
  # An image without objects gives empty lists.
  assert _box(examples[1]).shape == (0, 4)


def test_bad_flags(tmp_path, capsys):
  with pytest.raises(SystemExit):
    pascal.main(['--set', 'testing', '--output_path', str(tmp_path / 'x')])
  assert 'testing' in capsys.readouterr().err
  with pytest.raises(SystemExit):
    pascal.main(['--year', 'VOC2010', '--output_path', str(tmp_path / 'x')])
  assert 'VOC2010' in capsys.readouterr().err


def test_unknown_class_and_non_jpeg(tmp_path):
  data_dir, _ = _make_voc_tree(tmp_path)
  data = {'folder': 'VOC2007', 'filename': '000002.jpg',
          'size': {'width': '20', 'height': '10'},
          'object': [{'name': 'cow', 'pose': 'Left', 'truncated': '0',
                      'difficult': '0', 'bndbox': {'xmin': '1', 'ymin': '1',
                                                   'xmax': '2', 'ymax': '2'}}]}
  with pytest.raises(ValueError, match='cow'):
    pascal.dict_to_tf_example(data, data_dir, {'dog': 12})
  png = os.path.join(data_dir, 'VOC2007', 'JPEGImages', 'p.jpg')
  Image.fromarray(np.zeros([4, 4, 3], np.uint8)).save(png, format='PNG')
  with pytest.raises(ValueError, match='not a JPEG'):
    pascal.dict_to_tf_example(dict(data, filename='p.jpg', object=[]),
                              data_dir, {'dog': 12})


def test_missing_optional_object_tags_default(tmp_path):
  data_dir, _ = _make_voc_tree(tmp_path)
  # Objects without difficult/truncated/pose tags (seen in VOC2012).
  xml = ElementTree.fromstring(
      '<annotation><folder>VOC2007</folder><filename>000002.jpg</filename>'
      '<size><width>20</width><height>10</height></size>'
      '<object><name>dog</name><bndbox><xmin>0</xmin><ymin>5</ymin>'
      '<xmax>10</xmax><ymax>10</ymax></bndbox></object></annotation>')
  data = pascal.recursive_parse_xml_to_dict(xml)['annotation']
  # A single object still parses to a list.
  assert isinstance(data['object'], list) and len(data['object']) == 1
  feature = pascal.dict_to_tf_example(data, data_dir, {'dog': 12}).features
  feature = feature.feature
  assert _ints(feature, 'image/object/difficult') == [0]
  assert _ints(feature, 'image/object/truncated') == [0]
  assert _bytes(feature, 'image/object/view') == [b'Unspecified']
  # x 0..10 of 20, y 5..10 of 10.
  np.testing.assert_allclose(_box(feature), [[0.5, 0.0, 1.0, 0.5]])


def test_read_examples_list(tmp_path):
  path = tmp_path / 'list.txt'
  path.write_text('000005 -1\n000007  1\n\n2008_000001 0\n')
  assert pascal.read_examples_list(str(path)) == [
      '000005', '000007', '2008_000001']


def test_original_logging_flags_are_accepted(tmp_path):
  data_dir, label_map = _make_voc_tree(tmp_path)
  output = str(tmp_path / 'logged.record')
  assert pascal.main(['--logtostderr', '--alsologtostderr=true',
                      '--data_dir', data_dir, '--output_path', output,
                      '--label_map_path', label_map]) == 0
  assert len(_read(output)) == 2


@pytest.mark.parametrize('damage', ['missing', 'not_an_image'])
def test_bad_image_is_one_line_naming_it(tmp_path, capsys, damage):
  data_dir, label_map = _make_voc_tree(tmp_path)
  image = os.path.join(data_dir, 'VOC2007', 'JPEGImages', '000002.jpg')
  os.remove(image)
  if damage == 'not_an_image':
    with open(image, 'w') as f:
      f.write('<html>not found</html>')
  with pytest.raises(SystemExit) as raised:
    pascal.main(['--data_dir', data_dir, '--output_path',
                 str(tmp_path / 'x.record'), '--label_map_path', label_map])
  err = capsys.readouterr().err
  assert raised.value.code == 1
  assert err.count('\n') == 1 and err.startswith('error: ')
  assert image in err


def test_dict_to_tf_example_as_the_originals_users_call_it(tmp_path):
  # A hand-made dict: numbers as ints, no folder, an empty pose.
  Image.fromarray(np.zeros([256, 256, 3], np.uint8)).save(
      str(tmp_path / 'tmp_image.jpg'))
  data = {
      'folder': '', 'filename': 'tmp_image.jpg',
      'size': {'height': 256, 'width': 256},
      'object': [{'difficult': 1, 'truncated': 0, 'pose': '',
                  'name': 'person', 'bndbox': {'xmin': 64, 'ymin': 64,
                                               'xmax': 192, 'ymax': 192}}],
  }
  feature = pascal.dict_to_tf_example(
      data, str(tmp_path), {'background': 0, 'person': 1, 'notperson': 2},
      image_subdirectory='').features.feature
  assert _bytes(feature, 'image/object/view') == [b'']
  assert _bytes(feature, 'image/source_id') == [b'tmp_image.jpg']
  assert _ints(feature, 'image/object/difficult') == [1]
  assert _ints(feature, 'image/object/class/label') == [1]
  np.testing.assert_allclose(_box(feature), [[0.25, 0.25, 0.75, 0.75]])
  # An empty <pose/> element (text None) is empty too.
  xml = ElementTree.fromstring(
      '<annotation><folder></folder><filename>tmp_image.jpg</filename>'
      '<size><width>256</width><height>256</height></size><object>'
      '<name>person</name><pose/><truncated>0</truncated><difficult>0'
      '</difficult><bndbox><xmin>0</xmin><ymin>0</ymin><xmax>8</xmax>'
      '<ymax>8</ymax></bndbox></object></annotation>')
  data = pascal.recursive_parse_xml_to_dict(xml)['annotation']
  feature = pascal.dict_to_tf_example(data, str(tmp_path), {'person': 1},
                                      image_subdirectory='').features.feature
  assert _bytes(feature, 'image/object/view') == [b'']
