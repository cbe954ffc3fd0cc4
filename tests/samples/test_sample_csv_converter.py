"""samples/scripts/create_csv_tf_record.py: a CSV of pixel boxes and a
folder of images become records od_estimator's decoder reads back."""
import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator.data_decoders import tf_example_decoder
from od_estimator.core import standard_fields as fields
from tests.samples import sample_scripts

_IN = fields.InputDataFields
CSV = """filename,width,height,class,xmin,ymin,xmax,ymax
a.jpg,40,20,cat,4,2,20,10
b.png,30,60,dog,0,0,30,60
a.jpg,40,20,dog,10,5,40,20
"""


def test_csv_rows_become_one_example_per_image(tmp_path):
  (tmp_path / 'images').mkdir()
  Image.fromarray(np.full([20, 40, 3], 200, np.uint8)).save(
      str(tmp_path / 'images' / 'a.jpg'))
  Image.fromarray(np.zeros([60, 30, 3], np.uint8)).save(
      str(tmp_path / 'images' / 'b.png'))
  (tmp_path / 'boxes.csv').write_text(CSV)
  (tmp_path / 'label_map.pbtxt').write_text(
      "item { id: 1 name: 'cat' } item { id: 2 name: 'dog' }")
  output = str(tmp_path / 'train.record')
  stdout = sample_scripts.run(
      'create_csv_tf_record.py', csv_input=tmp_path / 'boxes.csv',
      image_dir=tmp_path / 'images',
      label_map_path=tmp_path / 'label_map.pbtxt', output_path=output)
  assert 'Wrote 2 examples' in stdout
  records = list(tf.compat.v1.io.tf_record_iterator(output))
  assert len(records) == 2
  with tf.Graph().as_default():
    serialized = tf.compat.v1.placeholder(tf.string, [])
    decoded = tf_example_decoder.TfExampleDecoder().decode(serialized)
    with tf.compat.v1.Session() as session:
      first, second = [session.run(decoded, {serialized: record})
                       for record in records]
  assert first[_IN.image].shape == (20, 40, 3)
  np.testing.assert_allclose(first[_IN.groundtruth_boxes],
                             [[0.1, 0.1, 0.5, 0.5], [0.25, 0.25, 1, 1]])
  np.testing.assert_array_equal(first[_IN.groundtruth_classes], [1, 2])
  assert first[_IN.source_id] == b'a.jpg'
  assert second[_IN.image].shape == (60, 30, 3)
  np.testing.assert_array_equal(second[_IN.groundtruth_classes], [2])


def test_sharded_output(tmp_path):
  (tmp_path / 'images').mkdir()
  rows = ['filename,width,height,class,xmin,ymin,xmax,ymax']
  for i in range(3):
    Image.fromarray(np.zeros([8, 8, 3], np.uint8)).save(
        str(tmp_path / 'images' / ('%d.png' % i)))
    rows.append('%d.png,8,8,cat,0,0,4,4' % i)
  (tmp_path / 'boxes.csv').write_text('\n'.join(rows) + '\n')
  (tmp_path / 'label_map.pbtxt').write_text("item { id: 1 name: 'cat' }")
  sample_scripts.run(
      'create_csv_tf_record.py', csv_input=tmp_path / 'boxes.csv',
      image_dir=tmp_path / 'images',
      label_map_path=tmp_path / 'label_map.pbtxt',
      output_path=tmp_path / 'train.record', num_shards=2)
  counts = [len(list(tf.compat.v1.io.tf_record_iterator(
      str(tmp_path / ('train.record-%05d-of-00002' % i))))) for i in range(2)]
  assert counts == [2, 1]
