"""Key strings equal the original's: TFRecords and exports depend on them."""
import pytest

from od_estimator.core import standard_fields as fields

# Every key of the original's standard_fields, by class.
_ORIGINAL_KEYS = {
  'InputDataFields': {
    'image': 'image',
    'image_additional_channels': 'image_additional_channels',
    'original_image': 'original_image',
    'original_image_spatial_shape': 'original_image_spatial_shape',
    'key': 'key',
    'source_id': 'source_id',
    'filename': 'filename',
    'groundtruth_image_classes': 'groundtruth_image_classes',
    'groundtruth_image_confidences': 'groundtruth_image_confidences',
    'groundtruth_labeled_classes': 'groundtruth_labeled_classes',
    'groundtruth_boxes': 'groundtruth_boxes',
    'groundtruth_classes': 'groundtruth_classes',
    'groundtruth_track_ids': 'groundtruth_track_ids',
    'groundtruth_temporal_offset': 'groundtruth_temporal_offset',
    'groundtruth_track_match_flags': 'groundtruth_track_match_flags',
    'groundtruth_confidences': 'groundtruth_confidences',
    'groundtruth_label_types': 'groundtruth_label_types',
    'groundtruth_is_crowd': 'groundtruth_is_crowd',
    'groundtruth_area': 'groundtruth_area',
    'groundtruth_difficult': 'groundtruth_difficult',
    'groundtruth_group_of': 'groundtruth_group_of',
    'proposal_boxes': 'proposal_boxes',
    'proposal_objectness': 'proposal_objectness',
    'groundtruth_instance_masks': 'groundtruth_instance_masks',
    'groundtruth_instance_mask_weights':
        'groundtruth_instance_mask_weights',
    'groundtruth_instance_boundaries': 'groundtruth_instance_boundaries',
    'groundtruth_instance_classes': 'groundtruth_instance_classes',
    'groundtruth_keypoints': 'groundtruth_keypoints',
    'groundtruth_keypoint_depths': 'groundtruth_keypoint_depths',
    'groundtruth_keypoint_depth_weights':
        'groundtruth_keypoint_depth_weights',
    'groundtruth_keypoint_visibilities':
        'groundtruth_keypoint_visibilities',
    'groundtruth_keypoint_weights': 'groundtruth_keypoint_weights',
    'groundtruth_label_weights': 'groundtruth_label_weights',
    'groundtruth_verified_neg_classes': 'groundtruth_verified_neg_classes',
    'groundtruth_not_exhaustive_classes':
        'groundtruth_not_exhaustive_classes',
    'groundtruth_weights': 'groundtruth_weights',
    'groundtruth_dp_num_points': 'groundtruth_dp_num_points',
    'groundtruth_dp_part_ids': 'groundtruth_dp_part_ids',
    'groundtruth_dp_surface_coords': 'groundtruth_dp_surface_coords',
    'num_groundtruth_boxes': 'num_groundtruth_boxes',
    'is_annotated': 'is_annotated',
    'true_image_shape': 'true_image_shape',
    'multiclass_scores': 'multiclass_scores',
    'context_features': 'context_features',
    'context_feature_length': 'context_feature_length',
    'valid_context_size': 'valid_context_size',
    'context_features_image_id_list': 'context_features_image_id_list',
    'image_timestamps': 'image_timestamps',
    'image_format': 'image_format',
    'image_height': 'image_height',
    'image_width': 'image_width',
  },
  'DetectionResultFields': {
    'source_id': 'source_id',
    'key': 'key',
    'detection_boxes': 'detection_boxes',
    'detection_scores': 'detection_scores',
    'detection_multiclass_scores': 'detection_multiclass_scores',
    'detection_features': 'detection_features',
    'detection_classes': 'detection_classes',
    'detection_masks': 'detection_masks',
    'detection_surface_coords': 'detection_surface_coords',
    'detection_boundaries': 'detection_boundaries',
    'detection_keypoints': 'detection_keypoints',
    'detection_keypoint_scores': 'detection_keypoint_scores',
    'detection_keypoint_depths': 'detection_keypoint_depths',
    'detection_embeddings': 'detection_embeddings',
    'detection_offsets': 'detection_temporal_offsets',
    'num_detections': 'num_detections',
    'raw_detection_boxes': 'raw_detection_boxes',
    'raw_detection_scores': 'raw_detection_scores',
    'detection_anchor_indices': 'detection_anchor_indices',
  },
  'BoxListFields': {
    'boxes': 'boxes',
    'classes': 'classes',
    'scores': 'scores',
    'weights': 'weights',
    'confidences': 'confidences',
    'objectness': 'objectness',
    'masks': 'masks',
    'mask_weights': 'mask_weights',
    'boundaries': 'boundaries',
    'keypoints': 'keypoints',
    'keypoint_visibilities': 'keypoint_visibilities',
    'keypoint_heatmaps': 'keypoint_heatmaps',
    'keypoint_depths': 'keypoint_depths',
    'keypoint_depth_weights': 'keypoint_depth_weights',
    'densepose_num_points': 'densepose_num_points',
    'densepose_part_ids': 'densepose_part_ids',
    'densepose_surface_coords': 'densepose_surface_coords',
    'is_crowd': 'is_crowd',
    'group_of': 'group_of',
    'track_ids': 'track_ids',
    'temporal_offsets': 'temporal_offsets',
    'track_match_flags': 'track_match_flags',
  },
  'PredictionFields': {
    'feature_maps': 'feature_maps',
    'anchors': 'anchors',
    'raw_detection_boxes': 'raw_detection_boxes',
    'raw_detection_feature_map_indices':
        'raw_detection_feature_map_indices',
  },
  'TfExampleFields': {
    'image_encoded': 'image/encoded',
    'image_format': 'image/format',
    'filename': 'image/filename',
    'channels': 'image/channels',
    'colorspace': 'image/colorspace',
    'height': 'image/height',
    'width': 'image/width',
    'source_id': 'image/source_id',
    'image_class_text': 'image/class/text',
    'image_class_label': 'image/class/label',
    'image_class_confidence': 'image/class/confidence',
    'object_class_text': 'image/object/class/text',
    'object_class_label': 'image/object/class/label',
    'object_bbox_ymin': 'image/object/bbox/ymin',
    'object_bbox_xmin': 'image/object/bbox/xmin',
    'object_bbox_ymax': 'image/object/bbox/ymax',
    'object_bbox_xmax': 'image/object/bbox/xmax',
    'object_view': 'image/object/view',
    'object_truncated': 'image/object/truncated',
    'object_occluded': 'image/object/occluded',
    'object_difficult': 'image/object/difficult',
    'object_group_of': 'image/object/group_of',
    'object_depiction': 'image/object/depiction',
    'object_is_crowd': 'image/object/is_crowd',
    'object_segment_area': 'image/object/segment/area',
    'object_weight': 'image/object/weight',
    'instance_masks': 'image/segmentation/object',
    'instance_boundaries': 'image/boundaries/object',
    'instance_classes': 'image/segmentation/object/class',
    'detection_class_label': 'image/detection/label',
    'detection_bbox_ymin': 'image/detection/bbox/ymin',
    'detection_bbox_xmin': 'image/detection/bbox/xmin',
    'detection_bbox_ymax': 'image/detection/bbox/ymax',
    'detection_bbox_xmax': 'image/detection/bbox/xmax',
    'detection_score': 'image/detection/score',
  },
}


@pytest.mark.parametrize('class_name', sorted(_ORIGINAL_KEYS))
def test_every_key_of_the_original_has_the_same_string(class_name):
  keys = getattr(fields, class_name)
  for name, value in _ORIGINAL_KEYS[class_name].items():
    assert getattr(keys, name, None) == value, name


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
  assert fields.DetectionResultFields.detection_offsets == (
      'detection_temporal_offsets')
  assert fields.InputDataFields.groundtruth_boxes == 'groundtruth_boxes'
  assert fields.InputDataFields.true_image_shape == 'true_image_shape'
  assert fields.BoxListFields.scores == 'scores'


def test_sequence_fields():
  assert fields.SEQUENCE_FIELDS == [
      'image', 'source_id', 'groundtruth_boxes', 'num_groundtruth_boxes',
      'groundtruth_classes', 'groundtruth_weights', 'source_id',
      'is_annotated']
