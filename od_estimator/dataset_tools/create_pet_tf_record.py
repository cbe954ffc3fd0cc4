r"""Converts the Oxford-IIIT Pet dataset into sharded TFRecords.

  python -m od_estimator.dataset_tools.create_pet_tf_record \
      --data_dir=pets --output_dir=pets_records \
      --label_map_path=pet_label_map.pbtxt [--nofaces_only --mask_type=png]

Reads DATA_DIR/annotations/trainval.txt, annotations/xmls/ID.xml,
annotations/trimaps/ID.png and images/ID.jpg, as the original. The list is
shuffled with seed 42 and split 70 % train / 30 % val (the dataset's test
images come without annotations), giving the original's split.

With --faces_only (the default) each example holds the XML's head boxes:
pet_faces_{train,val}.record-?????-of-NNNNN. With --nofaces_only it holds
the whole pet instead, its box the extent of the trimap's non-background
pixels and its instance mask the trimap's foreground and boundary (values
1 and 3; 2 is background): pets_fullbody_with_masks_{train,val}.record-...
--mask_type=png stores each mask as a PNG (read it with input_reader
`mask_type: PNG_MASKS`), --mask_type=numerical as height * width floats
(`mask_type: NUMERICAL_MASKS`, the input reader's default).

The class of an image comes from its file name (`Abyssinian_12.jpg` is
Abyssinian). Images that are not JPEGs (a few in the dataset are) and
examples without an XML file are skipped with a warning, as the original
does; the summary counts them.
"""
import argparse
import io
import logging
import os
import random
import re
import sys
import xml.etree.ElementTree as ElementTree

import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.utils import dataset_util
from od_estimator.utils import flag_checks
from od_estimator.utils import label_map_util
from od_estimator.utils import progress_bar

MASK_TYPES = ('png', 'numerical')
_BACKGROUND = 2  # trimap value of background pixels
_SPLIT_SEED = 42
_TRAIN_FRACTION = 0.7


class SkippedExample(Exception):
  """An example the original leaves out with a warning."""


def get_class_name_from_filename(file_name):
  """'american_pit_bull_terrier_105.jpg' -> 'american_pit_bull_terrier'."""
  match = re.match(r'([A-Za-z_]+)(_[0-9]+\.jpg)', file_name, re.I)
  if match is None:
    raise errors.UserInputError(
        'cannot read a class from image name %r (expected NAME_NUMBER.jpg)'
        % file_name)
  return match.groups()[0]


def _encode_png(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


def _read_trimap(mask_path):
  """The trimap as a uint8 [height, width] array."""
  encoded = tool_flags.read_bytes(mask_path, 'trimap')
  try:
    trimap = Image.open(io.BytesIO(encoded))
  except (OSError, SyntaxError, ValueError) as error:
    raise SkippedExample('trimap %s is not an image: %s' % (mask_path, error))
  if trimap.format != 'PNG':
    raise SkippedExample('trimap %s is not a PNG' % mask_path)
  return np.asarray(trimap)


def dict_to_tf_example(data, mask_path, label_map_dict, image_subdirectory,
                       ignore_difficult_instances=False, faces_only=True,
                       mask_type='png'):
  """Builds the tf.train.Example of one pet image.

  Args:
    data: the parsed <annotation> of the image's XML
      (recursive_parse_xml_to_dict): 'filename', 'size' {'width', 'height'}
      and optionally a list 'object' of {'bndbox', 'difficult', 'truncated',
      'pose'}.
    mask_path: the image's trimap PNG.
    label_map_dict: {class name: label id}.
    image_subdirectory: the folder holding data['filename'].
    ignore_difficult_instances: drop objects marked difficult.
    faces_only: head boxes, no masks; else whole-pet boxes and masks.
    mask_type: 'png' or 'numerical' (only used without faces_only).

  Returns:
    The tf.train.Example, boxes normalized.

  Raises:
    SkippedExample: the image is not a JPEG or the trimap not a PNG.
    errors.UserInputError: a missing file, a class not in the label map.
  """
  if mask_type not in MASK_TYPES:
    raise errors.UserInputError('--mask_type must be png or numerical, got %r'
                                % mask_type)
  image_path = os.path.join(image_subdirectory, data['filename'])
  encoded_jpg, image = tool_flags.read_image(image_path)
  if image.format != 'JPEG':
    raise SkippedExample('image %s is not a JPEG' % image_path)
  pet = _read_trimap(mask_path) != _BACKGROUND
  width = int(data['size']['width'])
  height = int(data['size']['height'])
  class_name = get_class_name_from_filename(data['filename'])
  if class_name not in label_map_dict:
    raise errors.UserInputError('class %r of %s is not in the label map' % (
        class_name, data['filename']))
  boxes, difficult_flags, truncated, poses = _object_columns(
      data, pet, mask_path, width, height, ignore_difficult_instances,
      faces_only)
  f = dataset_util
  feature = tool_flags.image_features(
      encoded_jpg, 'jpeg', height, width, data['filename'], data['filename'],
      *boxes.T)
  feature.update({
      'image/object/class/text': f.bytes_list_feature(
          [class_name] * len(boxes)),
      'image/object/class/label': f.int64_list_feature(
          [label_map_dict[class_name]] * len(boxes)),
      'image/object/difficult': f.int64_list_feature(difficult_flags),
      'image/object/truncated': f.int64_list_feature(truncated),
      'image/object/view': f.bytes_list_feature(poses),
  })
  if not faces_only:
    feature['image/object/mask'] = _mask_feature(pet, len(boxes), mask_type)
  return tf.train.Example(features=tf.train.Features(feature=feature))


def _object_columns(data, pet, mask_path, width, height,
                    ignore_difficult_instances, faces_only):
  """Per-object boxes and flags of one image's XML objects.

  Args:
    data, mask_path, ignore_difficult_instances, faces_only: see
      dict_to_tf_example.
    pet: [H, W] bool, the trimap's pet pixels.
    width, height: the image size the boxes are normalized by.

  Returns:
    ([N, 4] float32 normalized ymin, xmin, ymax, xmax boxes, then the lists
    of difficult flags, truncated flags and poses).

  Raises:
    SkippedExample: whole-pet boxes asked for a trimap without pet pixels.
  """
  rows = np.nonzero(pet.any(axis=1))[0]
  cols = np.nonzero(pet.any(axis=0))[0]
  boxes, difficult_flags, truncated, poses = [], [], [], []
  for obj in data.get('object', []):
    difficult = bool(int(obj.get('difficult') or 0))
    if ignore_difficult_instances and difficult:
      continue
    if faces_only:
      box = obj['bndbox']
      xmin, ymin = float(box['xmin']), float(box['ymin'])
      xmax, ymax = float(box['xmax']), float(box['ymax'])
    else:
      if not len(rows):
        raise SkippedExample('trimap %s has no pet pixels' % mask_path)
      # As the original: the last pet pixel's index, not one past it.
      xmin, xmax = float(cols[0]), float(cols[-1])
      ymin, ymax = float(rows[0]), float(rows[-1])
    boxes.append([ymin / height, xmin / width, ymax / height, xmax / width])
    difficult_flags.append(int(difficult))
    truncated.append(int(obj.get('truncated') or 0))
    poses.append(obj.get('pose') or 'Unspecified')
  boxes = np.array(boxes, np.float32).reshape([-1, 4])
  return boxes, difficult_flags, truncated, poses


def _mask_feature(pet, num_boxes, mask_type):
  """The whole-pet mask once per box, as PNGs or as floats (mask_type)."""
  masks = [pet.astype(np.uint8)] * num_boxes
  if mask_type == 'png':
    return dataset_util.bytes_list_feature(
        [_encode_png(mask) for mask in masks])
  return dataset_util.float_list_feature(np.array(masks, np.float32).ravel())


def create_tf_record(output_prefix, num_shards, label_map_dict,
                     annotations_dir, image_dir, examples, faces_only=True,
                     mask_type='png'):
  """Writes `examples` (ids) to shards; example i goes to shard i % n.

  Returns:
    (number written, number skipped).
  """
  written = skipped = 0
  with dataset_util.open_sharded_output_tfrecords(output_prefix,
                                                  num_shards) as writers:
    progress = progress_bar.Count(len(examples), 100, log_line=logging.info)
    for index, example in enumerate(examples):
      progress.update(index)
      xml_path = os.path.join(annotations_dir, 'xmls', example + '.xml')
      mask_path = os.path.join(annotations_dir, 'trimaps', example + '.png')
      if not tf.io.gfile.exists(xml_path):
        logging.warning('Could not find %s, ignoring example.', xml_path)
        skipped += 1
        continue
      xml = ElementTree.fromstring(tool_flags.read_bytes(xml_path,
                                                         'annotation'))
      data = dataset_util.recursive_parse_xml_to_dict(xml)['annotation']
      try:
        tf_example = dict_to_tf_example(
            data, mask_path, label_map_dict, image_dir,
            faces_only=faces_only, mask_type=mask_type)
      except SkippedExample as reason:
        logging.warning('Invalid example %s (%s), ignoring.', xml_path,
                        reason)
        skipped += 1
        continue
      writers[index % num_shards].write(tf_example.SerializeToString())
      written += 1
    progress.end()
  return written, skipped


def _parser():
  parser = argparse.ArgumentParser(
      description='Convert the Oxford-IIIT Pet dataset to TFRecords.')
  parser.add_argument('--data_dir', required=True,
                      help='Dataset root, holding images/ and annotations/.')
  parser.add_argument('--output_dir', required=True)
  parser.add_argument('--label_map_path', default='data/pet_label_map.pbtxt')
  # tf.flags boolean spellings: --flag, --flag=true|false, --noflag.
  parser.add_argument('--faces_only', type=tool_flags.parse_bool, nargs='?',
                      const=True, default=True,
                      help='Head boxes only (default); --nofaces_only '
                      'writes whole-pet boxes and instance masks.')
  parser.add_argument('--nofaces_only', dest='faces_only',
                      action='store_false', help=argparse.SUPPRESS)
  parser.add_argument('--mask_type', default='png', choices=MASK_TYPES,
                      help='How masks are stored with --nofaces_only.')
  parser.add_argument('--num_shards', type=flag_checks.at_least(1), default=10)
  return tool_flags.add_logging_flags(parser)


@tool_flags.reporting_input_errors
def main(argv=None):
  logging.basicConfig(level=logging.INFO, format='%(message)s')
  args = _parser().parse_args(argv)
  label_map_dict = label_map_util.get_label_map_dict(args.label_map_path)
  image_dir = os.path.join(args.data_dir, 'images')
  annotations_dir = os.path.join(args.data_dir, 'annotations')
  examples = dataset_util.read_examples_list(
      os.path.join(annotations_dir, 'trainval.txt'))
  # The original's split: random.seed(42); random.shuffle(examples).
  random.Random(_SPLIT_SEED).shuffle(examples)
  num_train = int(_TRAIN_FRACTION * len(examples))
  name = 'pet_faces_%s.record' if args.faces_only else (
      'pets_fullbody_with_masks_%s.record')
  tf.io.gfile.makedirs(args.output_dir)
  for split, split_examples in (('train', examples[:num_train]),
                                ('val', examples[num_train:])):
    prefix = os.path.join(args.output_dir, name % split)
    written, skipped = create_tf_record(
        prefix, args.num_shards, label_map_dict, annotations_dir, image_dir,
        split_examples, faces_only=args.faces_only, mask_type=args.mask_type)
    print('%s: wrote %d examples to %d shard(s) %s-*, skipped %d' % (
        split, written, args.num_shards, prefix, skipped))
  return 0


if __name__ == '__main__':
  sys.exit(main())
