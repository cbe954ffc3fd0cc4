"""The key strings must equal the original's: TFRecords and exports depend on them."""
from od_estimator.core import standard_fields as fields


def test_tf_example_keys_match_the_original():
  keys = fields.TfExampleFields
  assert keys.image_encoded == 'image/encoded'
  assert keys.object_bbox_ymin == 'image/object/bbox/ymin'
  assert keys.object_class_label == 'image/object/class/label'
  assert keys.object_mask == 'image/object/mask'
  assert keys.key == 'image/key/sha256'


def test_result_and_input_keys_match_the_original():
  assert fields.DetectionResultFields.num_detections == 'num_detections'
  assert fields.DetectionResultFields.detection_boxes == 'detection_boxes'
  assert fields.InputDataFields.groundtruth_boxes == 'groundtruth_boxes'
  assert fields.InputDataFields.true_image_shape == 'true_image_shape'
  assert fields.BoxListFields.scores == 'scores'
