r"""Converts COCO detection JSON + images into sharded TFRecords.

  python -m od_estimator.dataset_tools.create_coco_tf_record \
      --train_image_dir=coco/train2017 \
      --train_annotations_file=coco/annotations/instances_train2017.json \
      --val_image_dir=coco/val2017 \
      --val_annotations_file=coco/annotations/instances_val2017.json \
      --output_dir=coco_records --include_masks

Each split is optional and is written only when both its image directory and
its annotations file are given; the outputs are named like the original's:
coco_train.record-?????-of-00100, coco_val.record-?????-of-00050 and
coco_testdev.record-?????-of-00050 (shard counts set by --num_*_shards).

Boxes are stored normalized; class labels are the COCO category ids as they
are in the JSON (not made contiguous). Images without annotations are kept.
Annotations that cannot be used as boxes are skipped, counted per reason and
reported at the end of each split.
"""
import argparse
import collections
import hashlib
import io
import logging
import os
import sys

import numpy as np
from PIL import Image
from pycocotools import mask as coco_mask
import tensorflow as tf

from od_estimator import errors
from od_estimator.dataset_tools import coco_person_features
from od_estimator.dataset_tools import tool_flags
from od_estimator.utils import dataset_util
from od_estimator.utils import flag_checks
from od_estimator.utils import label_map_util
from od_estimator.utils import progress_bar

SKIP_ZERO_SIZE = 'zero width or height'
SKIP_OUTSIDE_IMAGE = 'box outside image'
SKIP_NOT_PERSON = 'not a person (remove_non_person_annotations)'

# Split name -> (image dir flag, annotations flag, shards flag, output name).
_SPLITS = collections.OrderedDict([
    ('train', ('train_image_dir', 'train_annotations_file',
               'num_train_shards', 'coco_train.record')),
    ('val', ('val_image_dir', 'val_annotations_file', 'num_val_shards',
             'coco_val.record')),
    ('testdev', ('test_image_dir', 'testdev_annotations_file',
                 'num_testdev_shards', 'coco_testdev.record')),
])

# How many skipped annotation ids the summary names before eliding.
_MAX_LISTED_IDS = 10


def _skip_reason(bbox, image_width, image_height):
  """Why a COCO [x, y, width, height] box is unusable, or None if it is fine."""
  x, y, width, height = bbox
  if width <= 0 or height <= 0:
    return SKIP_ZERO_SIZE
  # The original only checks the far edges; a negative origin is just as far
  # outside the image and would give negative normalized coordinates.
  if x < 0 or y < 0 or x + width > image_width or y + height > image_height:
    return SKIP_OUTSIDE_IMAGE
  return None


def _segmentation_to_mask(segmentation, image_height, image_width):
  """Rasterises one COCO segmentation to a uint8 [height, width] 0/1 mask.

  Args:
    segmentation: a list of polygons [x0, y0, x1, y1, ...], an uncompressed
      RLE {'size': [h, w], 'counts': [ints]} (typical for crowds) or a
      compressed RLE whose 'counts' is a string.
    image_height: int.
    image_width: int.

  Returns:
    uint8 [image_height, image_width] array of 0 and 1.
  """
  if isinstance(segmentation, dict):
    if isinstance(segmentation['counts'], list):
      rle = coco_mask.frPyObjects(segmentation, image_height, image_width)
    else:
      counts = segmentation['counts']
      rle = {'size': list(segmentation['size']),
             'counts': counts.encode('ascii') if isinstance(counts, str)
                       else counts}
    return coco_mask.decode(rle).astype(np.uint8)
  # pycocotools reads a 4-number list as a box, and fewer than 3 points
  # enclose nothing, so such degenerate polygons are dropped.
  polygons = [p for p in segmentation if len(p) >= 6]
  if not polygons:
    return np.zeros([image_height, image_width], np.uint8)
  rles = coco_mask.frPyObjects(polygons, image_height, image_width)
  # An object may be several polygons; its mask is their union.
  return np.amax(coco_mask.decode(rles), axis=2).astype(np.uint8)


def _encode_png(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


def create_tf_example(image, annotations_list, image_dir, category_index,
                      include_masks=False, keypoint_annotations_dict=None,
                      densepose_annotations_dict=None,
                      remove_non_person_annotations=False,
                      remove_non_person_images=False):
  """Builds the tf.train.Example of one COCO image, as the original's.

  Args:
    image: the COCO image dict (uses 'id', 'file_name', 'height', 'width').
    annotations_list: the COCO annotation dicts of this image (uses 'id',
      'bbox' [x, y, width, height] in pixels, 'category_id', 'iscrowd',
      'area' and, with include_masks, 'segmentation').
    image_dir: directory holding image['file_name'].
    category_index: {category id: {'id': int, 'name': str}}.
    include_masks: also store each object's mask as a PNG.
    keypoint_annotations_dict: optional {annotation id: COCO person keypoint
      annotation}; writes image/object/keypoint/* (coco_person_features).
    densepose_annotations_dict: optional {annotation id: DensePose
      annotation}; writes image/object/densepose/*.
    remove_non_person_annotations: skip objects whose category is not
      'person'.
    remove_non_person_images: return no example for an image without a
      'person' object.

  Returns:
    (key, example, num_annotations_skipped, num_keypoint_annotation_skipped,
    num_densepose_annotation_skipped): key is the hex SHA256 of the encoded
    image, example the tf.train.Example (None for an image
    remove_non_person_images leaves out), then the number of annotations
    left out (zero size, outside the image, not a person) and of keypoint /
    DensePose annotations not written.

  Raises:
    errors.UserInputError: if the image file is missing or unreadable, its
      size differs from the JSON's, an annotation names a category the
      JSON does not define, or (with include_masks) has no segmentation.
  """
  key, example, skipped, keypoints_skipped, densepose_skipped = (
      _example_and_skips(
          image, annotations_list, image_dir, category_index, include_masks,
          keypoint_annotations_dict, densepose_annotations_dict,
          remove_non_person_annotations, remove_non_person_images))
  return key, example, len(skipped), keypoints_skipped, densepose_skipped


def _checked_image(image_dir, filename, image_width, image_height):
  """Reads an image file; returns (encoded bytes, lower-case format).

  Raises:
    errors.UserInputError: if the file is missing or unreadable, or its size
      differs from the annotations file's.
  """
  encoded_image, pil_image = tool_flags.read_image(
      os.path.join(image_dir, filename))
  if pil_image.size != (image_width, image_height):
    raise errors.UserInputError(
        'image %r is %dx%d (width x height) but the annotations file says '
        '%dx%d' % (filename, pil_image.size[0], pil_image.size[1],
                   image_width, image_height))
  return encoded_image, (pil_image.format or 'jpeg').lower()


def _annotation_skip_reason(annotation, filename, image_width, image_height,
                            category_index, remove_non_person_annotations):
  """Why an annotation is left out (SKIP_*), or None to write it.

  Raises:
    errors.UserInputError: if its category_id is not in category_index.
  """
  reason = _skip_reason(annotation['bbox'], image_width, image_height)
  if reason:
    return reason
  category_id = int(annotation['category_id'])
  if category_id not in category_index:
    raise errors.UserInputError(
        'annotation %s of image %r has category_id %d, which is not in '
        'the "categories" list' % (annotation.get('id'), filename,
                                   category_id))
  if (remove_non_person_annotations and
      category_index[category_id]['name'] != 'person'):
    return SKIP_NOT_PERSON
  return None


def _object_features(annotations_list, filename, image_width, image_height,
                     category_index, include_masks,
                     remove_non_person_annotations):
  """The image/object/* features of one image's usable annotations.

  Returns:
    (feature dict, class texts, annotations written, skipped annotations as
    (id, reason) pairs).

  Raises:
    errors.UserInputError: for an unknown category or, with include_masks,
      an annotation without segmentation.
  """
  xmin, xmax, ymin, ymax = [], [], [], []
  labels, texts, is_crowd, area, masks = [], [], [], [], []
  skipped, written = [], []
  for annotation in annotations_list:
    reason = _annotation_skip_reason(
        annotation, filename, image_width, image_height, category_index,
        remove_non_person_annotations)
    if reason:
      skipped.append((annotation.get('id'), reason))
      continue
    written.append(annotation)
    category_id = int(annotation['category_id'])
    x, y, width, height = (float(v) for v in annotation['bbox'])
    xmin.append(x / image_width)
    xmax.append((x + width) / image_width)
    ymin.append(y / image_height)
    ymax.append((y + height) / image_height)
    labels.append(category_id)
    texts.append(category_index[category_id]['name'])
    is_crowd.append(int(annotation.get('iscrowd', 0)))
    area.append(float(annotation.get('area', width * height)))
    if include_masks:
      if 'segmentation' not in annotation:
        raise errors.UserInputError(
            'annotation %s of image %r has no "segmentation" for '
            '--include_masks (convert without masks: --noinclude_masks)' %
            (annotation.get('id'), filename))
      masks.append(_encode_png(_segmentation_to_mask(
          annotation['segmentation'], image_height, image_width)))
  f = dataset_util
  feature = {
      'image/object/bbox/xmin': f.float_list_feature(xmin),
      'image/object/bbox/xmax': f.float_list_feature(xmax),
      'image/object/bbox/ymin': f.float_list_feature(ymin),
      'image/object/bbox/ymax': f.float_list_feature(ymax),
      'image/object/class/text': f.bytes_list_feature(texts),
      'image/object/class/label': f.int64_list_feature(labels),
      'image/object/is_crowd': f.int64_list_feature(is_crowd),
      'image/object/area': f.float_list_feature(area),
  }
  if include_masks:
    feature['image/object/mask'] = f.bytes_list_feature(masks)
  return feature, texts, written, skipped


def _example_and_skips(image, annotations_list, image_dir, category_index,
                       include_masks=False, keypoint_annotations_dict=None,
                       densepose_annotations_dict=None,
                       remove_non_person_annotations=False,
                       remove_non_person_images=False):
  """create_tf_example with the skipped annotations as (id, reason) pairs.

  Reasons are SKIP_ZERO_SIZE, SKIP_OUTSIDE_IMAGE and SKIP_NOT_PERSON.
  """
  image_height = int(image['height'])
  image_width = int(image['width'])
  filename = image['file_name']
  encoded_image, image_format = _checked_image(image_dir, filename,
                                               image_width, image_height)
  key = hashlib.sha256(encoded_image).hexdigest()
  object_feature, texts, written, skipped = _object_features(
      annotations_list, filename, image_width, image_height, category_index,
      include_masks, remove_non_person_annotations)
  if remove_non_person_images and 'person' not in texts:
    return key, None, skipped, 0, 0
  f = dataset_util
  feature = {
      'image/height': f.int64_feature(image_height),
      'image/width': f.int64_feature(image_width),
      'image/filename': f.bytes_feature(filename),
      'image/source_id': f.bytes_feature(str(image['id'])),
      'image/key/sha256': f.bytes_feature(key),
      'image/encoded': f.bytes_feature(encoded_image),
      'image/format': f.bytes_feature(image_format),
  }
  feature.update(object_feature)
  keypoints_skipped = densepose_skipped = 0
  if keypoint_annotations_dict is not None:
    keypoints, keypoints_skipped = coco_person_features.keypoint_features(
        written, keypoint_annotations_dict, image_width, image_height)
    feature.update(keypoints)
  if densepose_annotations_dict is not None:
    densepose, densepose_skipped = coco_person_features.densepose_features(
        written, densepose_annotations_dict, image_width, image_height)
    feature.update(densepose)
  example = tf.train.Example(features=tf.train.Features(feature=feature))
  return key, example, skipped, keypoints_skipped, densepose_skipped


def _annotations_by_image(annotations_file, what):
  """{image id: {annotation id: annotation}} of a COCO JSON, or None."""
  if not annotations_file:
    return None
  data = tool_flags.read_json(annotations_file, what)
  index = collections.defaultdict(dict)
  for annotation in data.get('annotations', []):
    index[annotation['image_id']][annotation['id']] = annotation
  return index


def _images_and_annotations(groundtruth, annotations_file):
  """A COCO JSON's images and their annotations.

  Returns:
    (images list, {image id: [annotations]} for every image, the number of
    annotations whose image_id is not in the images list).

  Raises:
    errors.UserInputError: if the JSON has no "images" list.
  """
  if not isinstance(groundtruth.get('images'), list):
    raise errors.UserInputError(
        'annotations file %s has no "images" list: not a COCO annotations '
        'file.' % annotations_file)
  images = groundtruth['images']
  annotations_index = {image['id']: [] for image in images}
  num_orphans = 0
  for annotation in groundtruth.get('annotations', []):
    if annotation['image_id'] in annotations_index:
      annotations_index[annotation['image_id']].append(annotation)
    else:
      num_orphans += 1
  return images, annotations_index, num_orphans


def _count_example(summary, example, skipped, keypoints_skipped,
                   densepose_skipped):
  """Adds one image's outcome (example None: left out) to the summary."""
  for annotation_id, reason in skipped:
    summary['skipped'].setdefault(reason, []).append(annotation_id)
  summary['num_keypoint_annotations_skipped'] += keypoints_skipped
  summary['num_densepose_annotations_skipped'] += densepose_skipped
  if example is None:
    summary['num_images_without_person'] += 1
    return
  summary['num_images'] += 1
  summary['num_annotations'] += len(
      example.features.feature['image/object/class/label'].int64_list.value)


def _create_tf_record_from_coco_annotations(
    annotations_file, image_dir, output_path, include_masks, num_shards,
    keypoint_annotations_file='', densepose_annotations_file='',
    remove_non_person_annotations=False, remove_non_person_images=False):
  """Converts one split; example i goes to shard i % num_shards.

  Args:
    annotations_file: COCO JSON with 'images', 'categories' and optionally
      'annotations' (test-dev files have none).
    image_dir: directory of the split's images.
    output_path: shard prefix; files are OUTPUT_PATH-0000K-of-0000N.
    include_masks: store instance masks as PNGs.
    num_shards: number of output files.
    keypoint_annotations_file: optional COCO person keypoints JSON.
    densepose_annotations_file: optional DensePose JSON.
    remove_non_person_annotations: see create_tf_example.
    remove_non_person_images: see create_tf_example.

  Returns:
    A summary dict: 'num_images' (written), 'num_images_without_annotations',
    'num_images_without_person' (left out), 'num_annotations' (written),
    'skipped' ({reason: [annotation ids]}), 'num_orphan_annotations'
    (annotations of image ids not in 'images'), 'num_keypoint_annotations_
    skipped', 'num_densepose_annotations_skipped', 'output_path', 'files'
    (shard names).
  """
  groundtruth = tool_flags.read_json(annotations_file, 'annotations file')
  person_annotations = [
      _annotations_by_image(keypoint_annotations_file,
                            'keypoint annotations file'),
      _annotations_by_image(densepose_annotations_file,
                            'DensePose annotations file')]
  images, annotations_index, num_orphans = _images_and_annotations(
      groundtruth, annotations_file)
  category_index = label_map_util.create_category_index(
      groundtruth.get('categories', []))
  summary = {
      'num_images': 0,
      'num_images_without_annotations': sum(
          1 for v in annotations_index.values() if not v),
      'num_images_without_person': 0,
      'num_annotations': 0,
      'skipped': collections.OrderedDict(),
      'num_orphan_annotations': num_orphans,
      'num_keypoint_annotations_skipped': 0,
      'num_densepose_annotations_skipped': 0,
      'output_path': output_path,
      'files': dataset_util.sharded_filenames(output_path, num_shards),
  }
  with dataset_util.open_sharded_output_tfrecords(
      output_path, num_shards) as writers:
    progress = progress_bar.Count(len(images), 1000, log_line=logging.info)
    for index, image in enumerate(images):
      progress.update(index)
      keypoints, densepose = (
          None if index is None else index.get(image['id'], {})
          for index in person_annotations)
      _, example, skipped, keypoints_skipped, densepose_skipped = (
          _example_and_skips(
              image, annotations_index[image['id']], image_dir,
              category_index, include_masks, keypoints, densepose,
              remove_non_person_annotations, remove_non_person_images))
      _count_example(summary, example, skipped, keypoints_skipped,
                     densepose_skipped)
      if example is not None:
        writers[index % num_shards].write(example.SerializeToString())
    progress.end()
  return summary


def format_summary(split, summary):
  """A few human-readable lines describing what one split wrote and skipped."""
  lines = ['%s: wrote %d images (%d without annotations) and %d annotations '
           'to %d shard(s) %s-?????-of-%05d' % (
               split, summary['num_images'],
               summary['num_images_without_annotations'],
               summary['num_annotations'], len(summary['files']),
               summary['output_path'], len(summary['files']))]
  num_skipped = sum(len(ids) for ids in summary['skipped'].values())
  lines.append('%s: skipped %d annotations' % (split, num_skipped))
  for reason, ids in summary['skipped'].items():
    listed = ', '.join(str(i) for i in ids[:_MAX_LISTED_IDS])
    if len(ids) > _MAX_LISTED_IDS:
      listed += ', ...'
    lines.append('%s:   %d %s (annotation ids %s)' % (
        split, len(ids), reason, listed))
  if summary['num_images_without_person']:
    lines.append('%s: left out %d images without a person '
                 '(--remove_non_person_images)' % (
                     split, summary['num_images_without_person']))
  for what in ('keypoint', 'densepose'):
    count = summary['num_%s_annotations_skipped' % what]
    if count:
      lines.append('%s: %d %s annotations belong to no written object' % (
          split, count, what))
  if summary['num_orphan_annotations']:
    lines.append('%s: ignored %d annotations whose image_id is not in '
                 '"images"' % (split, summary['num_orphan_annotations']))
  return lines


def _parser():
  parser = argparse.ArgumentParser(
      description='Convert COCO detection annotations to sharded TFRecords.')
  tool_flags.add_bool_flag(parser, 'include_masks',
                           'Store instance masks (PNG) in the examples.')
  tool_flags.add_bool_flag(parser, 'remove_non_person_annotations',
                           'Leave out objects that are not a person.')
  tool_flags.add_bool_flag(parser, 'remove_non_person_images',
                           'Leave out images without a person.')
  parser.add_argument('--train_image_dir', default='')
  parser.add_argument('--val_image_dir', default='')
  parser.add_argument('--test_image_dir', default='')
  parser.add_argument('--train_annotations_file', default='')
  parser.add_argument('--val_annotations_file', default='')
  parser.add_argument('--testdev_annotations_file', default='')
  for split in ('train', 'val'):
    parser.add_argument('--%s_keypoint_annotations_file' % split, default='',
                        help='COCO person keypoints JSON of the %s split.' %
                        split)
    parser.add_argument('--%s_densepose_annotations_file' % split,
                        default='', help='DensePose JSON of the %s split.' %
                        split)
  parser.add_argument('--output_dir', default='/tmp/')
  parser.add_argument('--num_train_shards',
                      type=flag_checks.at_least(1), default=100)
  parser.add_argument('--num_val_shards', type=flag_checks.at_least(1),
                      default=50)
  parser.add_argument('--num_testdev_shards',
                      type=flag_checks.at_least(1), default=50)
  return tool_flags.add_logging_flags(parser)


@tool_flags.reporting_input_errors
def main(argv=None):
  logging.basicConfig(level=logging.INFO, format='%(message)s')
  parser = _parser()
  args = parser.parse_args(argv)
  splits = []
  for split, (dir_flag, json_flag, shards_flag, _) in _SPLITS.items():
    image_dir, annotations = getattr(args, dir_flag), getattr(args, json_flag)
    if bool(image_dir) != bool(annotations):
      parser.error('split %s needs both --%s and --%s' % (
          split, dir_flag, json_flag))
    if image_dir:
      if getattr(args, shards_flag) < 1:
        parser.error('--%s must be at least 1' % shards_flag)
      splits.append(split)
  if not splits:
    parser.error('nothing to convert: give at least one split, e.g. '
                 '--train_image_dir and --train_annotations_file')

  tf.io.gfile.makedirs(args.output_dir)
  for split in splits:
    dir_flag, json_flag, shards_flag, output_name = _SPLITS[split]
    person_options = {}
    if split != 'testdev':  # As the original: no person data for test-dev.
      person_options = dict(
          keypoint_annotations_file=getattr(
              args, split + '_keypoint_annotations_file'),
          densepose_annotations_file=getattr(
              args, split + '_densepose_annotations_file'),
          remove_non_person_annotations=args.remove_non_person_annotations,
          remove_non_person_images=args.remove_non_person_images)
    summary = _create_tf_record_from_coco_annotations(
        getattr(args, json_flag), getattr(args, dir_flag),
        os.path.join(args.output_dir, output_name), args.include_masks,
        getattr(args, shards_flag), **person_options)
    for line in format_summary(split, summary):
      print(line)
  return 0


if __name__ == '__main__':
  sys.exit(main())
