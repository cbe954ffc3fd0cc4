"""The original's object_detection.metrics.coco_tools, for scripts written
for it.

Nothing in od_estimator imports this module. It gives the original's
COCOWrapper and COCOEvalWrapper (coco_wrappers), its Export*ToCOCO and
ExportSingleImage*ToCoco functions (coco_export) and its metric name
tables; od_estimator computes COCO metrics with metrics/coco_tools.
"""
# The original's names kept in their homes. pylint: disable=unused-import
from od_estimator.compat.coco_export import (
    ExportDetectionsToCOCO, ExportGroundtruthToCOCO, ExportKeypointsToCOCO,
    ExportSegmentsToCOCO, ExportSingleImageDetectionBoxesToCoco,
    ExportSingleImageDetectionMasksToCoco, ExportSingleImageGroundtruthToCoco)
from od_estimator.compat.coco_wrappers import (
    COCO_KEYPOINT_METRIC_NAMES_AND_INDEX, COCOEvalWrapper, COCOWrapper)
from od_estimator.metrics.coco_tools import COCO_METRIC_NAMES_AND_INDEX
# pylint: enable=unused-import
