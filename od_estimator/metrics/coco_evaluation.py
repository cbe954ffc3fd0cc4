"""COCO box and mask metrics as evaluators and Estimator eval_metric_ops.

The evaluators collect groundtruth and detections image by image (boxes in
absolute pixel coordinates, 1-based class ids; masks binary at the original
image size), then `evaluate()` returns the original's metric names, e.g.
'DetectionBoxes_Precision/mAP' or 'DetectionMasks_Precision/mAP'.
"""
import collections
import json

from absl import logging
import numpy as np

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import coco_arrays
from od_estimator.metrics import coco_masks
from od_estimator.metrics import coco_tools
from od_estimator.metrics import evaluator_base
from od_estimator.metrics import overlaps
from od_estimator.config import config_util
from od_estimator.utils import file_safety

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
PREFIX = 'DetectionBoxes_'
MASK_PREFIX = 'DetectionMasks_'


class CocoDetectionEvaluator(evaluator_base.DetectionEvaluator):
  """Accumulates images and computes COCO box metrics."""

  optional_groundtruth_box_fields = (_IN.groundtruth_is_crowd,)
  optional_groundtruth_image_fields = (_IN.groundtruth_labeled_classes,)
  prefix = PREFIX

  def __init__(self, categories, include_metrics_per_category=False,
               all_metrics_per_category=False, backend='faster',
               skip_predictions_for_unlabeled_class=False,
               super_categories=None):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      include_metrics_per_category: also report per-category mAP.
      all_metrics_per_category: report all 12 metrics per category.
      backend: 'faster' (coco_arrays: pycocotools' evaluation redone on
        numpy arrays, the same numbers) or 'pycocotools' (run on dicts).
      skip_predictions_for_unlabeled_class: drop an image's detections of
        classes its groundtruth_labeled_classes does not list.
      super_categories: optional {super-category: [category names]}: also
        report 'DetectionBoxes_PerformanceBySuperCategory/<name>', the mean
        mAP of its categories.

    Raises:
      config_util.ConfigError: when a super-category names a category that
        is not in `categories`.
    """
    self._categories = list(categories)
    self._category_id_array = np.array([c['id'] for c in self._categories],
                                       np.int64)
    # Label map ids (small, positive) looked up in a table: a tenth of
    # np.isin's time on an image's classes.
    ids, self._id_table = self._category_id_array, None
    if len(ids) and ids.min() >= 0 and ids.max() <= 100000:
      self._id_table = np.zeros(ids.max() + 1, bool)
      self._id_table[ids] = True
    self._include_per_category = include_metrics_per_category
    self._all_per_category = all_metrics_per_category
    self._backend = backend
    self._skip_unlabeled = skip_predictions_for_unlabeled_class
    self._super_categories = _checked_super_categories(
        super_categories, [c['name'] for c in self._categories])
    self.clear()

  def clear(self):
    self._images = collections.OrderedDict()
    self._groundtruth = []  # Per image: columns (coco_arrays docstring).
    self._detections = []
    self._with_detections = set()
    self._labeled_classes = {}

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth; a repeated image_id is ignored.

    Args:
      image_id: hashable image id.
      groundtruth_dict: groundtruth_boxes [N, 4] absolute ymin, xmin, ymax,
        xmax; groundtruth_classes [N] 1-based; optional groundtruth_is_crowd
        [N], groundtruth_area [N], and groundtruth_labeled_classes
        [num_classes + 1] k-hot indexed by class id (read with
        skip_predictions_for_unlabeled_class).
    """
    if image_id in self._images:
      logging.warning('Ignoring groundtruth for image %s: already added.',
                      image_id)
      return
    boxes = np.asarray(groundtruth_dict[_IN.groundtruth_boxes],
                       np.float64).reshape([-1, 4])
    classes = _classes(groundtruth_dict[_IN.groundtruth_classes])
    is_crowd = groundtruth_dict.get(_IN.groundtruth_is_crowd)
    is_crowd = (np.zeros(len(classes), bool) if is_crowd is None or
                len(is_crowd) == 0 else np.asarray(is_crowd).astype(bool))
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    given = groundtruth_dict.get(_IN.groundtruth_area)
    if given is not None and len(given):
      given = np.asarray(given, np.float64)
      area = np.where(given > 0, given, area)
    labeled = groundtruth_dict.get(_IN.groundtruth_labeled_classes)
    if self._skip_unlabeled and labeled is not None:
      self._labeled_classes[image_id] = np.flatnonzero(
          np.asarray(labeled) == 1)
    self._images[image_id] = len(self._images) + 1
    kept = self._known(classes)
    self._groundtruth.append({
        'image_id': np.full(len(kept), self._images[image_id], np.int64),
        'category_id': classes[kept],
        'bbox': coco_tools.boxes_to_coco_array(boxes[kept]),
        'area': area[kept],
        'iscrowd': is_crowd[kept],
    })

  def _known(self, classes):
    """Indices of the classes in the label map."""
    if self._id_table is None:
      return np.flatnonzero(np.isin(classes, self._category_id_array))
    inside = (classes >= 0) & (classes < len(self._id_table))
    return np.flatnonzero(
        inside & self._id_table[np.where(inside, classes, 0)])

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (after its groundtruth).

    Args:
      image_id: an id given to add_single_ground_truth_image_info.
      detections_dict: detection_boxes [M, 4] absolute, detection_scores
        [M], detection_classes [M] 1-based.

    Raises:
      ValueError: if the image has no groundtruth yet.
    """
    if not self._first_detections_of(image_id):
      return
    kept = self._kept_detections(image_id, detections_dict)
    boxes = coco_tools.boxes_to_coco_array(
        np.asarray(detections_dict[_DET.detection_boxes])[kept])
    # As loadRes: a detection's area is its box's width * height.
    self._add_detections(image_id, detections_dict, kept, bbox=boxes,
                         area=boxes[:, 2] * boxes[:, 3])

  def _kept_detections(self, image_id, detections_dict):
    """Indices of the detections to evaluate: classes in the label map
    (and, with skip_predictions_for_unlabeled_class, labeled in the
    image)."""
    classes = _classes(detections_dict[_DET.detection_classes])
    kept = self._known(classes)
    if image_id in self._labeled_classes:
      kept = kept[np.isin(classes[kept], self._labeled_classes[image_id])]
    return kept

  def _add_detections(self, image_id, detections_dict, kept, **columns):
    """Records the kept detections: image, class, score and `columns`."""
    self._with_detections.add(image_id)
    self._detections.append(dict(
        image_id=np.full(len(kept), self._images[image_id], np.int64),
        category_id=_classes(detections_dict[_DET.detection_classes])[kept],
        score=np.asarray(detections_dict[_DET.detection_scores],
                         np.float64).reshape([-1])[kept],
        **columns))

  def _first_detections_of(self, image_id):
    """False (with a warning) when the image's detections were added.

    Raises:
      ValueError: if the image has no groundtruth yet.
    """
    if image_id not in self._images:
      raise ValueError('Missing groundtruth for image id %r' % (image_id,))
    if image_id in self._with_detections:
      logging.warning('Ignoring detections for image %s: already added.',
                      image_id)
      return False
    return True

  def _columns(self, parts, names):
    """The per-image column dicts joined into one (coco_arrays columns)."""
    columns = {}
    for name in names:
      values = [part[name] for part in parts if name in part]
      if name == 'segmentation':
        columns[name] = [rle for part in parts
                         for rle in part['masks'].rles()]
      elif name == 'mask_area':
        columns[name] = np.concatenate(
            [[]] + [part['masks'].areas for part in parts]).astype(np.int64)
      elif values:
        columns[name] = np.concatenate(values)
      else:
        columns[name] = np.zeros([0, 4] if name == 'bbox' else [0])
    return columns

  # COCO's annotation and result fields; then what the evaluation reads.
  _GROUNDTRUTH_COLUMNS = ('image_id', 'category_id', 'bbox', 'area',
                          'iscrowd')
  _DETECTION_COLUMNS = ('image_id', 'category_id', 'bbox', 'score', 'area')
  _EVALUATED_GROUNDTRUTH_COLUMNS = _GROUNDTRUTH_COLUMNS
  _EVALUATED_DETECTION_COLUMNS = _DETECTION_COLUMNS

  def groundtruth_dict(self):
    """The accumulated groundtruth as a COCO-format dict."""
    columns = self._columns(self._groundtruth, self._GROUNDTRUTH_COLUMNS)
    return {
        'images': [{'id': i} for i in self._images.values()],
        'annotations': _dicts(columns, ids=True),
        'categories': self._categories,
    }

  def detections_list(self):
    """The accumulated detections as COCO results (dicts)."""
    names = tuple(n for n in self._DETECTION_COLUMNS if n != 'area')
    return _dicts(self._columns(self._detections, names))

  def dump_detections_to_json_file(self, json_output_path):
    """Writes the accumulated detections as COCO results JSON, in one step."""
    file_safety.write_file(json_output_path,
                           json.dumps(self.detections_list()))

  def _compute(self, iou_type):
    """(summary, per-category) metrics of the images so far."""
    options = dict(
        include_metrics_per_category=self._include_per_category,
        all_metrics_per_category=self._all_per_category,
        super_categories=self._super_categories)
    if self._backend != 'faster':
      return coco_tools.compute_metrics(
          self.groundtruth_dict(), self.detections_list(), iou_type=iou_type,
          backend=self._backend, **options)
    coco_eval = coco_arrays.evaluate(
        self._images.values(), self._category_id_array,
        self._columns(self._groundtruth, self._EVALUATED_GROUNDTRUTH_COLUMNS),
        self._columns(self._detections, self._EVALUATED_DETECTION_COLUMNS),
        iou_type, self._mask_overlaps())
    return coco_tools.summarize(coco_eval, self._categories, **options)

  def _mask_overlaps(self):
    """Mask evaluators: coco_arrays.evaluate's mask_overlaps."""
    return None

  def evaluate(self):
    """Returns {'DetectionBoxes_<metric>': float} for the images so far."""
    logging.info('Evaluating %d images with COCO box metrics (%s).',
                 len(self._images), self._backend)
    if not self._images:
      logging.warning('No images were evaluated; metrics are -1.')
    summary, per_category = self._compute('bbox')
    summary.update(per_category)
    return {PREFIX + name: value for name, value in summary.items()}

  def metric_names(self):
    """Names evaluate() returns, known before any data (for metric ops)."""
    prefix = self.prefix
    names = [prefix + name for name, _ in
             coco_tools.COCO_METRIC_NAMES_AND_INDEX]
    if self._include_per_category or self._all_per_category:
      for category in self._categories:
        names.append(prefix + 'PerformanceByCategory/mAP/%s' %
                     category['name'])
        if self._all_per_category:
          names.extend(prefix + '%s ByCategory/%s' % (metric,
                                                      category['name'])
                       for metric, _ in coco_tools.COCO_METRIC_NAMES_AND_INDEX)
    names.extend(prefix + 'PerformanceBySuperCategory/%s' % key
                 for key in self._super_categories or {})
    return names


class CocoMaskEvaluator(CocoDetectionEvaluator):
  """COCO mask metrics ('segm': mask IoU, pycocotools' numbers).

  Each image's masks are read once when added (coco_masks.MaskCrops): their
  pixel counts, the pixels shared by a detection and a groundtruth of one
  class, and their occupied rectangles, kept bit-packed for the RLEs of
  groundtruth_dict() and detections_list().

  Groundtruth needs groundtruth_instance_masks [N, H, W] and detections
  detection_masks [M, H, W], binary at the image's original size (see
  eval_util.result_dict_for_batched_example); groundtruth_is_crowd is
  honoured. As the original, a groundtruth area (small / medium / large)
  is its box's area.
  """

  optional_groundtruth_box_fields = (_IN.groundtruth_is_crowd,
                                     _IN.groundtruth_instance_masks)
  optional_groundtruth_image_fields = ()
  optional_detection_fields = (_DET.detection_masks,)
  # As the original's: detections are read without their boxes.
  required_detection_fields = (_DET.detection_scores, _DET.detection_classes)
  evaluates_masks = True
  prefix = MASK_PREFIX

  def __init__(self, categories, include_metrics_per_category=False,
               all_metrics_per_category=False, backend='faster'):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      include_metrics_per_category: also report
        'DetectionMasks_PerformanceByCategory/mAP/<name>'.
      all_metrics_per_category: report all 12 metrics per category.
      backend: 'faster' (coco_arrays: pycocotools' evaluation redone on
        numpy arrays, the same numbers) or 'pycocotools' (run on dicts).
    """
    super().__init__(categories, include_metrics_per_category,
                     all_metrics_per_category, backend)

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth; a repeated image_id is ignored.

    Args:
      image_id: hashable image id.
      groundtruth_dict: groundtruth_boxes [N, 4] absolute,
        groundtruth_classes [N] 1-based, groundtruth_instance_masks
        [N, H, W] at the original image size (any dtype: a pixel above 0
        is the mask, as the original's), optional
        groundtruth_is_crowd [N].

    Raises:
      ValueError: without masks.
    """
    if image_id in self._images:
      logging.warning('Ignoring groundtruth for image %s: already added.',
                      image_id)
      return
    name = _IN.groundtruth_instance_masks
    # uint8 masks are binarized by MaskCrops, in its first read.
    masks = overlaps.nonzero_masks(name, groundtruth_dict.get(name),
                                   'CocoMaskEvaluator', check_values=False)
    kept = self._known(_classes(groundtruth_dict[_IN.groundtruth_classes]))
    # Read (and checked) before the image is added.
    crops = coco_masks.MaskCrops(
        masks[kept] if len(kept) < len(masks) else masks, name, nonzero=True)
    super().add_single_ground_truth_image_info(image_id, {
        name: groundtruth_dict[name] for name in (
            _IN.groundtruth_boxes, _IN.groundtruth_classes,
            _IN.groundtruth_is_crowd) if name in groundtruth_dict})
    self._groundtruth[-1]['masks'] = crops.pack()

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (after its groundtruth).

    Args:
      image_id: an id given to add_single_ground_truth_image_info.
      detections_dict: detection_scores [M], detection_classes [M] 1-based,
        detection_masks [M, H, W], the groundtruth masks' size (any
        dtype: a pixel above 0 is the mask).

    Raises:
      ValueError: if the image has no groundtruth yet, or for masks of
        another size.
    """
    if not self._first_detections_of(image_id):
      return
    masks = overlaps.nonzero_masks(
        _DET.detection_masks, detections_dict.get(_DET.detection_masks),
        'CocoMaskEvaluator', check_values=False)
    groundtruth = self._groundtruth[self._images[image_id] - 1]
    if masks.shape[1:3] != groundtruth['masks'].shape:
      raise ValueError(
          'Spatial shape of groundtruth masks and detection masks are '
          'incompatible: %s vs %s' % (groundtruth['masks'].shape,
                                      masks.shape[1:3]))
    kept = self._kept_detections(image_id, detections_dict)
    crops = coco_masks.MaskCrops(
        masks[kept] if len(kept) < len(masks) else masks,
        _DET.detection_masks, nonzero=True)
    classes = _classes(detections_dict[_DET.detection_classes])[kept]
    # As pycocotools: masks are compared only within a class, and a
    # detection's area is its mask's (loadRes).
    self._add_detections(
        image_id, detections_dict, kept, masks=crops,
        overlaps=(self._images[image_id] - 1,) + coco_masks.intersections(
            crops, groundtruth['masks'],
            classes[:, None] == groundtruth['category_id'][None, :]),
        area=crops.areas.astype(np.float64))
    crops.pack()

  _GROUNDTRUTH_COLUMNS = (
      CocoDetectionEvaluator._GROUNDTRUTH_COLUMNS + ('segmentation',))  # pylint: disable=protected-access
  _DETECTION_COLUMNS = ('image_id', 'category_id', 'segmentation', 'score',
                        'area')
  # Masks are evaluated by their pixel counts and overlaps, no RLE.
  _EVALUATED_GROUNDTRUTH_COLUMNS = (
      CocoDetectionEvaluator._GROUNDTRUTH_COLUMNS + ('mask_area',))  # pylint: disable=protected-access
  _EVALUATED_DETECTION_COLUMNS = ('image_id', 'category_id', 'score', 'area')

  def _mask_overlaps(self):
    """(detection row, groundtruth row, shared pixels) of the mask pairs
    that share pixels, rows numbered as in the evaluated columns."""
    gt_offsets = np.cumsum([0] + [len(part['category_id'])
                                  for part in self._groundtruth])
    parts, dt_offset = [np.zeros([3, 0], np.int64)], 0
    for part in self._detections:
      image, detection, groundtruth, count = part['overlaps']
      parts.append(np.stack([detection + dt_offset,
                             groundtruth + gt_offsets[image], count]))
      dt_offset += len(part['category_id'])
    return np.concatenate(parts, axis=1)

  def groundtruth_dict(self):
    """The accumulated groundtruth as a COCO-format dict (with sizes)."""
    groundtruth = super().groundtruth_dict()
    groundtruth['images'] = [
        {'id': coco_id, 'height': int(part['masks'].shape[0]),
         'width': int(part['masks'].shape[1])}
        for coco_id, part in zip(self._images.values(), self._groundtruth)]
    return groundtruth

  def evaluate(self):
    """Returns {'DetectionMasks_<metric>': float} for the images so far."""
    logging.info('Evaluating %d images with COCO mask metrics (%s).',
                 len(self._images), self._backend)
    summary, per_category = self._compute('segm')
    summary.update(per_category)
    return {MASK_PREFIX + name: value for name, value in summary.items()}


def _classes(classes):
  """[N] int64 class ids."""
  return np.asarray(classes).astype(np.int64).reshape([-1])


def _dicts(columns, ids=False):
  """COCO-format dicts, one per row of the columns (Python values)."""
  names = list(columns)
  values = [column if isinstance(column, list) else
            (column.astype(int) if column.dtype == bool else column).tolist()
            for column in columns.values()]
  rows = [dict(zip(names, row)) for row in zip(*values)]
  if ids:
    rows = [dict(id=index, **row) for index, row in enumerate(rows, 1)]
  return rows


def _checked_super_categories(super_categories, category_names):
  """super_categories, each name checked against the label map's names."""
  for key, members in (super_categories or {}).items():
    unknown = [name for name in members if name not in category_names]
    if unknown:
      raise config_util.ConfigError(
          'super-category %r lists %s, not in the label map' % (
              key, ', '.join(repr(name) for name in unknown)),
          field='eval_config.super_categories',
          hint='use the label map names: %s' % ', '.join(category_names))
  return super_categories
