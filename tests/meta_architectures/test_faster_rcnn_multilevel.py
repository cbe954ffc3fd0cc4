"""FasterRCNNMetaArch on a feature pyramid: multi-level RPN and ROI crop.

The fake pyramid extractor's first stage gives two levels of a 32x32 image,
strides 8 and 16, finest first as a pyramid gives them: 4x4 (level 3) and
2x2 (level 4) maps; a multiscale anchor generator places one anchor per
cell of each. The rest are tests/meta_architectures/faster_rcnn_parts'
tiny parts.
(Static shapes: tests/test_faster_rcnn_tpu_check.py compiles a pyramid's
training step.)
"""
import dataclasses
import functools

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.anchor_generators import multiscale_grid_anchor_generator
from od_estimator.core import image_resizing
from od_estimator.meta_architectures import faster_rcnn_meta_arch as arch
from od_estimator.meta_architectures import region_proposal_network
from tests import fakes
from tests.meta_architectures import faster_rcnn_parts as parts

BATCH = 2
SIZE = parts.IMAGE_SIZE
# Cells of the 4x4 and 2x2 maps, one anchor each.
NUM_ANCHORS = 16 + 4
GT_BOXES = [[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]],
            [[0.0, 0.5, 0.25, 0.75], [0.5, 0.0, 1.0, 0.5]]]
GT_CLASSES = [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]


def _pyramid_rpn(is_training, use_static_shapes):
  """parts.rpn with a multiscale anchor generator of levels 3 and 4 (its
  anchors clipped to the image, as the FPN sample config's)."""
  rpn = parts.rpn(is_training, use_static_shapes, clip_anchors_to_image=True)
  params = dataclasses.replace(
      rpn.params,
      anchor_generator=(
          multiscale_grid_anchor_generator.MultiscaleGridAnchorGenerator(
              min_level=3, max_level=4, anchor_scale=2.0,
              aspect_ratios=[1.0], scales_per_octave=1,
              normalize_coordinates=False)))
  return region_proposal_network.RegionProposalNetwork(
      params, is_training, use_static_shapes)


def _build_model(is_training=True, use_static_shapes=False,
                 number_of_stages=2):
  classifier = None
  if number_of_stages > 1:
    classifier, _ = parts.second_stage_parts(is_training, use_static_shapes)
  return arch.FasterRCNNMetaArch(
      is_training, fakes.FakePyramidFeatureExtractor(is_training),
      arch.ModelParams(
          num_classes=parts.NUM_CLASSES,
          image_resizer_fn=functools.partial(
              image_resizing.resize_image, new_height=SIZE, new_width=SIZE),
          number_of_stages=number_of_stages,
          use_static_shapes=use_static_shapes),
      _pyramid_rpn(is_training, use_static_shapes), classifier)


def _training_outputs(model):
  model.provide_groundtruth(
      [tf.constant(boxes, tf.float32) for boxes in GT_BOXES],
      [tf.constant(classes, tf.float32) for classes in GT_CLASSES])
  preprocessed, true_image_shapes = model.preprocess(
      tf.random.uniform([BATCH, SIZE, SIZE, 3], 0, 255, seed=1))
  prediction_dict = model.predict(preprocessed, true_image_shapes)
  return prediction_dict, model.loss(prediction_dict, true_image_shapes)


@pytest.mark.parametrize('is_training', [True, False])
def test_rpn_predicts_on_every_level(execute, is_training):
  def graph_fn():
    model = _build_model(is_training)
    prediction_dict, losses = _training_outputs(model)
    detections = model.postprocess(
        prediction_dict, tf.constant([[SIZE, SIZE, 3]] * BATCH))
    return prediction_dict, losses, detections

  prediction_dict, losses, detections = execute(graph_fn)
  assert [f.shape for f in prediction_dict['rpn_features_to_crop']] == [
      (BATCH, 4, 4, 8), (BATCH, 2, 2, 8)]
  assert [f.shape for f in prediction_dict['rpn_box_predictor_features']] == [
      (BATCH, 4, 4, 4), (BATCH, 2, 2, 4)]
  assert prediction_dict['rpn_box_encodings'].shape == (BATCH, NUM_ANCHORS, 4)
  # Level 3: 16-pixel anchors every 8 pixels from 4; level 4: 32-pixel ones
  # every 16 from 8, finest first, clipped to the image.
  anchors = prediction_dict['anchors']
  assert anchors.shape == (NUM_ANCHORS, 4)
  np.testing.assert_allclose(anchors[[0, 5, 16, 19]], [
      [0, 0, 12, 12], [4, 4, 20, 20], [0, 0, 24, 24], [8, 8, 32, 32]])
  assert all(np.isfinite(value) for value in losses.values()), losses
  assert detections['detection_boxes'].shape[0] == BATCH


def test_one_shared_rpn_conv_and_a_predictor_head_per_level():
  with tf.Graph().as_default():
    _training_outputs(_build_model())
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
  assert [n for n in names if n.startswith('Conv/')] == [
      'Conv/biases', 'Conv/weights']
  assert [n for n in names if n.startswith('FirstStageBoxPredictor/')] == [
      'FirstStageBoxPredictor/BoxPredictor_%d/%s/%s' % (level, head, weight)
      for level in (0, 1)
      for head in ('BoxEncodingPredictor', 'ClassPredictor')
      for weight in ('biases', 'weights')]


def test_boxes_are_cropped_from_their_level(execute):
  """Boxes of half the image side go to level 4, smaller ones to level 3.

  With the image side S the level index is floor(log2(box side * S /
  224)) + 0 (two levels): for S = 896, 1 from half the side up.
  """
  boxes = np.array([[[0, 0, 0.5, 0.5], [0.25, 0.5, 0.5, 0.75]],
                    [[0.1, 0.1, 0.3, 0.4], [0, 0, 1, 1]]], np.float32)

  def graph_fn():
    model = _build_model(is_training=False)
    maps = _training_outputs(model)[0]['rpn_features_to_crop']
    crops = model.box_classifier.crop(
        maps, tf.constant(boxes), image_shape=tf.constant([BATCH, 896, 896,
                                                           3]))
    return crops, [model.box_classifier.crop(m, tf.constant(boxes))
                   for m in maps]

  crops, (level3, level4) = execute(graph_fn)
  crops = crops.reshape((BATCH, 2) + crops.shape[1:])
  level3 = level3.reshape(crops.shape)
  level4 = level4.reshape(crops.shape)
  for image, box, expected in ((0, 0, level4), (0, 1, level3),
                               (1, 0, level3), (1, 1, level4)):
    np.testing.assert_allclose(crops[image, box], expected[image, box],
                               atol=1e-6)
  assert not np.allclose(level3, level4)


def test_anchor_grids_must_match_the_maps():
  with tf.Graph().as_default():
    rpn = parts.rpn()
    with pytest.raises(ValueError, match='1 feature maps; the feature '
                       'extractor gives 2'):
      rpn.predict([tf.zeros([1, 4, 4, 8]), tf.zeros([1, 2, 2, 8])],
                  tf.constant([1, 32, 32, 3]))
