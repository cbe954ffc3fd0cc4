r"""Converts a CSV of boxes and a folder of images to a TFRecord.

A custom dataset converter written the way the original's "Preparing
inputs" documentation shows, on dataset_util's feature helpers. The CSV
has a header and one row per box, in pixels:

  filename,width,height,class,xmin,ymin,xmax,ymax
  cat1.jpg,640,480,cat,10,20,200,300

Rows of the same filename become one tf.train.Example; class names are
looked up in the label map; --num_shards > 1 writes PATH-0000i-of-0000N
with tf_record_creation_util, as the original's tools. Example:

  python samples/scripts/create_csv_tf_record.py \
    --csv_input=train.csv --image_dir=images \
    --label_map_path=label_map.pbtxt --output_path=train.record
"""
import collections
import contextlib
import csv
import os

import tensorflow as tf

from od_estimator.dataset_tools import tf_record_creation_util
from od_estimator.utils import dataset_util
from od_estimator.utils import label_map_util

flags = tf.compat.v1.app.flags
flags.DEFINE_string('csv_input', '', 'Path to the CSV of boxes.')
flags.DEFINE_string('image_dir', '', 'Folder holding the images.')
flags.DEFINE_string('label_map_path', '', 'Path to the label map.')
flags.DEFINE_string('output_path', '', 'Path to the output TFRecord.')
flags.DEFINE_integer('num_shards', 1, 'Shards PATH-0000i-of-0000N when > 1.')
FLAGS = flags.FLAGS


def read_boxes(csv_path):
  """{filename: [row dict, ...]} in file order."""
  boxes = collections.OrderedDict()
  with tf.io.gfile.GFile(csv_path) as f:
    for row in csv.DictReader(f):
      boxes.setdefault(row['filename'], []).append(row)
  return boxes


def create_tf_example(filename, rows, image_dir, label_map_dict):
  """One image's tf.train.Example with normalized boxes."""
  with tf.io.gfile.GFile(os.path.join(image_dir, filename), 'rb') as f:
    encoded_image = f.read()
  width, height = int(rows[0]['width']), int(rows[0]['height'])
  image_format = os.path.splitext(filename)[1][1:].lower().replace(
      'jpg', 'jpeg').encode('utf8')
  xmins = [float(row['xmin']) / width for row in rows]
  xmaxs = [float(row['xmax']) / width for row in rows]
  ymins = [float(row['ymin']) / height for row in rows]
  ymaxs = [float(row['ymax']) / height for row in rows]
  classes_text = [row['class'].encode('utf8') for row in rows]
  classes = [label_map_dict[row['class']] for row in rows]
  return tf.train.Example(features=tf.train.Features(feature={
      'image/height': dataset_util.int64_feature(height),
      'image/width': dataset_util.int64_feature(width),
      'image/filename': dataset_util.bytes_feature(filename.encode('utf8')),
      'image/source_id': dataset_util.bytes_feature(filename.encode('utf8')),
      'image/encoded': dataset_util.bytes_feature(encoded_image),
      'image/format': dataset_util.bytes_feature(image_format),
      'image/object/bbox/xmin': dataset_util.float_list_feature(xmins),
      'image/object/bbox/xmax': dataset_util.float_list_feature(xmaxs),
      'image/object/bbox/ymin': dataset_util.float_list_feature(ymins),
      'image/object/bbox/ymax': dataset_util.float_list_feature(ymaxs),
      'image/object/class/text': dataset_util.bytes_list_feature(
          classes_text),
      'image/object/class/label': dataset_util.int64_list_feature(classes),
  }))


def main(_):
  label_map_dict = label_map_util.get_label_map_dict(FLAGS.label_map_path)
  count = 0
  with contextlib.ExitStack() as tf_record_close_stack:
    if FLAGS.num_shards > 1:
      writers = tf_record_creation_util.open_sharded_output_tfrecords(
          tf_record_close_stack, FLAGS.output_path, FLAGS.num_shards)
    else:
      writers = [tf_record_close_stack.enter_context(
          tf.io.TFRecordWriter(FLAGS.output_path))]
    for filename, rows in read_boxes(FLAGS.csv_input).items():
      example = create_tf_example(filename, rows, FLAGS.image_dir,
                                  label_map_dict)
      writers[count % len(writers)].write(example.SerializeToString())
      count += 1
  print('Wrote %d examples to %s' % (count, FLAGS.output_path))


if __name__ == '__main__':
  tf.compat.v1.app.run()
