"""Runs an exported detector on images: `od-estimator detect`.

Usage:
  od-estimator detect --saved_model_dir=EXPORT/saved_model \\
      --label_map_path=label_map.pbtxt --input=IMAGE_OR_FOLDER \\
      [--output_dir=DIR] [--min_score_threshold=0.5] [--max_boxes=100] \\
      [--coco_annotations=instances_val.json | --image_id_map=ids.json]
  python -m od_estimator.detect ...   (same flags)

Any export of export_inference_graph or exporter_main_v2 works: --input_type
image_tensor, encoded_image_string_tensor or tf_example (the signature's
input says which).

Writes, into --output_dir:
  detections.json            COCO results: [{image_id, category_id, bbox:
                             [x, y, width, height] in pixels, score}].
  detections_segm.json       for a model exporting detection_masks (Mask
                             R-CNN): COCO segm results [{image_id,
                             category_id, segmentation: RLE, score}].
  detections_image_ids.json  {image file name: image_id}.
  <stem>_detections.png      each image with its boxes and 'name: 87%' labels
                             (and masks).
Each file is written beside its destination and renamed over it in one step:
a file of an earlier run is replaced whole or not at all, and a link found
there is replaced, never written through.

Masks are exported relative to their boxes; they are pasted into the image
with core/spatial_transform_ops.reframe_box_masks_to_image_masks and
thresholded at 0.5, as the original's evaluation does.

image_id comes from --coco_annotations (the id of the annotations' image
whose file_name is the file's name) or --image_id_map ({file name: id});
without either it is the file stem as an int when it is all digits (COCO
names its images 000000397133.jpg for id 397133), else the stem itself. With
annotations, the json can be scored with pycocotools against them.
category_id is the label map id of the class (1-based).
"""
import argparse
import io
import json
import os
import sys

import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator.inference import command_runs
from od_estimator.inference import exported_model
from od_estimator.metrics import coco_masks
from od_estimator.metrics import coco_tools
from od_estimator.utils import file_safety
from od_estimator.utils import flag_checks
from od_estimator.utils import interrupts
from od_estimator.utils import label_map_util
from od_estimator.utils import visualization_utils

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.gif')
DETECTIONS_FILE = 'detections.json'
SEGM_FILE = 'detections_segm.json'
IMAGE_IDS_FILE = 'detections_image_ids.json'
_MASKS_KEY = exported_model.MASKS_KEY

_EPILOG = """\
outputs (in --output_dir, default: a `detections` folder next to the input):
  %s            COCO results [{image_id, category_id, bbox [x, y, w, h]
                             in pixels, score}]
  %s       models with detection_masks (Mask R-CNN): COCO segm
                             results [{image_id, category_id, segmentation
                             (RLE), score}]
  %s  {image file name: image_id}
  <stem>_detections.png      annotated images (boxes, labels, masks)

--min_score_threshold and --max_boxes apply to both the json and the
drawings; use --min_score_threshold=0 when the json is for COCO evaluation.

exit status: 0 when every image was processed; 1 when the model, label map
or input cannot be used (one-line error), or when some image could not be
read (a warning names each one, the other images are still processed).
""" % (DETECTIONS_FILE, SEGM_FILE, IMAGE_IDS_FILE)


# A problem that stops the whole run; the message is one line.
DetectError = exported_model.ExportedModelError


def _parser():
  parser = argparse.ArgumentParser(
      prog='od-estimator detect',
      description='Runs an exported SavedModel on an image or a folder of '
                  'images (%s, sorted, not recursive).' %
                  ', '.join(IMAGE_EXTENSIONS),
      epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
  command_runs.add_saved_model_dir_flag(parser)
  parser.add_argument('--label_map_path', required=True,
                      help='label map naming the classes.')
  parser.add_argument('--input', required=True,
                      help='an image file or a folder of images.')
  parser.add_argument('--output_dir', default=None,
                      help='where results are written (created if needed).')
  parser.add_argument('--min_score_threshold', type=float, default=0.5,
                      help='keep detections scoring at least this '
                           '(default 0.5).')
  parser.add_argument('--max_boxes', type=flag_checks.at_least(1), default=100,
                      help='keep at most this many detections per image '
                           '(default 100).')
  ids = parser.add_mutually_exclusive_group()
  ids.add_argument('--coco_annotations', default=None,
                   help='COCO annotations json (e.g. instances_val2017.json): '
                        'each image gets the id of the annotations image '
                        'with its file_name.')
  ids.add_argument('--image_id_map', default=None,
                   help='json {image file name: image_id} giving the ids.')
  return parser


def _list_images(path):
  """Returns the sorted image files of a folder, or [path] for a file."""
  if tf.io.gfile.isdir(path):
    names = sorted(name for name in tf.io.gfile.listdir(path)
                   if name.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
      raise DetectError('no images (%s) in %s' % (
          ', '.join(IMAGE_EXTENSIONS), path))
    return [os.path.join(path, name) for name in names]
  if not tf.io.gfile.exists(path):
    raise DetectError('input not found: %s' % path)
  return [path]


def _default_output_dir(input_path):
  base = input_path if tf.io.gfile.isdir(input_path) else os.path.dirname(
      input_path)
  return os.path.join(base, 'detections')


def image_ids_for(paths, known_ids=None):
  """Maps each image path to (image_id, output stem).

  Args:
    paths: the image files.
    known_ids: optional {file name: image_id}; an image missing from it
      gets the id None.

  Returns:
    {path: (image_id, stem)}. Without known_ids the id is the file stem (an
    int if all digits). Files sharing a stem (a.jpg, a.png) after the first
    use their full file name instead, so ids and annotated image names stay
    unique.
  """
  result, used = {}, set()
  for path in paths:
    name = os.path.basename(path)
    stem = os.path.splitext(name)[0]
    if stem in used:
      stem = name
    used.add(stem)
    if known_ids is not None:
      image_id = known_ids.get(name)
    else:
      image_id = int(stem) if stem.isdigit() else stem
    result[path] = (image_id, stem)
  return result


def _read_json(path, flag):
  try:
    with tf.io.gfile.GFile(path, 'r') as f:
      return json.load(f)
  except tf.errors.OpError as error:
    raise DetectError('%s=%s: %s' % (flag, path, error.message)) from None
  except ValueError as error:
    raise DetectError('%s=%s is not valid json: %s' % (flag, path,
                                                       error)) from None


def known_image_ids(coco_annotations=None, image_id_map=None):
  """{file name: image_id} from a COCO annotations file or an id map.

  Args:
    coco_annotations: path of a COCO json with "images" [{id, file_name}].
    image_id_map: path of a json {file name: image_id}.

  Returns:
    The map, or None when neither is given.

  Raises:
    DetectError: the file is missing, not json, or not of that form.
  """
  if coco_annotations:
    data = _read_json(coco_annotations, '--coco_annotations')
    images = data.get('images') if isinstance(data, dict) else None
    if not isinstance(images, list) or not all(
        isinstance(image, dict) and 'id' in image and 'file_name' in image
        for image in images):
      raise DetectError('--coco_annotations=%s has no "images" list of '
                        '{"id", "file_name"}.' % coco_annotations)
    # file_name may carry a folder (e.g. val2017/x.jpg); images are matched
    # by their base name.
    return {os.path.basename(image['file_name']): image['id']
            for image in images}
  if image_id_map:
    data = _read_json(image_id_map, '--image_id_map')
    if not isinstance(data, dict):
      raise DetectError('--image_id_map=%s must hold a json object '
                        '{"image file name": image_id}.' % image_id_map)
    return data
  return None


def _read_image(path):
  """Returns uint8 [H, W, 3] and the encoded bytes.

  Raises:
    OSError or ValueError: when the file is not a readable image.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  with Image.open(io.BytesIO(data)) as image:
    image.load()  # Fails here on truncated or corrupt files.
    return np.array(image.convert('RGB')), data


def _coco_results(image_id, detections, height, width):
  """COCO result dicts from one image's normalized detections."""
  results = []
  boxes = coco_tools.boxes_to_coco_array(detections['detection_boxes']) * (
      [width, height, width, height])
  for box, score, label in zip(boxes.tolist(),
                               detections['detection_scores'],
                               detections['detection_classes']):
    results.append({
        'image_id': image_id,
        'category_id': int(round(float(label))),
        'bbox': box,
        'score': float(score),
    })
  return results


def coco_segm_results(image_id, detections, image_masks):
  """COCO segm result dicts of one image's kept detections.

  Args:
    image_id: the image's COCO id.
    detections: detection_scores [N], detection_classes [N] 1-based.
    image_masks: uint8 [N, height, width] 0/1 masks in the image.
  """
  return [{'image_id': image_id, 'category_id': int(round(float(label))),
           'segmentation': rle, 'score': float(score)}
          for rle, score, label in zip(
              coco_masks.encode_masks(image_masks),
              detections['detection_scores'],
              detections['detection_classes'])]


def _kept(detections, min_score_threshold, max_boxes):
  """The valid detections scoring >= the threshold, at most max_boxes."""
  count = int(detections['num_detections'])
  scores = detections['detection_scores'][:count]
  keep = np.flatnonzero(scores >= min_score_threshold)[:max(max_boxes, 0)]
  return {key: detections[key][keep] for key in
          ('detection_boxes', 'detection_scores', 'detection_classes',
           _MASKS_KEY) if key in detections}


def run(saved_model_dir, label_map_path, input_path, output_dir=None,
        min_score_threshold=0.5, max_boxes=100, log=None,
        coco_annotations=None, image_id_map=None):
  """Detects objects in the input images and writes the results.

  Args:
    saved_model_dir: exported saved_model/ directory (or its parent).
    label_map_path: label map for the class names.
    input_path: image file or folder of images.
    output_dir: where results go; None means <input folder>/detections.
    min_score_threshold: minimum score of a kept detection.
    max_boxes: most detections kept per image.
    log: fn(str) for warnings; defaults to printing on stderr.
    coco_annotations: optional COCO annotations json giving the image ids
      (see known_image_ids).
    image_id_map: optional json {file name: image_id} giving them instead.

  Returns:
    {'failed': image paths that could not be read, 'images': number of
    images processed, 'detections': number of results written, 'output':
    the detections json's path, 'segm_output': the segm results json's
    path or None (a model without detection_masks)}.

  Raises:
    DetectError: when the model, label map or input cannot be used.
    errors.UserInputError: when output_dir is a file (checked first).
  """
  log = log or (lambda text: print(text, file=sys.stderr))
  output_dir = output_dir or _default_output_dir(input_path)
  file_safety.check_directory_destination(output_dir, '--output_dir')
  saved_model_dir = exported_model.resolve_saved_model_dir(saved_model_dir)
  try:
    category_index = label_map_util.create_category_index_from_labelmap(
        label_map_path, use_display_name=True)
  except label_map_util.LabelMapError as error:
    raise DetectError('--label_map_path: %s' % error) from None
  paths = _list_images(input_path)
  known_ids = known_image_ids(coco_annotations, image_id_map)
  ids = image_ids_for(paths, known_ids)
  # Refused before anything is made.
  detector = exported_model.SavedModelDetector(saved_model_dir)
  results, segm_results, id_map, failed, processed = [], [], {}, [], 0
  try:
    tf.io.gfile.makedirs(output_dir)
    for path in paths:
      try:
        image, encoded = _read_image(path)
      except (OSError, ValueError) as error:
        log('warning: cannot read image %s (%s); skipped.' % (
            path, str(error).splitlines()[0] if str(error) else
            type(error).__name__))
        failed.append(path)
        continue
      image_id, stem = ids[path]
      name = os.path.basename(path)
      detections = _kept(detector.detect(image, encoded, name),
                         min_score_threshold, max_boxes)
      masks = (detector.image_masks(detections, *image.shape[:2])
               if detector.has_masks else None)
      if image_id is None:
        log('warning: %s is not among the images of %s; drawn, but left '
            'out of %s.' % (name, coco_annotations or image_id_map,
                            DETECTIONS_FILE))
      else:
        id_map[name] = image_id
        results += _coco_results(image_id, detections, *image.shape[:2])
        if masks is not None:
          segm_results += coco_segm_results(image_id, detections, masks)
      processed += 1
      visualization_utils.visualize_boxes_and_labels_on_image_array(
          image, detections['detection_boxes'],
          detections['detection_classes'].round().astype(np.int64),
          detections['detection_scores'], category_index,
          instance_masks=masks,
          use_normalized_coordinates=True, max_boxes_to_draw=None,
          min_score_thresh=-np.inf)  # Already filtered by _kept.
      visualization_utils.save_image_array_as_png(
          image, os.path.join(output_dir, stem + '_detections.png'))
  except interrupts.Interrupted as stop:
    raise stop.add('%d of %d image(s) done, drawn in %s; no %s was '
                   'written' % (processed + len(failed), len(paths),
                                output_dir, DETECTIONS_FILE))
  finally:
    detector.close()
  detections_path = os.path.join(output_dir, DETECTIONS_FILE)
  file_safety.write_file(detections_path, json.dumps(results))
  segm_path = None
  if detector.has_masks:
    segm_path = os.path.join(output_dir, SEGM_FILE)
    file_safety.write_file(segm_path, json.dumps(segm_results))
  file_safety.write_file(os.path.join(output_dir, IMAGE_IDS_FILE),
                         json.dumps(id_map, indent=1, sort_keys=True))
  return {'failed': failed, 'images': processed,
          'detections': len(results), 'output': detections_path,
          'segm_output': segm_path}


def main(argv=None):
  """Entry point; returns the exit code (see --help)."""
  args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

  def work():
    summary = run(args.saved_model_dir, args.label_map_path, args.input,
                  output_dir=args.output_dir,
                  min_score_threshold=args.min_score_threshold,
                  max_boxes=args.max_boxes,
                  coco_annotations=args.coco_annotations,
                  image_id_map=args.image_id_map)
    print('od-estimator detect: %d image(s), %d detection(s) -> %s%s' % (
        summary['images'], summary['detections'], summary['output'],
        ' (masks: %s)' % summary['segm_output'] if summary['segm_output']
        else ''))
    failed = summary['failed']
    if failed:
      print('od-estimator detect: %d image(s) could not be read: %s' % (
          len(failed), ', '.join(failed)), file=sys.stderr)
      return 1
    return 0
  return command_runs.run('detect', work)


if __name__ == '__main__':
  sys.exit(main())
