"""Tests for od_estimator.dataset_tools.create_coco_tf_record."""
import glob
import hashlib
import io
import json
import os

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.dataset_tools import create_coco_tf_record as coco
from tests.command_modules import run_command

# Two categories with non-contiguous ids, as in COCO.
_CATEGORIES = [{'id': 1, 'name': 'person'}, {'id': 7, 'name': 'train'}]


def _rle_counts(mask):
  """Uncompressed COCO RLE of a 0/1 mask: column-major runs, zeros first."""
  flat = mask.flatten(order='F')
  counts, current, run = [], 0, 0
  for value in flat:
    if value == current:
      run += 1
    else:
      counts.append(run)
      current, run = value, 1
  counts.append(run)
  return counts


def _crowd_mask():
  """Image 139 is 20 high, 40 wide; the crowd covers rows 5..14, cols 20..29."""
  mask = np.zeros([20, 40], np.uint8)
  mask[5:15, 20:30] = 1
  return mask


def _write_jpeg(path, width, height):
  Image.fromarray(np.full([height, width, 3], 128, np.uint8)).save(
      path, format='JPEG')


def _make_coco_tree(root):
  """Writes 3 images and an annotations JSON; returns (image dir, json)."""
  image_dir = root / 'images'
  image_dir.mkdir()
  images = [
      {'id': 139, 'file_name': 'a.jpg', 'width': 40, 'height': 20},
      {'id': 285, 'file_name': 'b.jpg', 'width': 32, 'height': 32},
      {'id': 632, 'file_name': 'c.jpg', 'width': 16, 'height': 24},
  ]
  for image in images:
    _write_jpeg(str(image_dir / image['file_name']), image['width'],
                image['height'])
  annotations = [
      # A rectangle polygon.
      {'id': 10, 'image_id': 139, 'category_id': 1, 'iscrowd': 0,
       'area': 80.0, 'bbox': [4, 2, 10, 8],
       'segmentation': [[4, 2, 14, 2, 14, 10, 4, 10]]},
      # A crowd given as uncompressed RLE.
      {'id': 11, 'image_id': 139, 'category_id': 7, 'iscrowd': 1,
       'area': 100.0, 'bbox': [20, 5, 10, 10],
       'segmentation': {'size': [20, 40],
                        'counts': _rle_counts(_crowd_mask())}},
      # Zero width: skipped.
      {'id': 12, 'image_id': 139, 'category_id': 1, 'iscrowd': 0,
       'area': 0.0, 'bbox': [5, 5, 0, 4], 'segmentation': [[5, 5, 5, 9]]},
      # 30 + 5 > 32 wide: skipped as outside the image.
      {'id': 13, 'image_id': 285, 'category_id': 7, 'iscrowd': 0,
       'area': 25.0, 'bbox': [30, 0, 5, 5],
       'segmentation': [[30, 0, 35, 0, 35, 5, 30, 5]]},
      # An object made of two polygons.
      {'id': 14, 'image_id': 285, 'category_id': 7, 'iscrowd': 0,
       'area': 72.0, 'bbox': [0, 16, 16, 16],
       'segmentation': [[0, 16, 6, 16, 6, 22, 0, 22],
                        [10, 26, 16, 26, 16, 32, 10, 32]]},
  ]
  annotations_file = root / 'instances.json'
  annotations_file.write_text(json.dumps({
      'images': images, 'annotations': annotations,
      'categories': _CATEGORIES}))
  return str(image_dir), str(annotations_file)


def _run(args):
  result = run_command('dataset_tools.create_coco_tf_record', args)
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def _read_examples(pattern):
  examples = {}
  for path in sorted(glob.glob(pattern)):
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      source_id = example.features.feature[
          'image/source_id'].bytes_list.value[0].decode()
      examples[source_id] = example.features.feature
  return examples


def _floats(feature, key):
  return np.array(feature[key].float_list.value)


def _ints(feature, key):
  return list(feature[key].int64_list.value)


def _box(feature):
  """[N, 4] ymin, xmin, ymax, xmax."""
  return np.stack([_floats(feature, 'image/object/bbox/' + k)
                   for k in ('ymin', 'xmin', 'ymax', 'xmax')], axis=-1)


def _png(data):
  return np.array(Image.open(io.BytesIO(data)))


def test_train_split_with_masks(tmp_path):
  image_dir, annotations = _make_coco_tree(tmp_path)
  output_dir = tmp_path / 'out'
  result = _run(['--train_image_dir', image_dir,
                 '--train_annotations_file', annotations,
                 '--output_dir', str(output_dir), '--include_masks',
                 '--num_train_shards', '2'])

  assert sorted(os.listdir(output_dir)) == [
      'coco_train.record-00000-of-00002', 'coco_train.record-00001-of-00002']
  # Images 0 and 2 go to shard 0, image 1 to shard 1.
  assert set(_read_examples(str(
      output_dir / 'coco_train.record-00000-of-00002'))) == {'139', '632'}
  examples = _read_examples(str(output_dir / 'coco_train.record-*'))
  assert set(examples) == {'139', '285', '632'}

  a = examples['139']
  assert _ints(a, 'image/height') == [20] and _ints(a, 'image/width') == [40]
  assert a['image/filename'].bytes_list.value == [b'a.jpg']
  assert a['image/format'].bytes_list.value == [b'jpeg']
  encoded = a['image/encoded'].bytes_list.value[0]
  assert _png(encoded).shape == (20, 40, 3)
  assert a['image/key/sha256'].bytes_list.value[0].decode() == (
      hashlib.sha256(encoded).hexdigest())
  # Box 10: x 4..14 of 40, y 2..10 of 20; box 11: x 20..30, y 5..15.
  np.testing.assert_allclose(_box(a), [[2 / 20, 4 / 40, 10 / 20, 14 / 40],
                                       [5 / 20, 20 / 40, 15 / 20, 30 / 40]],
                             rtol=1e-6)
  assert _ints(a, 'image/object/class/label') == [1, 7]
  assert a['image/object/class/text'].bytes_list.value == [b'person',
                                                           b'train']
  assert _ints(a, 'image/object/is_crowd') == [0, 1]
  np.testing.assert_allclose(_floats(a, 'image/object/area'), [80.0, 100.0])
  polygon_mask, crowd_mask = [
      _png(m) for m in a['image/object/mask'].bytes_list.value]
  assert polygon_mask.shape == (20, 40) and polygon_mask.dtype == np.uint8
  # The rectangle's inside is set, well outside it nothing is.
  assert np.all(polygon_mask[3:9, 5:13] == 1)
  outside = np.ones([20, 40], bool)
  outside[1:12, 3:16] = False
  assert not polygon_mask[outside].any()
  # RLE masks decode exactly.
  np.testing.assert_array_equal(crowd_mask, _crowd_mask())

  b = examples['285']
  # Box 14: x 0..16, y 16..32 of 32; boxes 13 was skipped.
  np.testing.assert_allclose(_box(b), [[0.5, 0.0, 1.0, 0.5]])
  assert _ints(b, 'image/object/class/label') == [7]
  (two_polygons,) = [_png(m) for m in b['image/object/mask'].bytes_list.value]
  # Union of the two squares (x, y 0..6, 16..22) and (10..16, 26..32).
  assert np.all(two_polygons[17:21, 1:5] == 1)
  assert np.all(two_polygons[27:31, 11:15] == 1)
  assert not two_polygons[:15].any() and not two_polygons[24].any()
  assert not two_polygons[17:21, 9:].any()

  # The image without annotations is kept, with empty object lists.
  c = examples['632']
  assert _ints(c, 'image/height') == [24] and _ints(c, 'image/width') == [16]
  assert _box(c).shape == (0, 4)
  assert _ints(c, 'image/object/class/label') == []
  assert list(c['image/object/mask'].bytes_list.value) == []

  assert 'wrote 3 images (1 without annotations) and 3 annotations' in (
      result.stdout)
  assert 'train: skipped 2 annotations' in result.stdout
  assert '1 zero width or height (annotation ids 12)' in result.stdout
  assert '1 box outside image (annotation ids 13)' in result.stdout


def test_val_and_testdev_default_shards_without_masks(tmp_path, capsys):
  image_dir, annotations = _make_coco_tree(tmp_path)
  # Test-dev files list images and categories but no annotations.
  testdev = tmp_path / 'image_info_test-dev.json'
  with open(annotations) as f:
    data = json.load(f)
  del data['annotations']
  testdev.write_text(json.dumps(data))
  output_dir = tmp_path / 'out'
  assert coco.main(['--val_image_dir', image_dir,
                    '--val_annotations_file', annotations,
                    '--test_image_dir', image_dir,
                    '--testdev_annotations_file', str(testdev),
                    '--output_dir', str(output_dir)]) == 0
  stdout = capsys.readouterr().out

  names = sorted(os.listdir(output_dir))
  # Default 50 shards each, and no train files since no train flags.
  assert names == (
      ['coco_testdev.record-%05d-of-00050' % i for i in range(50)] +
      ['coco_val.record-%05d-of-00050' % i for i in range(50)])
  val = _read_examples(str(output_dir / 'coco_val.record-*'))
  assert set(val) == {'139', '285', '632'}
  assert 'image/object/mask' not in val['139']
  assert _ints(val['139'], 'image/object/class/label') == [1, 7]
  testdev_examples = _read_examples(str(output_dir / 'coco_testdev.record-*'))
  assert set(testdev_examples) == {'139', '285', '632'}
  for feature in testdev_examples.values():
    assert _ints(feature, 'image/object/class/label') == []
  assert 'testdev: wrote 3 images (3 without annotations)' in stdout
  assert 'testdev: skipped 0 annotations' in stdout


def test_flag_errors(capsys):
  with pytest.raises(SystemExit):
    coco.main(['--train_image_dir', '/x', '--output_dir', '/tmp/unused'])
  assert 'train_annotations_file' in capsys.readouterr().err
  with pytest.raises(SystemExit):
    coco.main(['--output_dir', '/tmp/unused'])
  assert 'nothing to convert' in capsys.readouterr().err
  with pytest.raises(SystemExit):
    coco.main(['--val_image_dir', '/x', '--val_annotations_file', '/y',
               '--num_val_shards', '0'])
  assert 'num_val_shards' in capsys.readouterr().err


def test_boolean_flag_spellings():
  parse = coco._parser().parse_args
  assert parse(['--include_masks']).include_masks
  assert parse(['--include_masks=true']).include_masks
  assert not parse(['--include_masks=false']).include_masks
  assert not parse(['--include_masks', '--noinclude_masks']).include_masks
  assert not parse([]).include_masks


def test_unknown_category_is_an_error(tmp_path):
  _write_jpeg(str(tmp_path / 'a.jpg'), 8, 8)
  image = {'id': 1, 'file_name': 'a.jpg', 'width': 8, 'height': 8}
  annotation = {'id': 5, 'image_id': 1, 'category_id': 3, 'iscrowd': 0,
                'area': 4.0, 'bbox': [0, 0, 2, 2]}
  with pytest.raises(ValueError, match='category_id 3'):
    coco.create_tf_example(image, [annotation], str(tmp_path),
                           {1: _CATEGORIES[0]})


def test_image_size_mismatch_is_an_error(tmp_path):
  _write_jpeg(str(tmp_path / 'a.jpg'), 8, 6)
  image = {'id': 1, 'file_name': 'a.jpg', 'width': 6, 'height': 8}
  with pytest.raises(ValueError, match='a.jpg'):
    coco.create_tf_example(image, [], str(tmp_path), {})


def test_skip_reasons_in_process(tmp_path):
  _write_jpeg(str(tmp_path / 'a.jpg'), 10, 10)
  image = {'id': 1, 'file_name': 'a.jpg', 'width': 10, 'height': 10}
  boxes = {1: [0, 0, 10, 10],  # exactly the image: kept
           2: [1, 1, 3, 0],  # zero height
           3: [-1, 0, 4, 4],  # starts left of the image
           4: [0, 8, 2, 3]}  # 8 + 3 > 10 high
  annotations = [{'id': i, 'image_id': 1, 'category_id': 1, 'iscrowd': 0,
                  'area': 1.0, 'bbox': b} for i, b in boxes.items()]
  # pylint: disable=protected-access
  _, example, skipped, _, _ = coco._example_and_skips(
      image, annotations, str(tmp_path), {1: _CATEGORIES[0]})
  assert skipped == [(2, coco.SKIP_ZERO_SIZE), (3, coco.SKIP_OUTSIDE_IMAGE),
                     (4, coco.SKIP_OUTSIDE_IMAGE)]
  # The original's public function counts them.
  assert coco.create_tf_example(
      image, annotations, str(tmp_path), {1: _CATEGORIES[0]})[2] == 3
  np.testing.assert_allclose(_box(example.features.feature),
                             [[0.0, 0.0, 1.0, 1.0]])


def test_original_logging_flags_are_accepted():
  args = coco._parser().parse_args(['--logtostderr', '--alsologtostderr',
                                    '--nologtostderr'])
  assert args.alsologtostderr and not args.logtostderr


@pytest.mark.parametrize('damage', ['missing', 'not_an_image'])
def test_bad_image_is_one_line_naming_it(tmp_path, capsys, damage):
  image_dir, annotations = _make_coco_tree(tmp_path)
  with open(annotations) as f:
    image = os.path.join(image_dir, json.load(f)['images'][0]['file_name'])
  os.remove(image)
  if damage == 'not_an_image':
    with open(image, 'wb') as f:
      f.write(b'\x00' * 10)
  with pytest.raises(SystemExit) as raised:
    coco.main(['--logtostderr', '--val_image_dir', image_dir,
               '--val_annotations_file', annotations,
               '--num_val_shards', '1', '--output_dir', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert raised.value.code == 1
  assert err.count('\n') == 1 and err.startswith('error: ')
  assert image in err


def test_missing_annotations_file_is_one_line(tmp_path, capsys):
  missing = str(tmp_path / 'instances_val.json')
  with pytest.raises(SystemExit):
    coco.main(['--val_image_dir', str(tmp_path), '--val_annotations_file',
               missing, '--output_dir', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and missing in err


@pytest.mark.parametrize('text, expected', [
    ('{"images": [', 'is not valid JSON: Expecting value: line 1'),
    ('[]', 'holds a JSON list, not an object'),
    ('{"annotations": []}', 'has no "images" list')])
def test_annotations_file_that_is_not_coco_json_is_one_line(
    tmp_path, capsys, text, expected):
  annotations = tmp_path / 'instances_val.json'
  annotations.write_text(text)
  with pytest.raises(SystemExit):
    coco.main(['--val_image_dir', str(tmp_path), '--val_annotations_file',
               str(annotations), '--output_dir', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and str(annotations) in err, err
  assert expected in err


def test_compressed_rle_and_missing_segmentation(tmp_path):
  _write_jpeg(str(tmp_path / 'a.jpg'), 12, 10)
  image = {'id': 1, 'file_name': 'a.jpg', 'width': 12, 'height': 10}
  mask = np.zeros([10, 12], np.uint8)
  mask[2:7, 3:11] = 1
  rle = coco.coco_mask.encode(np.asfortranarray(mask))
  # COCO JSON holds compressed counts as a str; a non-crowd RLE is valid.
  segmentation = {'size': rle['size'], 'counts': rle['counts'].decode()}
  annotation = {'id': 5, 'image_id': 1, 'category_id': 1, 'iscrowd': 0,
                'area': 40.0, 'bbox': [3, 2, 8, 5],
                'segmentation': segmentation}
  _, example, _, _, _ = coco.create_tf_example(
      image, [annotation], str(tmp_path), {1: _CATEGORIES[0]},
      include_masks=True)
  (png,) = example.features.feature['image/object/mask'].bytes_list.value
  np.testing.assert_array_equal(_png(png), mask)
  del annotation['segmentation']
  with pytest.raises(ValueError, match=r'annotation 5 .*no "segmentation".*'
                     '--noinclude_masks'):
    coco.create_tf_example(image, [annotation], str(tmp_path),
                           {1: _CATEGORIES[0]}, include_masks=True)


def test_masks_read_back_by_the_input_decoder(tmp_path):
  """PNG masks (crowd too) decode as the input pipeline reads them."""
  image_dir, annotations = _make_coco_tree(tmp_path)
  assert coco.main(['--train_image_dir', image_dir,
                    '--train_annotations_file', annotations,
                    '--output_dir', str(tmp_path / 'out'), '--include_masks',
                    '--num_train_shards', '1']) == 0
  decoder = tf_example_decoder.TfExampleDecoder(
      load_instance_masks=True,
      instance_mask_type=tf_example_decoder.PNG_MASKS)
  decoded = {}
  for record in tf.compat.v1.io.tf_record_iterator(
      str(tmp_path / 'out' / 'coco_train.record-00000-of-00001')):
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
      out = sess.run(decoder.decode(tf.constant(record)))
    decoded[out[fields.InputDataFields.source_id].decode()] = out
  a = decoded['139']
  masks = a[fields.InputDataFields.groundtruth_instance_masks]
  assert masks.shape == (2, 20, 40) and masks.dtype == np.float32
  np.testing.assert_array_equal(masks[1], _crowd_mask())
  np.testing.assert_array_equal(a[fields.InputDataFields.groundtruth_is_crowd],
                                [False, True])
  # The image without objects gives [0, H, W] masks.
  assert decoded['632'][
      fields.InputDataFields.groundtruth_instance_masks].shape == (0, 24, 16)


def _person_image(tmp_path):
  _write_jpeg(str(tmp_path / 'tmp_image.jpg'), 256, 256)
  return {'file_name': 'tmp_image.jpg', 'height': 256, 'width': 256, 'id': 11}


def test_create_tf_example_with_keypoints_as_the_original(tmp_path):
  image = _person_image(tmp_path)
  rng = np.random.RandomState(0)
  xs, ys = rng.randint(64, 128, 17), rng.randint(64, 128, 17)
  visibility = rng.randint(0, 3, 17)
  keypoints = np.stack([xs, ys, visibility], axis=1).flatten().tolist()
  annotations_list = [
      {'area': 0.5, 'iscrowd': False, 'image_id': 11,
       'bbox': [64, 64, 128, 128], 'category_id': 1, 'id': 1000},
      {'area': 0.5, 'iscrowd': False, 'image_id': 11,
       'bbox': [0, 0, 8, 8], 'category_id': 7, 'id': 1001}]
  keypoint_annotations_dict = {
      1000: {'keypoints': keypoints,
             'num_keypoints': int((visibility > 0).sum())},
      2000: {'keypoints': keypoints, 'num_keypoints': 1}}  # no such object
  category_index = {1: {'name': 'person', 'id': 1},
                    7: {'name': 'train', 'id': 7}}
  key, example, num_skipped, num_keypoints_skipped, num_densepose_skipped = (
      coco.create_tf_example(
          image, annotations_list, str(tmp_path), category_index,
          include_masks=False,
          keypoint_annotations_dict=keypoint_annotations_dict))
  assert len(key) == 64
  assert (num_skipped, num_keypoints_skipped, num_densepose_skipped) == (
      0, 1, 0)
  feature = example.features.feature
  # The train has no keypoints: 17 zeros, so both objects have 17 entries.
  np.testing.assert_allclose(
      feature['image/object/keypoint/x'].float_list.value,
      np.concatenate([xs / 256, np.zeros(17)]), rtol=1e-6)
  np.testing.assert_allclose(
      feature['image/object/keypoint/y'].float_list.value,
      np.concatenate([ys / 256, np.zeros(17)]), rtol=1e-6)
  assert list(feature['image/object/keypoint/visibility'].int64_list
              .value) == list(visibility) + [0] * 17
  assert list(feature['image/object/keypoint/num'].int64_list.value) == [
      (visibility > 0).sum(), 0]
  names = list(feature['image/object/keypoint/text'].bytes_list.value)
  assert names[:3] == [b'nose', b'left_eye', b'right_eye'] and len(
      names) == 34

  # Only people: the train is skipped, and an image of trains is left out.
  _, example, num_skipped, _, _ = coco.create_tf_example(
      image, annotations_list, str(tmp_path), category_index,
      remove_non_person_annotations=True)
  assert num_skipped == 1
  assert list(example.features.feature['image/object/class/label']
              .int64_list.value) == [1]
  _, example, _, _, _ = coco.create_tf_example(
      image, annotations_list[1:], str(tmp_path), category_index,
      remove_non_person_images=True)
  assert example is None


def test_create_tf_example_with_densepose_as_the_original(tmp_path):
  image = _person_image(tmp_path)
  annotations_list = [{'area': 0.5, 'iscrowd': False, 'image_id': 11,
                       'bbox': [64, 32, 128, 64], 'category_id': 1,
                       'id': 1000}]
  densepose_annotations_dict = {1000: {
      'dp_I': [1, 24], 'dp_x': [0.0, 256.0], 'dp_y': [128.0, 300.0],
      'dp_U': [0.1, 0.2], 'dp_V': [0.3, 0.4], 'bbox': [64, 32, 128, 64]}}
  _, example, _, _, num_densepose_skipped = coco.create_tf_example(
      image, annotations_list, str(tmp_path), {1: {'name': 'person', 'id': 1}},
      densepose_annotations_dict=densepose_annotations_dict)
  assert num_densepose_skipped == 0
  feature = example.features.feature
  assert list(feature['image/object/densepose/num'].int64_list.value) == [2]
  assert list(feature['image/object/densepose/part_index'].int64_list
              .value) == [0, 23]
  # Points on the box's 256 grid (clipped to it), normalized to the image.
  np.testing.assert_allclose(
      feature['image/object/densepose/x'].float_list.value,
      [64 / 256, 192 / 256])
  np.testing.assert_allclose(
      feature['image/object/densepose/y'].float_list.value,
      [64 / 256, 96 / 256])
  np.testing.assert_allclose(
      feature['image/object/densepose/u'].float_list.value, [0.1, 0.2])


def test_person_flags_as_the_originals(tmp_path, capsys):
  # Category 1 is 'person': image 139 has one (annotation 10), 285 none.
  image_dir, annotations = _make_coco_tree(tmp_path)
  keypoints = tmp_path / 'person_keypoints.json'
  keypoints.write_text(json.dumps({'annotations': [
      {'id': 10, 'image_id': 139, 'num_keypoints': 1,
       'keypoints': [8, 4, 2] + [0] * 48}]}))
  coco.main(['--train_image_dir', image_dir, '--train_annotations_file',
             annotations, '--train_keypoint_annotations_file', str(keypoints),
             '--remove_non_person_annotations', '--remove_non_person_images',
             '--num_train_shards', '1', '--output_dir', str(tmp_path / 'out')])
  out = capsys.readouterr().out
  assert 'left out 2 images without a person' in out
  examples = _read_examples(str(tmp_path / 'out' / 'coco_train.record-*'))
  assert list(examples) == ['139']
  feature = examples['139']
  assert _ints(feature, 'image/object/class/label') == [1]
  assert _ints(feature, 'image/object/keypoint/num') == [1]
  np.testing.assert_allclose(_floats(feature, 'image/object/keypoint/x')[:2],
                             [8 / 40, 0])
  np.testing.assert_allclose(_floats(feature, 'image/object/keypoint/y')[:2],
                             [4 / 20, 0])
