"""What every detection evaluator shares: batched updates and metric ops.

An evaluator accumulates numpy groundtruth and detections image by image
and computes {metric name: float} in `evaluate()`. This base turns that
into Estimator eval_metric_ops: a py_func update op that unpacks a padded
batch into single images, and value ops that run `evaluate()` once.
"""
import numpy as np
import tensorflow as tf

from od_estimator.core import standard_fields as fields

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields

# Batched eval dict entries every evaluator needs, in py_func input order
# (then the evaluator's required_detection_fields).
_REQUIRED_FIELDS = (
    _IN.key, _IN.groundtruth_boxes, _IN.groundtruth_classes,
    _IN.num_groundtruth_boxes, _DET.num_detections)
# Optional per-image counts: the names the original's evaluators read them
# under, and the padded rows they count when absent.
_COUNTED_ROWS = (
    (_IN.num_groundtruth_boxes, 'num_groundtruth_boxes_per_image',
     _IN.groundtruth_boxes),
    (_DET.num_detections, 'num_det_boxes_per_image', _DET.detection_scores))
# Masks of the original image frame, padded to the batch's largest image:
# each image's are cut to its original_image_spatial_shape.
MASK_FIELDS = (_IN.groundtruth_instance_masks, _DET.detection_masks)


class DetectionEvaluator:
  """Base of the box evaluators; subclasses implement the abstract methods.

  Subclasses list the optional groundtruth entries they read, so the batched
  update forwards them when the eval dict has them:
    optional_groundtruth_box_fields: per-box [B, N, ...] fields, cut to the
      image's num_groundtruth_boxes.
    optional_groundtruth_image_fields: per-image [B, ...] fields.
  """

  optional_groundtruth_box_fields = ()
  optional_groundtruth_image_fields = ()
  # Per-detection [B, M, ...] fields forwarded, cut to num_detections.
  optional_detection_fields = ()
  # Per-detection [B, M, ...] fields the evaluator reads.
  required_detection_fields = (_DET.detection_boxes, _DET.detection_scores,
                               _DET.detection_classes)
  # Mask evaluators: the eval dict must hold MASK_FIELDS.
  evaluates_masks = False

  def clear(self):
    """Drops everything added so far."""
    raise NotImplementedError

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth (numpy arrays keyed by field name)."""
    raise NotImplementedError

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (numpy arrays keyed by field name)."""
    raise NotImplementedError

  def evaluate(self):
    """Returns {metric name: float} for the images added so far."""
    raise NotImplementedError

  def metric_names(self):
    """Names evaluate() returns, known before any data (headline first)."""
    raise NotImplementedError

  def add_eval_dict(self, eval_dict):
    """Returns an op adding a batch of eval results to the evaluator.

    Args:
      eval_dict: from eval_util.result_dict_for_batched_example: key [B],
        groundtruth_boxes [B, N, 4] absolute, groundtruth_classes [B, N]
        1-based, num_groundtruth_boxes [B], detection_boxes [B, M, 4]
        absolute, detection_scores [B, M], detection_classes [B, M]
        1-based, num_detections [B], plus any optional groundtruth fields
        the evaluator declares. As the original: the per-image counts are
        optional (every row counts) and also read under the original's
        names 'num_groundtruth_boxes_per_image' and
        'num_det_boxes_per_image'; an optional is_annotated [B] bool skips
        the images it marks False; one image's dict (scalar key, no batch
        dimension) is accepted.

    Returns:
      A py_func op with no outputs.
    """
    self._check_masks(eval_dict)
    eval_dict = _batched_with_counts(eval_dict)
    box_fields = [name for name in self.optional_groundtruth_box_fields
                  if eval_dict.get(name) is not None]
    image_fields = [name for name in self.optional_groundtruth_image_fields
                    if eval_dict.get(name) is not None]
    detection_fields = [name for name in self.optional_detection_fields
                        if eval_dict.get(name) is not None]
    names = (list(_REQUIRED_FIELDS) + list(self.required_detection_fields) +
             box_fields + image_fields + detection_fields)
    if set(names) & set(MASK_FIELDS):
      names.append(_IN.original_image_spatial_shape)
    if _IN.is_annotated in eval_dict:
      names.append(_IN.is_annotated)

    def update(*values):
      batch = dict(zip(names, values))
      for i, image_id in enumerate(batch[_IN.key]):
        if _IN.is_annotated in batch and not batch[_IN.is_annotated][i]:
          continue
        n = int(batch[_IN.num_groundtruth_boxes][i])
        m = int(batch[_DET.num_detections][i])
        groundtruth = {
            _IN.groundtruth_boxes: batch[_IN.groundtruth_boxes][i][:n],
            _IN.groundtruth_classes: batch[_IN.groundtruth_classes][i][:n]}
        for name in box_fields:
          groundtruth[name] = _image_part(batch, name, i, n)
        for name in image_fields:
          groundtruth[name] = batch[name][i]
        detections = {name: batch[name][i][:m]
                      for name in self.required_detection_fields}
        for name in detection_fields:
          detections[name] = _image_part(batch, name, i, m)
        self.add_image(image_id, groundtruth, detections)

    return tf.compat.v1.py_func(update, [eval_dict[name] for name in names],
                                [])

  def add_image(self, image_id, groundtruth, detections):
    """Adds one image as a batch's update does: only the fields read.

    Args:
      image_id: the image's unique id.
      groundtruth: numpy groundtruth_boxes [N, 4] absolute,
        groundtruth_classes [N] 1-based, and any other groundtruth fields;
        those the evaluator declares optional are passed on.
      detections: numpy detection_boxes [M, 4] absolute, detection_scores
        [M], detection_classes [M] 1-based, and any other detection fields;
        those the evaluator declares are passed on.
    """
    wanted = ((_IN.groundtruth_boxes, _IN.groundtruth_classes) +
              tuple(self.optional_groundtruth_box_fields) +
              tuple(self.optional_groundtruth_image_fields))
    self.add_single_ground_truth_image_info(image_id, {
        name: groundtruth[name] for name in wanted
        if groundtruth.get(name) is not None})
    wanted = (tuple(self.required_detection_fields) +
              tuple(self.optional_detection_fields))
    self.add_single_detected_image_info(image_id, {
        name: detections[name] for name in wanted
        if detections.get(name) is not None})

  def _check_masks(self, eval_dict):
    """Raises ValueError when a mask evaluator's eval dict lacks masks.

    Evaluation from a config checks this first, naming the metrics set
    (metric_sets.check_eval_dict).
    """
    if not self.evaluates_masks:
      return
    for name in MASK_FIELDS:
      if eval_dict.get(name) is None:
        raise ValueError('%s needs %r in the eval dict' % (
            type(self).__name__, name))

  def get_estimator_eval_metric_ops(self, eval_dict):
    """Returns {metric name: (value_op, update_op)} for an EstimatorSpec.

    The update op collects each batch; reading the first value op runs
    evaluate() once, fills every metric and clears the evaluator. The other
    value ops depend on it, so one sess.run of all of them is consistent.
    Names evaluate() did not produce read -1.
    """
    update_op = self.add_eval_dict(eval_dict)
    names = self.metric_names()
    results = {}

    def first_value():
      results.clear()
      results.update(self.evaluate())
      self.clear()
      return np.float32(results[names[0]])

    def value_of(name):
      return lambda: np.float32(results.get(name, -1.0))

    first_op = tf.compat.v1.py_func(first_value, [], tf.float32)
    metric_ops = {names[0]: (first_op, update_op)}
    with tf.control_dependencies([first_op]):
      for name in names[1:]:
        metric_ops[name] = (tf.compat.v1.py_func(value_of(name), [],
                                                 tf.float32), update_op)
    return metric_ops


def _batched_with_counts(eval_dict):
  """eval_dict with a batch dimension and both per-image counts."""
  eval_dict = {name: value for name, value in eval_dict.items()
               if value is not None}
  if tf.convert_to_tensor(eval_dict[_IN.key]).shape.rank == 0:
    eval_dict = {name: tf.expand_dims(value, 0)
                 for name, value in eval_dict.items()}
  return with_counts(eval_dict)


def with_counts(eval_dict):
  """A batched eval dict with num_groundtruth_boxes and num_detections.

  As the original's evaluators: a count may come under the original's
  name ('num_groundtruth_boxes_per_image', 'num_det_boxes_per_image');
  without one, every row of the image counts.
  """
  eval_dict = dict(eval_dict)
  for count, original_name, rows in _COUNTED_ROWS:
    given = eval_dict.pop(original_name, None)
    if count in eval_dict:
      continue
    if given is not None:
      eval_dict[count] = given
    elif rows in eval_dict:
      shape = tf.shape(eval_dict[rows])
      eval_dict[count] = tf.fill(shape[:1], shape[1])
  return eval_dict


def _image_part(batch, name, index, count):
  """Image `index`'s first `count` rows of a batched field.

  Masks are also cut to the image's original height and width.
  """
  values = batch[name][index][:count]
  if name in MASK_FIELDS:
    height, width = batch[_IN.original_image_spatial_shape][index][:2]
    values = values[:, :int(height), :int(width)]
  return values
