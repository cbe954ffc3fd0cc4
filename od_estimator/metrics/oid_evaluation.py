"""Open Images box metrics: the V2 protocol and the detection challenge.

Both are PASCAL-style per-class AP at IoU 0.5 (pascal_evaluation does the
matching and the AP), with Open Images' two kinds of annotation:

- group-of boxes (`image/object/group_of`), one box around several objects
  of a class. A detection left unmatched by the ordinary boxes that lies
  inside a group-of box (intersection >= 0.5 of the detection's own area)
  is never a false positive. With `group_of_weight` 0 (V2) such detections
  are ignored and group-of boxes are not groundtruth. With a weight w > 0
  (the challenge: 1) each group-of box is w groundtruth instances, and the
  detections inside it count once, as one true positive of weight w
  scored with the best of their scores; a group-of box no detection hits
  is w missed instances.
- verified image-level labels (`image/class/label`, the challenge only):
  the classes a human checked for the image, present or absent. Detections
  of a class neither verified nor among the image's boxes are ignored, so
  a detector is not penalised for objects nobody looked for.

Metric names are the original's, e.g. 'OpenImagesV2_Precision/mAP@0.5IOU',
'OpenImagesV2_PerformanceByCategory/AP@0.5IOU/<category name>' and
'OpenImagesDetectionChallenge_Precision/mAP@0.5IOU'. Boxes are absolute
ymin, xmin, ymax, xmax; classes are 1-based.
"""
import numpy as np

from od_estimator.core import standard_fields as fields
from od_estimator.metrics import pascal_evaluation

_IN = fields.InputDataFields


class OpenImagesDetectionEvaluator(pascal_evaluation.ObjectDetectionEvaluator):
  """Open Images V2 metrics: group-of boxes, no difficult flags.

  Reads groundtruth_group_of ([N] bool; absent means no group-of boxes).
  groundtruth_difficult is ignored, as in the original.
  """

  optional_groundtruth_box_fields = (_IN.groundtruth_group_of,)

  def __init__(self, categories, matching_iou_threshold=0.5,
               metric_prefix='OpenImagesV2', group_of_weight=0.0):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int (1-based), 'name': str}.
      matching_iou_threshold: IoU a true positive needs, and the share of a
        detection a group-of box must cover.
      metric_prefix: prefix of every metric name.
      group_of_weight: weight of a group-of box as groundtruth and as a
        true positive; 0 ignores the detections inside group-of boxes.
    """
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     metric_prefix=metric_prefix,
                     group_of_weight=group_of_weight)

  def _box_flags(self, groundtruth_dict):
    return None, pascal_evaluation.optional_box_flags(
        groundtruth_dict, _IN.groundtruth_group_of)


class OpenImagesDetectionChallengeEvaluator(OpenImagesDetectionEvaluator):
  """Open Images detection challenge metrics.

  As V2 with group-of boxes of weight 1, and detections ignored for the
  classes the image neither has boxes of nor lists among its verified
  image-level labels. Those labels come in either of two optional fields:
    groundtruth_image_classes: [K] 1-based class ids (the original's
      per-image form); ids below 1 are padding.
    groundtruth_labeled_classes: [num_classes + 1] k-hot indexed by class
      id (the batched eval dict's form, made by the input pipeline from
      image/class/label).
  An image with neither has only its box classes verified. Note that the
  input pipeline gives an image without image/class/label every class as
  verified unless eval_config.image_classes_field_map_empty_to_ones is
  false.
  """

  optional_groundtruth_image_fields = (_IN.groundtruth_labeled_classes,
                                       _IN.groundtruth_image_classes)
  # Nothing was verified in an image whose groundtruth was never added.
  _classes_of_images_without_groundtruth = ()

  def __init__(self, categories, matching_iou_threshold=0.5,
               group_of_weight=1.0):
    """Creates the evaluator; see OpenImagesDetectionEvaluator."""
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     metric_prefix='OpenImagesDetectionChallenge',
                     group_of_weight=group_of_weight)

  def _classes_evaluated_in(self, groundtruth_dict):
    """The image's verified classes and the classes of its boxes.

    Raises:
      ValueError: if groundtruth_labeled_classes is not [num_classes + 1].
    """
    return np.union1d(
        self._verified_classes(groundtruth_dict),
        np.asarray(groundtruth_dict[_IN.groundtruth_classes]).astype(int))

  def _verified_classes(self, groundtruth_dict):
    """1-based ids of the image-level labels in groundtruth_dict."""
    verified = [np.zeros(0, int)]
    image_classes = groundtruth_dict.get(_IN.groundtruth_image_classes)
    if image_classes is not None:
      ids = np.asarray(image_classes).astype(int).reshape([-1])
      verified.append(ids[ids >= fields.LABEL_ID_OFFSET])
    k_hot = groundtruth_dict.get(_IN.groundtruth_labeled_classes)
    if k_hot is not None:
      ids = self._labeled_class_ids(k_hot)
      verified.append(ids[ids >= fields.LABEL_ID_OFFSET])
    return np.concatenate(verified)
