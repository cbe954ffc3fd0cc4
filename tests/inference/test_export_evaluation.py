"""What evaluate gives the evaluators: detections in pixels, a model's
classes checked against the label map, the metrics sets it can run."""
import numpy as np
import pytest

from od_estimator.core import standard_fields as fields
from od_estimator.inference import exported_model
from od_estimator.inference import export_evaluation

_DET = fields.DetectionResultFields
RAW = {'detection_boxes': np.float32([[0.1, 0.2, 0.5, 1.0], [0, 0, 1, 1],
                                      [0, 0, 0, 0]]),
       'detection_scores': np.float32([0.9, 0.4, 0.0]),
       'detection_classes': np.float32([2.0, 1.0, 0.0]),
       'num_detections': np.float32(2.0)}


def test_detections_in_pixels_cut_to_num_detections():
  detections = export_evaluation.absolute_detections(RAW, 20, 40, [1, 2],
                                                     'map.pbtxt')
  np.testing.assert_allclose(detections[_DET.detection_boxes],
                             [[2, 8, 10, 40], [0, 0, 20, 40]], rtol=1e-6)
  np.testing.assert_array_equal(detections[_DET.detection_classes], [2, 1])
  assert detections[_DET.detection_classes].dtype == np.int64
  np.testing.assert_array_equal(detections[_DET.detection_scores],
                                np.float32([0.9, 0.4]))


def test_a_class_the_label_map_lacks_is_one_line():
  with pytest.raises(exported_model.ExportedModelError) as error:
    export_evaluation.absolute_detections(RAW, 20, 40, [1, 3, 4, 5],
                                          'map.pbtxt')
  assert str(error.value) == (
      'the model detects class id 2, which --label_map_path=map.pbtxt lacks '
      '(its ids: 1, 3..5): pass the label map the model was trained with.')


def test_metrics_sets_from_the_flag_or_the_pipeline_config(tmp_path):
  config = tmp_path / 'pipeline.config'
  config.write_text('eval_config { metrics_set: "pascal_voc_detection_metrics"'
                    ' include_metrics_per_category: false }')
  eval_config = export_evaluation.eval_config_for(
      pipeline_config_path=str(config), per_category=True)
  assert list(eval_config.metrics_set) == ['pascal_voc_detection_metrics']
  assert eval_config.include_metrics_per_category
  eval_config = export_evaluation.eval_config_for(
      'coco_detection_metrics, oid_V2_detection_metrics', str(config))
  assert list(eval_config.metrics_set) == ['coco_detection_metrics',
                                           'oid_V2_detection_metrics']
  eval_config = export_evaluation.eval_config_for('coco_mask_metrics')
  assert list(eval_config.metrics_set) == ['coco_mask_metrics']
