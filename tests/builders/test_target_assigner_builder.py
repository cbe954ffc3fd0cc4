"""target_assigner_builder from a text proto (a TargetAssigner or model.ssd)."""
import numpy as np
import pytest
from google.protobuf import text_format

from od_estimator.builders import target_assigner_builder
from od_estimator.core import box_list
from od_estimator.protos import ssd_pb2
from od_estimator.protos import target_assigner_pb2

CONFIG = """
  matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5 } }
  similarity_calculator { iou_similarity { } }
  box_coder { faster_rcnn_box_coder { y_scale: 10.0 x_scale: 10.0
                                      height_scale: 5.0 width_scale: 5.0 } }
"""


def test_builds_a_working_assigner(execute):
  config = text_format.Parse(CONFIG, target_assigner_pb2.TargetAssigner())

  def graph(anchors, gt):
    assigner = target_assigner_builder.build(config)
    return assigner.assign(box_list.BoxList(anchors), box_list.BoxList(gt))[2:4]
  # The groundtruth box is anchor 0 shifted down by a tenth of its height:
  # ty = 10 * 0.05 / 0.5 = 1; the sizes are equal so th = tw = 0.
  reg_targets, reg_weights = execute(graph, [
      np.array([[0., 0., .5, .5], [.5, .5, 1., 1.]], np.float32),
      np.array([[.05, 0., .55, .5]], np.float32)])
  np.testing.assert_allclose(reg_weights, [1., 0.])
  np.testing.assert_allclose(reg_targets, [[1., 0., 0., 0.], [0.] * 4],
                             atol=1e-4)


def test_thresholded_iou_similarity_scores_by_foreground(execute):
  config = text_format.Parse("""
    matcher { argmax_matcher { matched_threshold: 0.5
                               unmatched_threshold: 0.3 } }
    similarity_calculator { thresholded_iou_similarity { iou_threshold: 0.5 } }
    box_coder { mean_stddev_box_coder { stddev: 0.1 } }
  """, target_assigner_pb2.TargetAssigner())

  def graph(anchors, gt, labels):
    assigner = target_assigner_builder.build(config)
    return assigner.assign(box_list.BoxList(anchors), box_list.BoxList(gt),
                           labels)[4].match_results
  # Both boxes equal their anchor (IoU 1 > 0.5); their similarity is the
  # foreground score 1 - background label: 0.8 matches, 0.4 is ignored.
  anchors = np.array([[0., 0., .5, .5], [.5, .5, 1., 1.]], np.float32)
  labels = np.array([[.2, .8], [.6, .4]], np.float32)
  np.testing.assert_array_equal(execute(graph, [anchors, anchors, labels]),
                                [0, -2])


def test_missing_part_is_named():
  config = text_format.Parse('similarity_calculator { iou_similarity { } }',
                             target_assigner_pb2.TargetAssigner())
  with pytest.raises(ValueError, match='TargetAssigner.matcher'):
    target_assigner_builder.build(config)


def test_builds_from_the_fields_of_an_ssd_config(execute):
  config = text_format.Parse(CONFIG + 'num_classes: 2', ssd_pb2.Ssd())

  def graph(anchors, gt):
    assigner = target_assigner_builder.build_from_fields(
        config, negative_class_weight=0.25)
    return assigner.assign(box_list.BoxList(anchors),
                           box_list.BoxList(gt))[1:4]
  # As above: anchor 0 matches; anchor 1 is unmatched and its
  # classification weight is the negative class weight.
  cls_weights, reg_targets, reg_weights = execute(graph, [
      np.array([[0., 0., .5, .5], [.5, .5, 1., 1.]], np.float32),
      np.array([[.05, 0., .55, .5]], np.float32)])
  np.testing.assert_allclose(cls_weights, [[1.], [.25]])
  np.testing.assert_allclose(reg_weights, [1., 0.])
  np.testing.assert_allclose(reg_targets[0], [1., 0., 0., 0.], atol=1e-4)


def test_an_empty_part_of_an_ssd_config_is_named_by_its_builder():
  config = text_format.Parse('similarity_calculator { iou_similarity { } } '
                             'box_coder { mean_stddev_box_coder { } }',
                             ssd_pb2.Ssd())
  with pytest.raises(ValueError, match='Empty matcher'):
    target_assigner_builder.build_from_fields(config)
