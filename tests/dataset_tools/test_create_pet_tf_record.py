"""create_pet_tf_record: real pet XMLs, JPEGs and PNG trimaps, read back."""
import glob
import os
import random

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.dataset_tools import create_pet_tf_record as pets

F = fields.InputDataFields
_LABEL_MAP = "item { id: 1 name: 'Abyssinian' }\nitem { id: 2 name: 'pug' }\n"
# Image id -> (height, width, pet rows [y0, y1), pet cols [x0, x1), head box
# xmin, ymin, xmax, ymax in pixels).
_PETS = {
    'Abyssinian_1': (20, 30, (3, 15), (5, 22), (8, 4, 16, 10)),
    'pug_7': (24, 16, (2, 20), (1, 12), (2, 3, 9, 11)),
    'pug_8': (16, 16, (4, 12), (4, 12), (5, 5, 9, 9)),
}


def _trimap(height, width, rows, cols):
  """1 pet, 2 background, 3 a one-pixel boundary ring around the pet."""
  trimap = np.full([height, width], 2, np.uint8)
  trimap[rows[0] - 1:rows[1] + 1, cols[0] - 1:cols[1] + 1] = 3
  trimap[rows[0]:rows[1], cols[0]:cols[1]] = 1
  return trimap


@pytest.fixture
def pet_dir(tmp_path):
  (tmp_path / 'images').mkdir()
  (tmp_path / 'annotations' / 'xmls').mkdir(parents=True)
  (tmp_path / 'annotations' / 'trimaps').mkdir()
  for name, (height, width, rows, cols, head) in _PETS.items():
    image_format = 'PNG' if name == 'pug_8' else 'JPEG'  # as in the dataset
    Image.fromarray(np.full([height, width, 3], 70, np.uint8)).save(
        str(tmp_path / 'images' / (name + '.jpg')), format=image_format)
    Image.fromarray(_trimap(height, width, rows, cols)).save(
        str(tmp_path / 'annotations' / 'trimaps' / (name + '.png')))
    (tmp_path / 'annotations' / 'xmls' / (name + '.xml')).write_text(
        '<annotation><filename>%s.jpg</filename><size><width>%d</width>'
        '<height>%d</height><depth>3</depth></size><object><name>cat</name>'
        '<pose>Frontal</pose><truncated>0</truncated><difficult>0'
        '</difficult><bndbox><xmin>%d</xmin><ymin>%d</ymin><xmax>%d</xmax>'
        '<ymax>%d</ymax></bndbox></object></annotation>' % (
            (name, width, height) + head))
  # pug_9 has no XML: skipped with a warning, as the original.
  (tmp_path / 'annotations' / 'trainval.txt').write_text(
      'Abyssinian_1 1 1 1\npug_7 2 2 1\npug_8 2 2 1\npug_9 2 2 1\n')
  (tmp_path / 'pet_label_map.pbtxt').write_text(_LABEL_MAP)
  return tmp_path


def _read(pattern, mask_type=None):
  """Decoded examples of the shards matching pattern, by filename."""
  decoder = tf_example_decoder.TfExampleDecoder(
      load_instance_masks=mask_type is not None,
      instance_mask_type=mask_type or tf_example_decoder.NUMERICAL_MASKS)
  out = {}
  for path in sorted(glob.glob(pattern)):
    for record in tf.compat.v1.io.tf_record_iterator(path):
      with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        decoded = sess.run(decoder.decode(tf.constant(record)))
      out[decoded[F.filename].decode()] = decoded
  return out


def _main(pet_dir, output_dir, *flags):
  return pets.main(['--data_dir', str(pet_dir), '--output_dir',
                    str(output_dir), '--label_map_path',
                    str(pet_dir / 'pet_label_map.pbtxt'), '--num_shards', '2']
                   + list(flags))


def _expected_split():
  ids = ['Abyssinian_1', 'pug_7', 'pug_8', 'pug_9']
  random.seed(42)
  random.shuffle(ids)
  return ids[:int(0.7 * len(ids))], ids[int(0.7 * len(ids)):]


def test_faces_only_default(pet_dir, tmp_path, capsys):
  assert _main(pet_dir, tmp_path / 'out') == 0
  train, val = _expected_split()
  files = sorted(os.listdir(tmp_path / 'out'))
  assert files == ['pet_faces_%s.record-%05d-of-00002' % (split, shard)
                   for split in ('train', 'val') for shard in (0, 1)]
  examples = _read(str(tmp_path / 'out' / 'pet_faces_*'))
  written = {name for name in _PETS if name != 'pug_8'}  # pug_8 is a PNG
  assert set(examples) == {name + '.jpg' for name in written}
  for name in written:
    height, width, _, _, (xmin, ymin, xmax, ymax) = _PETS[name]
    example = examples[name + '.jpg']
    np.testing.assert_allclose(
        example[F.groundtruth_boxes],
        [[ymin / height, xmin / width, ymax / height, xmax / width]],
        rtol=1e-6)
    label = 1 if name.startswith('Abyssinian') else 2
    np.testing.assert_array_equal(example[F.groundtruth_classes], [label])
  out = capsys.readouterr().out
  skipped = {split: sum(1 for n in ids if n in ('pug_8', 'pug_9'))
             for split, ids in (('train', train), ('val', val))}
  for split in ('train', 'val'):
    assert 'skipped %d' % skipped[split] in out.split(split + ':')[1]


@pytest.mark.parametrize('flag,mask_type', [
    ('png', tf_example_decoder.PNG_MASKS),
    ('numerical', tf_example_decoder.NUMERICAL_MASKS)])
def test_fullbody_with_masks(pet_dir, tmp_path, flag, mask_type):
  assert _main(pet_dir, tmp_path / 'out', '--nofaces_only',
               '--mask_type=' + flag) == 0
  examples = _read(str(tmp_path / 'out' / 'pets_fullbody_with_masks_*'),
                   mask_type)
  assert set(examples) == {'Abyssinian_1.jpg', 'pug_7.jpg'}
  for name in ('Abyssinian_1', 'pug_7'):
    height, width, rows, cols, _ = _PETS[name]
    example = examples[name + '.jpg']
    # Pet and boundary pixels, not background.
    expected = (_trimap(height, width, rows, cols) != 2).astype(np.float32)
    np.testing.assert_array_equal(example[F.groundtruth_instance_masks],
                                  [expected])
    # The box spans the mask, ending at its last pixel (as the original).
    y0, y1, x0, x1 = rows[0] - 1, rows[1], cols[0] - 1, cols[1]
    np.testing.assert_allclose(
        example[F.groundtruth_boxes],
        [[y0 / height, x0 / width, y1 / height, x1 / width]], rtol=1e-6)


def test_png_masks_are_png_bytes(pet_dir, tmp_path):
  _main(pet_dir, tmp_path / 'out', '--faces_only=false')
  for path in glob.glob(str(tmp_path / 'out' / '*')):
    for record in tf.compat.v1.io.tf_record_iterator(path):
      example = tf.train.Example.FromString(record)
      (mask,) = example.features.feature['image/object/mask'].bytes_list.value
      assert mask.startswith(b'\x89PNG')


def test_unknown_class_is_one_error_line(pet_dir, tmp_path, capsys):
  (pet_dir / 'pet_label_map.pbtxt').write_text("item { id: 1 name: 'pug' }")
  with pytest.raises(SystemExit) as exit_info:
    _main(pet_dir, tmp_path / 'out')
  assert exit_info.value.code == 1
  assert "error: class 'Abyssinian' of Abyssinian_1.jpg is not in the " \
         'label map' in capsys.readouterr().err
