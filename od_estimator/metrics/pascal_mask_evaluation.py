"""PASCAL VOC instance segmentation metrics: PASCAL AP with mask IoU.

The PASCAL evaluators of pascal_evaluation, matching detections to
groundtruth by the IoU of their masks (binary, at the original image size)
instead of their boxes, under the original's names:
'PascalMasks_Precision/mAP@0.5IOU',
'PascalMasks_PerformanceByCategory/AP@0.5IOU/<category name>' and the
'WeightedPascalMasks_' equivalents.
"""
from od_estimator.core import standard_fields as fields
from od_estimator.metrics import pascal_evaluation

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields


class PascalInstanceSegmentationEvaluator(
    pascal_evaluation.ObjectDetectionEvaluator):
  """PASCAL metrics on masks: mAP is the mean of the per-class APs.

  Groundtruth needs groundtruth_instance_masks [N, H, W] and detections
  detection_masks [M, H, W], uint8 0/1; groundtruth_difficult is honoured
  as for boxes. Detections with an empty or inverted box are dropped, as
  the original does.
  """

  optional_groundtruth_box_fields = (_IN.groundtruth_difficult,
                                     _IN.groundtruth_instance_masks)
  optional_detection_fields = (_DET.detection_masks,)
  evaluates_masks = True
  _metric_prefix = 'PascalMasks'
  _use_weighted_mean_ap = False

  def __init__(self, categories, matching_iou_threshold=0.5):
    super().__init__(categories,
                     matching_iou_threshold=matching_iou_threshold,
                     metric_prefix=self._metric_prefix,
                     use_weighted_mean_ap=self._use_weighted_mean_ap)


class WeightedPascalInstanceSegmentationEvaluator(
    PascalInstanceSegmentationEvaluator):
  """PASCAL metrics on masks, mAP over all classes' detections pooled."""

  _metric_prefix = 'WeightedPascalMasks'
  _use_weighted_mean_ap = True
