"""Tests for od_estimator.dataset_tools.create_synthetic_tf_record."""
import io
import os

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.utils import label_map_util


def _examples(path):
  return [tf.train.Example.FromString(r.numpy())
          for r in tf.data.TFRecordDataset(path)]


def test_writes_shards_and_label_map(tmp_path):
  written = synth.create_dataset(str(tmp_path), num_train=5, num_val=3,
                                 image_size=32, num_train_shards=2)
  assert [os.path.basename(f) for f in written['train']] == [
      'shapes_train.record-00000-of-00002',
      'shapes_train.record-00001-of-00002']
  assert sum(len(_examples(f)) for f in written['train']) == 5
  assert len(_examples(written['val'][0])) == 3
  assert label_map_util.get_label_map_dict(written['label_map']) == {
      'circle': 1, 'square': 2, 'triangle': 3}


def test_examples_have_the_original_keys_and_consistent_boxes(tmp_path):
  written = synth.create_dataset(str(tmp_path), num_train=4, num_val=1,
                                 image_size=48, num_train_shards=1)
  for example in _examples(written['train'][0]):
    feature = example.features.feature
    image = np.array(Image.open(io.BytesIO(
        feature['image/encoded'].bytes_list.value[0])))
    assert image.shape == (48, 48, 3)
    assert feature['image/height'].int64_list.value == [48]
    assert feature['image/format'].bytes_list.value == [b'jpeg']
    labels = list(feature['image/object/class/label'].int64_list.value)
    assert 1 <= len(labels) <= 3 and set(labels) <= {1, 2, 3}
    texts = [t.decode() for t in
             feature['image/object/class/text'].bytes_list.value]
    assert texts == [synth.CLASSES[l - 1] for l in labels]
    ymin = np.array(feature['image/object/bbox/ymin'].float_list.value)
    ymax = np.array(feature['image/object/bbox/ymax'].float_list.value)
    xmin = np.array(feature['image/object/bbox/xmin'].float_list.value)
    xmax = np.array(feature['image/object/bbox/xmax'].float_list.value)
    assert np.all((0 <= ymin) & (ymin < ymax) & (ymax <= 1))
    assert np.all((0 <= xmin) & (xmin < xmax) & (xmax <= 1))
    masks = feature['image/object/mask'].bytes_list.value
    assert len(masks) == len(labels)
    for mask_png, y0, y1, x0, x1 in zip(masks, ymin, ymax, xmin, xmax):
      mask = np.array(Image.open(io.BytesIO(mask_png)))
      ys, xs = np.nonzero(mask)
      if len(ys):  # a shape may be hidden by later ones
        # Every mask pixel lies inside its box.
        assert ys.min() >= int(y0 * 48) and ys.max() < y1 * 48
        assert xs.min() >= int(x0 * 48) and xs.max() < x1 * 48


def test_same_seed_same_data(tmp_path):
  a = synth.create_dataset(str(tmp_path / 'a'), num_train=3, num_val=1,
                           image_size=32, num_train_shards=1, seed=7)
  b = synth.create_dataset(str(tmp_path / 'b'), num_train=3, num_val=1,
                           image_size=32, num_train_shards=1, seed=7)
  with open(a['train'][0], 'rb') as fa, open(b['train'][0], 'rb') as fb:
    assert fa.read() == fb.read()


def test_sample_images_are_png_files_of_the_image_size(tmp_path):
  assert synth.create_dataset(str(tmp_path / 'none'), num_train=1,
                              num_val=1)['images'] == []
  assert synth.main(['--output_dir=%s' % tmp_path, '--num_train=1',
                     '--num_val=1', '--image_size=40',
                     '--num_sample_images=2']) == 0
  paths = sorted((tmp_path / 'images').iterdir())
  assert [p.name for p in paths] == ['shapes_0.png', 'shapes_1.png']
  pixels = [np.array(Image.open(p)) for p in paths]
  assert all(p.shape == (40, 40, 3) and p.dtype == np.uint8 for p in pixels)
  assert not np.array_equal(pixels[0], pixels[1])


def test_original_logging_flags_are_accepted(tmp_path):
  assert synth.main(['--logtostderr', '--alsologtostderr',
                     '--output_dir=%s' % tmp_path, '--num_train=1',
                     '--num_val=1', '--image_size=32']) == 0
  assert (tmp_path / 'shapes_label_map.pbtxt').exists()


def test_include_masks_flag(tmp_path):
  val = 'shapes_val.record-00000-of-00001'

  def mask_counts(directory):
    return [len(e.features.feature['image/object/mask'].bytes_list.value)
            for e in _examples(str(directory / val))]

  common = ['--num_train=1', '--num_val=3', '--image_size=32']
  assert synth.main(['--output_dir=%s' % (tmp_path / 'a')] + common) == 0
  assert synth.main(['--output_dir=%s' % (tmp_path / 'b'), '--include_masks']
                    + common) == 0
  assert synth.main(['--output_dir=%s' % (tmp_path / 'c'),
                     '--noinclude_masks'] + common) == 0
  # Masks are on by default; one per shape.
  assert all(mask_counts(tmp_path / 'a')) and (
      mask_counts(tmp_path / 'a') == mask_counts(tmp_path / 'b'))
  for example in _examples(str(tmp_path / 'c' / val)):
    assert 'image/object/mask' not in example.features.feature


def test_output_dir_that_is_a_file_is_one_line(tmp_path, capsys):
  # A TensorFlow error about the path the user gave: one line, no traceback.
  existing = tmp_path / 'data'
  existing.write_text('kept')
  with pytest.raises(SystemExit) as raised:
    synth.main(['--output_dir=%s' % existing, '--num_train=1', '--num_val=1',
                '--image_size=32'])
  err = capsys.readouterr().err
  assert raised.value.code == 1
  assert err.count('\n') == 1 and err.startswith('error: '), err
  assert str(existing) in err and 'is not a directory' in err
  assert existing.read_text() == 'kept'
