r"""Writes a small synthetic detection set: coloured shapes on noisy ground.

Three classes (1 circle, 2 square, 3 triangle), each image holding one to
`--max_shapes` shapes of random size, colour and position, with their boxes,
labels, areas and instance masks (PNG-encoded, as create_coco_tf_record
--include_masks writes them: read them with input_reader `load_instance_masks:
true mask_type: PNG_MASKS`; --noinclude_masks leaves them out). A shape drawn
over an earlier one hides that part of the earlier mask. The output is
deterministic for a seed. It is the demo's data and the tests' data.

  python -m od_estimator.dataset_tools.create_synthetic_tf_record \
      --output_dir=demo_out/data --num_train=800 --num_val=200

writes shapes_train.record-0000K-of-0000N, shapes_val.record-...,
shapes_label_map.pbtxt and, with --num_sample_images=N, images/shapes_<k>.png
in --output_dir.
"""
import argparse
import hashlib
import io
import os
import sys

import numpy as np
from PIL import Image
from PIL import ImageDraw
import tensorflow as tf

from od_estimator.dataset_tools import tool_flags
from od_estimator.utils import dataset_util
from od_estimator.utils import file_safety
from od_estimator.utils import flag_checks

CLASSES = ('circle', 'square', 'triangle')
LABEL_MAP_NAME = 'shapes_label_map.pbtxt'


def label_map_text():
  """The label map of the shapes set, in the original's text format."""
  return ''.join("item {\n  id: %d\n  name: '%s'\n  display_name: '%s'\n}\n"
                 % (i, name, name.capitalize())
                 for i, name in enumerate(CLASSES, start=1))


def _draw_shape(draw, kind, box, colour):
  """Draws one shape filling `box` = (x0, y0, x1, y1) in pixels."""
  x0, y0, x1, y1 = box
  if kind == 'circle':
    draw.ellipse(box, fill=colour)
  elif kind == 'square':
    draw.rectangle(box, fill=colour)
  else:
    draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=colour)


def make_image(rng, height, width, max_shapes, min_size=0.15, max_size=0.45):
  """Draws one synthetic image.

  Returns:
    (image uint8 [height, width, 3], boxes [N, 4] normalized ymin, xmin,
    ymax, xmax float32, labels [N] int 1-based, masks [N, height, width]
    uint8 0/1).
  """
  ground = rng.integers(0, 60, size=3)
  image = np.clip(rng.normal(ground, 12, size=(height, width, 3)), 0, 255)
  canvas = Image.fromarray(image.astype(np.uint8))
  boxes, labels, masks = [], [], []
  for _ in range(rng.integers(1, max_shapes + 1)):
    label = int(rng.integers(1, len(CLASSES) + 1))
    side = rng.uniform(min_size, max_size) * min(height, width)
    y0 = rng.uniform(0, height - side)
    x0 = rng.uniform(0, width - side)
    box = (int(x0), int(y0), int(x0 + side), int(y0 + side))
    colour = tuple(int(c) for c in rng.integers(110, 256, size=3))
    mask = Image.new('L', (width, height), 0)
    _draw_shape(ImageDraw.Draw(mask), CLASSES[label - 1], box, 1)
    _draw_shape(ImageDraw.Draw(canvas), CLASSES[label - 1], box, colour)
    mask = np.array(mask)
    # Later shapes cover earlier ones; keep the earlier masks honest.
    for earlier in masks:
      earlier[mask > 0] = 0
    masks.append(mask)
    boxes.append([box[1] / height, box[0] / width,
                  (box[3] + 1) / height, (box[2] + 1) / width])
    labels.append(label)
  boxes = np.clip(np.array(boxes, np.float32), 0.0, 1.0)
  return np.array(canvas), boxes, np.array(labels), np.stack(masks)


def _png(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


def encode_jpeg(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='JPEG', quality=95)
  return buffer.getvalue()


def make_example(image, boxes, labels, masks, source_id, include_masks=True):
  """Builds a tf.train.Example with the original's keys (masks as PNGs)."""
  height, width = image.shape[:2]
  encoded = encode_jpeg(image)
  areas = masks.reshape(len(masks), -1).sum(axis=1).astype(np.float32)
  f = dataset_util
  feature = {
      'image/height': f.int64_feature(height),
      'image/width': f.int64_feature(width),
      'image/filename': f.bytes_feature('%s.jpg' % source_id),
      'image/source_id': f.bytes_feature(str(source_id)),
      'image/key/sha256': f.bytes_feature(
          hashlib.sha256(encoded).hexdigest()),
      'image/encoded': f.bytes_feature(encoded),
      'image/format': f.bytes_feature('jpeg'),
      'image/object/bbox/ymin': f.float_list_feature(boxes[:, 0]),
      'image/object/bbox/xmin': f.float_list_feature(boxes[:, 1]),
      'image/object/bbox/ymax': f.float_list_feature(boxes[:, 2]),
      'image/object/bbox/xmax': f.float_list_feature(boxes[:, 3]),
      'image/object/class/label': f.int64_list_feature(labels),
      'image/object/class/text': f.bytes_list_feature(
          [CLASSES[l - 1] for l in labels]),
      'image/object/area': f.float_list_feature(areas),
      'image/object/is_crowd': f.int64_list_feature([0] * len(labels)),
      'image/object/difficult': f.int64_list_feature([0] * len(labels)),
  }
  if include_masks:
    feature['image/object/mask'] = f.bytes_list_feature(
        [_png(m) for m in masks])
  return tf.train.Example(features=tf.train.Features(feature=feature))


def write_split(output_prefix, num_examples, num_shards, seed, image_size,
                max_shapes, first_id=0, include_masks=True):
  """Writes one split; returns the shard file names."""
  rng = np.random.default_rng(seed)
  with dataset_util.open_sharded_output_tfrecords(
      output_prefix, num_shards) as writers:
    for index in range(num_examples):
      image, boxes, labels, masks = make_image(rng, image_size, image_size,
                                               max_shapes)
      example = make_example(image, boxes, labels, masks, first_id + index,
                             include_masks)
      writers[index % num_shards].write(example.SerializeToString())
  return dataset_util.sharded_filenames(output_prefix, num_shards)


def write_sample_images(directory, count, seed, image_size, max_shapes):
  """Writes `count` unlabelled images, shapes_<k>.png, to try a model on."""
  tf.io.gfile.makedirs(directory)
  rng = np.random.default_rng(seed)
  paths = []
  for index in range(count):
    image = make_image(rng, image_size, image_size, max_shapes)[0]
    paths.append(os.path.join(directory, 'shapes_%d.png' % index))
    file_safety.write_file(paths[-1], _png(image))
  return paths


def create_dataset(output_dir, num_train=800, num_val=200, image_size=128,
                   num_train_shards=2, num_val_shards=1, max_shapes=3,
                   seed=0, num_sample_images=0, include_masks=True):
  """Writes both splits, the label map and sample images into output_dir.

  Returns:
    {'train': [files], 'val': [files], 'label_map': path,
    'images': [sample image files in output_dir/images]}.
  """
  tf.io.gfile.makedirs(output_dir)
  label_map_path = os.path.join(output_dir, LABEL_MAP_NAME)
  file_safety.write_file(label_map_path, label_map_text())
  # Different seeds per split keep train and val images distinct.
  train = write_split(os.path.join(output_dir, 'shapes_train.record'),
                      num_train, num_train_shards, seed, image_size,
                      max_shapes, include_masks=include_masks)
  val = write_split(os.path.join(output_dir, 'shapes_val.record'), num_val,
                    num_val_shards, seed + 1, image_size, max_shapes,
                    first_id=num_train, include_masks=include_masks)
  images = write_sample_images(os.path.join(output_dir, 'images'),
                               num_sample_images, seed + 2, image_size,
                               max_shapes)
  return {'train': train, 'val': val, 'label_map': label_map_path,
          'images': images}


def _parser():
  parser = argparse.ArgumentParser(
      description='Write the synthetic coloured-shapes detection set.')
  parser.add_argument('--output_dir', required=True)
  parser.add_argument('--num_train', type=flag_checks.at_least(0), default=800)
  parser.add_argument('--num_val', type=flag_checks.at_least(0), default=200)
  parser.add_argument('--image_size', type=flag_checks.at_least(1), default=128,
                      help='Images are square, this many pixels a side.')
  parser.add_argument('--num_train_shards',
                      type=flag_checks.at_least(1), default=2)
  parser.add_argument('--num_val_shards', type=flag_checks.at_least(1),
                      default=1)
  parser.add_argument('--max_shapes', type=flag_checks.at_least(1), default=3,
                      help='Each image holds 1..max_shapes shapes.')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--num_sample_images',
                      type=flag_checks.at_least(0), default=0,
                      help='Also write this many unlabelled images, '
                      'images/shapes_<k>.png, to run a trained model on.')
  # tf.flags boolean spellings: --flag, --flag=true|false, --noflag.
  parser.add_argument('--include_masks', type=tool_flags.parse_bool,
                      nargs='?', const=True, default=True,
                      help='Store each shape\'s instance mask as a PNG '
                      '(default; --noinclude_masks leaves them out).')
  parser.add_argument('--noinclude_masks', dest='include_masks',
                      action='store_false', help=argparse.SUPPRESS)
  return tool_flags.add_logging_flags(parser)


@tool_flags.reporting_input_errors
def main(argv=None):
  written = create_dataset(**tool_flags.tool_arguments(_parser(), argv))
  print('wrote %d train shard(s), %d val shard(s), %d sample image(s) and %s'
        % (len(written['train']), len(written['val']), len(written['images']),
           written['label_map']))
  return 0


if __name__ == '__main__':
  sys.exit(main())
