"""Names of the tensors that flow between the parts of a detector.

The strings are those of the original Object Detection API, so tensor dicts,
exported signatures and `tf.Example`s stay interchangeable with it.
"""

# Class ids in records, label maps and exported detections are 1-based
# (0 is the background); the model's one-hot class index is 0-based:
# class id = index + LABEL_ID_OFFSET.
LABEL_ID_OFFSET = 1


class InputDataFields:
  """Keys of the tensor dicts made by decoders and the input pipeline."""
  image = 'image'
  image_additional_channels = 'image_additional_channels'
  original_image = 'original_image'
  original_image_spatial_shape = 'original_image_spatial_shape'
  key = 'key'
  source_id = 'source_id'
  filename = 'filename'
  groundtruth_image_classes = 'groundtruth_image_classes'
  groundtruth_image_confidences = 'groundtruth_image_confidences'
  groundtruth_labeled_classes = 'groundtruth_labeled_classes'
  groundtruth_boxes = 'groundtruth_boxes'
  groundtruth_classes = 'groundtruth_classes'
  groundtruth_track_ids = 'groundtruth_track_ids'
  groundtruth_temporal_offset = 'groundtruth_temporal_offset'
  groundtruth_track_match_flags = 'groundtruth_track_match_flags'
  groundtruth_confidences = 'groundtruth_confidences'
  groundtruth_label_types = 'groundtruth_label_types'
  groundtruth_is_crowd = 'groundtruth_is_crowd'
  groundtruth_area = 'groundtruth_area'
  groundtruth_difficult = 'groundtruth_difficult'
  groundtruth_group_of = 'groundtruth_group_of'
  proposal_boxes = 'proposal_boxes'
  proposal_objectness = 'proposal_objectness'
  groundtruth_instance_masks = 'groundtruth_instance_masks'
  groundtruth_instance_mask_weights = 'groundtruth_instance_mask_weights'
  groundtruth_instance_boundaries = 'groundtruth_instance_boundaries'
  groundtruth_instance_classes = 'groundtruth_instance_classes'
  groundtruth_keypoints = 'groundtruth_keypoints'
  groundtruth_keypoint_depths = 'groundtruth_keypoint_depths'
  groundtruth_keypoint_depth_weights = 'groundtruth_keypoint_depth_weights'
  groundtruth_keypoint_visibilities = 'groundtruth_keypoint_visibilities'
  groundtruth_keypoint_weights = 'groundtruth_keypoint_weights'
  groundtruth_label_weights = 'groundtruth_label_weights'
  groundtruth_verified_neg_classes = 'groundtruth_verified_neg_classes'
  groundtruth_not_exhaustive_classes = 'groundtruth_not_exhaustive_classes'
  groundtruth_weights = 'groundtruth_weights'
  groundtruth_dp_num_points = 'groundtruth_dp_num_points'
  groundtruth_dp_part_ids = 'groundtruth_dp_part_ids'
  groundtruth_dp_surface_coords = 'groundtruth_dp_surface_coords'
  num_groundtruth_boxes = 'num_groundtruth_boxes'
  is_annotated = 'is_annotated'
  true_image_shape = 'true_image_shape'
  multiclass_scores = 'multiclass_scores'
  context_features = 'context_features'
  context_feature_length = 'context_feature_length'
  valid_context_size = 'valid_context_size'
  context_features_image_id_list = 'context_features_image_id_list'
  image_timestamps = 'image_timestamps'
  image_format = 'image_format'
  image_height = 'image_height'
  image_width = 'image_width'


class DetectionResultFields:
  """Keys of the dicts returned by `DetectionModel.postprocess`."""
  source_id = 'source_id'
  key = 'key'
  detection_boxes = 'detection_boxes'
  detection_scores = 'detection_scores'
  detection_multiclass_scores = 'detection_multiclass_scores'
  detection_features = 'detection_features'
  detection_classes = 'detection_classes'
  detection_masks = 'detection_masks'
  detection_surface_coords = 'detection_surface_coords'
  detection_boundaries = 'detection_boundaries'
  detection_keypoints = 'detection_keypoints'
  detection_keypoint_scores = 'detection_keypoint_scores'
  detection_keypoint_depths = 'detection_keypoint_depths'
  detection_embeddings = 'detection_embeddings'
  detection_offsets = 'detection_temporal_offsets'
  num_detections = 'num_detections'
  raw_detection_boxes = 'raw_detection_boxes'
  raw_detection_scores = 'raw_detection_scores'
  detection_anchor_indices = 'detection_anchor_indices'


class BoxListFields:
  """Names of the extra fields a BoxList may carry."""
  boxes = 'boxes'
  classes = 'classes'
  scores = 'scores'
  weights = 'weights'
  confidences = 'confidences'
  objectness = 'objectness'
  masks = 'masks'
  mask_weights = 'mask_weights'
  boundaries = 'boundaries'
  keypoints = 'keypoints'
  keypoint_visibilities = 'keypoint_visibilities'
  keypoint_heatmaps = 'keypoint_heatmaps'
  keypoint_depths = 'keypoint_depths'
  keypoint_depth_weights = 'keypoint_depth_weights'
  densepose_num_points = 'densepose_num_points'
  densepose_part_ids = 'densepose_part_ids'
  densepose_surface_coords = 'densepose_surface_coords'
  is_crowd = 'is_crowd'
  group_of = 'group_of'
  track_ids = 'track_ids'
  temporal_offsets = 'temporal_offsets'
  track_match_flags = 'track_match_flags'


class PredictionFields:
  """Keys of the dict returned by `DetectionModel.predict` besides heads."""
  feature_maps = 'feature_maps'
  anchors = 'anchors'
  raw_detection_boxes = 'raw_detection_boxes'
  raw_detection_feature_map_indices = 'raw_detection_feature_map_indices'


class TfExampleFields:
  """Feature keys of the `tf.Example`s in detection TFRecords."""
  image_encoded = 'image/encoded'
  image_format = 'image/format'
  filename = 'image/filename'
  channels = 'image/channels'
  colorspace = 'image/colorspace'
  height = 'image/height'
  width = 'image/width'
  source_id = 'image/source_id'
  key = 'image/key/sha256'
  image_class_text = 'image/class/text'
  image_class_label = 'image/class/label'
  image_class_confidence = 'image/class/confidence'
  object_class_text = 'image/object/class/text'
  object_class_label = 'image/object/class/label'
  object_bbox_ymin = 'image/object/bbox/ymin'
  object_bbox_xmin = 'image/object/bbox/xmin'
  object_bbox_ymax = 'image/object/bbox/ymax'
  object_bbox_xmax = 'image/object/bbox/xmax'
  object_view = 'image/object/view'
  object_truncated = 'image/object/truncated'
  object_occluded = 'image/object/occluded'
  object_difficult = 'image/object/difficult'
  object_group_of = 'image/object/group_of'
  object_depiction = 'image/object/depiction'
  object_is_crowd = 'image/object/is_crowd'
  object_area = 'image/object/area'
  object_segment_area = 'image/object/segment/area'
  object_weight = 'image/object/weight'
  object_mask = 'image/object/mask'
  object_keypoint_x = 'image/object/keypoint/x'
  object_keypoint_y = 'image/object/keypoint/y'
  object_keypoint_visibility = 'image/object/keypoint/visibility'
  instance_masks = 'image/segmentation/object'
  instance_boundaries = 'image/boundaries/object'
  instance_classes = 'image/segmentation/object/class'
  detection_class_label = 'image/detection/label'
  detection_bbox_ymin = 'image/detection/bbox/ymin'
  detection_bbox_xmin = 'image/detection/bbox/xmin'
  detection_bbox_ymax = 'image/detection/bbox/ymax'
  detection_bbox_xmax = 'image/detection/bbox/xmax'
  detection_score = 'image/detection/score'


# Input keys that carry one value per frame in sequence (video) examples.
# The list equals the original's, source_id twice included.
SEQUENCE_FIELDS = [InputDataFields.image,
                   InputDataFields.source_id,
                   InputDataFields.groundtruth_boxes,
                   InputDataFields.num_groundtruth_boxes,
                   InputDataFields.groundtruth_classes,
                   InputDataFields.groundtruth_weights,
                   InputDataFields.source_id,
                   InputDataFields.is_annotated]

# Detection outputs that exports (the exporter's graphs and the Estimator's
# PREDICT signature) serve besides boxes, scores, classes and
# num_detections, whenever the model's postprocess() returns them. One list,
# so both exports always offer the same outputs; its order is the order the
# output nodes are added to an exported graph.
OPTIONAL_EXPORTED_OUTPUTS = (
    DetectionResultFields.detection_multiclass_scores,
    DetectionResultFields.raw_detection_boxes,
    DetectionResultFields.raw_detection_scores,
    DetectionResultFields.detection_masks,
    DetectionResultFields.detection_keypoints,
    DetectionResultFields.detection_features)
