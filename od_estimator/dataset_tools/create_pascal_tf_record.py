r"""Converts a PASCAL VOC tree (VOCdevkit) into one TFRecord file.

  python -m od_estimator.dataset_tools.create_pascal_tf_record \
      --data_dir=VOCdevkit --year=VOC2012 --set=train \
      --label_map_path=pascal_label_map.pbtxt --output_path=pascal_train.record

Like the original, the image ids of a set are read from
DATA_DIR/YEAR/ImageSets/Main/aeroplane_SET.txt (every VOC class file lists
all images of the set), annotations from DATA_DIR/YEAR/ANNOTATIONS_DIR/ID.xml
and images from DATA_DIR/<folder in the XML>/JPEGImages/<filename>.
--year=merged reads VOC2007 and VOC2012 into the same file.
"""
import argparse
import logging
import os
import sys
import xml.etree.ElementTree as ElementTree

import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.utils import dataset_util
from od_estimator.utils import file_safety
from od_estimator.utils.dataset_util import read_examples_list
from od_estimator.utils.dataset_util import recursive_parse_xml_to_dict
from od_estimator.utils import label_map_util
from od_estimator.utils import progress_bar

SETS = ['train', 'val', 'trainval', 'test']
YEARS = ['VOC2007', 'VOC2012', 'merged']


def dict_to_tf_example(data, dataset_directory, label_map_dict,
                       ignore_difficult_instances=False,
                       image_subdirectory='JPEGImages'):
  """Builds the tf.train.Example of one VOC annotation.

  Args:
    data: the parsed <annotation> of one image (recursive_parse_xml_to_dict),
      with 'folder', 'filename', 'size' {'width', 'height'} and optionally
      a list 'object' of {'name', 'pose', 'truncated', 'difficult',
      'bndbox' {'xmin', 'ymin', 'xmax', 'ymax'} in pixels}.
    dataset_directory: the VOCdevkit root.
    label_map_dict: {class name: label id}.
    ignore_difficult_instances: drop objects marked difficult.
    image_subdirectory: image folder inside data['folder'].

  Returns:
    The tf.train.Example with normalized boxes.

  Raises:
    errors.UserInputError: if the image is missing, unreadable or not a
      JPEG, or an object's class is not in the label map.
  """
  image_path = os.path.join(dataset_directory, data['folder'] or '',
                            image_subdirectory, data['filename'])
  encoded_jpg, image = tool_flags.read_image(image_path)
  if image.format != 'JPEG':
    raise errors.UserInputError('image %s is not a JPEG' % image_path)
  width = int(data['size']['width'])
  height = int(data['size']['height'])

  xmin, ymin, xmax, ymax = [], [], [], []
  labels, texts, truncated, poses, difficult_flags = [], [], [], [], []
  for obj in data.get('object', []):
    # Some VOC2012 objects lack these tags; VOC's own tools read them as 0.
    difficult = bool(int(obj.get('difficult') or 0))
    if ignore_difficult_instances and difficult:
      continue
    name = obj['name']
    if name not in label_map_dict:
      raise errors.UserInputError(
          'class %r of %s is not in the label map' % (name, data['filename']))
    box = obj['bndbox']
    xmin.append(float(box['xmin']) / width)
    ymin.append(float(box['ymin']) / height)
    xmax.append(float(box['xmax']) / width)
    ymax.append(float(box['ymax']) / height)
    labels.append(label_map_dict[name])
    texts.append(name)
    difficult_flags.append(int(difficult))
    truncated.append(int(obj.get('truncated') or 0))
    # As the original, an empty <pose> is written empty; only a missing tag
    # gets VOC's 'Unspecified'.
    poses.append(obj.get('pose', 'Unspecified') or '')

  f = dataset_util
  feature = tool_flags.image_features(
      encoded_jpg, 'jpeg', height, width, data['filename'], data['filename'],
      ymin, xmin, ymax, xmax)
  feature.update({
      'image/object/class/text': f.bytes_list_feature(texts),
      'image/object/class/label': f.int64_list_feature(labels),
      'image/object/difficult': f.int64_list_feature(difficult_flags),
      'image/object/truncated': f.int64_list_feature(truncated),
      'image/object/view': f.bytes_list_feature(poses),
  })
  return tf.train.Example(features=tf.train.Features(feature=feature))


def _parser():
  parser = argparse.ArgumentParser(
      description='Convert a PASCAL VOC set to a TFRecord file.')
  parser.add_argument('--data_dir', default='',
                      help='VOCdevkit root (holding VOC2007/, VOC2012/).')
  parser.add_argument('--set', default='train', choices=SETS)
  parser.add_argument('--annotations_dir', default='Annotations',
                      help='Annotation folder, relative to DATA_DIR/YEAR.')
  parser.add_argument('--year', default='VOC2007', choices=YEARS)
  parser.add_argument('--output_path', required=True)
  parser.add_argument('--label_map_path',
                      default='data/pascal_label_map.pbtxt')
  # tf.flags boolean spellings: --flag, --flag=true|false, --noflag.
  parser.add_argument('--ignore_difficult_instances',
                      type=tool_flags.parse_bool, nargs='?', const=True,
                      default=False)
  parser.add_argument('--noignore_difficult_instances',
                      dest='ignore_difficult_instances',
                      action='store_false', help=argparse.SUPPRESS)
  return tool_flags.add_logging_flags(parser)


@tool_flags.reporting_input_errors
def main(argv=None):
  logging.basicConfig(level=logging.INFO, format='%(message)s')
  args = _parser().parse_args(argv)
  years = ['VOC2007', 'VOC2012'] if args.year == 'merged' else [args.year]
  label_map_dict = label_map_util.get_label_map_dict(args.label_map_path)
  output_dir = os.path.dirname(args.output_path)
  if output_dir:
    tf.io.gfile.makedirs(output_dir)

  num_images = num_objects = 0
  # Renamed into place when complete: an interrupted run leaves none.
  with file_safety.replacing_paths([args.output_path]) as (temp,), \
      tf.io.TFRecordWriter(temp) as writer:
    for year in years:
      examples_path = os.path.join(args.data_dir, year, 'ImageSets', 'Main',
                                   'aeroplane_%s.txt' % args.set)
      annotations_dir = os.path.join(args.data_dir, year, args.annotations_dir)
      examples = read_examples_list(examples_path)
      logging.info('Reading %d images of PASCAL %s %s.', len(examples), year,
                   args.set)
      progress = progress_bar.Count(len(examples), 1000,
                                    log_line=logging.info)
      for index, example_id in enumerate(examples):
        progress.update(index)
        path = os.path.join(annotations_dir, example_id + '.xml')
        xml = ElementTree.fromstring(
            tool_flags.read_bytes(path, 'annotation'))
        data = recursive_parse_xml_to_dict(xml)['annotation']
        example = dict_to_tf_example(data, args.data_dir, label_map_dict,
                                     args.ignore_difficult_instances)
        num_images += 1
        num_objects += len(example.features.feature[
            'image/object/class/label'].int64_list.value)
        writer.write(example.SerializeToString())
      progress.end()
  print('wrote %d images and %d objects to %s' % (
      num_images, num_objects, args.output_path))
  return 0


if __name__ == '__main__':
  sys.exit(main())
