"""numpy groundtruth and detections → COCO-format dicts (and JSON files).

The original's coco_tools Export* functions, with its names, arguments and
outputs: annotation ids count from 1 across images, 'iscrowd' is 0 unless
given, 'area' is the box area unless a positive area is given, boxes become
[x, y, width, height] computed in the input's dtype, masks become RLE dicts
with text counts, files are JSON with floats written to 4 digits and an
indent of 2. compat.coco_tools gives these names.
"""
import numpy as np

from od_estimator.metrics import coco_masks
from od_estimator.metrics import coco_tools
from od_estimator.utils import file_safety
from od_estimator.utils import json_utils


def _write_json(value, output_path):
  if output_path:
    with file_safety.replacing(output_path) as fid:
      json_utils.Dump(value, fid, float_digits=4, indent=2)


def _check_rank(name, array, rank):
  if len(array.shape) != rank:
    raise ValueError('%s is expected to be of rank %d; got shape %s.' % (
        name, rank, array.shape))


def _check_detections(scores, classes, count, what):
  _check_rank('detection_scores', scores, 1)
  _check_rank('detection_classes', classes, 1)
  if not len(classes) == count == len(scores):
    raise ValueError(
        'Corresponding entries in detection_classes, detection_scores and '
        '%s should agree on the 0th dimension. Classes: %d, %s: %d, '
        'scores: %d.' % (what, len(classes), what, count, len(scores)))


def _coco_keypoints(keypoints, visibilities):
  """[K, 2] y, x and [K] visibilities → flat [x, y, v, ...]."""
  flat = []
  for (y, x), visibility in zip(keypoints, np.reshape(visibilities, [-1])):
    flat += [float(x), float(y), int(visibility)]
  return flat


def ExportSingleImageGroundtruthToCoco(  # pylint: disable=invalid-name
    image_id, next_annotation_id, category_id_set, groundtruth_boxes,
    groundtruth_classes, groundtruth_keypoints=None,
    groundtruth_keypoint_visibilities=None, groundtruth_masks=None,
    groundtruth_is_crowd=None, groundtruth_area=None):
  """One image's groundtruth as a list of COCO annotation dicts.

  Args:
    image_id: int or str image id.
    next_annotation_id: id of the first annotation; box i gets
      next_annotation_id + i (dropped boxes keep their number unused).
    category_id_set: class ids kept; other boxes are dropped.
    groundtruth_boxes: [N, 4] ymin, xmin, ymax, xmax (pixels for COCO's
      area ranges).
    groundtruth_classes: [N] ints.
    groundtruth_keypoints: optional [N, K, 2] y, x.
    groundtruth_keypoint_visibilities: optional [N, K] (0 unlabeled,
      1 labeled not visible, 2 visible); 2 for all when absent.
    groundtruth_masks: optional uint8 [N, H, W] 0/1 masks → 'segmentation'.
    groundtruth_is_crowd: optional [N]; 'iscrowd' is 0 without it.
    groundtruth_area: optional [N]; a positive value replaces the box area.

  Returns:
    list of dicts with id, image_id, category_id, bbox, area, iscrowd
    (and segmentation, keypoints, num_keypoints when given).

  Raises:
    ValueError: on ranks or lengths that do not match.
  """
  _check_rank('groundtruth_classes', groundtruth_classes, 1)
  _check_rank('groundtruth_boxes', groundtruth_boxes, 2)
  if groundtruth_boxes.shape[1] != 4:
    raise ValueError('groundtruth_boxes should have shape[1] == 4.')
  num_boxes = groundtruth_classes.shape[0]
  if num_boxes != groundtruth_boxes.shape[0]:
    raise ValueError(
        'Corresponding entries in groundtruth_classes and groundtruth_boxes '
        'should agree on the 0th dimension. Classes: %d. Boxes: %d. Image '
        'ID: %s' % (num_boxes, groundtruth_boxes.shape[0], image_id))
  if groundtruth_is_crowd is not None:
    _check_rank('groundtruth_is_crowd', groundtruth_is_crowd, 1)
  if (groundtruth_keypoints is not None and
      groundtruth_keypoint_visibilities is None):
    groundtruth_keypoint_visibilities = np.full(
        groundtruth_keypoints.shape[:2], 2)
  segmentations = (None if groundtruth_masks is None else
                   coco_masks.encode_masks(groundtruth_masks,
                                           'groundtruth_masks'))
  annotations = []
  for i in range(num_boxes):
    if groundtruth_classes[i] not in category_id_set:
      continue
    box = groundtruth_boxes[i]
    if groundtruth_area is not None and groundtruth_area[i] > 0:
      area = float(groundtruth_area[i])
    else:
      area = float((box[2] - box[0]) * (box[3] - box[1]))
    annotation = {
        'id': next_annotation_id + i,
        'image_id': image_id,
        'category_id': int(groundtruth_classes[i]),
        'bbox': coco_tools.boxes_to_coco(box, dtype=None)[0],
        'area': area,
        'iscrowd': (int(groundtruth_is_crowd[i])
                    if groundtruth_is_crowd is not None else 0),
    }
    if segmentations is not None:
      annotation['segmentation'] = segmentations[i]
    if groundtruth_keypoints is not None:
      visibilities = np.reshape(groundtruth_keypoint_visibilities[i], [-1])
      annotation['keypoints'] = _coco_keypoints(groundtruth_keypoints[i],
                                                visibilities)
      annotation['num_keypoints'] = int(np.sum(visibilities > 0))
    annotations.append(annotation)
  return annotations


def ExportGroundtruthToCOCO(image_ids, groundtruth_boxes,  # pylint: disable=invalid-name
                            groundtruth_classes, categories,
                            output_path=None):
  """Groundtruth of several images as one COCO dataset dict.

  Args:
    image_ids: list of int or str ids.
    groundtruth_boxes: list of [N_i, 4] arrays.
    groundtruth_classes: list of [N_i] arrays.
    categories: list of {'id', 'name'[, 'supercategory']} dicts.
    output_path: optional JSON file to write.

  Returns:
    {'annotations': [...], 'images': [{'id': id}, ...], 'categories'}.

  Raises:
    ValueError: if the lists differ in length (or per-image checks fail).
  """
  if not len(image_ids) == len(groundtruth_boxes) == len(groundtruth_classes):
    raise ValueError('Input lists must have the same length')
  category_id_set = {category['id'] for category in categories}
  annotations, images = [], []
  next_id = 1  # COCO's tools treat annotation id 0 as missing.
  for image_id, boxes, classes in zip(image_ids, groundtruth_boxes,
                                      groundtruth_classes):
    images.append({'id': image_id})
    annotations += ExportSingleImageGroundtruthToCoco(
        image_id, next_id, category_id_set, boxes, classes)
    next_id += classes.shape[0]
  groundtruth = {'annotations': annotations, 'images': images,
                 'categories': categories}
  _write_json(groundtruth, output_path)
  return groundtruth


def ExportSingleImageDetectionBoxesToCoco(  # pylint: disable=invalid-name
    image_id, category_id_set, detection_boxes, detection_scores,
    detection_classes, detection_keypoints=None,
    detection_keypoint_visibilities=None):
  """One image's box detections as COCO result dicts.

  Returns:
    list of {'image_id', 'category_id', 'bbox', 'score'} (plus keypoints
    [x, y, v, ...] and num_keypoints, the keypoint count, when given);
    classes outside category_id_set are dropped.
  """
  _check_rank('detection_boxes', detection_boxes, 2)
  if detection_boxes.shape[1] != 4:
    raise ValueError('All entries in detection_boxes should have '
                     'shape[1] == 4.')
  _check_detections(detection_scores, detection_classes,
                    detection_boxes.shape[0], 'detection_boxes')
  if (detection_keypoints is not None and
      detection_keypoint_visibilities is None):
    detection_keypoint_visibilities = np.full(
        detection_keypoints.shape[:2], 2)
  results = []
  for i, class_id in enumerate(detection_classes):
    if class_id not in category_id_set:
      continue
    result = {'image_id': image_id, 'category_id': int(class_id),
              'bbox': coco_tools.boxes_to_coco(detection_boxes[i],
                                               dtype=None)[0],
              'score': float(detection_scores[i])}
    if detection_keypoints is not None:
      result['keypoints'] = _coco_keypoints(
          detection_keypoints[i], detection_keypoint_visibilities[i])
      result['num_keypoints'] = detection_keypoints[i].shape[0]
    results.append(result)
  return results


def ExportSingleImageDetectionMasksToCoco(  # pylint: disable=invalid-name
    image_id, category_id_set, detection_masks, detection_scores,
    detection_classes):
  """One image's mask detections ([N, H, W] uint8 0/1) as COCO results.

  Returns:
    list of {'image_id', 'category_id', 'segmentation' (RLE), 'score'}.
  """
  _check_detections(detection_scores, detection_classes,
                    len(detection_masks), 'detection_masks')
  keep = [i for i, class_id in enumerate(detection_classes)
          if class_id in category_id_set]
  rles = coco_masks.encode_masks(np.asarray(detection_masks)[keep],
                                 'detection_masks')
  return [{'image_id': image_id,
           'category_id': int(detection_classes[i]),
           'segmentation': rle,
           'score': float(detection_scores[i])} for i, rle in zip(keep, rles)]


def _export_per_image(export_one, image_ids, per_image, categories,
                      output_path):
  """Runs export_one(image_id, category_id_set, *arrays) over images."""
  if any(len(values) != len(image_ids) for values in per_image):
    raise ValueError('Input lists must have the same length')
  category_id_set = {category['id'] for category in categories}
  results = []
  for image_id, *arrays in zip(image_ids, *per_image):
    results += export_one(image_id, category_id_set, *arrays)
  _write_json(results, output_path)
  return results


def ExportDetectionsToCOCO(image_ids, detection_boxes, detection_scores,  # pylint: disable=invalid-name
                           detection_classes, categories, output_path=None):
  """Box detections of several images as one list of COCO results.

  Args:
    image_ids: list of ids, as given to ExportGroundtruthToCOCO.
    detection_boxes: list of [N_i, 4] ymin, xmin, ymax, xmax arrays.
    detection_scores: list of [N_i] arrays.
    detection_classes: list of [N_i] int arrays.
    categories: list of {'id', ...} dicts; other classes are dropped.
    output_path: optional JSON file to write.
  """
  return _export_per_image(
      ExportSingleImageDetectionBoxesToCoco, image_ids,
      [detection_boxes, detection_scores, detection_classes], categories,
      output_path)


def ExportSegmentsToCOCO(image_ids, detection_masks, detection_scores,  # pylint: disable=invalid-name
                         detection_classes, categories, output_path=None):
  """Mask detections ([N_i, H, W, 1] uint8 each) as COCO results."""
  def export_one(image_id, category_id_set, masks, scores, classes):
    _check_rank('detection_masks entry', masks, 4)
    return ExportSingleImageDetectionMasksToCoco(
        image_id, category_id_set, np.squeeze(masks, axis=3), scores,
        classes)
  return _export_per_image(export_one, image_ids,
                           [detection_masks, detection_scores,
                            detection_classes], categories, output_path)


def ExportKeypointsToCOCO(image_ids, detection_keypoints, detection_scores,  # pylint: disable=invalid-name
                          detection_classes, categories, output_path=None):
  """Keypoint detections as COCO results.

  Args:
    detection_keypoints: list of [N_i, K, 2] arrays, absolute x, y (taken
      as they are, no swap).
    categories: dicts with 'id' and, for classes with keypoints,
      'num_keypoints' (the first num_keypoints points are written, each
      with visibility 1, as ints); other classes write nothing.

  Raises:
    ValueError: for a detection class outside the categories.
  """
  num_keypoints = {category['id']: category['num_keypoints']
                   for category in categories if 'num_keypoints' in category}

  def export_one(image_id, category_id_set, keypoints, scores, classes):
    _check_rank('detection_keypoints entry', keypoints, 3)
    _check_detections(scores, classes, keypoints.shape[0],
                      'detection_keypoints')
    results = []
    for i, class_id in enumerate(classes):
      if class_id not in category_id_set:
        raise ValueError('class id should be in category_id_set\n')
      if class_id not in num_keypoints:
        continue
      count = num_keypoints[class_id]
      points = np.concatenate([keypoints[i, :count, :], np.ones([count, 1])],
                              axis=1).astype(int)
      results.append({'image_id': image_id, 'category_id': int(class_id),
                      'keypoints': points.flatten().tolist(),
                      'score': float(scores[i])})
    return results
  return _export_per_image(export_one, image_ids,
                           [detection_keypoints, detection_scores,
                            detection_classes], categories, output_path)
