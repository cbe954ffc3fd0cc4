r"""COCO Camera Traps annotations + images -> sharded tf.Example TFRecords.

An Apache Beam pipeline (install extra: `pip install od_estimator[beam]`),
with the original's flags (the console script, or `python -m` this module):

  create_cococameratraps_tfexample_main \
      --image_directory=images/ \
      --input_annotations_file=annotations.json \
      --output_tfrecord_prefix=out/cct.record \
      [--num_images_per_shard=200] [--runner=DataflowRunner ...]

The annotations file is in the COCO Camera Traps format: COCO's `images`,
`annotations` and `categories`, where each image also gives its
`location`, `date_captured`, `seq_id`, `seq_num_frames` and `frame_num`.
Each image becomes one tf.Example with the original's keys: image/encoded,
image/format, image/filename, image/source_id, image/key/sha256,
image/height, image/width (as the annotations file gives them),
image/location, image/date_captured, image/seq_id, image/seq_num_frames,
image/seq_frame_num, image/object/bbox/{xmin,ymin,xmax,ymax} (normalized),
image/object/class/{label,text}, image/object/area, and
image/class/{label,text}: the first object's category, else 0 / 'empty'.

As in the original, an annotation without a `bbox` is an image-level label:
its class is listed with no box; a box of zero size or outside the image is
left out with its class. The output has ceil(images / num_images_per_shard)
shards, PREFIX-00000-of-0000N.

Where this differs from the original: the annotations file is checked
before the pipeline starts (a missing field, an unknown image or category
id is an error naming it, where the original failed with a KeyError inside
the pipeline); an image file that is missing or unreadable is left out as
the original does, but logged by name and counted in the final report;
image/format is the file's format (the original wrote 'jpeg' for every
file); and --num_images_per_shard is read as a number (the original's
command line took it as text and failed).
"""
import logging
import math
import os
import sys

import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import tool_flags
from od_estimator.dataset_tools.context_rcnn import beam_tool
from od_estimator.utils import dataset_util
from od_estimator.utils import flag_checks

_NAMESPACE = 'cococameratraps_data_generation'
_LOG = logging.getLogger(__name__)
_IMAGE_FIELDS = ('id', 'file_name', 'height', 'width', 'location',
                 'date_captured', 'seq_id', 'seq_num_frames', 'frame_num')
_INTEGER_FIELDS = ('height', 'width', 'seq_num_frames', 'frame_num')
# How many problems of an annotations file are listed before eliding.
_MAX_PROBLEMS = 10


def _problems_in_images(images):
  problems, ids = [], set()
  for index, image in enumerate(images):
    if not isinstance(image, dict):
      problems.append('images[%d] is not an object' % index)
      continue
    where = 'images[%d] (id %r)' % (index, image.get('id'))
    if image.get('id') in ids:
      problems.append('%s: the id is used by an earlier image' % where)
    ids.add(image.get('id'))
    missing = [name for name in _IMAGE_FIELDS if name not in image]
    if missing:
      problems.append('%s lacks %s' % (where, ', '.join(missing)))
      continue
    for name in _INTEGER_FIELDS:
      if not isinstance(image[name], int) or isinstance(image[name], bool):
        problems.append('%s: %s is %r, not an integer' % (
            where, name, image[name]))
  return problems, ids


def _problems_in_annotations(annotations, image_ids, category_ids):
  problems = []
  for index, annotation in enumerate(annotations):
    if not isinstance(annotation, dict):
      problems.append('annotations[%d] is not an object' % index)
      continue
    where = 'annotations[%d] (id %r)' % (index, annotation.get('id'))
    if annotation.get('image_id') not in image_ids:
      problems.append('%s: image_id %r is no image of the file' % (
          where, annotation.get('image_id')))
    if annotation.get('category_id') not in category_ids:
      problems.append('%s: category_id %r is no category of the file' % (
          where, annotation.get('category_id')))
    bbox = annotation.get('bbox')
    if bbox is not None and (
        not isinstance(bbox, list) or len(bbox) != 4 or
        not all(isinstance(v, (int, float)) for v in bbox)):
      problems.append('%s: bbox %r is not [x, y, width, height]' % (
          where, bbox))
  return problems


def check_annotations(data, path):
  """Refuses an annotations file the pipeline could not convert.

  Args:
    data: the parsed JSON object.
    path: the file, for the messages.

  Returns:
    (images, annotations, categories) lists; `annotations` and
    `categories` may be absent from the file (no labels).

  Raises:
    errors.UserInputErrors: one line per problem, each naming the file and
      the image, annotation or category concerned.
  """
  lists = {}
  for name in ('images', 'annotations', 'categories'):
    value = data.get(name, [] if name != 'images' else None)
    if not isinstance(value, list):
      raise errors.UserInputError('annotations file %s: `%s` is %s, not a '
                                  'list' % (path, name, type(value).__name__))
    lists[name] = value
  problems, image_ids = _problems_in_images(lists['images'])
  category_ids = set()
  for index, category in enumerate(lists['categories']):
    if not isinstance(category, dict) or not {'id', 'name'} <= set(category):
      problems.append('categories[%d] lacks id or name' % index)
    else:
      category_ids.add(category['id'])
  problems += _problems_in_annotations(lists['annotations'], image_ids,
                                       category_ids)
  if problems:
    listed = ['annotations file %s: %s' % (path, p)
              for p in problems[:_MAX_PROBLEMS]]
    if len(problems) > _MAX_PROBLEMS:
      listed.append('annotations file %s: %d more problems' % (
          path, len(problems) - _MAX_PROBLEMS))
    raise errors.UserInputErrors(listed)
  return lists['images'], lists['annotations'], lists['categories']


def _box_fits(bbox, image_width, image_height):
  x, y, width, height = bbox
  return (width > 0 and height > 0 and x >= 0 and y >= 0 and
          x + width <= image_width and y + height <= image_height)


def _object_features(annotations, image, category_names, keep_bboxes):
  """The per-object lists of an image's annotations; (lists, skipped)."""
  width, height = image['width'], image['height']
  boxes = {'xmin': [], 'xmax': [], 'ymin': [], 'ymax': [], 'area': []}
  ids, names, skipped = [], [], 0
  for annotation in annotations:
    if 'bbox' in annotation and keep_bboxes:
      if not _box_fits(annotation['bbox'], width, height):
        skipped += 1
        continue
      x, y, box_width, box_height = annotation['bbox']
      boxes['xmin'].append(x / width)
      boxes['xmax'].append((x + box_width) / width)
      boxes['ymin'].append(y / height)
      boxes['ymax'].append((y + box_height) / height)
      # The original's stand-in for a missing area.
      boxes['area'].append(annotation.get('area', box_width * box_height / 2))
    ids.append(int(annotation['category_id']))
    names.append(category_names[annotation['category_id']])
  return boxes, ids, names, skipped


def image_example(image, annotations, image_directory, category_names,
                  keep_bboxes=True):
  """The tf.Example of one COCO Camera Traps image, as the original's.

  Args:
    image: the image's dict (check_annotations has checked its fields).
    annotations: the annotation dicts of this image.
    image_directory: the directory holding image['file_name'].
    category_names: {category id: name}.
    keep_bboxes: write the annotations' boxes (else classes only).

  Returns:
    (tf.train.Example, number of annotations left out for their box).

  Raises:
    errors.UserInputError: the image file is missing, unreadable or
      corrupt (the pipeline leaves such an image out).
  """
  path = os.path.join(image_directory, image['file_name'])
  encoded, decoded = tool_flags.read_image(path)
  try:
    decoded.load()
  except (OSError, SyntaxError, ValueError) as error:
    raise errors.UserInputError('image %s is truncated or corrupt: %s' % (
        path, error)) from None
  boxes, ids, names, skipped = _object_features(
      annotations, image, category_names, keep_bboxes)
  f = dataset_util
  image_format = (decoded.format or 'jpeg').lower()
  # Many camera traps write MPO: a JPEG with a preview appended.
  image_format = 'jpeg' if image_format == 'mpo' else image_format
  features = tool_flags.image_features(
      encoded, image_format, image['height'], image['width'],
      image['file_name'], str(image['id']), boxes['ymin'], boxes['xmin'],
      boxes['ymax'], boxes['xmax'])
  features.update({
      'image/location': f.bytes_feature(str(image['location'])),
      'image/seq_num_frames': f.int64_feature(image['seq_num_frames']),
      'image/seq_frame_num': f.int64_feature(image['frame_num']),
      'image/seq_id': f.bytes_feature(str(image['seq_id'])),
      'image/date_captured': f.bytes_feature(str(image['date_captured'])),
      'image/class/label': f.int64_list_feature(ids[:1] or [0]),
      'image/class/text': f.bytes_list_feature(names[:1] or ['empty']),
  })
  if annotations:
    features.update({
        'image/object/class/label': f.int64_list_feature(ids),
        'image/object/class/text': f.bytes_list_feature(names),
        'image/object/area': f.float_list_feature(boxes['area']),
    })
  example = tf.train.Example(features=tf.train.Features(feature=features))
  return example, skipped


def _convert(item, image_directory, category_names, keep_bboxes):
  """Beam step: (image, annotations) -> its tf.Example, or none."""
  image, annotations = item
  try:
    example, skipped = image_example(image, annotations, image_directory,
                                     category_names, keep_bboxes)
  except errors.UserInputError as error:
    # As the original: a camera-trap set of millions of frames keeps going
    # past a missing or broken file; the report counts them.
    _LOG.warning('left out image id %s: %s', image['id'], error)
    beam_tool.count(_NAMESPACE, 'images_left_out')
    return []
  beam_tool.count(_NAMESPACE, 'annotations_skipped', skipped)
  beam_tool.count(_NAMESPACE, 'num_tf_examples_processed')
  return [example]


def load_json_data(data_file):
  """The parsed annotations file (errors name the file)."""
  return tool_flags.read_json(data_file, 'annotations file')


def create_pipeline(pipeline, image_directory, input_annotations_file,
                    output_tfrecord_prefix=None, num_images_per_shard=200,
                    keep_bboxes=True):
  """Adds the conversion to a Beam pipeline, as the original's function.

  Args:
    pipeline: a beam.Pipeline.
    image_directory: the directory of the images.
    input_annotations_file: the COCO Camera Traps JSON file.
    output_tfrecord_prefix: shards are PREFIX-0000i-of-0000N.
    num_images_per_shard: images per output shard (sets N).
    keep_bboxes: write the annotations' boxes.

  Returns:
    The number of shards.

  Raises:
    errors.UserInputError: an unreadable or unusable annotations file, an
      annotations file without images, or num_images_per_shard < 1.
  """
  beam = beam_tool.import_beam()
  if num_images_per_shard < 1:
    raise errors.UserInputError('--num_images_per_shard=%d: must be at '
                                'least 1' % num_images_per_shard)
  images, annotations, categories = check_annotations(
      load_json_data(input_annotations_file), input_annotations_file)
  if not images:
    raise errors.UserInputError('annotations file %s lists no images' %
                                input_annotations_file)
  per_image = {image['id']: [] for image in images}
  for annotation in annotations:
    per_image[annotation['image_id']].append(annotation)
  category_names = {c['id']: c['name'] for c in categories}
  num_shards = math.ceil(len(images) / num_images_per_shard)
  _ = (pipeline
       | 'CreateCollections' >> beam.Create(
           [(image, per_image[image['id']]) for image in images])
       # Spreads the images over the workers before they are read.
       | 'Reshuffle' >> beam.Reshuffle()
       | 'ParseImage' >> beam.FlatMap(
           _convert, image_directory, category_names, keep_bboxes)
       | 'WriteTfImageExample' >> beam.io.WriteToTFRecord(
           output_tfrecord_prefix, num_shards=num_shards,
           coder=beam.coders.ProtoCoder(tf.train.Example)))
  return num_shards


def _parser():
  parser = beam_tool.argument_parser(
      'Convert COCO Camera Traps annotations and images to sharded '
      'tf.Example TFRecords, as an Apache Beam pipeline.')
  parser.add_argument('--image_directory', required=True,
                      help='The directory of the images.')
  parser.add_argument('--output_tfrecord_prefix', required=True,
                      help='Shards are written as PREFIX-0000i-of-0000N.')
  parser.add_argument('--input_annotations_file', required=True,
                      help='The COCO Camera Traps JSON annotations file.')
  parser.add_argument('--num_images_per_shard',
                      type=flag_checks.at_least(1), default=200,
                      help='Images per output shard.')
  return parser


@tool_flags.reporting_input_errors
def main(argv=None):
  args, options = beam_tool.parse_flags(_parser(), argv)
  counters, shards = beam_tool.run(
      options, lambda pipeline: create_pipeline(pipeline, **args),
      _NAMESPACE, args['output_tfrecord_prefix'], 'output_tfrecord_prefix')
  print('wrote %s tf.Example(s) to %s; left out %s image(s) (missing or '
        'unreadable, logged) and %s box(es) (zero size or outside the '
        'image)' % (counters.get('num_tf_examples_processed', '?'), shards,
                    counters.get('images_left_out', 0),
                    counters.get('annotations_skipped', 0)))
  return 0


if __name__ == '__main__':
  # Under `python -m` this file is __main__, a module Beam workers (other
  # processes, other machines) cannot import: the pipeline must refer to
  # the steps of the module under its own name.
  from od_estimator.dataset_tools.context_rcnn import (
      create_cococameratraps_tfexample_main as tool)
  sys.exit(tool.main())
