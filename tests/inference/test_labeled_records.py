"""Records read as model_main's evaluation reads them: groundtruth in pixels,
unknown class texts left out, class ids a label map lacks refused."""
import io

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.core import standard_fields as fields
from od_estimator.inference import exported_model
from od_estimator.inference import labeled_records

_IN = fields.InputDataFields
LABEL_MAP = "item { id: 1 name: 'cat' } item { id: 2 name: 'dog' }\n"


def _feature(values):
  if isinstance(values[0], bytes):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
  if isinstance(values[0], int):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _record(**objects):
  """A 20x40 PNG's tf.Example; objects: `key` -> values of
  image/object/<key> (with / for __)."""
  encoded = io.BytesIO()
  Image.fromarray(np.full([20, 40, 3], 90, np.uint8)).save(encoded, 'PNG')
  feature = {'image/encoded': _feature([encoded.getvalue()]),
             'image/filename': _feature([b'a.png'])}
  for key, values in objects.items():
    feature['image/object/' + key.replace('__', '/')] = _feature(values)
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


_BOXES = dict(bbox__ymin=[0.1, 0.5], bbox__xmin=[0.0, 0.5],
              bbox__ymax=[0.5, 1.0], bbox__xmax=[0.25, 1.0])


@pytest.fixture(scope='module')
def decoder(tmp_path_factory):
  path = tmp_path_factory.mktemp('labels') / 'label_map.pbtxt'
  path.write_text(LABEL_MAP)
  decoder = labeled_records.GroundtruthDecoder(str(path), 2)
  yield decoder, str(path)
  decoder.close()


def test_groundtruth_in_pixels_without_unknown_class_texts(decoder):
  labeled = decoder[0].decode(
      _record(class__text=[b'dog', b'horse'], **_BOXES), 'x.record:0')
  assert labeled.name == 'a.png' and labeled.image.shape == (20, 40, 3)
  assert labeled.unknown_classes == 1
  np.testing.assert_allclose(labeled.groundtruth[_IN.groundtruth_boxes],
                             [[2, 0, 10, 10]], rtol=1e-6)
  np.testing.assert_array_equal(
      labeled.groundtruth[_IN.groundtruth_classes], [2])
  np.testing.assert_array_equal(
      labeled.groundtruth[_IN.groundtruth_labeled_classes], [0, 1, 1])


def test_class_ids_the_label_map_lacks_are_one_line(decoder):
  with pytest.raises(exported_model.ExportedModelError) as error:
    decoder[0].decode(_record(class__label=[1, 5], **_BOXES), 'x.record:3')
  message = str(error.value)
  assert '\n' not in message and 'x.record:3' in message
  assert decoder[1] in message and 'class ids outside' in message


def test_record_paths_of_comma_separated_globs(tmp_path):
  for name in ('a-0', 'a-1', 'b'):
    (tmp_path / name).write_bytes(b'')
  assert labeled_records.record_paths(
      '%s/a-*, %s/b' % (tmp_path, tmp_path)) == [
          str(tmp_path / name) for name in ('a-0', 'a-1', 'b')]
  with pytest.raises(exported_model.ExportedModelError,
                     match='--input_tfrecord_paths: .*c-\\* matches no'):
    labeled_records.record_paths('%s/a-0,%s/c-*' % (tmp_path, tmp_path))


def test_a_damaged_record_file_is_one_line(tmp_path):
  path = str(tmp_path / 'a.record')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(b'one')
    writer.write(b'two')
  with open(path, 'r+b') as f:
    f.truncate(len(f.read()) - 3)
  records = labeled_records.serialized_records([path])
  assert next(records) == (path, 0, b'one')
  with pytest.raises(exported_model.ExportedModelError) as error:
    next(records)
  assert str(error.value).startswith(
      path + ' is not a TFRecord file, or is damaged at record 1 (')
  assert '\n' not in str(error.value)
