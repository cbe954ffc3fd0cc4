"""Tests for od_estimator.data_decoders.tf_example_decoder."""
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.utils import dataset_util as du

F = fields.InputDataFields

_LABEL_MAP = """
item { id: 1 name: 'circle' display_name: 'Circle' }
item { id: 2 name: 'square' display_name: 'Square' }
item { id: 7 name: 'triangle' }
"""


def _encode(array, fmt='PNG'):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format=fmt)
  return buffer.getvalue()


def _image(height=4, width=6):
  # Every pixel distinct enough to catch transposes: value = 10 * y + x + c.
  y, x, c = np.meshgrid(np.arange(height), np.arange(width), np.arange(3),
                        indexing='ij')
  return (10 * y + x + 100 * c).astype(np.uint8)


def _example(**features):
  return tf.train.Example(features=tf.train.Features(feature=features))


def _full_features(image):
  return {
      'image/encoded': du.bytes_feature(_encode(image)),
      'image/format': du.bytes_feature('png'),
      'image/height': du.int64_feature(image.shape[0]),
      'image/width': du.int64_feature(image.shape[1]),
      'image/filename': du.bytes_feature('a.png'),
      'image/source_id': du.bytes_feature('17'),
      'image/key/sha256': du.bytes_feature('abc'),
      'image/object/bbox/ymin': du.float_list_feature([0.0, 0.25]),
      'image/object/bbox/xmin': du.float_list_feature([0.0, 0.5]),
      'image/object/bbox/ymax': du.float_list_feature([0.5, 1.0]),
      'image/object/bbox/xmax': du.float_list_feature([0.5, 0.75]),
      'image/object/class/label': du.int64_list_feature([3, 1]),
      'image/object/area': du.float_list_feature([6.0, 2.5]),
      'image/object/is_crowd': du.int64_list_feature([0, 1]),
      'image/object/difficult': du.int64_list_feature([1, 0]),
      'image/object/group_of': du.int64_list_feature([1, 0]),
      'image/object/weight': du.float_list_feature([0.5, 1.0]),
      'image/class/label': du.int64_list_feature([3, 2]),
      'image/class/confidence': du.float_list_feature([1.0, 0.0]),
      'image/neg_category_ids': du.int64_list_feature([4]),
      'image/not_exhaustive_category_ids': du.int64_list_feature([5, 6]),
  }


def _decode(execute, example, **decoder_kwargs):
  """Decodes a fed (not constant-folded) serialized example, as tf.data does."""
  decoder = tf_example_decoder.TfExampleDecoder(**decoder_kwargs)
  return execute(decoder.decode,
                 [np.array(example.SerializeToString(), dtype=object)],
                 dynamic=True)


@pytest.fixture
def label_map_path(tmp_path):
  path = tmp_path / 'label_map.pbtxt'
  path.write_text(_LABEL_MAP)
  return str(path)


def test_decodes_all_standard_keys_exactly(execute):
  image = _image()
  out = _decode(execute, _example(**_full_features(image)))
  np.testing.assert_array_equal(out[F.image], image)
  assert out[F.image].dtype == np.uint8
  assert out[F.source_id] == b'17'
  assert out[F.key] == b'abc'
  assert out[F.filename] == b'a.png'
  np.testing.assert_array_equal(out[F.original_image_spatial_shape], [4, 6])
  np.testing.assert_array_equal(out[F.groundtruth_boxes],
                                [[0.0, 0.0, 0.5, 0.5],
                                 [0.25, 0.5, 1.0, 0.75]])
  np.testing.assert_array_equal(out[F.groundtruth_classes], [3, 1])
  assert out[F.groundtruth_classes].dtype == np.int32
  np.testing.assert_array_equal(out[F.groundtruth_area], [6.0, 2.5])
  np.testing.assert_array_equal(out[F.groundtruth_is_crowd], [False, True])
  np.testing.assert_array_equal(out[F.groundtruth_difficult], [1, 0])
  np.testing.assert_array_equal(out[F.groundtruth_group_of], [True, False])
  np.testing.assert_array_equal(out[F.groundtruth_weights], [0.5, 1.0])
  np.testing.assert_array_equal(out[F.groundtruth_image_classes], [3, 2])
  np.testing.assert_array_equal(out[F.groundtruth_image_confidences],
                                [1.0, 0.0])
  np.testing.assert_array_equal(out[F.groundtruth_verified_neg_classes], [4])
  np.testing.assert_array_equal(out[F.groundtruth_not_exhaustive_classes],
                                [5, 6])
  assert F.groundtruth_instance_masks not in out
  assert F.groundtruth_keypoints not in out


def test_static_shapes():
  decoder = tf_example_decoder.TfExampleDecoder(num_keypoints=3)
  with tf.Graph().as_default():
    out = decoder.decode(tf.compat.v1.placeholder(tf.string, []))
    assert out[F.image].shape.as_list() == [None, None, 3]
    assert out[F.groundtruth_boxes].shape.as_list() == [None, 4]
    assert out[F.groundtruth_keypoints].shape.as_list() == [None, 3, 2]


def test_missing_optional_keys_give_empty_tensors(execute):
  image = _image()
  example = _example(**{'image/encoded': du.bytes_feature(_encode(image))})
  out = _decode(execute, example, load_instance_masks=True,
                instance_mask_type=tf_example_decoder.PNG_MASKS,
                num_keypoints=2, load_multiclass_scores=True)
  np.testing.assert_array_equal(out[F.image], image)
  assert out[F.source_id] == b'' and out[F.key] == b''
  assert out[F.filename] == b''
  assert out[F.groundtruth_boxes].shape == (0, 4)
  for key in (F.groundtruth_classes, F.groundtruth_area,
              F.groundtruth_is_crowd, F.groundtruth_difficult,
              F.groundtruth_group_of, F.groundtruth_weights,
              F.groundtruth_image_classes, F.groundtruth_image_confidences,
              F.multiclass_scores):
    assert out[key].shape == (0,), key
  # Empty masks still carry the image size.
  assert out[F.groundtruth_instance_masks].shape == (0, 4, 6)
  assert out[F.groundtruth_keypoints].shape == (0, 2, 2)
  assert out[F.groundtruth_keypoint_visibilities].shape == (0, 2)


def test_weights_default_to_one_per_box(execute):
  features = _full_features(_image())
  del features['image/object/weight']
  out = _decode(execute, _example(**features))
  np.testing.assert_array_equal(out[F.groundtruth_weights], [1.0, 1.0])


def test_png_instance_masks(execute):
  image = _image()
  masks = np.zeros((2, 4, 6), np.uint8)
  masks[0, :2, :3] = 1
  masks[1, 1:, 3:] = 255  # any nonzero pixel is foreground
  features = _full_features(image)
  features['image/object/mask'] = du.bytes_list_feature(
      [_encode(m) for m in masks])
  out = _decode(execute, _example(**features), load_instance_masks=True,
                instance_mask_type=tf_example_decoder.PNG_MASKS)
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks],
                                (masks > 0).astype(np.float32))


def test_png_masks_by_enum_number(execute):
  features = _full_features(_image())
  features['image/object/mask'] = du.bytes_list_feature(
      [_encode(np.ones((4, 6), np.uint8))] * 2)
  out = _decode(execute, _example(**features), load_instance_masks=True,
                instance_mask_type=2)  # input_reader_pb2.PNG_MASKS
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks],
                                np.ones((2, 4, 6)))


@pytest.mark.parametrize('stored,configured,fix', [
    ('png', tf_example_decoder.NUMERICAL_MASKS, 'mask_type: PNG_MASKS'),
    ('numerical', tf_example_decoder.PNG_MASKS, 'mask_type: NUMERICAL_MASKS'),
    ('empty png', tf_example_decoder.NUMERICAL_MASKS, 'mask_type: PNG_MASKS'),
])
def test_mask_encoding_other_than_mask_type_names_the_fix(
    execute, stored, configured, fix):
  """E.g. the original's pets tool (PNG) with its pets config (numerical)."""
  features = _full_features(_image())
  if stored == 'png':
    features['image/object/mask'] = du.bytes_list_feature(
        [_encode(np.ones((4, 6), np.uint8))] * 2)
  elif stored == 'numerical':
    features['image/object/mask'] = du.float_list_feature(np.ones(48))
  else:
    for key in list(features):
      if key.startswith('image/object/'):
        del features[key]
    features['image/object/mask'] = du.bytes_list_feature([])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='set %s in the input reader.* in record.*'
                     'source_id=17' % fix):
    _decode(execute, _example(**features), load_instance_masks=True,
            instance_mask_type=configured)


def test_png_masks_decode_as_the_originals(execute):
  # The original's PNG mask cases: masks at their own size (10 x 10 in a
  # 4 x 6 image), as many as stored, with no boxes; none without masks.
  # (transform_input_data refuses masks that do not fit: tests/
  # input_pipeline/test_inputs_masks.py.)
  rng = np.random.RandomState(0)
  masks = rng.randint(0, 2, size=(2, 10, 10)).astype(np.uint8)
  features = {
      'image/encoded': du.bytes_feature(_encode(_image())),
      'image/format': du.bytes_feature('png'),
      'image/object/mask': du.bytes_list_feature(
          [_encode(mask) for mask in masks])}
  out = _decode(execute, _example(**features), load_instance_masks=True,
                instance_mask_type=tf_example_decoder.PNG_MASKS)
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks],
                                masks.astype(np.float32))
  features['image/object/mask'] = du.bytes_list_feature([])
  out = _decode(execute, _example(**features), load_instance_masks=True,
                instance_mask_type=tf_example_decoder.PNG_MASKS)
  assert out[F.groundtruth_instance_masks].shape == (0, 4, 6)


@pytest.mark.parametrize('masks', [
    None,  # Records converted without masks, read by a mask config.
    np.ones(36, np.float32),  # 1.5 masks' worth of values.
])
def test_numerical_masks_that_do_not_fit_name_the_record(execute, masks):
  features = _full_features(_image())
  if masks is not None:
    features['image/object/mask'] = du.float_list_feature(masks)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='not height \\* width values per box.* in '
                     'record.*source_id=17, filename=a.png'):
    _decode(execute, _example(**features), load_instance_masks=True,
            instance_mask_type=tf_example_decoder.NUMERICAL_MASKS)


def test_numerical_instance_masks(execute):
  masks = np.zeros((2, 4, 6), np.float32)
  masks[0, 0, 0] = 0.7
  masks[1, 3, 5] = 1.0
  features = _full_features(_image())
  features['image/object/mask'] = du.float_list_feature(masks.ravel())
  out = _decode(execute, _example(**features), load_instance_masks=True)
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks],
                                (masks > 0).astype(np.float32))


def test_keypoints_with_visibilities(execute):
  features = _full_features(_image())
  # Two objects x three keypoints; visibility 0 = unlabeled -> NaN.
  features['image/object/keypoint/y'] = du.float_list_feature(
      [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
  features['image/object/keypoint/x'] = du.float_list_feature(
      [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
  features['image/object/keypoint/visibility'] = du.int64_list_feature(
      [2, 0, 1, 1, 2, 0])
  out = _decode(execute, _example(**features), num_keypoints=3)
  nan = np.nan
  np.testing.assert_array_equal(out[F.groundtruth_keypoints], np.float32(
      [[[0.1, 0.9], [nan, nan], [0.3, 0.7]],
       [[0.4, 0.6], [0.5, 0.5], [nan, nan]]]))
  np.testing.assert_array_equal(out[F.groundtruth_keypoint_visibilities],
                                [[True, False, True], [True, True, False]])


def test_keypoints_without_visibilities_use_nan(execute):
  features = _full_features(_image())
  features['image/object/keypoint/y'] = du.float_list_feature(
      [0.1, np.nan])
  features['image/object/keypoint/x'] = du.float_list_feature(
      [0.2, np.nan])
  out = _decode(execute, _example(**features), num_keypoints=2)
  np.testing.assert_array_equal(out[F.groundtruth_keypoint_visibilities],
                                [[True, False]])
  np.testing.assert_array_equal(out[F.groundtruth_keypoints],
                                np.float32([[[0.1, 0.2], [np.nan, np.nan]]]))


def test_additional_channels_multiclass_scores_and_context(execute):
  image = _image()
  extra = [np.full((4, 6), 11, np.uint8), np.full((4, 6), 22, np.uint8)]
  features = _full_features(image)
  features['image/additional_channels/encoded'] = du.bytes_list_feature(
      [_encode(channel) for channel in extra])
  features['image/object/class/multiclass_scores'] = du.float_list_feature(
      [0.1, 0.9, 0.8, 0.2])
  features['image/context_features'] = du.float_list_feature(
      [1, 2, 3, 4, 5, 6])
  features['image/context_feature_length'] = du.int64_feature(3)
  out = _decode(execute, _example(**features), num_additional_channels=2,
                load_multiclass_scores=True, load_context_features=True)
  np.testing.assert_array_equal(out[F.image_additional_channels],
                                np.stack(extra, axis=2))
  np.testing.assert_allclose(out[F.multiclass_scores], [0.1, 0.9, 0.8, 0.2])
  np.testing.assert_array_equal(out[F.context_features],
                                [[1, 2, 3], [4, 5, 6]])
  assert out[F.context_feature_length] == 3


def test_label_map_maps_texts_by_name_or_display_name(execute,
                                                       label_map_path):
  features = _full_features(_image())
  features['image/object/class/text'] = du.bytes_list_feature(
      ['triangle', 'Square'])
  features['image/class/text'] = du.bytes_list_feature(['circle', 'dog'])
  # The text wins over the (deliberately different) numeric label; unknown
  # texts become -1.
  out = _decode(execute, _example(**features),
                label_map_proto_file=label_map_path)
  np.testing.assert_array_equal(out[F.groundtruth_classes], [7, 2])
  np.testing.assert_array_equal(out[F.groundtruth_image_classes], [1, -1])


def test_label_map_falls_back_to_labels_without_texts(execute,
                                                      label_map_path):
  out = _decode(execute, _example(**_full_features(_image())),
                label_map_proto_file=label_map_path, use_display_name=True)
  np.testing.assert_array_equal(out[F.groundtruth_classes], [3, 1])


def test_jpeg_with_dct_method(execute):
  image = np.full((8, 8, 3), 128, np.uint8)
  features = _full_features(image)
  features['image/encoded'] = du.bytes_feature(_encode(image, 'JPEG'))
  out = _decode(execute, _example(**features), dct_method='INTEGER_ACCURATE')
  # A flat JPEG decodes back to (nearly) the same flat colour.
  assert np.abs(out[F.image].astype(int) - 128).max() <= 2


def test_decodes_synthetic_tfrecord(tmp_path, execute):
  rng = np.random.default_rng(3)
  image, boxes, labels, masks = synth.make_image(rng, 24, 32, max_shapes=3)
  path = str(tmp_path / 'one.record')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(synth.make_example(image, boxes, labels, masks,
                                    5).SerializeToString())
  label_map = tmp_path / 'shapes.pbtxt'
  label_map.write_text(synth.label_map_text())
  decoder = tf_example_decoder.TfExampleDecoder(
      load_instance_masks=True, instance_mask_type='PNG_MASKS',
      label_map_proto_file=str(label_map))

  def graph_fn():
    dataset = tf.data.TFRecordDataset(path).map(decoder.decode)
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

  out = execute(graph_fn, [])
  assert out[F.source_id] == b'5' and out[F.filename] == b'5.jpg'
  np.testing.assert_array_equal(out[F.groundtruth_boxes], boxes)
  # The texts ('circle', ...) map back to the written labels.
  np.testing.assert_array_equal(out[F.groundtruth_classes], labels)
  np.testing.assert_array_equal(out[F.groundtruth_instance_masks], masks)
  np.testing.assert_array_equal(out[F.groundtruth_area],
                                masks.reshape(len(masks), -1).sum(axis=1))
  assert out[F.image].shape == (24, 32, 3)


def test_unknown_mask_type_raises():
  with pytest.raises(ValueError, match='instance_mask_type'):
    tf_example_decoder.TfExampleDecoder(instance_mask_type='RLE')


@pytest.mark.parametrize('encoded', [b'not an image at all', b''])
def test_non_image_names_the_record(execute, encoded):
  features = _full_features(_image())
  features['image/encoded'] = du.bytes_feature(encoded)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'not a JPEG.*source_id=17, filename=a\.png'):
    _decode(execute, _example(**features))


def test_inverted_box_names_the_record(execute):
  features = _full_features(_image())
  features['image/object/bbox/ymin'] = du.float_list_feature([0.6, 0.25])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'Inverted.*source_id=17, filename=a\.png'):
    _decode(execute, _example(**features))


def test_non_finite_box_names_the_record(execute):
  features = _full_features(_image())
  features['image/object/bbox/xmax'] = du.float_list_feature([np.nan, 0.75])
  with pytest.raises(tf.errors.InvalidArgumentError, match='source_id=17'):
    _decode(execute, _example(**features))


def test_mismatched_box_lists_name_the_record(execute):
  features = _full_features(_image())
  features['image/object/bbox/xmax'] = du.float_list_feature([0.5])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'different lengths.*source_id=17'):
    _decode(execute, _example(**features))


def test_zero_size_box_is_accepted(execute):
  features = _full_features(_image())
  features['image/object/bbox/ymax'] = du.float_list_feature([0.0, 1.0])
  out = _decode(execute, _example(**features))
  np.testing.assert_array_equal(out[F.groundtruth_boxes][0], [0, 0, 0, 0.5])


def test_out_of_range_boxes_are_clipped_with_a_warning(execute, capfd):
  features = _full_features(_image())
  features['image/object/bbox/ymin'] = du.float_list_feature([-0.25, 0.25])
  features['image/object/bbox/xmax'] = du.float_list_feature([0.5, 1.5])
  out = _decode(execute, _example(**features))
  np.testing.assert_array_equal(out[F.groundtruth_boxes],
                                [[0.0, 0.0, 0.5, 0.5],
                                 [0.25, 0.5, 1.0, 1.0]])
  err = capfd.readouterr().err
  assert 'WARNING: clipping boxes' in err
  assert 'source_id=17, filename=a.png' in err


def test_in_range_boxes_do_not_warn(execute, capfd):
  _decode(execute, _example(**_full_features(_image())))
  assert 'clipping boxes' not in capfd.readouterr().err
